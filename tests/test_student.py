"""The student edition (`make student`, attnlab.classroom.student): solutions out, placeholders in
at the right indentation, bad markers refused with the cell and line, `remove-cell` cells and
instructor notes dropped, no outputs, cell ids kept; the comparison `make test` runs (the student
edition under nbval against the full edition's outputs); and the committed notebooks/student/ equal
to what the builder makes, with nothing in it a student should not see first."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import conftest
import nbformat
import pytest
from helpers import ROOT, raises_each, solution_lines
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbval.plugin import IPyNbFile

from attnlab.classroom import series, student
from attnlab.classroom.student import (
    PLACEHOLDER,
    TOP_LEVEL_PLACEHOLDER,
    SolutionMarkerError,
    strip_solutions,
)

FULL = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
COMMITTED = sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))
# Lines a solution may share with the student edition without giving anything away.
_TRIVIAL = re.compile(r"^(?:[\s()\[\]{},:;]*|return|pass|\.\.\.|else:|try:|break|continue)$")


# ----------------------------------------------------------------------------- the transformation

def test_a_region_becomes_one_placeholder_at_its_indentation():
    source = "\n".join([
        "def my_attention(q, k, v):",
        "    ### BEGIN SOLUTION",
        "    scores = q @ k.T",
        "    return scores.softmax(-1) @ v",
        "    ### END SOLUTION",
        "",
        "attention = ex01.attention(my_attention)",
    ])
    assert strip_solutions(source) == "\n".join([
        "def my_attention(q, k, v):",
        f"    {PLACEHOLDER}",
        "",
        "attention = ex01.attention(my_attention)",
    ])


def test_several_regions_any_indentation_and_code_around_them_are_kept():
    source = "\n".join([
        "guess = ...  # your prediction: a number",
        "### BEGIN SOLUTION",
        "guess = 0.5",
        "### END SOLUTION",
        "for i in range(3):",
        "    if i:",
        "\t\t### BEGIN SOLUTION  ",
        "        print(i)",
        "\t\t### END SOLUTION",
        "    x = i",
    ])
    assert strip_solutions(source).split("\n") == [
        "guess = ...  # your prediction: a number",
        TOP_LEVEL_PLACEHOLDER,
        "for i in range(3):",
        "    if i:",
        f"\t\t{PLACEHOLDER}",
        "    x = i",
    ]


def test_unbalanced_nested_or_malformed_markers_name_the_cell_and_line():
    bad = [
        (["x = 1", "### BEGIN SOLUTION", "y = 2"], 2, "has no '### END SOLUTION' after it"),
        (["x = 1", "y = 2", "    ### END SOLUTION"], 3, "without a '### BEGIN SOLUTION' before it"),
        (["### BEGIN SOLUTION", "a = 1", "  ### BEGIN SOLUTION", "### END SOLUTION",
          "### END SOLUTION"], 3,
         "inside the region opened at line 1; solution regions do not nest"),
        (["## BEGIN SOLUTION", "a = 1", "### END SOLUTION"], 1, "looks like a solution marker"),
        (["### BEGIN SOLUTION", "a = 1  ### END SOLUTION"], 2, "looks like a solution marker"),
    ]
    raises_each([(lambda lines=lines: strip_solutions("\n".join(lines), "10_x.ipynb, cell 4"),
                  re.escape(f"10_x.ipynb, cell 4, line {line}: ") + ".*" + re.escape(message))
                 for lines, line, message in bad], SolutionMarkerError)


def _cell(kind, source, tags=(), slide=None, outputs=(), **metadata):
    cell = (new_code_cell(source, execution_count=1) if kind == "code"
            else new_markdown_cell(source))
    if tags:
        cell.metadata["tags"] = list(tags)
    if slide:
        cell.metadata["slideshow"] = {"slide_type": slide}
    cell.metadata.update(metadata)
    if kind == "code":
        cell.outputs = list(outputs)
    return cell


def _printed(text):
    return new_output("stream", name="stdout", text=text)


def _full_edition(path: Path) -> Path:
    """A small executed full edition in the series' form, written to `path`."""
    nb = new_notebook(cells=[
        _cell("markdown", "# Tiny\n\nWrite between `### BEGIN SOLUTION` and `### END SOLUTION`."),
        _cell("code", "x = 2\nprint(x)", outputs=[_printed("2\n")], slide="skip",
              execution={"iopub.status.busy": "2024-01-01"}),
        _cell("code", "assert x == 2", tags=["remove-cell"]),
        _cell("markdown", "Ask the class: what is 2x?", slide="notes"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n"
              "    ### END SOLUTION\n\ncheck(double)",
              tags=["hide-input"], outputs=[_printed("✓ double: right\n")]),
        _cell("markdown", "So 2x is 4.", slide="fragment"),
    ], metadata={"kernelspec": dict(series.KERNELSPEC), "language_info": {"name": "python"},
                 "jupytext": {"formats": "ipynb,py:percent"}, "widgets": {}})
    nbformat.write(nb, path)
    return path


def test_the_student_notebook_drops_solutions_removed_cells_notes_and_outputs(tmp_path):
    full = nbformat.read(_full_edition(tmp_path / "01_tiny.ipynb"), as_version=4)
    nb = student.student_notebook(tmp_path / "01_tiny.ipynb")
    kept = [0, 1, 4, 5]  # the remove-cell cell and the notes are gone
    assert [c.id for c in nb.cells] == [full.cells[i].id for i in kept]
    assert [c.source for c in nb.cells] == [
        full.cells[0].source,  # markdown is unchanged, even where it names the markers
        "x = 2\nprint(x)",
        f"def double(x):\n    {PLACEHOLDER}\n\ncheck(double)",
        "So 2x is 4."]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert [c.metadata for c in nb.cells] == [  # tags and slideshow; hide-input code collapsed
        {}, {"slideshow": {"slide_type": "skip"}},
        {"tags": ["hide-input"], "jupyter": {"source_hidden": True}},
        {"slideshow": {"slide_type": "fragment"}}]
    assert nb.metadata == {"kernelspec": series.KERNELSPEC, "jupytext": {"formats": "ipynb"}}
    nbformat.validate(nb)


def test_main_writes_every_notebook_or_none_when_a_marker_is_wrong(tmp_path, monkeypatch):
    _full_edition(tmp_path / "01_tiny.ipynb")
    broken = _full_edition(tmp_path / "02_broken.ipynb")
    nb = nbformat.read(broken, as_version=4)
    nb.cells[1].source = "### BEGIN SOLUTION\nx = 1"
    nbformat.write(nb, broken)
    monkeypatch.setattr(series, "NOTEBOOK_DIR", tmp_path)
    monkeypatch.setattr(student, "STUDENT_DIR", tmp_path / "student")
    assert student.main([]) == 1
    assert not (tmp_path / "student").exists()
    assert student.main(["01"]) == 0
    assert (tmp_path / "student" / "01_tiny.ipynb").exists()


# ----------------------------------------------------------------------------- the comparison

@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_make_test_runs_the_student_edition_under_nbval_against_the_full_editions_outputs(
        tmp_path):
    """The collector in tests/conftest.py, run by pytest on small notebooks: a cell that prints
    what the full edition printed passes, a ✓ line met by a ○ line passes, a ✓ line met by a
    ✓ line (a check the student edition passes unasked) fails, a changed number fails with a
    diff, a cell that raises fails, and a student edition older than the full one is refused."""
    folder = tmp_path / "notebooks"
    (folder / "student").mkdir(parents=True)
    full = new_notebook(cells=[
        _cell("code", "print(6 * 6)", outputs=[_printed("36\n")]),
        _cell("code", "guess = None\n### BEGIN SOLUTION\nguess = 3\n### END SOLUTION\n"
                      "print('○ right: not yet' if guess is None else '✓ right: 3')",
              outputs=[_printed("✓ right: 3\n")]),
        _cell("code", "print(6 * 7)", outputs=[_printed("41\n")]),
        _cell("code", "raise ValueError('on purpose')", outputs=[]),
        _cell("code", "print('after')", outputs=[_printed("after\n")]),
        _cell("code", "print('✓ free: 1')", outputs=[_printed("✓ free: 1\n")]),
    ], metadata={"kernelspec": dict(series.KERNELSPEC)})
    for i, cell in enumerate(full.cells):
        cell.execution_count = i + 1
    nbformat.write(full, folder / "01_tiny.ipynb")
    nbformat.write(student.student_notebook(folder / "01_tiny.ipynb"),
                   folder / "student" / "01_tiny.ipynb")
    stale = student.student_notebook(folder / "01_tiny.ipynb")
    stale.cells[0].id = "not-in-the-full-edition"
    nbformat.write(full, folder / "02_stale.ipynb")
    nbformat.write(stale, folder / "student" / "02_stale.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-v",
         "--rootdir", str(tmp_path), "--continue-on-collection-errors",
         "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", str(ROOT / "tests" / "sanitize.cfg"),
         str(folder / "student" / "01_tiny.ipynb"), str(folder / "student" / "02_stale.ipynb"),
         str(ROOT / "tests" / "conftest.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    report = done.stdout
    assert done.returncode == 1, report
    outcomes = dict(re.findall(r"01_tiny\W+ipynb::(Cell \d) (PASSED|FAILED)", report))
    assert outcomes == {"Cell 0": "PASSED", "Cell 1": "PASSED", "Cell 2": "FAILED",
                        "Cell 3": "FAILED", "Cell 4": "PASSED", "Cell 5": "FAILED"}, report
    report = re.sub(r"\x1b\[[0-9;]*m", "", report)  # nbval colours its report
    assert "'41\\n' == '42\\n'" in report and "ValueError: on purpose" in report
    assert "'○ free: not attempted\\n' == '✓ free: 1\\n'" in report
    assert ("student/02_stale.ipynb: cell id 'not-in-the-full-edition' is not in the full "
            "edition: run `make student`") in report


# ----------------------------------------------------------------------------- committed editions

def test_committed_student_editions_are_what_the_builder_makes():
    stale = []
    for ipynb in FULL:
        committed = ROOT / "notebooks" / "student" / ipynb.name
        if not committed.exists():
            stale.append(f"notebooks/student/{ipynb.name} is missing")
        elif nbformat.read(committed, as_version=4) != student.student_notebook(ipynb):
            stale.append(f"notebooks/student/{ipynb.name} is not what {ipynb.name} gives now")
    assert not stale, "; ".join(stale) + ": run `make student NB=..`"


def leaks(ipynb: Path) -> list[str]:
    """What notebooks/student/`ipynb` shows that a student should not see first."""
    nb = nbformat.read(ipynb, as_version=4)
    full = nbformat.read(ROOT / "notebooks" / ipynb.name, as_version=4)
    found = []
    shown = {line.strip() for cell in nb.cells for line in cell.source.split("\n")}
    found += [f"solution line in cell {i}: {line.strip()!r}"
              for i, line in solution_lines(full)
              if not _TRIVIAL.match(line.strip()) and line.strip() in shown]
    if "BEGIN SOLUTION" in ipynb.read_text():
        found.append("a solution marker")
    code = [c for c in json.loads(ipynb.read_text())["cells"] if c["cell_type"] == "code"]
    if not all(c["outputs"] == [] and c["execution_count"] is None for c in code):
        found.append("outputs")
    if [c for c in nb.cells if student.is_notes(c)]:
        found.append("instructor notes")
    if [c for c in nb.cells if student.REMOVE_CELL in c.metadata.get("tags", [])]:
        found.append("a remove-cell cell")
    found += [f"an assert in cell {i} (tag its cell `remove-cell` in the .py): {line.strip()}"
              for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for line in c.source.split("\n") if re.match(r"\s*assert\b", line)]
    return found


def test_no_student_edition_shows_what_a_student_should_not_see_first():
    found = {ipynb.name: leaks(ipynb) for ipynb in COMMITTED}
    assert COMMITTED and not any(found.values()), "\n".join(
        f"{name}: " + "; ".join(what) for name, what in found.items() if what)


def test_a_release_is_the_student_edition_alone_and_overwrites_no_ones_work(tmp_path):
    course = tmp_path / "course"
    (course / ".git").mkdir(parents=True)  # a previous release, published from a git repository
    (course / "01_old_name.ipynb").write_text("{}")
    written = student.release(course)
    released = sorted(course.glob("[0-9][0-9]_*.ipynb"))
    assert [p.name for p in written[:-1]] == [p.name for p in series.notebook_paths()]
    found = {p.name: leaks(p) for p in released}  # the old name is gone
    assert len(found) == len(COMMITTED) and not any(found.values()), found
    assert "✎ your prediction" in (course / "README.md").read_text()
    (course / "my_answers.ipynb").write_text("{}")  # a student's own work: never overwritten
    before = {p.name: p.stat().st_mtime_ns for p in course.iterdir()}
    with pytest.raises(FileExistsError, match=r"my_answers.ipynb\); release into a new"):
        student.release(course)
    assert {p.name: p.stat().st_mtime_ns for p in course.iterdir()} == before
    with pytest.raises(ValueError, match="the series' own notebooks folder"):
        student.release(ROOT / "notebooks" / "student")


def test_a_colab_notebook_installs_where_attnlab_is_missing_and_does_nothing_here(tmp_path):
    code = student.main(["01", "--colab", str(tmp_path), "--source", "git+https://example.org/a"])
    assert code == 0
    colab = nbformat.read(tmp_path / "01_attention_by_hand.ipynb", as_version=4)
    plain = student.student_notebook(ROOT / "notebooks" / "01_attention_by_hand.ipynb")
    install = colab.cells[0].source
    assert "'git+https://example.org/a'" in install and "attnlab\", \"fetch\"" in install
    assert [c.source for c in colab.cells[1:]] == [c.source for c in plain.cells]
    here = subprocess.run([sys.executable, "-c", install], capture_output=True, text=True,
                          check=True)
    assert here.stdout == "attnlab is installed: nothing to do\n"  # CI runs it unchanged
    assert student.main(["01", "--colab", str(tmp_path / "x")]) == 1  # no --source: refused


def test_a_notebook_kernel_that_dies_at_start_gets_two_more_tries(monkeypatch):
    """tests/conftest.py's Notebook: two workers may start kernels on the same port."""
    tries = []

    def start(self, fail_until=3):
        tries.append(1)
        if len(tries) < fail_until:
            raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(IPyNbFile, "setup", start)
    conftest.Notebook.setup(object.__new__(conftest.Notebook))
    assert len(tries) == 3
    tries.clear()
    monkeypatch.setattr(IPyNbFile, "setup", lambda self: start(self, fail_until=99))
    with pytest.raises(RuntimeError, match="Kernel died"):
        conftest.Notebook.setup(object.__new__(conftest.Notebook))
    assert len(tries) == 3

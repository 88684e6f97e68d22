"""The student edition (`make student`, attnlab.classroom.student): solutions out, placeholders in
at the right indentation, bad markers refused with the cell and line, `remove-cell` cells and
instructor notes dropped, no outputs, cell ids kept; the comparison `make test` runs (the student
edition executed against the full edition's outputs); and the committed notebooks/student/ equal
to what the builder makes, with nothing in it a student should not see first."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import ROOT, raises_each, solution_lines
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

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
    raises_each([(lambda lines=lines: strip_solutions("\n".join(lines), "09_x.ipynb, cell 4"),
                  re.escape(f"09_x.ipynb, cell 4, line {line}: ") + ".*" + re.escape(message))
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

def _run(*outputs):
    return _cell("code", "f()", outputs=outputs)


def same_text(full, got) -> bool:
    """Whether compare_cell finds a cell printing `got` as good as one that printed `full`."""
    diff = student.compare_cell(_run(*full), _run(*got), [(r"0x[0-9a-fA-F]+", "0xADDRESS")])
    return diff is None


def test_compare_cell_wants_the_same_text_sanitized():
    assert same_text([_printed("0.405 0.246\n")], [_printed("0.405 0.246\n")])
    assert not same_text([_printed("0.405 0.246\n")], [_printed("0.405 0.247\n")])
    assert not same_text(
        [new_output("execute_result", data={"text/plain": "3"}, execution_count=1)],
        [new_output("execute_result", data={"text/plain": "4"}, execution_count=1)])
    assert not same_text([_printed("done\n")], [_printed("done\n"), new_output(
        "stream", name="stderr", text="Warning: slow\n")])  # stderr is text too
    assert same_text([_printed("0x7f00ab at 0x1f\n")], [_printed("0x8e11cd at 0x2e\n")])


def test_compare_cell_expects_a_not_attempted_line_for_each_check_mark_at_its_place():
    for full, got, same in [
        ([_printed("a = 1\n✓ right: 0.405\nb = 2\n")], [_printed("a = 1\n○ not yet\nb = 2\n")],
         True),
        ([_printed("✓ right\n")], [_printed("✓ right\n")], False),
        ([_printed("✓ right\nb = 2\n")], [_printed("○ not yet\nb = 3\n")], False),
        ([_printed("✓ right\n")], [_printed("○ not yet\n○ again\n")], False),
    ]:
        assert same_text(full, got) == same, (full, got)


def test_compare_cell_leaves_images_html_and_widgets_alone():
    assert same_text(
        [new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"})],
        [new_output("display_data", data={"image/png": "BBBB", "text/plain": "<Figure>"})])
    assert same_text(
        [new_output("display_data", data={"text/html": "<b>1</b>", "text/plain": "x"})],
        [new_output("display_data", data={"text/html": "<b>2</b>", "text/plain": "x"})])


def test_a_solution_cell_is_an_exercise_cell_and_a_diff_shows_what_differs():
    full = _cell("code", "### BEGIN SOLUTION\nguess = 3\n### END SOLUTION\nprint(check(guess))",
                 outputs=[_printed("✓ predict: 3\nthe answer is 3\n")])
    got = _run(_printed("○ predict: not attempted\nthe answer is 4\n"))
    assert student.is_exercise(full) and not student.is_exercise(_run(_printed("x\n")))
    assert student.compare_cell(full, got) == (
        "@@ -1,2 +1,2 @@\n ○ predict: not attempted\n-the answer is 3\n+the answer is 4")
    assert student.compare_cell(full, _run(_printed("✓ predict: 3\nthe answer is 3\n"))) == (
        f"@@ -1,2 +1,2 @@\n-{student.UNMET}\n+✓ predict: 3\n the answer is 3")


def test_cells_are_paired_by_id_and_ignored_outputs_are_not_compared():
    full = new_notebook(cells=[_cell("markdown", "# T"), _run(), _cell("code", "t()", tags=[
        "nbval-ignore-output"]), _cell("code", "u()", tags=["nbval-skip"]), _run()])
    nb = new_notebook(cells=[full.cells[i] for i in (1, 2, 3, 4)])
    assert student.compared_cells(full, nb) == [(0, 1), (3, 4)]
    nb.cells[0] = _run()  # a new id: the student edition is older than the full one
    with pytest.raises(ValueError, match=r"student cell 0 has id .* run `make student`"):
        student.compared_cells(full, nb)


def test_make_test_executes_the_student_edition_and_fails_on_a_difference(tmp_path):
    """The collector in tests/conftest.py, run by pytest on a pair of small notebooks: a cell that
    prints what the full edition printed passes, a ✓ line met by a ○ line passes, a changed
    number fails with the cell and a diff, and a cell that raises fails the run."""
    folder = tmp_path / "notebooks"
    (folder / "student").mkdir(parents=True)
    full = new_notebook(cells=[
        _cell("code", "import os\nprint(os.getcwd())", outputs=[_printed(f"{folder}\n")]),
        _cell("code", "guess = None\n### BEGIN SOLUTION\nguess = 3\n### END SOLUTION\n"
                      "print('○ not yet' if guess is None else '✓ right')",
              outputs=[_printed("✓ right\n")]),
        _cell("code", "print(6 * 7)", outputs=[_printed("41\n")]),
        _cell("code", "raise ValueError('on purpose')", outputs=[]),
        _cell("code", "print('after')", outputs=[_printed("after\n")]),
    ], metadata={"kernelspec": dict(series.KERNELSPEC)})
    nbformat.write(full, folder / "01_tiny.ipynb")
    nbformat.write(student.student_notebook(folder / "01_tiny.ipynb"),
                   folder / "student" / "01_tiny.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-v",
         "--rootdir", str(tmp_path),
         str(folder / "student" / "01_tiny.ipynb"), str(ROOT / "tests" / "conftest.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    report = done.stdout
    assert done.returncode == 1, report
    outcomes = dict(re.findall(r"01_tiny.ipynb::(Cell \d|runs top to bottom) "
                               r"(PASSED|FAILED|SKIPPED)", report))
    assert outcomes == {"Cell 0": "PASSED", "Cell 1": "PASSED", "Cell 2": "FAILED",
                        "Cell 3": "FAILED", "Cell 4": "SKIPPED",
                        "runs top to bottom": "FAILED"}, report
    assert ("notebooks/student/01_tiny.ipynb cell 2 (full edition cell 2): 'print(6 * 7)'\n"
            "@@ -1 +1 @@\n-41\n+42") in report
    assert "cell 3 (\"raise ValueError('on purpose')\") raised" in report


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

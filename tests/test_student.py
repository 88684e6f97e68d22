"""The student edition (`make student`, attnlab.classroom.student): solutions out, placeholders in
at the right indentation, bad markers refused with file and line, and the committed
notebooks/student/ equal to what the builder makes from the current sources, with no solution
line left in them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from attnlab.classroom import runner, student
from attnlab.classroom.student import (
    PLACEHOLDER,
    TOP_LEVEL_PLACEHOLDER,
    SolutionMarkerError,
    strip_solutions,
)

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
COMMITTED = sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))
HEADER = ("# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Python 3\n"
          "#     language: python\n#     name: python3\n# ---\n\n")
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
    assert strip_solutions("x = 1\ny = 2") == "x = 1\ny = 2"  # nothing to take out


@pytest.mark.parametrize("lines, line, message", [
    (["x = 1", "### BEGIN SOLUTION", "y = 2"], 2, "has no '### END SOLUTION' after it"),
    (["x = 1", "y = 2", "    ### END SOLUTION"], 3, "without a '### BEGIN SOLUTION' before it"),
    (["### BEGIN SOLUTION", "a = 1", "  ### BEGIN SOLUTION", "### END SOLUTION",
      "### END SOLUTION"], 3, "inside the region opened at line 10; solution regions do not nest"),
    (["## BEGIN SOLUTION", "a = 1", "### END SOLUTION"], 1, "looks like a solution marker"),
    (["### BEGIN SOLUTION", "a = 1  ### END SOLUTION"], 2, "looks like a solution marker"),
])
def test_unbalanced_nested_or_malformed_markers_name_the_file_and_line(lines, line, message):
    with pytest.raises(SolutionMarkerError, match=re.escape(f"notebooks/09_x.py:{line + 9}: ")
                       + ".*" + re.escape(message)):
        strip_solutions("\n".join(lines), "notebooks/09_x.py", first_line=10)


def test_a_notebook_source_changes_only_in_its_code_cells():
    text = HEADER + "\n".join([
        "# %% [markdown]",
        "# # Title",
        "# Write your answer between `### BEGIN SOLUTION` and `### END SOLUTION`:",
        "# ### BEGIN SOLUTION",
        "",
        '# %% tags=["hide-input"]',
        "def f(x):",
        "    ### BEGIN SOLUTION",
        "    return 2 * x",
        "    ### END SOLUTION",
        "",
        '# %% [markdown] slideshow={"slide_type": "notes"}',
        "# Predict f(3).",
    ]) + "\n"
    out = student.student_source(text, "n.py")
    assert out == text.replace("    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n",
                               f"    {PLACEHOLDER}\n")
    assert student.solution_lines(text) == [(HEADER.count("\n") + 9, "    return 2 * x")]

    # a region must close in the cell that opens it; the line number is the file's
    with pytest.raises(SolutionMarkerError, match=r"n\.py:11: '### BEGIN SOLUTION' has no"):
        student.student_source(HEADER + "# %%\nx = 1\n### BEGIN SOLUTION\n# %%\n### END SOLUTION\n",
                               "n.py")


def test_the_student_notebook_keeps_markdown_and_metadata_and_is_not_paired(tmp_path):
    py = tmp_path / "01_tiny.py"
    py.write_text(HEADER + "\n".join([
        "# %% [markdown]",
        "# # Tiny",
        "",
        '# %% tags=["hide-input"] slideshow={"slide_type": "skip"}',
        "def double(x):",
        "    ### BEGIN SOLUTION",
        "    return 2 * x",
        "    ### END SOLUTION",
    ]) + "\n")
    nb = student.student_notebook(py)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code"]
    assert nb.cells[0].source == "# Tiny"
    assert nb.cells[1].source == f"def double(x):\n    {PLACEHOLDER}"
    assert nb.cells[1].metadata == {"tags": ["hide-input"], "slideshow": {"slide_type": "skip"}}
    assert nb.metadata["jupytext"] == {"formats": "ipynb"}  # no .py pairing
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert [c.id for c in nb.cells] == [c.id for c in student.student_notebook(py).cells]


def test_build_executes_the_student_edition_and_stores_its_outputs(tmp_path, monkeypatch):
    (tmp_path / "01_tiny.py").write_text(HEADER + "\n".join([
        "# %%",
        "import os",
        "answer = None",
        "### BEGIN SOLUTION",
        "answer = 42",
        "### END SOLUTION",
        "print('○ not attempted' if answer is None else '✓', os.getcwd())",
    ]) + "\n")
    (tmp_path / "02_broken.py").write_text(HEADER + "# %%\n### BEGIN SOLUTION\n")
    monkeypatch.setattr(runner, "NOTEBOOK_DIR", tmp_path)
    out = tmp_path / "student"
    path, seconds, error = student.build("01_tiny", out_dir=out)
    assert error is None and path == out / "01_tiny.ipynb"
    stored = nbformat.read(path, as_version=4)
    text = stored.cells[0].outputs[0]["text"]
    assert text.startswith("○ not attempted") and text.strip().endswith(str(out))  # kernel cwd
    assert "execution" not in stored.cells[0].metadata  # no timestamps to churn

    # a marker error stops the command before any kernel starts, and names the file and line
    monkeypatch.setattr(student, "STUDENT_DIR", out)
    assert student.main(["02"]) == 1


# ----------------------------------------------------------------------------- committed editions

def _stored_sources(ipynb: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(ipynb.read_text())["cells"]]


@pytest.mark.parametrize("ipynb", COMMITTED, ids=lambda p: p.name)
def test_committed_student_edition_is_what_the_builder_makes(ipynb):
    py = ROOT / "notebooks" / f"{ipynb.stem}.py"
    assert py.exists(), f"{ipynb} has no source {py.name}; delete it or restore the source"
    expected = [(c.cell_type, c.source) for c in student.student_notebook(py).cells]
    assert _stored_sources(ipynb) == expected, (
        f"notebooks/student/{ipynb.name} is not what {py.name} gives now: "
        f"run `make student NB={ipynb.name[:2]}`")
    stored = json.loads(ipynb.read_text())
    assert "text_representation" not in stored["metadata"].get("jupytext", {})
    counts = [c["execution_count"] for c in stored["cells"] if c["cell_type"] == "code"
              and "".join(c["source"]).strip()]
    assert counts == list(range(1, len(counts) + 1)), f"run `make student NB={ipynb.name[:2]}`"


@pytest.mark.parametrize("ipynb", COMMITTED, ids=lambda p: p.name)
def test_no_solution_line_reaches_the_student_edition(ipynb):
    py = ROOT / "notebooks" / f"{ipynb.stem}.py"
    shown = {line.strip() for kind, source in _stored_sources(ipynb)
             for line in source.split("\n")}
    leaked = [(n, line.strip()) for n, line in student.solution_lines(py.read_text())
              if not _TRIVIAL.match(line.strip()) and line.strip() in shown]
    assert not leaked, (f"solution lines of {py.name} appear in notebooks/student/{ipynb.name}: "
                        + "; ".join(f"line {n}: {line!r}" for n, line in leaked))
    assert "BEGIN SOLUTION" not in ipynb.read_text()


def test_every_source_has_balanced_markers():
    for py in SOURCES:
        student.student_source(py.read_text(), str(py.relative_to(ROOT)))


"""The student edition: the notebooks with their exercise solutions taken out (`make student`).

An exercise's solution is written in the py:percent source, inside a code cell, between a line
`### BEGIN SOLUTION` and a line `### END SOLUTION`. For each notebooks/NN_name.py this writes
notebooks/student/NN_name.ipynb in which every such region (markers included) is one line
`...  # your code here` at the region's indentation (inside a block, where Python needs a
statement), or `# your code here` at the top level of a cell (where a bare `...` as the cell's
last line would be displayed as `Ellipsis`); markdown and cell metadata are unchanged.
The notebook is then executed in a fresh kernel (ATTNLAB_RECORDING=1, as `make notebooks`), so
its stored outputs show what a student sees first: each check's `○` line. The student edition is
not paired with a .py: the solution edition is the source, this one is generated from it.

    python -m attnlab.classroom.student          # every notebook
    python -m attnlab.classroom.student 03 05    # by NN prefix or name
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from pathlib import Path

from . import runner

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
PLACEHOLDER = "...  # your code here"  # inside a block: a statement the block can consist of
TOP_LEVEL_PLACEHOLDER = "# your code here"  # at a cell's top level: shows no `Ellipsis` output
STUDENT_DIR = runner.NOTEBOOK_DIR / "student"

MARKER = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>### (?:BEGIN|END) SOLUTION)[ \t]*$")
# Anything that looks like a marker but is not exactly one (`## BEGIN SOLUTION`, a marker after
# code, a typo'd word): refused, so a solution is never shipped because its marker was misspelt.
_LOOKS_LIKE_MARKER = re.compile(r"#+\s*(BEGIN|END)[ _]*SOLUTION", re.IGNORECASE)
# A py:percent cell header (`# %%`, `# %% [markdown] ...`), as jupytext reads it.
_CELL_HEADER = re.compile(r"^#\s*%%(?:\s|$)")
_MARKDOWN_HEADER = re.compile(r"^#\s*%%\s*\[(?:markdown|md)\]")
# Cell metadata jupytext adds when reading a text notebook, about the text's layout only; its
# ipynb writer drops them too. The authors' metadata (tags, slideshow) stays.
_JUPYTEXT_LAYOUT = ("lines_to_next_cell", "lines_to_end_of_cell_marker", "cell_marker",
                    "skipline", "noskipline")


class SolutionMarkerError(ValueError):
    """Unbalanced, nested or malformed solution markers; the message names the file and line."""


def strip_solutions(source: str, where: str = "<source>", first_line: int = 1) -> str:
    """`source` (code) with each BEGIN/END SOLUTION region replaced by one placeholder line.

    The placeholder takes the BEGIN marker's indentation, so the code around it keeps its
    shape (a function body stays a body). `where` and `first_line` (the line number of the
    source's first line in its file) make error messages point at the file and line.
    Raises SolutionMarkerError for a BEGIN without END, an END without BEGIN, nested regions
    and marker-like lines that are not exactly a marker.
    """
    out: list[str] = []
    begin: int | None = None  # line number of the open region's BEGIN
    for number, line in enumerate(source.split("\n"), start=first_line):
        match = MARKER.match(line)
        if match is None:
            if _LOOKS_LIKE_MARKER.search(line):
                raise SolutionMarkerError(
                    f"{where}:{number}: {line.strip()!r} looks like a solution marker but is not "
                    f"one; write {BEGIN!r} or {END!r} alone on its line")
            if begin is None:
                out.append(line)
            continue
        if match["marker"] == BEGIN:
            if begin is not None:
                raise SolutionMarkerError(
                    f"{where}:{number}: {BEGIN!r} inside the region opened at line {begin}; "
                    f"solution regions do not nest: close it with {END!r} first")
            begin = number
            placeholder = PLACEHOLDER if match["indent"] else TOP_LEVEL_PLACEHOLDER
            out.append(f"{match['indent']}{placeholder}")
        else:
            if begin is None:
                raise SolutionMarkerError(
                    f"{where}:{number}: {END!r} without a {BEGIN!r} before it")
            begin = None
    if begin is not None:
        raise SolutionMarkerError(
            f"{where}:{begin}: {BEGIN!r} has no {END!r} after it in the same cell")
    return "\n".join(out)


def _cells(text: str) -> list[tuple[bool, int, list[str]]]:
    """Split py:percent `text` into (is_code, first line number, lines) runs at cell headers.

    The text before the first header (jupytext's YAML header) and markdown cells count as not
    code; each header line starts a run of its own kind.
    """
    runs: list[tuple[bool, int, list[str]]] = [(False, 1, [])]
    for number, line in enumerate(text.split("\n"), start=1):
        if _CELL_HEADER.match(line):
            runs.append((not _MARKDOWN_HEADER.match(line), number, [line]))
        else:
            runs[-1][2].append(line)
    return runs


def student_source(text: str, where: str = "<source>") -> str:
    """The py:percent `text` of a notebook with the solutions of its code cells taken out.

    Markers are looked for in code cells only (a markdown cell may talk about them); a region
    must open and close inside one cell.
    """
    parts = []
    for is_code, first, lines in _cells(text):
        run = "\n".join(lines)
        parts.append(strip_solutions(run, where, first) if is_code else run)
    return "\n".join(parts)


def solution_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line strictly inside a solution region of py:percent `text`."""
    found: list[tuple[int, str]] = []
    for is_code, first, lines in _cells(text):
        inside = False
        for number, line in enumerate(lines, start=first):
            match = MARKER.match(line) if is_code else None
            if match:
                inside = match["marker"] == BEGIN
            elif inside:
                found.append((number, line))
    return found


def student_notebook(py: Path):
    """The unexecuted student edition of the py:percent notebook `py` (a NotebookNode).

    Cell sources and metadata come from the source; the notebook metadata keeps the kernelspec
    and pins the format to ipynb alone, so Jupyter's jupytext never pairs it with a .py. Cell ids
    are derived from the notebook name and position, so rebuilding does not churn them.
    """
    import jupytext

    py = Path(py)
    nb = jupytext.reads(student_source(py.read_text(encoding="utf-8"), str(py)), fmt="py:percent")
    nb.metadata = {"kernelspec": nb.metadata.get("kernelspec", runner.KERNELSPEC),
                   "jupytext": {"formats": "ipynb"}}
    for i, cell in enumerate(nb.cells):
        cell.id = hashlib.sha1(f"{py.stem}:{i}".encode()).hexdigest()[:8]
        for key in _JUPYTEXT_LAYOUT:
            cell.metadata.pop(key, None)
    return nb


def build(stem: str, timeout: int = 600, out_dir: Path | None = None):
    """Write and execute out_dir/`stem`.ipynb (default notebooks/student/); returns
    (path, seconds, error). A notebook whose execution fails is not written."""
    import nbformat

    out_dir = Path(out_dir) if out_dir is not None else STUDENT_DIR
    nb = student_notebook(runner.NOTEBOOK_DIR / f"{stem}.py")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.ipynb"
    nb, seconds, error = runner.execute(path, timeout, nb=nb)
    if error is None:
        for cell in nb.cells:  # nbclient's timestamps would change on every build
            cell.metadata.pop("execution", None)
        nbformat.write(nb, path)
    return path, seconds, error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.student",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook names or NN prefixes (default: all)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    args = parser.parse_args(argv)

    stems = [s for s in runner.notebook_stems(args.names)
             if (runner.NOTEBOOK_DIR / f"{s}.py").exists()]
    try:  # every source is checked before anything runs: a marker error costs no kernel time
        for stem in stems:
            py = runner.NOTEBOOK_DIR / f"{stem}.py"
            student_source(py.read_text(encoding="utf-8"), str(py))
    except SolutionMarkerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    rows = []
    # The stored outputs are a recording, like `make notebooks`'s: fmt's rounding guard is on in
    # the kernels (they inherit the environment), and only while they run: a caller in the same
    # process (a test) must not find it left on.
    previous = os.environ.get("ATTNLAB_RECORDING")
    os.environ["ATTNLAB_RECORDING"] = "1"
    try:
        for stem in stems:
            print(f"building student/{stem}.ipynb ...", flush=True)
            path, seconds, error = build(stem, args.timeout)
            rows.append((f"student/{path.name}", error, seconds))
    finally:
        if previous is None:
            os.environ.pop("ATTNLAB_RECORDING", None)
        else:
            os.environ["ATTNLAB_RECORDING"] = previous
    runner.report(rows)
    return 1 if any(error is not None for _, error, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The student edition: the notebooks with their exercise solutions taken out (`make student`).

An exercise's solution is written in a code cell, between a line `### BEGIN SOLUTION` and a
line `### END SOLUTION`. For each full edition notebooks/NN_name.ipynb (the executed notebook
that jupytext keeps paired with NN_name.py) this writes notebooks/student/NN_name.ipynb:

- every solution region (markers included) becomes one line `...  # your code here` at the
  region's indentation (inside a block, where Python needs a statement), or `# your code here`
  at the top level of a cell (where a bare `...` as the cell's last line would be displayed as
  `Ellipsis`);
- cells tagged `remove-cell` (the asserts that keep the prose honest, CI plumbing) are dropped,
  by nbconvert's TagRemovePreprocessor, as the slides and the site drop them;
- markdown cells whose `slideshow.slide_type` is `notes` (instructor notes) are dropped;
- no outputs and no execution counts: students predict before they see.

Every other cell keeps its source, its tags and slideshow metadata, and its cell id: a student
cell has the id of the full-edition cell it comes from, so `make test` can execute the student
edition under nbval against the full edition's outputs, cell by cell (tests/conftest.py). Nothing
is executed here; building all the notebooks takes about a second.

    python -m attnlab.classroom.student          # every notebook
    python -m attnlab.classroom.student 03 06    # by NN prefix or name
"""
from __future__ import annotations

import argparse
import copy
import os
import re
import sys
from pathlib import Path

import nbformat
from nbconvert.preprocessors import TagRemovePreprocessor

from ..exercises import checks
from . import series

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
PLACEHOLDER = "...  # your code here"  # inside a block: a statement the block can consist of
TOP_LEVEL_PLACEHOLDER = "# your code here"  # at a cell's top level: shows no `Ellipsis` output
STUDENT_DIR = series.NOTEBOOK_DIR / "student"
REMOVE_CELL = "remove-cell"  # the one tag that keeps a cell out of the student edition,
#                              the slides and the site; the full edition runs it under nbval
KEPT_METADATA = ("tags", "slideshow")  # what jupytext.toml keeps in the .py, and all we keep

MARKER = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>### (?:BEGIN|END) SOLUTION)[ \t]*$")
# Anything that looks like a marker but is not exactly one (`## BEGIN SOLUTION`, a marker after
# code, a typo'd word): refused, so a solution is never shipped because its marker was misspelt.
_LOOKS_LIKE_MARKER = re.compile(r"#+\s*(BEGIN|END)[ _]*SOLUTION", re.IGNORECASE)


class SolutionMarkerError(ValueError):
    """Unbalanced, nested or malformed solution markers; the message names the cell and line."""


def strip_solutions(source: str, where: str = "<source>") -> str:
    """`source` (code) with each BEGIN/END SOLUTION region replaced by one placeholder line.

    The placeholder takes the BEGIN marker's indentation, so the code around it keeps its
    shape (a function body stays a body). `where` names the cell in error messages.
    Raises SolutionMarkerError for a BEGIN without END, an END without BEGIN, nested regions
    and marker-like lines that are not exactly a marker.
    """
    out: list[str] = []
    begin: int | None = None  # line number of the open region's BEGIN
    for number, line in enumerate(source.split("\n"), start=1):
        match = MARKER.match(line)
        if match is None:
            if _LOOKS_LIKE_MARKER.search(line):
                raise SolutionMarkerError(
                    f"{where}, line {number}: {line.strip()!r} looks like a solution marker but "
                    f"is not one; write {BEGIN!r} or {END!r} alone on its line")
            if begin is None:
                out.append(line)
            continue
        if match["marker"] == BEGIN:
            if begin is not None:
                raise SolutionMarkerError(
                    f"{where}, line {number}: {BEGIN!r} inside the region opened at line "
                    f"{begin}; solution regions do not nest: close it with {END!r} first")
            begin = number
            placeholder = PLACEHOLDER if match["indent"] else TOP_LEVEL_PLACEHOLDER
            out.append(f"{match['indent']}{placeholder}")
        else:
            if begin is None:
                raise SolutionMarkerError(
                    f"{where}, line {number}: {END!r} without a {BEGIN!r} before it")
            begin = None
    if begin is not None:
        raise SolutionMarkerError(
            f"{where}, line {begin}: {BEGIN!r} has no {END!r} after it in the same cell")
    return "\n".join(out)


def has_solution(cell) -> bool:
    """Whether a cell holds a solution region (markers are looked for in code cells only)."""
    return cell.cell_type == "code" and any(
        MARKER.match(line) for line in cell.source.split("\n"))


_CHECK_CALL = re.compile(r"\b(ex\d\d)\.(\w+)\(\s*([A-Za-z_]\w*)\s*[,)]")  # exNN.check(answer, ...)


def predict_guess_cells(nb) -> dict[int, int]:
    """{guess cell index: check cell index} for every *predict* exercise of notebook `nb`.

    A predict check is called as `exNN.check(guess, measured)` after the measurement; its guess
    cell is the last code cell before that call whose solution region assigns `guess` (a
    ValueError if there is none: a guess written in the measuring cell cannot stay open).
    The slides use this to keep the question open: the guess cell shows no instructor answer,
    and the measurement comes on a later slide.
    """
    registry, found = checks(), {}  # the registry knows each check's kind
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for module, name, answer in _CHECK_CALL.findall(cell.source):
            check = registry.get(f"{module}.{name}")
            if check is None or check.exercise.kind != "predict":
                continue
            assigns = re.compile(rf"^\s*{re.escape(answer)}\s*=", re.MULTILINE)
            guess = next((j for j in range(i - 1, -1, -1) if has_solution(nb.cells[j])
                          and assigns.search(nb.cells[j].source)), None)
            if guess is None:
                raise ValueError(
                    f"cell {i} calls the predict check {module}.{name}({answer}, ...), but no "
                    f"code cell before it has a solution region that assigns {answer}: the "
                    f"guess goes in a cell of its own, before the measurement")
            found[guess] = i
    return found

def without_removed_cells(nb):
    """A copy of `nb` without the cells tagged `remove-cell` (nbconvert's TagRemovePreprocessor)."""
    nb, _ = TagRemovePreprocessor(remove_cell_tags={REMOVE_CELL}).preprocess(
        copy.deepcopy(nb), {})
    return nb


def is_notes(cell) -> bool:
    """An instructor's note: a markdown cell shown as speaker notes on the slides."""
    return (cell.cell_type == "markdown"
            and (cell.metadata.get("slideshow") or {}).get("slide_type") == "notes")


def student_notebook(ipynb: Path):
    """The student edition of the full-edition notebook `ipynb` (a NotebookNode, unexecuted).

    The notebook metadata keeps the kernelspec and pins the format to ipynb alone, so Jupyter's
    jupytext never pairs it with a .py: the full edition is the source, this one is generated.
    """
    ipynb = Path(ipynb)
    nb = without_removed_cells(nbformat.read(ipynb, as_version=4))
    cells = []
    for index, cell in enumerate(nb.cells):
        if is_notes(cell):
            continue
        cell.metadata = {k: cell.metadata[k] for k in KEPT_METADATA if k in cell.metadata}
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source, f"{ipynb.name}, cell {index} ({cell.id})")
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    nb.cells = cells
    series.collapse_hidden_inputs(nb)
    nb.metadata = {"kernelspec": nb.metadata.get("kernelspec", series.KERNELSPEC),
                   "jupytext": {"formats": "ipynb"}}
    return nb


RELEASE_README = """# {title}

The student edition of the attnlab series: one notebook per lesson, in order, without the
solutions and without stored outputs (you predict before you see). Open a notebook, run its
cells from the top, and write your answers where a cell says `# your code here`; each check
answers with one line (✓ right, ✗ not yet, ○ not attempted, ✎ your prediction beside the
measurement).

The notebooks need the `attnlab` package and its assets, which the course's image (JupyterHub,
Binder) already has; on your own machine, `make lab` in a clone of the repository sets them up.
"""
RELEASE_KEEP = {".git", ".gitignore", "README.md"}  # a published tree's files besides notebooks


def release(out: Path, folder: Path | None = None) -> list[Path]:
    """Write the student-only tree an instructor publishes (for nbgitpuller, say) into `out`:
    every notebook's student edition, made fresh from the full edition, and a README.

    `out` may be new, empty, or a previous release (its git files are kept, its notebooks
    replaced, one no longer in the series removed); anything else in it stops the release
    before a file is written, so no one's work is overwritten. Returns the paths written."""
    folder = series.notebook_dir(folder)
    out = Path(out)
    if out.resolve() in {folder.resolve(), (folder / "student").resolve()}:
        raise ValueError(f"{out} is the series' own notebooks folder; release into another one")
    stems = series.notebook_stems(None, folder)
    notebooks = {stem: student_notebook(folder / f"{stem}.ipynb") for stem in stems}
    if out.exists():
        ours = {f"{stem}.ipynb" for stem in stems} | RELEASE_KEEP
        foreign = sorted(p.name for p in out.iterdir()
                         if p.name not in ours and not re.fullmatch(r"\d\d_\w+\.ipynb", p.name))
        if foreign:
            raise FileExistsError(
                f"{out} holds files that are not a release's ({', '.join(foreign[:5])}"
                f"{' ...' if len(foreign) > 5 else ''}); release into a new or empty folder, or "
                f"a previous release")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("[0-9][0-9]_*.ipynb"):  # a previous release's notebook renamed since
        if stale.stem not in notebooks:
            stale.unlink()
    written = []
    for stem, nb in notebooks.items():
        nbformat.write(nb, out / f"{stem}.ipynb")
        written.append(out / f"{stem}.ipynb")
    (out / "README.md").write_text(RELEASE_README.format(title="attnlab: the student edition"),
                                   encoding="utf-8")
    return [*written, out / "README.md"]


COLAB_CELL = """# Google Colab: install what this notebook needs, once a session (a minute or two).
# Where attnlab is installed already (your own machine, the course's JupyterHub) it does nothing.
import importlib.util, subprocess, sys
if importlib.util.find_spec("attnlab") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", {source!r}], check=True)
    subprocess.run([sys.executable, "-m", "attnlab", "fetch"], check=True)  # models and data
    subprocess.run([sys.executable, "-m", "attnlab", "kernel"], check=True)  # after a restart
else:
    print("attnlab is installed: nothing to do")"""


def colab_notebook(ipynb: Path, source: str):
    """The student edition of `ipynb` with a first cell that installs attnlab from `source`
    (a pip requirement: a git URL, a wheel's URL, a PyPI name) and fetches its assets where
    attnlab is missing, as on Colab, and does nothing where it is present."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("give the source students install attnlab from, e.g. "
                         "SOURCE=git+https://github.com/you/attnlab (a git URL, a wheel's URL or "
                         "a package name)")
    nb = student_notebook(ipynb)
    cell = nbformat.v4.new_code_cell(COLAB_CELL.format(source=source.strip()))
    cell.id = "colab-install"
    nb.cells.insert(0, cell)
    return nb

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.student",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook names or NN prefixes (default: all)")
    series.add_argument(parser)
    parser.add_argument("--release", metavar="DIR", type=Path,
                        help="write the student-only tree for students to pull into DIR")
    parser.add_argument("--colab", metavar="DIR", type=Path,
                        help="write Colab-ready student notebooks into DIR (with --source)")
    parser.add_argument("--source", help="where Colab installs attnlab from (a pip requirement)")
    args = parser.parse_args(argv)

    if args.colab is not None:
        folder = series.notebook_dir(args.notebooks)
        try:
            notebooks = {stem: colab_notebook(folder / f"{stem}.ipynb", args.source)
                         for stem in series.notebook_stems(args.names, folder)}
        except (SolutionMarkerError, FileNotFoundError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        args.colab.mkdir(parents=True, exist_ok=True)
        for stem, nb in notebooks.items():
            nbformat.write(nb, args.colab / f"{stem}.ipynb")
        print(f"wrote {len(notebooks)} Colab notebooks into {args.colab}")
        return 0

    if args.release is not None:
        try:
            written = release(args.release, args.notebooks)
        except (SolutionMarkerError, FileNotFoundError, FileExistsError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"wrote {len(written) - 1} student notebooks and a README into {args.release}")
        return 0
    folder = series.notebook_dir(args.notebooks)
    out = STUDENT_DIR if folder == series.NOTEBOOK_DIR else folder / "student"
    stems = series.notebook_stems(args.names, folder)
    try:  # every notebook is checked before anything is written
        notebooks = {stem: student_notebook(folder / f"{stem}.ipynb") for stem in stems}
    except (SolutionMarkerError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for stem, nb in notebooks.items():
        nbformat.write(nb, out / f"{stem}.ipynb")
        print(f"wrote {os.path.relpath(out / f'{stem}.ipynb')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The series as an nbgrader course (`make nbgrader DIR=course`): assignments nbgrader can
release, collect and autograde.

nbgrader (https://nbgrader.readthedocs.io) grades a notebook by its *test cells*: a locked cell
that earns its points when it runs without raising. The series' checks never raise (a wrong
answer must not stop a student's notebook), so the export adds, after every cell that calls a
check (`grade.answer_key`), one locked test cell per check that calls
`attnlab.exercises.grading.require("exNN.function", lambda: answer, lambda: (args,))`: it
judges the variable the check was given afresh, by the rule `make grade` follows too (inputs
drawn now from a secret seed, attnlab's reference refused while the student's function runs),
and raises unless it is ✓, or ✎ for a prediction (graded on completion: a guess made before the
measurement earns the point, whatever it was). What the check printed and what the kernel
recorded earn nothing. A blank submission therefore scores 0, a notebook that prints ✓ lines 0,
and the full edition every point. Run as nbgrader runs it, that cell would judge in the
student's kernel, which any answer cell can rewrite; so the nbgrader_config.py written here
replaces nbgrader's Execute among autograde's preprocessors with
`attnlab.classroom.nbgrade.OwnJudgeExecute`, which judges each of those cells in nbgrader's own
process, the way `make grade` does, and sets the cell's outputs to that verdict (an error where
it earns nothing) for nbgrader's SaveAutoGrades to score. (So attnlab must be importable where
nbgrader runs, not only in the kernel.) Run in a kernel without that config, as the student's
own assert, the cell is only as strong as the in-kernel judge (`attnlab.exercises.grading`).

For each notebook NN_name of the series this writes DIR/source/NN_name/NN_name.ipynb:

- the cells of the student edition (`student.student_notebook`: no `remove-cell` asserts, no
  instructor notes, no outputs), but with the solutions kept: nbgrader's own ClearSolutions
  takes them out when the instructor runs `nbgrader generate_assignment`;
- nbgrader's metadata: each cell with a solution region is a solution cell, each added test
  cell a locked, graded one (1 point);

and DIR/nbgrader_config.py (the stub that replaces a solution, `pass  # your code here`, which
is valid Python at any indentation and shows no output; a cell time limit that fits the
trainings) and DIR/README.md (the instructor's commands).

    python -m attnlab.classroom.course DIR [NN ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from . import series
from .grade import IOPUB_TIMEOUT_S, answer_key
from .student import SolutionMarkerError, has_solution, strip_solutions, student_notebook

STUB = "pass  # your code here"  # what nbgrader's ClearSolutions puts where a solution was
SCHEMA = 3  # nbgrader's cell metadata schema version (nbgrader 0.9)
TEST_CELL = """\
# Graded (nbgrader, 1 point): your answer judged afresh, on inputs you have not seen.
from attnlab.exercises import grading
grading.require({check!r}, lambda: ({answer}), lambda: ({args}{comma}))"""
CONFIG = '''\
# nbgrader's configuration for the attnlab course (written by `make nbgrader`).
c = get_config()  # noqa: F821 - nbgrader defines it
c.CourseDirectory.course_id = "attnlab"
# A solution region becomes one line that is valid Python wherever it stands and shows nothing.
c.ClearSolutions.code_stub = {{"python": {stub!r}}}
# Seconds a cell may run when autograding: the trainings take up to ~30 s on a 2-core laptop.
c.Execute.timeout = {timeout}
# Seconds to wait for a cell's output after it finished, and for a kernel to start: with
# nbgrader's 4 s, a busy grading machine that delivers output late ends the whole submission
# in "error processing assignment" (seen in CI, on a submission of 25 printing cells).
c.Execute.iopub_timeout = {iopub}
c.Execute.startup_timeout = {startup}
# The points come from attnlab's grader, not from the student's kernel: each locked test cell
# is judged in nbgrader's own process (attnlab.classroom.nbgrade), the cell's outputs then say
# that verdict, and SaveAutoGrades scores them. nbgrader 0.9.6's list, with Execute replaced.
c.Autograde.autograde_preprocessors = [
    "attnlab.classroom.nbgrade.OwnJudgeExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
'''
README = """\
# The attnlab course for nbgrader

Written by `make nbgrader` from the series' notebooks: `source/` holds one assignment per
notebook, with its solutions and its graded test cells (1 point per check: ✓ for an exercise, a
guess given for a prediction). With nbgrader installed (`pip install nbgrader==0.9.6`, the
version the tests use) and attnlab in the kernel that grades:

    cd {folder}
    nbgrader generate_assignment 01_attention_by_hand   # release/: solutions taken out
    nbgrader generate_assignment "*"                    # ... or every notebook at once
    # hand release/ out; collect submissions into submitted/<student>/01_attention_by_hand/
    nbgrader autograde 01_attention_by_hand
    nbgrader export                                     # grades.csv

The test cells are locked: nbgrader puts them back as they were before it grades, so a student
cannot edit a check away. nbgrader_config.py has autograde judge them in nbgrader's own process
(attnlab.classroom.nbgrade), so attnlab must be installed where nbgrader runs too.
"""
CELL_TIMEOUT_S = 300
STARTUP_TIMEOUT_S = 180


def course_notebook(ipynb: Path):
    """The nbgrader source version of the full-edition notebook `ipynb` (see the module's
    docstring): the student edition's cells with their solutions, solution cells marked, and a
    locked test cell after every check."""
    ipynb = Path(ipynb)
    full = nbformat.read(ipynb, as_version=4)
    student = student_notebook(ipynb)  # its cells keep their full-edition ids
    by_id = {cell.id: cell for cell in full.cells}
    key = answer_key(full)
    cells = []
    for index, cell in enumerate(student.cells):
        source = by_id[cell.id]
        if cell.cell_type == "code":
            cell.source = source.source  # the solutions back in: nbgrader takes them out
            if has_solution(cell):
                strip_solutions(cell.source, f"{ipynb.name}, cell {index} ({cell.id})")
                cell.metadata["nbgrader"] = {
                    "solution": True, "grade": False, "locked": False,
                    "grade_id": f"answer-{cell.id}", "schema_version": SCHEMA}
        cells.append(cell)
        for k, entry in enumerate(e for e in key if e["cell"] == cell.id):
            test = nbformat.v4.new_code_cell(TEST_CELL.format(
                comma="," if entry["args"] else "", **entry))
            test.id = f"check-{cell.id}-{k}"
            test.metadata = {"nbgrader": {
                "solution": False, "grade": True, "locked": True, "points": 1,
                "grade_id": test.id, "schema_version": SCHEMA}}
            cells.append(test)
    student.cells = cells
    return student


def write_course(out: Path, names: list[str] | None = None,
                 folder: Path | None = None) -> list[Path]:
    """Write the course into `out` (new, empty, or a previous export: its source/ notebooks are
    replaced, and nbgrader's own folders and gradebook are left alone); returns the assignment
    notebooks written. Every notebook is built before anything is written."""
    folder = series.notebook_dir(folder)
    out = Path(out)
    notebooks = {stem: course_notebook(folder / f"{stem}.ipynb")
                 for stem in series.notebook_stems(names, folder)}
    if out.exists() and any(out.iterdir()) and not (out / "nbgrader_config.py").is_file():
        raise FileExistsError(f"{out} holds files and no nbgrader_config.py: export into a new "
                              f"or empty folder, or a previous export")
    written = []
    for stem, nb in notebooks.items():
        path = out / "source" / stem / f"{stem}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
        written.append(path)
    (out / "nbgrader_config.py").write_text(CONFIG.format(
        stub=STUB, timeout=CELL_TIMEOUT_S, iopub=IOPUB_TIMEOUT_S, startup=STARTUP_TIMEOUT_S),
        encoding="utf-8")
    (out / "README.md").write_text(README.format(folder=out), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnlab.classroom.course",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the course folder to write")
    parser.add_argument("names", nargs="*", help="notebook names or NN prefixes (default: all)")
    series.add_argument(parser)
    args = parser.parse_args(argv)
    try:
        written = write_course(args.out, args.names, args.notebooks)
    except (SolutionMarkerError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} nbgrader assignments into {args.out / 'source'}; "
          f"next: cd {args.out} && nbgrader generate_assignment {written[0].stem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The nbgrader export (`make nbgrader`), tried with nbgrader itself: generate_assignment takes
the solutions out of every notebook, and autograde gives the full edition every point, a blank
submission none and a half-done one its half."""
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attnlab.classroom import course, grade, series, student
from attnlab.exercises import check_answer, check_prediction, require

pytestmark = pytest.mark.integration  # make test-all (CI), not make test

BIN = Path(sys.executable).parent  # nbgrader runs alembic and the kernel from the venv
FIRST = "01_attention_by_hand"


def nbgrader(folder: Path, *args: str) -> subprocess.CompletedProcess:
    executable = BIN / "nbgrader"
    assert executable.exists(), "nbgrader is a test tool (requirements-dev.txt): make dev"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([str(executable), *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:  # the first traceback, not only the tail nbgrader ends with
        log = done.stdout + done.stderr
        start = max(log.find("Traceback"), log.find("[AutogradeApp | ERROR]"), 0)
        shown = log[max(start - 2000, 0):][:6000]
        raise AssertionError(f"nbgrader {' '.join(args)} failed:\n{shown}")
    return done


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """Every notebook exported and released by one `nbgrader generate_assignment "*"` (one
    nbgrader start, not one per notebook)."""
    folder = tmp_path_factory.mktemp("course")
    written = course.write_course(folder)
    assert [p.stem for p in written] == series.notebook_stems()
    nbgrader(folder, "generate_assignment", "*")
    assert sorted(p.name for p in (folder / "release").iterdir()) == series.notebook_stems()
    return folder


def test_the_release_is_the_student_edition_with_locked_test_cells(released):
    """Cell for cell, what nbgrader releases is the student edition (solutions out, the same
    placeholder up to its spelling) plus one locked 1-point test cell per check line the full
    edition shows, right after its cell, which judges the answer the check was given."""
    for stem in series.notebook_stems():
        release = nbformat.read(released / "release" / stem / f"{stem}.ipynb", as_version=4)
        edition = student.student_notebook(series.NOTEBOOK_DIR / f"{stem}.ipynb")
        full = {c.id: c for c in nbformat.read(series.NOTEBOOK_DIR / f"{stem}.ipynb", 4).cells}
        tests = [c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade")]
        kept = [c for c in release.cells if c not in tests]
        assert [c.id for c in kept] == [c.id for c in edition.cells], stem
        for got, want in zip(kept, edition.cells):
            source = re.sub(r"(?m)^(\s+)pass  # your code here$", rf"\1{student.PLACEHOLDER}",
                            got.source)
            source = re.sub(r"(?m)^pass  # your code here$", student.TOP_LEVEL_PLACEHOLDER, source)
            assert source == want.source, (stem, got.id)
            assert student.BEGIN not in got.source
        checks = [(c.id, name) for c in edition.cells for _, name, _ in
                  grade.cell_checks(full[c.id])]
        key = grade.answer_key(series.NOTEBOOK_DIR / f"{stem}.ipynb")
        assert len(tests) == len(checks) == len(key) > 0, stem
        for test, (after, name), entry in zip(tests, checks, key):
            meta = test.metadata["nbgrader"]
            assert meta["locked"] and meta["points"] == 1 and not meta["solution"]
            assert entry["cell"] == after
            assert f"grading.require({entry['check']!r}, lambda: ({entry['answer']})" \
                in test.source
            before = release.cells[release.cells.index(test) - 1]
            assert before.id == after or before.id.startswith(f"check-{after}-"), (stem, name)


def test_autograde_full_marks_for_the_solution_none_for_a_blank_half_for_half(released):
    source = released / "source" / FIRST / f"{FIRST}.ipynb"
    blank = released / "release" / FIRST / f"{FIRST}.ipynb"
    half = nbformat.read(blank, as_version=4)
    answers = nbformat.read(source, as_version=4)
    solutions = {c.id: c.source for c in answers.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    for cell_id in list(solutions)[:3]:  # the first three answers given, the rest left blank
        next(c for c in half.cells if c.id == cell_id).source = solutions[cell_id]
    for name, write in (("solution", lambda p: shutil.copy(source, p)),
                        ("blank", lambda p: shutil.copy(blank, p)),
                        ("half", lambda p: nbformat.write(half, p))):
        folder = released / "submitted" / name / FIRST
        folder.mkdir(parents=True)
        write(folder / f"{FIRST}.ipynb")
    nbgrader(released, "autograde", FIRST, "--create")
    nbgrader(released, "export")
    with open(released / "grades.csv", newline="") as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"]))
                  for row in csv.DictReader(f) if row["assignment"] == FIRST}
    points = len([c for c in answers.cells if c.metadata.get("nbgrader", {}).get("grade")])
    assert scores == {"solution": (points, points), "blank": (0, points), "half": (3, points)}


def test_require_passes_a_right_answer_and_a_given_prediction_only(capsys):
    with pytest.raises(AssertionError, match="has not run"):
        require("a check never run")
    check_answer(..., lambda x: None if x > 0 else "not > 0", name="t-positive", hint="h",
                 reference=1.0)
    with pytest.raises(AssertionError, match="not attempted"):
        require("t-positive")
    check_answer(-1.0, lambda x: None if x > 0 else "not > 0", name="t-positive", hint="h",
                 reference=1.0)
    with pytest.raises(AssertionError, match="not yet right"):
        require("t-positive")
    check_answer(2.0, lambda x: None if x > 0 else "not > 0", name="t-positive", hint="h",
                 reference=1.0)
    require("t-positive")  # the last line counts: ✓ now
    check_prediction(..., 0.5, name="t-guess", tolerance=0.1)
    with pytest.raises(AssertionError, match="not attempted"):
        require("t-guess")
    check_prediction(0.9, 0.5, name="t-guess", tolerance=0.1)  # far off, and still earned
    require("t-guess")


def test_the_cli_refuses_a_folder_that_is_not_a_course(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("an instructor's file")
    assert course.main([str(tmp_path), "01"]) == 1
    assert "no nbgrader_config.py" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "an instructor's file"
    assert not (tmp_path / "source").exists()

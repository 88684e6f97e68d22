"""`make grade`: submissions executed one by one, each in its own process, fresh kernel and
temporary folder, graded by the lines their checks print; a hostile one costs only its row."""
import csv
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attnlab.classroom import grade

pytestmark = pytest.mark.integration  # make test-all (CI), not make test

RIGHT = ("import attnlab\nfrom attnlab.exercises import ex03\n"
         "ex03.attention_received(attnlab.probes.attention_received)")


def _submit(folder, student, *cells):
    (folder / student).mkdir(parents=True)
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nbformat.write(nb, folder / student / "03_training_an_encoder.ipynb")


def test_a_class_is_graded_by_its_checks_and_a_hostile_submission_costs_its_own_row(tmp_path):
    subs = tmp_path / "submissions"
    _submit(subs, "ada", RIGHT, "ex03.uniform_accuracy(0.5, 0.4775)")  # the solution
    _submit(subs, "bo", "from attnlab.exercises import ex03\n"
                        "ex03.attention_received(lambda weights, real: None)",
            "guess = ...\nex03.uniform_accuracy(guess, 0.4775)")  # blank
    _submit(subs, "cy", RIGHT, "while True:\n    pass", "ex03.uniform_accuracy(0.5, 0.48)")
    _submit(subs, "di", "x = bytearray(64 * 2**30)", RIGHT)  # more memory than allowed
    _submit(subs, "ed", "import os\nfor f in os.listdir('.'):\n    os.remove(f)", RIGHT)
    (subs / "fay").mkdir()
    (subs / "fay" / "03_training_an_encoder.ipynb").write_text("not a notebook {")
    rows = grade.grade(subs, tmp_path / "grades.csv", timeout=12, memory_gb=6, jobs=2)
    with open(tmp_path / "grades.csv", encoding="utf-8") as f:
        assert list(csv.DictReader(f)) == rows
    students = [row["student"] for row in rows]  # two at a time, written in submission order
    assert sorted(set(students)) == ["ada", "bo", "cy", "di", "ed", "fay"]
    assert students == sorted(students)
    by = {}
    for row in rows:
        by.setdefault(row["student"], []).append((row["exercise"], row["mark"], row["status"]))
    assert by["ada"] == [("attention_received", "✓", "ok"),
                         ("accuracy with uniform attention", "✎", "ok")]
    assert [m for _, m, _ in by["bo"]] == ["○", "○"]  # a blank submission earns nothing
    assert by["cy"][0][:2] == ("attention_received", "✓") and len(by["cy"]) == 1
    assert by["cy"][0][2].startswith("stopped: CellTimeoutError")  # the loop: its own row only
    assert ("attention_received", "✓") in [r[:2] for r in by["di"]]  # MemoryError, then on
    assert "raised" in by["di"][0][2]
    assert by["ed"][0][:2] == ("attention_received", "✓")  # it deleted only its own folder
    assert by["fay"] == [("", "", "not a notebook: NotJSONError")]
    assert (subs / "ed" / "03_training_an_encoder.ipynb").exists()  # the submission is kept
    assert "ada" in grade.summary(rows)


def test_make_grade_runs_the_module_and_reads_a_class_folder(tmp_path, capsys):
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "gil.ipynb").write_text("{ not json")
    out = subprocess.run([sys.executable, "-m", "attnlab.classroom.grade", str(tmp_path / "subs"),
                          "--out", str(tmp_path / "g.csv")], capture_output=True, text=True,
                         check=True).stdout
    assert "not a notebook: NotJSONError" in out and (tmp_path / "g.csv").exists()
    # Refusals, in this process (what the command above runs is the same main()):
    assert grade.main([str(tmp_path / "nowhere")]) == 1
    assert "is not a folder of submissions" in capsys.readouterr().err
    assert grade.main([str(tmp_path / "subs"), "--jobs", "0"]) == 1
    assert "jobs must be a whole number of at least 1, got 0" in capsys.readouterr().err

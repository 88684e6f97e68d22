"""`make grade`: submissions executed one by one, each in its own process, fresh kernel and
temporary folder, graded by judging their answers after each check cell (not by what they
print: tests/test_grading.py feeds it forgeries); a hostile one costs only its row."""
import csv
import subprocess
import sys

import nbformat
import pytest
from helpers import ascii_windows_like
from nbformat.v4 import new_code_cell, new_notebook

from attnlab.classroom import grade

pytestmark = pytest.mark.integration  # make test-all (CI), not make test

RIGHT = ("import math\nimport torch\nfrom attnlab.exercises import ex01\n"
         "def my_attention(q, k, v):\n"
         "    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)\n"
         "    return weights @ v, weights\n"
         "attention = ex01.attention(my_attention)")
CHECK_CELL = "26938f61"  # the id of notebook 01's cell that checks `attention`
CHECK_CELLS = {"ex01.attention(": CHECK_CELL, "ex01.key_2_wins(": "ae7d0d00",
               "ex01.predict_winner(": "ec9cc3d9"}  # notebook 01's cells that call these checks


def _submit(folder, student, *cells):
    """Notebook 01 as `student` hands it in: `cells`, those that call a check of `CHECK_CELLS`
    with its id (the grader judges each answer after the cell of its check)."""
    (folder / student).mkdir(parents=True)
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    for cell in nb.cells:
        for call, cell_id in CHECK_CELLS.items():
            if call in cell.source:
                cell.id = cell_id
    nbformat.write(nb, folder / student / "01_attention_by_hand.ipynb")


def test_a_class_is_graded_by_its_checks_and_a_hostile_submission_costs_its_own_row(tmp_path):
    subs = tmp_path / "submissions"
    _submit(subs, "ada", RIGHT, "my_query = [1, 1, 0, 0]\nK = ex01.WORKED_KEYS")  # two answers
    _submit(subs, "bo", "from attnlab.exercises import ex01\n"
                        "my_attention = lambda q, k, v: None\nex01.attention(my_attention)",
            "my_query = ...")  # blank
    _submit(subs, "cy", RIGHT, "while True:\n    pass", "my_query = [1, 1, 0, 0]")
    _submit(subs, "di", "x = bytearray(64 * 2**30)", RIGHT)  # more memory than allowed
    _submit(subs, "ed", "import os\nfor f in os.listdir('.'):\n    os.remove(f)", RIGHT)
    (subs / "fay").mkdir()
    (subs / "fay" / "01_attention_by_hand.ipynb").write_text("not a notebook {")
    rows = grade.grade(subs, tmp_path / "grades.csv", timeout=12, memory_gb=6, jobs=2)
    with open(tmp_path / "grades.csv", encoding="utf-8") as f:
        assert list(csv.DictReader(f)) == rows
    students = [row["student"] for row in rows]  # two at a time, written in submission order
    assert sorted(set(students)) == ["ada", "bo", "cy", "di", "ed", "fay"]
    assert students == sorted(students)
    by = {}
    for row in rows:
        by.setdefault(row["student"], []).append((row["exercise"], row["mark"], row["status"]))
    right = lambda student: {e for e, m, _ in by[student] if m == "✓"}  # noqa: E731
    assert right("ada") == {"attention", "key 2 wins"}  # the other four: not in this notebook
    assert len(by["ada"]) == 6 and by["ada"][0][2] == "ok"
    assert right("bo") == set() and {m for _, m, _ in by["bo"]} == {"○"}  # blank: nothing
    assert by["cy"][0][:2] == ("attention", "✓") and len(by["cy"]) == 1  # judged before the loop
    assert by["cy"][0][2].startswith("stopped: CellTimeoutError")  # the loop: its own row only
    assert "attention" in right("di")  # MemoryError, then on
    assert "raised" in by["di"][0][2]
    assert "attention" in right("ed")  # it deleted only its own folder
    assert by["fay"] == [("", "", "not a notebook: NotJSONError")]
    assert (subs / "ed" / "01_attention_by_hand.ipynb").exists()  # the submission is kept
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


def test_grading_works_without_posix_pieces_and_under_an_ascii_locale(tmp_path):
    env = ascii_windows_like(tmp_path)
    _submit(tmp_path / "subs", "ada", RIGHT, "while True:\n    pass")
    _submit(tmp_path / "subs", "bo", "ex01.attention(lambda q, k, v: None)")  # no import
    loops = ("from attnlab.exercises import ex01\n"
             "def my_attention(q, k, v):\n    while True:\n        pass\n"
             "ex01.attention(my_attention)\nprint('the kernel goes on')")
    _submit(tmp_path / "subs", "cy", loops)
    done = subprocess.run([sys.executable, "-m", "attnlab.classroom.grade", str(tmp_path / "subs"),
                           "--out", str(tmp_path / "g.csv"), "--timeout", "10"], env=env,
                          capture_output=True, encoding="utf-8", errors="replace", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "note: the memory limit (6 GB) is not applied on this system" in done.stdout
    with open(tmp_path / "g.csv", encoding="utf-8") as f:
        rows = {}
        for row in csv.DictReader(f):
            rows.setdefault(row["student"], row)  # each student's first verdict: attention
    assert rows["ada"]["mark"] == "✓" and rows["ada"]["status"].startswith("stopped")
    assert rows["bo"]["status"] == "ok, 1 cell raised"
    assert rows["cy"]["mark"] == "✗" and rows["cy"]["status"] == "ok"  # stopped without SIGALRM


def test_release_and_nbgrader_export_write_utf8_under_an_ascii_locale(tmp_path):
    env = ascii_windows_like(tmp_path)
    for command in (["attnlab.classroom.student", "--release", str(tmp_path / "release")],
                    ["attnlab.classroom.course", str(tmp_path / "course"), "01"]):
        done = subprocess.run([sys.executable, "-m", *command], env=env, capture_output=True,
                              encoding="utf-8", errors="replace", timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    assert "✓ right" in (tmp_path / "release" / "README.md").read_text(encoding="utf-8")
    assert (tmp_path / "course" / "README.md").read_text(encoding="utf-8").strip()
    assert (tmp_path / "course" / "nbgrader_config.py").read_text(encoding="utf-8").strip()


def _cell(text):
    return nbformat.from_dict({"cell_type": "code", "source": "", "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": text}], "execution_count": 1})


def test_check_lines_read_a_wrapped_cross_up_to_its_hint():
    cell = _cell("✓ attention: right.\nnot a check\n"
                 "✗ split_heads: given a (2, 5, 6) tensor, 3: you reshaped straight to\n"
                 "  (B, H, T, D), which mixes tokens and heads.\n"
                 "  Hint: view it as (B, T, H, D) first,\n  then transpose.\n"
                 "○ merge_heads: not attempted yet.\n")
    assert grade.cell_checks(cell) == [
        ("✓", "attention", "right."),
        ("✗", "split_heads", "given a (2, 5, 6) tensor, 3: you reshaped straight to (B, H, T, "
                             "D), which mixes tokens and heads."),
        ("○", "merge_heads", "not attempted yet.")]
    assert grade.mistake(grade.cell_checks(cell)[1][2]) == \
        "you reshaped straight to (B, H, T, D), which mixes tokens and heads"


def row(student, exercise, mark, message="", notebook="01_attention_by_hand.ipynb"):
    return {"student": student, "notebook": notebook, "exercise": exercise, "mark": mark,
            "meaning": grade.MARKS[mark], "message": message, "status": "ok"}


def test_the_instructor_reads_each_check_and_its_most_frequent_mistakes(tmp_path):
    rows = [row("ada", "attention", "✓"), row("bo", "attention", "✗", "given a (3, 4) tensor: "
            "your weights are softmax(q kᵀ): the scores are not divided by √d_k. More."),
            row("cy", "attention", "✗", "given a (2, 6, 8) tensor: your weights are softmax(q "
            "kᵀ): the scores are not divided by √d_k"),
            row("di", "attention", "✗", "your result differs from the reference by up to 0.130"),
            row("ed", "attention", "○"), row("ed", "predict the weights", "✎")]
    rows += [row("fay", "attention", "✓")] * 25  # printed 25 times: counts once
    (entry, predicted) = grade.class_report(rows)
    assert (entry["check"], entry["✓"], entry["✗"], entry["○"], entry["✎"]) == \
        ("attention", 2, 3, 1, 0)
    assert entry["mistakes"][0] == ("your weights are softmax(q kᵀ): the scores are not "
                                    "divided by √d_k", 2)
    assert entry["mistakes"][1] == ("your result differs from the reference by up to #", 1)
    assert predicted["✎"] == 1
    table = grade.report_markdown([entry, predicted], students=6)
    assert "| 01_attention_by_hand.ipynb | attention | 2 | 3 | 1 | 0 |" in table
    grade.draw_report([entry, predicted], tmp_path / "by-check.png")
    assert (tmp_path / "by-check.png").read_bytes()[:4] == b"\x89PNG"
    fay = next(line for line in grade.summary(rows).splitlines() if line.startswith("fay"))
    assert fay.split()[2:5] == ["1", "0", "1"]  # one ✓ of one check, not 25


def test_make_grade_writes_the_report_beside_the_grades(tmp_path, monkeypatch, capsys):
    rows = [row("ada", "attention", "✓"), row("bo", "attention", "✗", "your scores are not "
                                                                      "divided by √d_k")]
    (tmp_path / "subs").mkdir()
    monkeypatch.setattr(grade, "grade", lambda *args: rows)  # what main does with the rows
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out" / "g.csv")]) == 0
    table = (tmp_path / "out" / "g-by-check.md").read_text(encoding="utf-8")
    assert "| attention | 1 | 1 | 0 | 0 | your scores are not divided by √d_k (1) |" in table
    assert (tmp_path / "out" / "g-by-check.png").exists()
    assert "g-by-check.md" in capsys.readouterr().out


# Issue 49, item 1: an answer cell that rewrites what judges in the kernel. A wrong function
# (zeros) is handed in after the cell has made every judge and comparison there agree: the
# in-kernel judge itself, the engine's comparisons and torch's. The kernel-side half of `make
# grade` is then replaced too, to write a record that claims ✓, or results it never computed.
FORGES_THE_JUDGE = """import torch
import attnlab.exercises as engine
from attnlab.exercises import ex01, grading
grading.judge = lambda name, *args, **kwargs: ("✓", "attention", "right.")
engine.Implement.problem = lambda self, *args: None
engine.result_problem = engine.tensor_problem = lambda *args, **kwargs: None
engine.same = lambda *args, **kwargs: True
torch.allclose = torch.equal = lambda *args, **kwargs: True
def my_attention(q, k, v):
    return torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(*q.shape[:-1], k.shape[-2])
attention = ex01.attention(my_attention)"""
FORGES_THE_RECORD = FORGES_THE_JUDGE + """
def _forged(name, answer, inputs, outputs):
    torch.save({"verdict": ["✓", "right"]}, outputs)
grading.answer = _forged"""


def test_make_grade_judges_implement_checks_where_no_answer_cell_reaches(tmp_path):
    subs = tmp_path / "submissions"
    _submit(subs, "honest", RIGHT)
    _submit(subs, "judge", FORGES_THE_JUDGE)
    _submit(subs, "record", FORGES_THE_RECORD)
    rows = grade.grade(subs, tmp_path / "grades.csv", timeout=120, jobs=2)
    attention = {student: (r["mark"], r["message"])  # the verdict that stands, as graded
                 for (student, _, exercise), r in grade.standing(rows).items()
                 if exercise == "attention"}
    assert attention["honest"] == ("✓", "matches attnlab's version on 3 random inputs.")
    assert attention["judge"][0] == "✗"
    assert "differs from the reference" in attention["judge"][1]  # judged in the grader
    assert attention["record"] == ("✗", "the grader could not read what your notebook handed "
                                        "back (ValueError)")
    # the forged judge answers ✓ "attention" for the checks judged in the kernel too: no row
    # of theirs takes the name of a check that the grader's process decides
    assert [r["exercise"] for r in rows].count("attention") == 3


# The same forgery for the checks whose answer is a value: the in-kernel judge says ✓ for a
# wrong query and ✎ for a guess never made. The grader runs the checks' rules itself, on the
# values the kernel ships.
FORGES_THE_EXPLORE_JUDGE = """import torch
from attnlab.exercises import ex01, grading
forged = {"ex01.key_2_wins": ("✓", "key 2 wins", "right."),
          "ex01.predict_winner": ("✎", "which key wins?", "you predicted 4.")}
grading.judge = lambda name, *args, **kwargs: forged[name]
K, w4 = ex01.WORKED_KEYS, torch.tensor([[0.166, 0.166, 0.251, 0.417]])
my_query, winner_guess = [1, 0, 0, 0], ..."""
VALUES = ("winner = ex01.key_2_wins(my_query, K)", "ex01.predict_winner(winner_guess, w4[0])")


def test_make_grade_judges_explore_and_predict_checks_where_no_answer_cell_reaches(tmp_path):
    subs = tmp_path / "submissions"
    _submit(subs, "honest", FORGES_THE_EXPLORE_JUDGE.replace("[1, 0, 0, 0], ...", "[1, 1, 0, 0], 3")
            .replace("grading.judge =", "_ ="), *VALUES)
    _submit(subs, "judge", FORGES_THE_EXPLORE_JUDGE, *VALUES)
    rows = grade.grade(subs, tmp_path / "grades.csv", timeout=120, jobs=2)
    marks = {(student, exercise): (r["mark"], r["message"])
             for (student, _, exercise), r in grade.standing(rows).items()}
    assert marks[("honest", "key 2 wins")][0] == "✓"
    assert marks[("honest", "which key wins?")][0] == "✎"
    assert marks[("judge", "key 2 wins")][0] == "✗"  # the rule run in the grader's process
    assert marks[("judge", "which key wins?")] == \
        ("○", "no prediction yet; write a key number in the cell above before running.")


# A hand-written implement check (ex03's uniform_scores, whose function runs at a hook inside a
# model) under the same forgery: the in-kernel judge says ✓ for scores that change nothing.
FORGES_THE_HOOK_JUDGE = """import torch
from attnlab.exercises import ex03, grading
grading.judge = lambda name, *args, **kwargs: ("✓", "uniform attention", "right.")
model = None
def make_uniform(scores):
    return scores"""
UNIFORM = "uniform = ex03.uniform_scores(make_uniform, model)"


def test_make_grade_judges_a_hand_written_check_where_no_answer_cell_reaches(tmp_path):
    subs = tmp_path / "submissions"
    for student, source in (("honest", FORGES_THE_HOOK_JUDGE.replace("return scores",
                                                                     "return 0 * scores")
                             .replace("grading.judge =", "_ =")),
                            ("judge", FORGES_THE_HOOK_JUDGE)):
        (subs / student).mkdir(parents=True)
        nb = new_notebook(cells=[new_code_cell(source), new_code_cell(UNIFORM)])
        nb.cells[1].id = "06562db4"  # notebook 03's cell that checks make_uniform
        nbformat.write(nb, subs / student / "03_training_an_encoder.ipynb")
    rows = grade.grade(subs, tmp_path / "grades.csv", timeout=120, jobs=2)
    marks = {student: (r["mark"], r["message"])
             for (student, _, exercise), r in grade.standing(rows).items()
             if exercise == "uniform attention"}
    assert marks["honest"][0] == "✓"
    assert marks["judge"] == ("✗", "the weights are the model's own: your scores change "
                                   "nothing the softmax sees.")

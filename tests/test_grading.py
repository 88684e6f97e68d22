"""The one grading rule (`attnlab.exercises.grading`), and both graders fed the submissions of
the issue: forged ✓ lines, forged kernel state, attnlab's own functions handed in, a blank, a
half-done and an honest notebook 01. Forgeries score 0 under `make grade` and nbgrader alike."""
import csv
import functools
import inspect
import math

import nbformat
import pytest
import torch
from test_course import FIRST, nbgrader

import attnlab
from attnlab import exercises
from attnlab.classroom import course, grade
from attnlab.core import attention as lesson
from attnlab.exercises import _last_mark, ex01, grading


def honest_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def remembers(q, k, v):  # right on the inputs the module shows, wrong anywhere else
    if any(torch.equal(q, shown) for shown, _, _ in ex01._attention_inputs()):
        return honest_attention(q, k, v)
    return torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(*q.shape[:-1], k.shape[-2])


def test_the_judge_runs_the_students_function_on_fresh_inputs_and_refuses_attnlabs(capsys):
    assert grading.judge("ex01.attention", lambda: honest_attention, seed=5)[0] == "✓"
    for library in (attnlab.scaled_dot_product_attention, lesson.scaled_dot_product_attention,
                    functools.partial(attnlab.scaled_dot_product_attention),
                    lambda q, k, v: attnlab.scaled_dot_product_attention(q, k, v)):
        mark, name, message = grading.judge("ex01.attention", lambda f=library: f, seed=5)
        assert (mark, name) == ("✗", "attention") and "attnlab's own version" in message
    assert grading.judge("ex01.split_heads", lambda: lesson.split_heads, seed=5)[0] == "✗"
    assert grading.judge("ex01.merge_heads", lambda: lesson.merge_heads, seed=5)[0] == "✗"
    # the reference works again afterwards, and the inputs shown in ex01 are not the graded ones
    assert attnlab.scaled_dot_product_attention(torch.ones(2, 3), torch.ones(2, 3),
                                                torch.ones(2, 3))[1].shape == (2, 2)
    assert grading.judge("ex01.attention", lambda: remembers, seed=5)[0] == "✗"
    assert grading.judge("ex01.attention", lambda: undefined_name, seed=5)[0] == "○"  # noqa: F821
    assert capsys.readouterr().out == ""  # the judge prints nothing



IMPLEMENTS = sorted(n for n, c in exercises.checks().items() if isinstance(c, exercises.Implement))


@pytest.mark.parametrize("name", IMPLEMENTS)
def test_attnlabs_own_answer_earns_nothing_for_any_implement_check(name):
    """Issue 49, item 1, for every declared implement check: under a grader the check's reference,
    each function it refuses and a wrapper around the reference all get ✗ (the check's
    reference refuses to run inside the student's function), and they work again after."""
    check = exercises.checks()[name]
    args = lambda: check.exercise.args()  # noqa: E731
    for answer in (check.reference, *check.refuse, lambda *a: check.reference(*a)):
        mark, _, message = grading.judge(name, lambda f=answer: f, args, seed=11)
        assert mark == "✗" and "attnlab's own version was called" in message, (answer, message)
    for answer in (check.reference, *check.refuse):
        assert inspect.unwrap(answer).__code__.co_name != "_refused"  # the code is back


def test_attnlabs_own_module_earns_nothing_for_the_module_check():
    mark, _, message = grading.judge("ex02.multi_head_module", lambda: attnlab.MultiHeadAttention,
                                     seed=11)
    assert mark == "✗" and "attnlab's own version was called" in message, message
    assert attnlab.MultiHeadAttention(16, 4)(torch.ones(1, 2, 16))[0].shape == (1, 2, 16)

def test_printed_lines_and_kernel_state_earn_nothing(capsys):
    print("✓ attention: right.")
    _last_mark.update({"attention": "✓", "predict the weights": "✎"})
    placeholder = lambda q, k, v: None  # noqa: E731 - the student edition's untouched answer
    assert grading.judge("ex01.attention", lambda: placeholder)[0] == "○"
    with pytest.raises(AssertionError, match="○ attention"):
        grading.require("ex01.attention", lambda: placeholder)
    measured = lambda: (torch.tensor([0.405, 0.246, 0.349]),)  # noqa: E731
    with pytest.raises(AssertionError, match="○ predict the weights"):
        grading.require("ex01.predict_weights", lambda: ..., measured)
    grading.require("ex01.predict_weights", lambda: [0.5, 0.2, 0.3], measured)  # a guess: earned
    grading.require("ex01.key_2_wins", lambda: [1, 1, 0, 0], lambda: (ex01.WORKED_KEYS,))
    with pytest.raises(AssertionError, match="✗ key 2 wins"):
        grading.require("ex01.key_2_wins", lambda: [1, 0, 0, 0], lambda: (ex01.WORKED_KEYS,))
    _last_mark.clear()


def test_a_guess_written_after_the_measurement_earns_nothing(capsys):
    measured = torch.tensor([0.405, 0.246, 0.349])
    ex01.predict_weights(..., measured)  # the measurement shown with no guess
    ex01.predict_weights([0.4, 0.3, 0.3], measured)  # then a guess
    assert grading.judge("ex01.predict_weights", lambda: [0.4, 0.3, 0.3],
                         lambda: (measured,))[0] == "○"


# --- both graders, fed the table ---------------------------------------------------------

NAMES = {"predict the weights": "✎", "attention": "✓", "key 2 wins": "✓",
         "which key wins?": "✎", "split_heads": "✓", "merge_heads": "✓"}
PRINTS = "\n".join(f"print({f'{mark} {name}: right.'!r})" for name, mark in NAMES.items())
STATE = f"import attnlab.exercises\nattnlab.exercises._last_mark.update({NAMES!r})"
LIBRARY = {"def my_attention": "my_attention = attnlab.scaled_dot_product_attention\n"
                               "attention = ex01.attention(my_attention)",
           "def my_split_heads": "my_split_heads = attnlab.core.attention.split_heads\n"
                                 "split_heads = ex01.split_heads(my_split_heads)",
           "def my_merge_heads": "my_merge_heads = attnlab.core.attention.merge_heads\n"
                                 "merge_heads = ex01.merge_heads(my_merge_heads)"}
EXPECTED = {"honest": 6, "blank": 0, "half": 3, "prints": 0, "prints25": 0, "library": 0,
            "state": 0, "prints_and_state": 0}


def submissions(release, source):
    """The issue's submissions of notebook 01, built from nbgrader's release (the student
    edition with its locked test cells) and the source's solutions."""
    solutions = {c.id: c.source for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}

    def answered(ids):
        nb = nbformat.reads(nbformat.writes(release), as_version=4)  # a copy
        for cell in nb.cells:
            if cell.id in ids:
                cell.source = solutions[cell.id]
        return nb

    def added(nb, *sources):
        for text in sources:
            nb.cells.append(nbformat.v4.new_code_cell(text))
        return nb

    library = answered(())
    for cell in library.cells:
        for start, forged in LIBRARY.items():
            if start in cell.source and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = forged
    return {"honest": answered(solutions), "blank": answered(()),
            "half": answered(list(solutions)[:3]),
            "prints": added(answered(()), PRINTS), "prints25": added(answered(()), *[PRINTS] * 25),
            "library": library, "state": added(answered(()), STATE),
            "prints_and_state": added(answered(()), PRINTS, STATE)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("course")
    course.write_course(folder, [FIRST])
    nbgrader(folder, "generate_assignment", FIRST)
    release = nbformat.read(folder / "release" / FIRST / f"{FIRST}.ipynb", as_version=4)
    source = nbformat.read(folder / "source" / FIRST / f"{FIRST}.ipynb", as_version=4)
    return folder, submissions(release, source)


@pytest.mark.integration
def test_make_grade_scores_the_forgeries_0(exported, tmp_path):
    _, subs = exported
    for student, nb in subs.items():
        (tmp_path / "subs" / student).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "subs" / student / f"{FIRST}.ipynb")
    rows = grade.grade(tmp_path / "subs", tmp_path / "grades.csv", timeout=300, jobs=2)
    stands = grade.standing(rows)
    scores = {s: sum(r["mark"] in ("✓", "✎") for (who, _, _), r in stands.items() if who == s)
              for s in subs}
    print("make grade:", scores)
    assert scores == EXPECTED
    honest = {e: r["mark"] for (who, _, e), r in stands.items() if who == "honest"}
    assert honest == NAMES
    report = grade.class_report(rows)  # what the instructor reads, from the judged verdicts
    attention = next(e for e in report if e["check"] == "attention")
    assert (attention["✓"], attention["✗"], attention["○"]) == (2, 1, 5)
    assert attention["mistakes"][0][0].startswith("your function raised RuntimeError")
    assert "| attention | 2 | 1 | 5 | 0 |" in grade.report_markdown(report, len(subs))


@pytest.mark.integration
def test_nbgrader_scores_the_forgeries_0(exported):
    folder, subs = exported
    for student, nb in subs.items():
        (folder / "submitted" / student / FIRST).mkdir(parents=True)
        nbformat.write(nb, folder / "submitted" / student / FIRST / f"{FIRST}.ipynb")
    nbgrader(folder, "autograde", FIRST, "--create")
    nbgrader(folder, "export")
    with open(folder / "grades.csv", newline="") as f:
        scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)
                  if row["assignment"] == FIRST}
    print("nbgrader:", scores)
    assert scores == {s: float(n) for s, n in EXPECTED.items()}

"""The one grading rule (`attnlab.exercises.grading`), and both graders fed the submissions of
the issue: forged ✓ lines, forged kernel state, attnlab's own functions handed in, a blank, a
half-done and an honest notebook 01. Forgeries score 0 under `make grade` and nbgrader alike."""
import csv
import functools
import inspect
import math
import types

import nbformat
import numpy as np
import pytest
import torch
from exercise_doubles import forgot_return, loops_forever, placeholder, raises
from test_course import FIRST, nbgrader
from test_ex02 import Extra, NoReturn, Renamed, Student, Untouched, with_forward
from test_ex09 import on_a_copy, with_attend
from test_ex09 import step as ex09_step
from torch import nn

import attnlab
from attnlab import exercises
from attnlab.classroom import course, grade
from attnlab.core import attention as lesson
from attnlab.core import kv_cache
from attnlab.exercises import _last_mark, ex01, ex02, grading


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


def same_inputs(a, b) -> bool:
    """Whether two lists of argument tuples hold the same values (tensors compared as values)."""
    def flat(made):  # a module stands for its weights, a number for a tensor
        return [w for args in made for x in args
                for w in (x.state_dict().values() if isinstance(x, nn.Module)
                          else [x if x is None or isinstance(x, str) else torch.as_tensor(x)])]
    return len(flat(a)) == len(flat(b)) and all(
        (torch.is_tensor(x) and torch.is_tensor(y) and x.shape == y.shape and torch.equal(x, y))
        or (not torch.is_tensor(x) and not torch.is_tensor(y) and x == y)
        for x, y in zip(flat(a), flat(b)))


@pytest.mark.parametrize("name", IMPLEMENTS)
def test_every_implement_check_is_graded_on_inputs_the_student_has_not_seen(name):
    """Issue 49, item 1: under a grader, every declared implement check draws its inputs from
    the grader's seed, so the values the notebook's check used (and the exercise module shows)
    are not the graded ones, and two seeds give two sets of inputs."""
    check = exercises.checks()[name]
    args = check.exercise.args()
    shown, graded = check.made(*args), check.made(*args, seed=12345)
    assert not same_inputs(shown, graded), f"{name}: graded on the inputs the notebook shows"
    assert not same_inputs(graded, check.made(*args, seed=54321)), f"{name}: one set of inputs"


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

@pytest.mark.parametrize("name, reference", [
    ("ex03.uniform_scores", "attnlab.exercises.ex03._uniform_scores"),
    ("ex09.decode_step", "attnlab.core.kv_cache.decode_step")])
def test_a_hand_written_check_hands_back_its_reference_and_it_earns_nothing(name, reference,
                                                                             tmp_path):
    """The notebook rebinds the answer to what the check returns (`make_uniform =
    ex03.uniform_scores(make_uniform, model)`), which is attnlab's reference when the answer is
    wrong or untouched: a blank notebook must not earn the point with it, in the kernel's judge
    or in `make grade`'s two halves, and the reference works again after."""
    module, _, attr = reference.rpartition(".")
    function = getattr(__import__(module, fromlist=[attr]), attr)
    check = exercises.checks()[name]
    args = lambda: check.exercise.args()  # noqa: E731
    for answer in (function, lambda *a: function(*a)):
        for mark, _, message in (grading.judge(name, lambda f=answer: f, args, seed=11),
                                 _through_a_kernel(name, answer, 11, tmp_path)):
            assert mark == "✗" and "attnlab's own version was called" in message, message
    assert inspect.unwrap(function).__code__.co_name != "_refused"


# --- `make grade`'s own process: the kernel only calls the student's function ------------------

def _through_a_kernel(name, answer, seed, folder):
    """What `make grade` does for an implement check, its two halves in this one process: the
    inputs and references made here (`prepare`), the function called on the inputs read back
    as data (`answer`, in the kernel), and the results judged here (`returned`)."""
    prepared = grading.prepare(name, seed, folder / "inputs.pt")
    grading.answer(name, lambda: answer, str(folder / "inputs.pt"), str(folder / "outputs.pt"))
    return grading.returned(prepared, folder / "outputs.pt")


def _copied(function):
    """attnlab's function as a new function object: the same code, not the one that refuses
    (what an honest answer computes; also the route around the refusal the docs own up to)."""
    function = inspect.unwrap(function)
    copied = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                                function.__defaults__, function.__closure__)
    copied.__kwdefaults__ = function.__kwdefaults__
    return copied


@pytest.mark.parametrize("name", IMPLEMENTS)
def test_make_grades_own_judgement_gives_the_kernels_verdicts_word_for_word(name, tmp_path):
    """For every declared implement check, judging in the grader's process (the kernel only
    calls the function) gives the very line the in-kernel judge gives: ✓ for a right function,
    ✗ with its named mistake for each declared mistake, ✗ for attnlab's own function (the
    refusal holds in the kernel's half), ○ and ✗ for the hostile answers."""
    check = exercises.checks()[name]
    answers = [None, placeholder, forgot_return, "my_function", raises, loops_forever,
               lambda *args: "attention", lambda *args: np.zeros(3), lambda *args: {"a": 1},
               check.reference, *check.refuse, _copied(check.reference)]
    answers += [m.wrong if isinstance(m, exercises.Like) else m.example or placeholder
                for m in check.mistakes]
    lines = [(_through_a_kernel(name, answer, 11, tmp_path), grading.judge(name, lambda a=answer:
                                                                            a, seed=11))
             for answer in answers]
    for (own, kernel), answer in zip(lines, answers):
        assert own == kernel, answer
    if not check.refuse:  # a copy of the reference computes it (where it calls none refused)
        assert lines[len(answers) - len(check.mistakes) - 1][0][0] == "✓"


class _Sleeps(nn.Module):  # a module whose forward never ends
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.q, self.k, self.v, self.out = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None):
        while True:
            pass


HAND_WRITTEN = {"ex02.multi_head_module": [
    Student, attnlab.MultiHeadAttention, with_forward(lambda s, x, m: None),
    with_forward(lambda s, x, m: (x, x)), with_forward(lambda s, x, m: "x"), _Sleeps,
    *[with_forward(forward) for forward, _ in ex02._MISTAKES], lambda d, h: 3,
    NoReturn, Renamed, Extra, Untouched],
                "ex09.decode_step": [
    ex09_step, with_attend, kv_cache.decode_step, on_a_copy, lambda *a: ex09_step(*a).double(),
    lambda *a: "x", lambda *a: {"a": 1},
    *[functools.partial(ex09_step, **mistake) for mistake in (
        dict(append_first=False), dict(out=False), dict(split="query"), dict(expand=True),
        dict(tile=True), dict(position=lambda t: 0), dict(position=lambda t: t + 1))]],
                "ex03.uniform_scores": [
    lambda s: torch.zeros_like(s), lambda s: s, lambda s: s.float(), lambda s: s[..., :1],
    lambda s: "x", lambda s: s * float("nan"), lambda s: torch.randn_like(s),
    lambda s: torch.full_like(s, 3.0), lambda s: {"a": 1}]}


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_hand_written_checks_split_in_two_give_the_kernels_verdicts_word_for_word(name, tmp_path):
    """A hand-written implement check with a `split` (`grading.split`) judged in the grader's
    process gives the in-kernel judge's line, for a right answer, each of its mistakes and the
    hostile answers."""
    assert grading.out_of_kernel(name) and not grading.shipped_values(name)
    answers = [None, placeholder, forgot_return, "my_function", raises, loops_forever,
               *HAND_WRITTEN[name]]
    lines = [(_through_a_kernel(name, answer, 11, tmp_path),
              grading.judge(name, lambda a=answer: a, seed=11)) for answer in answers]
    for (own, kernel), answer in zip(lines, answers):
        assert own == kernel, answer
    assert lines[len(answers) - len(HAND_WRITTEN[name])][0][0] == "✓"
    assert {own[0] for own, _ in lines} == {"○", "✗", "✓"}


def test_the_checks_judged_in_the_kernel_are_the_ones_the_docs_name():
    """`make grade` decides every check in its own process: the declared implement checks, the
    hand-written ones through their splits (each named in the graders' docs) and the explore
    and predict checks. A new hand-written check without a split fails here."""
    left = {name.split(".")[1] for name in exercises.checks() if not grading.out_of_kernel(name)}
    assert all(grading.out_of_kernel(name) for name in IMPLEMENTS)
    assert left == set()
    split = {name.split(".")[1] for name, check in exercises.checks().items()
             if grading.split(name) is not None and not isinstance(check, exercises.Implement)}
    assert split == {"multi_head_module", "uniform_scores", "decode_step"}
    assert all(f"`{name}`" in grading.__doc__ for name in split)


def test_what_the_kernel_hands_back_is_only_data_and_never_a_point(tmp_path):
    """The kernel's record is read with torch.load(weights_only=True): a pickle that would run
    code is refused, not run; a ✓ the kernel claims, a record of the wrong form or results it
    made up are ✗. The kernel can lose its point, never give one."""
    prepared = grading.prepare("ex01.attention", 3, tmp_path / "inputs.pt")
    ran = tmp_path / "ran"

    class Runs:
        def __reduce__(self):
            return (ran.touch, ())

    zeros = [[("tuple", [("tensor", torch.zeros(e[0].shape)), ("tensor", torch.zeros(e[1].shape))]),
              [("tensor", a) for a in args], None, []]
             for args, e in zip(prepared.made, prepared.expected)]
    for record, words in [
            ({"calls": Runs()}, "could not read what your notebook handed back (UnpicklingError)"),
            ({"verdict": ["✓", "right"]}, "could not read what your notebook handed back"),
            ({"verdict": ["✎", "guess"]}, "could not read what your notebook handed back"),
            ({"calls": [[("other", "x")] * 4]}, "could not read what your notebook handed back"),
            ({"calls": zeros}, "the first result differs from the reference"),
            ({"calls": zeros[:1]}, "the first result differs from the reference")]:
        torch.save(record, tmp_path / "outputs.pt")
        mark, shown, message = grading.returned(prepared, tmp_path / "outputs.pt")
        assert (mark, shown) == ("✗", "attention") and words in message, (record, message)
    assert not ran.exists()
    right = [[("tuple", [("tensor", e[0]), ("tensor", e[1])]), [("tensor", a) for a in args],
              None, []] for args, e in zip(prepared.made, prepared.expected)]
    torch.save({"calls": right[:2]}, tmp_path / "outputs.pt")  # fewer results than inputs
    assert grading.returned(prepared, tmp_path / "outputs.pt")[0] == "✗"
    assert grading.returned(prepared, tmp_path / "nothing.pt") == \
        ("✗", "attention", "your notebook handed back nothing for this check")


# --- `make grade`'s own process: explore and predict checks judged on shipped values -----------

VALUES = [k for k, c in exercises.checks().items() if c.exercise.kind in ("explore", "predict")]


def _measured_through_a_kernel(name, answer, args, folder, seed=11):
    """What `make grade` does for an explore or predict check, its two halves in this one
    process: the answer and the values shipped as data (`measure`, in the kernel), the check's
    own rule run on them here (`measured`)."""
    grading.measure(name, lambda: answer, lambda: args, str(folder / "values.pt"))
    return grading.measured(name, folder / "values.pt", seed)


@pytest.mark.parametrize("name", VALUES)
def test_explore_and_predict_checks_judged_on_shipped_values_agree_word_for_word(name, tmp_path,
                                                                                capsys):
    """For every explore and predict check, the check's rule run in the grader's process on
    the values the kernel shipped gives the very line the in-kernel judge gives: ✓ for the
    check's own answer, ✗, ○ or ✎ for the others, a function among the values (ex07's
    attention_maps, ex11's copy_loss_without) replayed from the calls the check made."""
    check = exercises.checks()[name]
    args = check.exercise.args()
    reference = check(..., *args)  # an explore check hands back its answer; a prediction, None
    if isinstance(reference, torch.Tensor) and name == "ex07.minimal_pair":
        reference = reference.tolist()
    for answer in [None, ..., reference, 0, -1.5, "x", [0.1, 0.2], {"a": 1}, object()]:
        assert _measured_through_a_kernel(name, answer, args, tmp_path) == \
            grading.judge(name, lambda a=answer: a, lambda: args, seed=11), answer
    if check.exercise.kind == "explore":
        assert _measured_through_a_kernel(name, reference, args, tmp_path)[0] == "✓"


def test_a_shipped_record_is_only_data_and_a_forged_judge_in_the_kernel_changes_nothing(
        tmp_path, monkeypatch):
    """The kernel's half of an explore check ships values, not verdicts: a record that claims a
    verdict, a pickle that would run code, or values that are not data are ✗ here; and a judge
    rewritten in the kernel only changes what that kernel would say, not what is shipped."""
    name, args = "ex01.key_2_wins", (ex01.WORKED_KEYS,)
    ran = tmp_path / "ran"

    class Runs:
        def __reduce__(self):
            return (ran.touch, ())

    for record, words in [
            ({"verdict": ["✓", "right"]}, "could not read what your notebook handed back"),
            ({"answer": Runs(), "args": [], "predictions": {}}, "(UnpicklingError)"),
            ({"answer": ("value", 1), "args": [["code", "x"]], "predictions": {}},
             "could not read what your notebook handed back (ValueError)"),
            ({"answer": ("list", [("value", 1)] * 4),
              "args": [["data", ("other", "a TinyTransformer")]], "predictions": {}},
             "could not be read back as data (a TinyTransformer)")]:
        torch.save(record, tmp_path / "values.pt")
        mark, shown, message = grading.measured(name, tmp_path / "values.pt", 3)
        assert (mark, shown) == ("✗", "key 2 wins") and words in message, (record, message)
    assert not ran.exists()
    assert grading.measured(name, tmp_path / "nothing.pt", 3) == \
        ("✗", "key 2 wins", "your notebook handed back nothing for this check")
    monkeypatch.setattr(grading, "judge", lambda *a, **k: ("✓", "key 2 wins", "right."))
    grading.measure(name, lambda: [1, 0, 0, 0], lambda: args, str(tmp_path / "values.pt"))
    monkeypatch.undo()
    assert grading.measured(name, tmp_path / "values.pt", 3)[0] == "✗"


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
# The judge rewritten in the kernel: every in-kernel verdict ✓ (or ✎), nbgrader's test cells
# silent. Neither grader asks that kernel for a verdict, so it earns nothing.
JUDGE = ("from attnlab.exercises import grading\n"
         "grading.judge = lambda name, *args, **kwargs: ('✓', name, 'right.')\n"
         "grading.require = lambda *args, **kwargs: None")
EXPECTED = {"honest": 6, "blank": 0, "half": 3, "prints": 0, "prints25": 0, "library": 0,
            "state": 0, "prints_and_state": 0, "judge": 0}


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

    def first(nb, source):  # before every test cell
        nb.cells.insert(0, nbformat.v4.new_code_cell(source))
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
            "prints_and_state": added(answered(()), PRINTS, STATE),
            "judge": first(answered(()), JUDGE)}


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
    assert (attention["✓"], attention["✗"], attention["○"]) == (2, 1, 6)
    assert attention["mistakes"][0][0].startswith("your function raised RuntimeError")
    assert "| attention | 2 | 1 | 6 | 0 |" in grade.report_markdown(report, len(subs))


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

"""The exercise framework (attnlab.exercises): a check never raises, prints one line that starts
with ✓, ✗ or ○, and returns something the cells below can use.

`test_every_check_turns_hostile_answers_into_one_line` feeds every check of the series (found
by `exercises.checks()`, so a new one is covered as soon as it exists) the answers no exercise
asks for: None, `...`, a string, an int, a NumPy array, the wrong shape or dtype, NaN, a
function that raises or never returns. The test_exNN.py files hold each exercise's right answer
and typical mistakes."""
import contextlib
import math
import signal
import threading
import time

import numpy as np
import pytest
import torch
from exercise_doubles import (
    expect,
    forgot_return,
    loops_forever,
    one_line,
    placeholder,
    raises,
)

from attnlab import exercises
from attnlab.exercises import (
    Implement,
    Like,
    Verdict,
    call_safely,
    check_answer,
    check_prediction,
)

# --- hostile answers, over every check --------------------------------------------------------


def _each(change, out):
    """`change` applied to a result, or to each part of a tuple result."""
    return tuple(change(t) for t in out) if isinstance(out, tuple) else change(out)


def _like(reference, change):
    """A student's function that returns the reference's result, changed."""
    return lambda *args: _each(change, reference(*args))


def implement_answers(reference):
    """(answer, mark, words): what a hostile student may pass where a function belongs."""
    return [
        (None, "○", "not attempted"),
        (..., "○", "not attempted"),
        (placeholder, "○", "returns None"),
        (forgot_return, "✗", "your function runs but returns None. Hint: a function hands back"),
        ("my_function", "✗", "expected a function, got the string 'my_function'"),
        (42, "✗", "expected a function, got an int"),
        (raises, "✗", "raised ZeroDivisionError: oops"),
        (loops_forever, "✗", "did not finish within 0.3 s"),
        (lambda *args: "attention", "✗", "got the string 'attention'"),
        (lambda *args: 3, "✗", "got an int"),
        (_like(reference, lambda t: t.numpy()), "✗", "NumPy array"),
        (_like(reference, lambda t: t[None]), "✗", ""),  # shape or broadcast, as each says
        (_like(reference, lambda t: t.to(torch.int64 if t.dtype != torch.int64 else torch.float)),
         "✗", "dtype"),
        (_like(reference, lambda t: t * math.nan), "✗", ""),  # NaN, or a float mask's dtype
    ]


def module_answers():
    """(answer, mark, words): what a hostile student may pass where a module's class belongs
    (ex02.multi_head_module builds `answer(16, 4)`, then calls it on tensors)."""
    def with_forward(answer):
        class Hostile(torch.nn.Module):
            def __init__(self, d_model, n_heads):
                super().__init__()
                self.q, self.k, self.v, self.out = (torch.nn.Linear(d_model, d_model)
                                                    for _ in range(4))

            def forward(self, x, mask=None):
                return answer(x)
        return Hostile
    return [
        (None, "○", "not attempted"),
        (..., "○", "not attempted"),
        (placeholder, "○", "returns None"),
        (forgot_return, "✗", "your function runs but returns None. Hint: a function hands back"),
        ("my_function", "✗", "expected a class, got the string 'my_function'"),
        (42, "✗", "expected a class, got an int"),
        (raises, "✗", "building your module raised ZeroDivisionError: oops"),
        (loops_forever, "✗", "building your module did not finish within 0.3 s"),
        (with_forward(raises), "✗", "your forward raised ZeroDivisionError: oops"),
        (with_forward(loops_forever), "✗", "your forward did not finish within 0.3 s"),
        (with_forward(lambda x: "attention"), "✗", "got the string 'attention'"),
        (with_forward(lambda x: (x.numpy(), x)), "✗", "NumPy array"),
        (with_forward(lambda x: (x * math.nan, x)), "✗", ""),
    ]


MODULE_CHECKS = {"ex02.multi_head_module"}  # implement checks whose answer is a module's class

VALUE_ANSWERS = [  # (answer, mark, words) where a number, a list or a pair belongs
    (None, "○", ""),
    (..., "○", ""),
    ("0.5", "✗", "the string '0.5'"),
    (math.nan, "✗", ""),
    (np.zeros((2, 3)), "✗", ""),
    (torch.zeros(2, 3), "✗", ""),
    (raises, "✗", "a function"),
]


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return torch.equal(a, b)
    return a is b or a == b


@pytest.mark.parametrize("name", sorted(exercises.checks()))
def test_every_check_turns_hostile_answers_into_one_line(capsys, name):
    check = exercises.checks()[name]
    assert hasattr(check, "exercise"), \
        f"{name} is public but not registered: decorate it with @exercise(kind, args=...)"
    before = torch.random.get_rng_state()
    args = check.exercise.args()
    assert torch.equal(torch.random.get_rng_state(), before), \
        f"{name}'s example arguments moved the caller's random state: draw them under a " \
        "private seed (torch.random.fork_rng)"
    reference = check(..., *args)  # untouched: ○ and the reference
    assert one_line(capsys)[0] == "○"
    if check.exercise.kind == "predict":  # a guess it cannot read is no prediction yet: ○
        assert reference is None
        for answer, _, words in VALUE_ANSWERS:
            assert expect(capsys, check, [answer], "○", words, *args) == [None], answer
        return
    assert reference is not None
    if name in MODULE_CHECKS:
        answers = module_answers()
    elif check.exercise.kind == "implement":
        assert callable(reference)
        answers = implement_answers(reference)
    else:
        answers = VALUE_ANSWERS
    for answer, mark, words in answers:
        got = expect(capsys, check, [answer], mark, words, *args)[0]
        assert same(got, reference), (answer, got)  # usable: the reference, as for `...`
    assert torch.equal(torch.random.get_rng_state(), before), \
        f"{name} moved the caller's random state: a cell below it would draw other numbers " \
        "after the check ran once more"


@pytest.mark.parametrize("name", sorted(n for n, c in exercises.checks().items()
                                        if c.exercise.kind != "predict"))
def test_every_check_hints_in_two_steps(capsys, name):
    """Issue 28, item 3: the first ✗ of an implement or explore check gives a nudge, the second
    adds the method; the nudge alone never says "Second hint"."""
    check = exercises.checks()[name]
    args = check.exercise.args()
    exercises._wrong_so_far.clear()  # as in a fresh kernel
    lines = []
    for _ in range(2):
        check("not an answer", *args)
        lines.append(one_line(capsys))
    (mark, first), (_, second) = lines
    assert mark == "✗" and "Hint: " in first and "Second hint" not in first, first
    assert second.startswith(first) and "Second hint: " in second, second



# --- declared checks: every listed mistake, submitted, gets its own message ---------------------

DECLARED = sorted(n for n, c in exercises.checks().items() if isinstance(c, Implement))


def _first_difference(check: Implement, wrong, args) -> tuple[tuple, object, object]:
    """(inputs, the mistake's result, the reference's) on the first input where they differ."""
    with torch.no_grad() if check.no_grad else contextlib.nullcontext():
        for made in check.inputs(*args):
            got, expected = wrong(*made), check.reference(*made)
            if check.problem(got, expected, made) is not None:
                return made, got, expected
    raise AssertionError(f"{check.name}: the inputs never tell this mistake from the reference")


@pytest.mark.parametrize("name", DECLARED)
def test_every_declared_mistake_submitted_gets_its_message(capsys, name):
    """The table is the test: the reference earns ✓ and is returned; each mistake written as a
    student writes it (a `Like`, or a `When`'s example) gets ✗ with its own message, which
    also shows that the check's inputs tell it apart from the reference and from the mistakes
    listed before it; the reference comes back."""
    check = exercises.checks()[name]
    args = check.exercise.args()
    assert check(check.reference, *args) is check.reference
    assert one_line(capsys)[0] == "✓"
    students = [(m, m.wrong if isinstance(m, Like) else m.example) for m in check.mistakes]
    for mistake, student in students:
        if student is None:
            continue
        made, got, expected = _first_difference(check, student, args)
        message = mistake.message if isinstance(mistake.message, str) else \
            mistake.message(got, expected, *made)
        assert check(student, *args) is check.reference, message
        mark, line = one_line(capsys)
        assert mark == "✗" and message in line, (message, line)

# --- the one flow: check_answer ---------------------------------------------------------------

def test_check_answer_lets_the_judge_decide(capsys):
    for judge, mark, words, returned in [
        (lambda a: None, "✓", "✓ x: fine.", 7),
        (lambda a: "it is odd", "✗", "✗ x: it is odd. Hint: look again", -1),
        (lambda a: Verdict.right("7 is right.", value=7.0), "✓", "✓ x: 7 is right.", 7.0),
        (lambda a: Verdict.wrong("too big", "smaller"), "✗", "✗ x: too big. Hint: smaller", -1),
    ]:
        got = check_answer(7, judge, name="x", reference=-1, hint="look again", success="fine")
        sign, line = one_line(capsys)
        assert sign == mark and line.startswith(words), (words, line)
        assert got == returned and type(got) is type(returned), words


def test_a_judge_that_raises_or_hangs_is_a_cross_not_a_traceback(capsys):
    for judge, words in [
        (lambda a: 1 / 0, "✗ x: checking your answer raised ZeroDivisionError"),
        (loops_forever, "✗ x: checking your answer did not finish within 0.1 s"),
    ]:
        got = check_answer(7, judge, name="x", reference=-1, hint="look again", seconds=0.1)
        sign, line = one_line(capsys)
        assert sign == "✗" and line.startswith(words), (words, line)
        assert got == -1, words


def test_a_hint_in_two_steps_gives_the_nudge_then_the_method(capsys):
    lines = []
    for _ in range(3):
        check_answer(1, lambda a: "no", name="two steps", reference=0, hint=("nudge.", "method."))
        lines.append(one_line(capsys)[1])
    assert lines[0].endswith("Hint: nudge.")
    assert lines[1].endswith("Hint: nudge. Second hint: method.") and lines[2] == lines[1]


def test_a_time_limit_inside_another_leaves_the_outer_one_running():
    def judge():
        inner = call_safely(loops_forever, seconds=0.05)[1]
        assert inner.startswith("your function did not finish within 0.05 s")
        loops_forever()  # stopped by the outer limit, restored after the inner call

    assert "did not finish within 0.2 s" in call_safely(judge, seconds=0.2, who="the judge")[1]
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # no alarm left behind


def test_without_sigalrm_the_limit_stops_the_function_and_the_kernel_goes_on(monkeypatch, capsys):
    """As on Windows (no SIGALRM): the call runs in a thread of its own, is stopped after its
    time, and leaves no thread behind; answers, errors and torch's grad mode as with the alarm."""
    monkeypatch.delattr(signal, "setitimer")
    started = time.monotonic()
    assert call_safely(loops_forever, seconds=0.2)[1] == (
        "your function did not finish within 0.2 s (an endless loop?)")
    assert time.monotonic() - started < 1.5
    time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name == "attnlab-check"]  # stopped
    assert call_safely(lambda x: x + 1, 2) == (3, None)
    assert call_safely(lambda: 1 / 0)[1] == (
        "your function raised ZeroDivisionError: division by zero")
    with torch.no_grad():
        assert call_safely(lambda: torch.is_grad_enabled()) == (False, None)
    assert check_answer(7, loops_forever, name="x", reference=-1, hint="h", seconds=0.1) == -1
    assert one_line(capsys) == ("✗", "✗ x: checking your answer did not finish within 0.1 s "
                                     "(an endless loop?). Hint: h")


# --- the three kinds ------------------------------------------------------------------------------

def four_parts(x):
    return x, x + 1, x + 2, x + 3


def test_an_implement_check_compares_every_part_of_a_tuple(capsys):
    for answer, mark, words in [
        (four_parts, "✓", "f: matches attnlab's version on 1 random input."),  # singular
        (lambda x: four_parts(x)[:3] + (x,), "✗", "the fourth result differs from the reference"),
    ]:
        got = Implement("f", four_parts, lambda: [(torch.zeros(2),)], hint="h")(answer)
        sign, line = one_line(capsys)
        assert sign == mark and words in line, (words, line)
        assert got is (answer if mark == "✓" else four_parts), words


def test_a_compare_that_cannot_read_a_result_leaves_it_to_the_plain_comparison(capsys):
    Implement("f", lambda x: x, lambda: [(torch.zeros(2),)], hint="h",
              compare=lambda got, expected, x: 1 / 0)(lambda x: x.long())
    sign, line = one_line(capsys)
    assert sign == "✗" and "has dtype torch.int64, expected torch.float32" in line, line


def test_check_prediction_reads_a_list_of_numbers(capsys):
    measured = [0.405, 0.246, 0.349]
    for guess, mark, words in [
        (np.array([0.4, 0.25, 0.35]), "✎", "you predicted 0.400, 0.250, 0.350; measured 0.405"),
        ([0.4, "a", 0.35], "○", "each guess should be a number, got the string 'a'"),
    ]:
        assert check_prediction(guess, measured, name="weights", tolerance=0.05) is None
        sign, line = one_line(capsys)
        assert sign == mark and words in line, (words, line)


@pytest.mark.parametrize("name", sorted(n for n, c in exercises.checks().items()
                                        if c.exercise.kind == "predict"))
def test_a_prediction_is_never_judged_and_a_rerun_shows_what_it_showed(capsys, name):
    """No ✓ or ✗ for a prediction; the guess stays the student's, so running the cell again
    prints the same line; a guess first given after the measurement was shown says so."""
    check = exercises.checks()[name]
    args = check.exercise.args()
    guess = _a_guess(capsys, check, args)
    lines = []
    for _ in range(2):
        assert check(guess, *args) is None
        lines.append(capsys.readouterr().out)
    assert lines[0] == lines[1] and lines[0].startswith("✎ ") and "after the measurement" \
        not in lines[0], lines
    exercises._predictions.clear()  # a fresh kernel, this time run before the guess is written
    check(..., *args)
    check(guess, *args)
    late = capsys.readouterr().out.splitlines()
    assert late[0].startswith("○ ") and late[1].startswith("✎ ")
    assert "(written after the measurement was shown)" in late[1], late
    assert not [line for line in lines + late if line.startswith(("✓", "✗"))]


def _a_guess(capsys, check, args):
    """A guess the check can read (it prints ✎ for it), made from its example measurement as a
    student would copy it: the value, its list, the winning key, or one of the two words."""
    measured = args[0]
    candidates = [measured, getattr(measured, "tolist", list)() if hasattr(measured, "tolist")
                  else measured, "unscaled"]
    if isinstance(measured, torch.Tensor) and measured.dim() == 1:
        candidates.append(int(measured.argmax()))
    for guess in candidates:
        exercises._predictions.clear()
        check(guess, *args)
        if capsys.readouterr().out.startswith("✎ "):
            exercises._predictions.clear()
            return guess
    raise AssertionError(f"no readable guess for {check} among {candidates}")

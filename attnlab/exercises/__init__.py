"""Exercise checks: instant, friendly, offline feedback for the notebooks' exercises.

A check never raises. It prints one line (a ✗: a few short lines, the hint on its own):
`✓` right (it returns the student's answer), `✗` not yet (what is wrong, and a hint that does
not give the answer away, a nudge first and the method after; it returns the reference answer,
so the rest of the notebook still runs), `○` not attempted (the placeholder is still there; the
reference again). A *predict* check sets the guess beside the measurement with `✎`, never ✓ or
✗ (a prediction is not right or wrong), marks a guess first given after the measurement was
shown, and returns None. Printed numbers are rounded (`attnlab.plumbing.report.fmt`) so that a line
is the same on any CPU.

A check is declared, not programmed. An *implement* check is an `Implement`: its reference, how
its inputs are made, and its classic mistakes, each a wrong implementation as a student writes
it (`Like`) or a test on the result (`When`), with its message; the engine calls the student's
function with a time limit, compares, names the first matching mistake and hands the reference
on. A *predict* check on a number is a `Predict` row. The rest (explore checks, predictions that
are not numbers, the few implement checks the engine cannot express) are functions registered
with `@exercise(kind, args=...)` over the one flow, `check_answer(answer, judge, ...)`.
`checks()` finds them all in the per-notebook modules (`attnlab.exercises.ex01`, ...), so the
tests feed every check hostile answers and submit every declared mistake without being told.

A check's line is feedback, not a grade. Graders (`make grade`, nbgrader's locked test cells)
call the check again through `attnlab.exercises.grading.judge`, in grading mode (`_grading`):
the line goes to the grader instead of the screen, an implement check draws its inputs from the
grader's secret seed, and its reference (and `refuse`) refuse to run inside the student's
function. `make grade` splits a declared implement check in two (`Implement.calls` in the
student's kernel, `Implement.judged` in the grader's own process; a hand-written one carries a
`split` with the same two halves), so that the comparison runs where no answer cell reaches,
and runs an explore or predict check's own rule in its process on the values the kernel
ships; `attnlab.exercises.grading` says what is judged where.
"""
from __future__ import annotations

import ast
import contextlib
import ctypes
import importlib
import inspect
import math
import numbers
import pkgutil
import re
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..plumbing.report import fmt

RIGHT, WRONG, TODO = "✓", "✗", "○"
PREDICTED = "✎"  # a prediction set beside its measurement: never right or wrong
KINDS = ("implement", "predict", "explore")
WIDTH = 80  # characters per line of a ✗ (see `say`)
TIME_LIMIT_S = 2.0  # a student's call that takes longer is stopped; read at call time, so a
#                    test may set it lower (tests/conftest.py does)
CHECK_WORK_S = 5.0  # on top of the student's calls: the check's own work (the reference, the
#                     classic mistakes it recognises), which a loaded machine slows
_ANSWER = object()  # Verdict.value's default: the check returns the answer it was given
_IN_KERNEL = object()  # the answer `make grade` judges in its own process: it stays in the kernel
_wrong_so_far: dict[str, int] = {}  # ✗ lines given per check name, for two-step hints
_predictions: dict[str, _Shown] = {}  # per predict check: its measurement shown yet, and when
_last_mark: dict[str, str] = {}  # per check name: the mark of its last line in this kernel
_grading = None  # while `grading.judge` runs a check: where its verdict goes instead of print


class _TimeLimit(BaseException):
    """A student's call past its time limit. Not an Exception, so that a student's loop with
    `except Exception: pass` inside it (a retry loop) is stopped all the same, and so that no
    helper of ours that catches Exception swallows an outer limit."""


# --- the registry ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exercise:
    """What a test or tool needs to call a check: its kind and example arguments after the
    answer (what the notebook passes, such as the measured value of a *predict* exercise)."""
    kind: str
    args: Callable[[], tuple]
    measure: Callable[..., tuple] | None = None


def exercise(kind: str, args: tuple | Callable[[], tuple] = (), *,
             measure: Callable[..., tuple] | None = None):
    """Register a check: `@exercise("predict", args=(0.5,))` above `def check(guess, measured)`.

    `args` is a tuple, or a function that makes one (for data worth building only when used).
    `measure`, for an explore check whose arguments are not data (a model): a function that
    turns them, in the student's kernel, into data the check takes in their place, so that
    `make grade` can judge it in its own process (`attnlab.exercises.grading.measure`).
    The check itself is unchanged; it gains an `exercise` attribute.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    make = args if callable(args) else (lambda: tuple(args))

    def register(check: Callable) -> Callable:
        check.exercise = Exercise(kind, make, measure)
        return check
    return register


def checks() -> dict[str, Callable]:
    """Every check of the series, by "exNN.name": the public functions of the modules exNN."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not re.fullmatch(r"ex\d\d", info.name):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for attr, obj in vars(module).items():
            declared = isinstance(obj, Implement | Predict)
            if not attr.startswith("_") and (declared or inspect.isfunction(obj)
                                             and obj.__module__ == module.__name__):
                found[f"{info.name}.{attr}"] = obj
    return found


# --- the one flow --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """What a judge returns when None (right) or a string (what is wrong) is not enough."""
    mark: str                          # RIGHT, WRONG or TODO
    text: str = ""                     # the ✓ text, the problem, or the ○ text
    hint: str | tuple[str, str] | None = None  # a ✗ hint instead of the check's
    value: object = _ANSWER            # what a ✓ returns (default: the answer itself)

    @classmethod
    def right(cls, text: str = "", value=_ANSWER) -> Verdict:
        return cls(RIGHT, text, value=value)

    @classmethod
    def wrong(cls, problem: str, hint: str | tuple[str, str] | None = None) -> Verdict:
        return cls(WRONG, problem, hint)

    @classmethod
    def todo(cls, text: str) -> Verdict:
        return cls(TODO, text)


def say(mark: str, name: str, message: str, hint: str | None = None) -> None:
    """Print the feedback, `<mark> <name>: <message>`, and remember the mark as the check's
    last verdict in this kernel (what `require` reads).

    ✓, ○ and ✎ are one line. A ✗ says more (what is wrong, then the hint), so it is cut into
    lines of at most `WIDTH` characters, never inside a word, its hint on a line of its own,
    and every line after the first indented: short lines that no notebook front end wraps
    mid-word, and a block that looks unlike a ✓ line.
    """
    if _grading is not None:  # judged by a grader: the verdict goes to it, nothing is shown
        _grading.lines.append((mark, name, message))
        return
    _last_mark[name] = mark
    line = f"{mark} {name}: {message}"
    if mark != WRONG:
        _show(line)
        return
    wrap = {"width": WIDTH, "subsequent_indent": "  ", "break_long_words": False,
            "break_on_hyphens": False}
    lines = textwrap.wrap(line, **wrap)
    if hint:
        lines += textwrap.wrap(f"Hint: {hint}", initial_indent="  ", **wrap)
    _show("\n".join(lines))


def _show(text: str) -> None:
    """print(text), also where the output cannot encode the marks: a plain Python process under
    an ASCII locale, or with its output piped on Windows (cp1252). There each character it
    cannot show becomes `?`, since a check never raises. (A notebook's kernel takes any text.)"""
    try:
        print(text)
    except UnicodeEncodeError:
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        print(text.encode(encoding, "replace").decode(encoding))


def require(name: str) -> None:
    """Raise AssertionError unless the check `name` has run in this kernel and its last line was
    ✓ (for a prediction: ✎, a guess given): a student's own assert, for a cell that must not
    run on a wrong answer. It reads what this kernel recorded, which any cell can write, so it
    is never a grade: both graders judge the answer itself (`attnlab.exercises.grading`)."""
    mark = _last_mark.get(name)
    if mark in (RIGHT, PREDICTED):
        return
    if mark is None:
        raise AssertionError(f"the check {name!r} has not run: run the cells above this one")
    meaning = "not attempted" if mark == TODO else "not yet right"
    raise AssertionError(f"{name}: {meaning} ({mark}); see the check's line above")


def untouched(answer) -> bool:
    """True while the placeholder is still in place (`...`) or nothing was given (None)."""
    return answer is ... or answer is None


def check_answer(answer, judge: Callable, *, name: str, reference, hint: str | tuple[str, str],
                 success: str = "", todo: str | Verdict = "not attempted yet; put your answer in "
                                                          "the cell above and run it again.",
                 seconds: float | None = None):
    """The flow of every check: ○ for an untouched answer, else `judge(answer)` decides.

    `judge(answer)` returns None (right: the ✓ line says `success`, or "right"), a string (✗:
    what is wrong; the line adds `hint`) or a `Verdict`. A judge that raises or takes longer
    than `seconds` (None: 5 × `TIME_LIMIT_S` as it is when called) gives ✗ too. `hint` is a
    string or a pair (nudge, method): the nudge at the first ✗ of this `name`, both after.
    `todo` is the ○ line of an untouched answer, or a Verdict for one where the check can see
    that work was done around the placeholder (a loop that ran and never set the answer).
    Returns the answer (or the Verdict's value) when right, else `reference`.
    """
    crash = None
    if untouched(answer) and not isinstance(todo, Verdict):
        say(TODO, name, todo)
        return reference
    if untouched(answer):
        verdict = todo
    else:
        limit = 5 * TIME_LIMIT_S if seconds is None else seconds
        verdict, crash = call_safely(judge, answer, seconds=limit, who="checking your answer")
    if crash is not None:
        verdict = Verdict.wrong(crash)
    elif verdict is None:
        verdict = Verdict.right()
    elif isinstance(verdict, str):
        verdict = Verdict.wrong(verdict)
    elif not isinstance(verdict, Verdict):  # a bug of ours: still a line, not a traceback
        verdict = Verdict.wrong(f"this check could not judge your answer ({_kind(verdict)})")
    if verdict.mark == RIGHT:
        say(RIGHT, name, _sentence(verdict.text or success or "right"))
        return answer if verdict.value is _ANSWER else verdict.value
    if verdict.mark == TODO:
        say(TODO, name, verdict.text)
        return reference
    say(WRONG, name, _sentence(verdict.text), _hint_step(name, verdict.hint or hint))
    return reference


def _hint_step(name: str, hint: str | tuple[str, str] | None) -> str | None:
    """The hint for this ✗: a string as it is; of a (nudge, method) pair, the nudge the first
    time `name` is wrong, the nudge and the method after that."""
    if not isinstance(hint, tuple):
        return hint
    if _grading is not None:  # a grader's judgement is not one of the student's tries
        return hint[0]
    _wrong_so_far[name] = _wrong_so_far.get(name, 0) + 1
    nudge, method = hint
    return nudge if _wrong_so_far[name] == 1 else f"{nudge} Second hint: {method}"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def call_safely(fn: Callable, *args, seconds: float | None = None, who: str = "your function"):
    """Call a student's `fn(*args)` with a time limit; returns (value, problem or None).

    `seconds` defaults to `TIME_LIMIT_S` as it is when called. In the main thread of a system
    with SIGALRM (Linux, macOS: where notebook cells run) the limit is an alarm; elsewhere
    (Windows has no SIGALRM, or a call from another thread) the call runs in a thread of its own
    and is stopped by an exception raised in that thread. Either way it interrupts a Python loop
    at once (also one that catches Exception), and an operation inside PyTorch as soon as it
    returns, and the kernel stays usable. Neither stops a loop that catches everything (a bare
    `except:`): with the alarm its cell runs until the kernel is restarted; in a thread the
    check answers ✗ on time and the loop runs on in the background. A thread is stopped between
    two bytecodes only, so a call that waits in C (`time.sleep(60)`, which the alarm does
    interrupt) also runs on in the background until it returns; the check has answered.
    Calls nest: an inner call ends by the outer one's deadline at the latest.
    `who` names what ran in the problem ("your function raised ...").
    """
    if seconds is None:
        seconds = TIME_LIMIT_S
    alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    try:
        return (_with_alarm if alarm else _in_thread)(fn, args, seconds), None
    except _TimeLimit:
        return None, f"{who} did not finish within {seconds:g} s (an endless loop?)"
    except Exception as error:  # the student's code: any exception is feedback, not a crash
        text = str(error).splitlines()[0][:160] if str(error) else ""
        return None, f"{who} raised {type(error).__name__}" + (f": {text}" if text else "")


def _with_alarm(fn: Callable, args: tuple, seconds: float):
    """fn(*args), raising _TimeLimit after `seconds` (SIGALRM); an outer alarm goes on after."""
    def alarm(signum, frame):
        raise _TimeLimit
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]  # 0: no outer limit running
    previous = signal.signal(signal.SIGALRM, alarm)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, min(seconds, outer_left) if outer_left else seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:  # the outer limit goes on (and fires at once if it has passed)
            left = outer_left - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6))


def _in_thread(fn: Callable, args: tuple, seconds: float):
    """fn(*args) in a thread of its own, raising _TimeLimit after `seconds`: where there is no
    SIGALRM. The thread is then stopped by _TimeLimit raised inside it (CPython's
    PyThreadState_SetAsyncExc, checked between two bytecodes), so a loop left running does not
    keep taking the kernel's time. The caller's grad mode holds in the thread (it is
    per-thread in torch)."""
    done: dict = {}
    grad = torch.is_grad_enabled()

    def run():
        try:
            with torch.set_grad_enabled(grad):
                done["value"] = fn(*args)
        except BaseException as error:  # noqa: BLE001 - handed to the caller below
            done["error"] = error

    thread = threading.Thread(target=run, name="attnlab-check", daemon=True)
    thread.start()
    try:
        thread.join(seconds)
    finally:
        if thread.is_alive():  # past its time, or the caller was interrupted
            ident = ctypes.c_ulong(thread.ident)
            raise_in = ctypes.pythonapi.PyThreadState_SetAsyncExc
            if raise_in(ident, ctypes.py_object(_TimeLimit)) > 1:  # more than one thread:
                raise_in(ident, None)  # CPython's documented way back (never seen)
            thread.join(1.0)
    if "error" in done and not isinstance(done["error"], _TimeLimit):
        raise done["error"]
    if "value" not in done:
        raise _TimeLimit
    return done["value"]


# --- the three kinds -----------------------------------------------------------------------------

def as_number(answer, name: str = "your answer") -> tuple[float | None, str | None]:
    """(the answer as a float, None) or (None, what is wrong with it)."""
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = answer.item()
    elif isinstance(answer, np.ndarray) and answer.size == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        return None, f"{name} should be a number, got {_kind(answer)}"
    value = float(answer)
    if not math.isfinite(value):
        return None, f"{name} is {value}, expected a finite number"
    return value, None


def tensor_problem(got, expected: torch.Tensor, *, name: str = "your result",
                   atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """What is wrong with `got` as a stand-in for `expected`, or None when it matches."""
    if got is None:
        return f"{name} is None: did you forget `return`?"
    if not isinstance(got, torch.Tensor):
        return f"{name} should be a torch.Tensor of shape {tuple(expected.shape)}, got {_kind(got)}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype != expected.dtype:
        return f"{name} has dtype {got.dtype}, expected {expected.dtype}"
    if not bool(torch.isfinite(got).all()):
        return f"{name} contains NaN or inf"
    if not torch.allclose(got.detach(), expected, atol=atol, rtol=rtol):
        err = (got.detach() - expected).abs().max().item()
        return f"{name} differs from the reference by up to {fmt(err, 3, guard=False)}"
    return None


def result_problem(got, expected, *, atol: float = 1e-5, rtol: float = 1e-4,
                   name: str = "your result") -> str | None:
    """`tensor_problem` for a tensor result, or for each part of a tuple of them (all parts)."""
    if not isinstance(expected, tuple):
        return tensor_problem(got, expected, atol=atol, rtol=rtol, name=name)
    n = len(expected)
    if not isinstance(got, tuple) or len(got) != n:
        return f"your function should return a tuple of {n} tensors, got {_kind(got)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        problem = tensor_problem(g, e, name=f"the {_ordinal(i)} result", atol=atol, rtol=rtol)
        if problem:
            return problem
    return None


# --- implement checks, declared ---------------------------------------------------------------

@dataclass(frozen=True)
class Like:
    """A classic mistake, written as a student writes it: `wrong(*inputs)` is that student's
    result. An answer whose result is the same (to the check's tolerance) gets `message`, a
    string or `message(got, expected, *inputs) -> str`."""
    wrong: Callable
    message: str | Callable[..., str]

    def matches(self, got, expected, args: tuple, same: Callable) -> bool:
        return same(got, self.wrong(*args))


@dataclass(frozen=True)
class When:
    """A mistake told by a test on the result: `test(got, expected, *inputs)` is true.
    `example`, a student's function that makes it, lets the tests submit it."""
    test: Callable[..., bool]
    message: str | Callable[..., str]
    example: Callable | None = None

    def matches(self, got, expected, args: tuple, same: Callable) -> bool:
        return bool(self.test(got, expected, *args))


@dataclass(frozen=True, repr=False)
class Implement:
    """An *implement* check, declared: the student's function against `reference` on the
    argument tuples `inputs()` makes, each call stopped after `seconds` (None: `TIME_LIMIT_S` as
    it is when called).

    A result that differs (the type, shape, dtype and values of a tensor or a tuple of them,
    compared within atol/rtol, or `compare(got, expected, *inputs) -> problem or None` where
    the plain comparison cannot judge) gets the message of the first of `mistakes` it matches,
    else the comparison's own words. `view(x, *inputs)` is what results are compared as (a mask
    broadcast to the scores' shape). Calling the check with `fn` returns `fn` when it matches
    on every input, else `reference`, so later cells can always call what is returned.

    The student's function gets copies of the tensor inputs; one that changes them in place
    gets `changed` (None: changing them is fine, the check reads only the result).

    While a grader judges (`attnlab.exercises.grading`), `inputs(seed=...)` draws them from the
    grader's secret seed where it takes one, the reference's results are computed first, and
    then `reference` and each of `refuse` (attnlab's functions that are the answer) refuse to
    run while `fn` is called: attnlab's own function, or a wrapper that calls it, is not the
    student's work. `inputs` may take the check's extra arguments (`args`, what the notebook
    passes after the function, such as its model).
    """
    name: str
    reference: Callable
    inputs: Callable[..., Sequence[tuple]]
    hint: str | tuple[str, str]
    mistakes: Sequence[Like | When] = ()
    success: str | None = None
    what: str = "your result"
    atol: float = 1e-5
    rtol: float = 1e-4
    compare: Callable | None = None
    view: Callable | None = None
    refuse: Sequence[Callable] = ()
    seconds: float | None = None
    no_grad: bool = False
    args: Callable[[], tuple] = tuple
    changed: str | None = "your function changed a tensor it was given (in place): work on a copy"

    @property
    def exercise(self) -> Exercise:
        return Exercise("implement", self.args)

    def __repr__(self) -> str:
        return f"<implement check {self.name!r}>"

    def __call__(self, fn, *args):
        grading = _grading is not None
        made = self.made(*args, seed=_grading.seed if grading else None)
        with self._grad():
            expected_all = self.expected(made) if grading else None
            return self._checked(fn, lambda fn: self._judge(fn, made, expected_all), len(made))

    def made(self, *args, seed: int | None = None) -> Sequence[tuple]:
        """The argument tuples the student's function is called on: `inputs(*args)`, drawn
        from `seed` where `inputs` takes one and a seed is given."""
        takes = seed is not None and "seed" in inspect.signature(self.inputs).parameters
        return self.inputs(*args, **({"seed": seed} if takes else {}))

    def expected(self, made: Sequence[tuple]) -> list:
        """The reference's result on each of `made` (what a grader compares with)."""
        with self._grad():
            return [self.reference(*a) for a in made]

    def seconds_for(self, n: int) -> float:
        """The time limit of judging an answer on `n` inputs: each call's, plus the check's
        own work."""
        return (TIME_LIMIT_S if self.seconds is None else self.seconds) * n + CHECK_WORK_S

    def _grad(self):
        return torch.no_grad() if self.no_grad else contextlib.nullcontext()

    def _checked(self, fn, judge: Callable, n: int):
        """`check_answer` with this check's words: the flow all three ways of judging share
        (the feedback in the notebook, a grader in the kernel, `make grade`'s own process)."""
        return check_answer(
            fn, judge, name=self.name, reference=self.reference, hint=self.hint,
            success=self.success or f"matches attnlab's version on {n} random "
                                    f"input{'' if n == 1 else 's'}",
            todo="not attempted yet; write your function above and run the cell again.",
            seconds=self.seconds_for(n))

    def _judge(self, fn, made: Sequence[tuple], expected_all) -> str | Verdict | None:
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        for i, args in enumerate(made):
            called = self._call(fn, i, args, refuse=expected_all is not None)
            verdict = self._verdict(args, *called, None if expected_all is None
                                    else expected_all[i])
            if verdict is not None:
                return verdict
        return None

    def _call(self, fn, i: int, args: tuple, *, refuse: bool):
        """(result, the copies of `args` it was given, problem or None) of the student's call
        on the `i`-th inputs, with the reference and `refuse` refusing where `refuse` is true.
        The problem is the call's own (it raised, ran out of time) or, for a first call that
        returned None, `none_returned`'s Verdict, which only the student's source can tell."""
        with contextlib.ExitStack() as stack:
            for reference in (self.reference, *self.refuse) if refuse else ():
                stack.enter_context(refusing(reference))
            copies = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
            got, problem = call_safely(fn, *copies, seconds=self.seconds)
        if problem is None and got is None and i == 0:
            problem = none_returned(fn)
        return got, copies, problem

    def _verdict(self, args: tuple, got, copies: tuple, problem,
                 expected=None) -> str | Verdict | None:
        """None when `got` is right for `args`, else what is wrong (`expected`: the
        reference's result, computed here when None)."""
        if isinstance(problem, Verdict):
            return problem
        if problem is None and any(isinstance(a, torch.Tensor) and not torch.equal(a, c)
                                   for a, c in zip(args, copies)):
            problem = self.changed
        if problem is None:
            problem = self.problem(got, self.reference(*args) if expected is None else expected,
                                   args)
        if problem is None:
            return None
        given = ", ".join(f"a {tuple(a.shape)} tensor" if isinstance(a, torch.Tensor)
                          else repr(a) if isinstance(a, (numbers.Number, str))
                          else f"a {type(a).__name__}" for a in args)
        return f"given {given}: {problem}"

    def calls(self, fn, made: Sequence[tuple]) -> str | Verdict | list[tuple]:
        """The kernel's half of `make grade`'s judgement (`grading.answer`): the student's
        function called on each of `made` as the check calls it (on copies, with its time
        limit, the reference and `refuse` refusing), up to the first call that gives a problem:
        [(result, copies, problem or None, `recorded(args)` after the call), ...]. Or the
        verdict that only the kernel can give and that earns nothing: not a function, a
        function that returns None. Judging the results is `judged`'s, in the grader's
        process."""
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        done = []
        with self._grad():
            for i, args in enumerate(made):
                got, copies, problem = self._call(fn, i, args, refuse=True)
                if isinstance(problem, Verdict):
                    return problem
                done.append((got, copies, problem, recorded(args)))
                if problem is not None:
                    break
        return done

    def judged(self, done: str | Verdict | list[tuple], made: Sequence[tuple],
               expected_all: list):
        """The grader's half (`grading.returned`): the check's line on what `calls` handed
        back from the kernel (`...`: the answer was still the placeholder). Each result's
        module records are set on the modules here, then it is compared with `expected_all`,
        the reference's results computed here on the inputs `made` here. Runs in grading
        mode, so the line goes to the grader. A verdict from the kernel can only be ✗ or ○
        (its caller sees to it), so the kernel can lose a point but never give one."""
        def judge(_):
            if not isinstance(done, list):
                return done
            for args, (got, copies, problem, record), expected in zip(made, done, expected_all):
                for (j, attr), value in record.items():  # what the kernel's modules recorded
                    if isinstance(args[j], torch.nn.Module) and \
                            isinstance(getattr(args[j], attr, None), list):
                        getattr(args[j], attr)[:] = value
                verdict = self._verdict(args, got, copies, problem, expected)
                if verdict is not None:
                    return verdict
            if len(done) < len(made):
                return "your notebook handed back fewer results than the check asked for"
            return None
        return self._checked(... if done is ... else _IN_KERNEL, judge, len(made))


    def problem(self, got, expected, args: tuple) -> str | None:
        """What is wrong with `got` as the result for `args`: None, a named mistake, or the
        comparison's words."""
        plain = _compared(self.compare, got, expected, args, self.atol, self.rtol, self.what)
        if plain is None:
            return None
        for mistake in self.mistakes:
            try:
                if mistake.matches(got, expected, args, lambda a, b: self.matches(a, b, args)):
                    message = mistake.message
                    return message if isinstance(message, str) else message(got, expected, *args)
            except Exception:  # noqa: BLE001 - a test that cannot read this result: not a match
                continue
        return plain

    def matches(self, got, made, args: tuple) -> bool:
        """Whether `got` is `made` to this check's tolerance, both as `view` shows them."""
        if self.view is not None:
            got, made = self.view(got, *args), self.view(made, *args)
        return same(got, made, self.atol, self.rtol)


def recorded(args: tuple) -> dict[tuple[int, str], list]:
    """What the modules among `args` recorded while the student's function ran: their list
    attributes (a watching hook's record, such as ex10's `block.called`), by (position, name).
    `make grade` ships them from the kernel with the result, since a check may read them."""
    return {(j, attr): list(value) for j, a in enumerate(args) if isinstance(a, torch.nn.Module)
            for attr, value in vars(a).items() if isinstance(value, list)
            and not attr.startswith("_")}


def alike(got, expected) -> bool:
    """Whether `got` is a tensor of `expected`'s shape and dtype: a `When` test's first clause
    where its mistake is one of values, not of kind."""
    return isinstance(got, torch.Tensor) and got.shape == expected.shape \
        and got.dtype == expected.dtype


def same(got, made, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Equal type, shape and dtype, and values within atol/rtol (exactly, for integers and
    bools; infinities where the other has them): tensors, tuples of them, or numbers."""
    if isinstance(made, tuple):
        return isinstance(got, tuple) and len(got) == len(made) and \
            all(same(g, m, atol, rtol) for g, m in zip(got, made))
    if isinstance(made, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != made.shape or got.dtype != made.dtype:
            return False
        if not got.dtype.is_floating_point:
            return torch.equal(got, made)
        return bool(torch.allclose(got.detach(), made.detach(), atol=atol, rtol=rtol,
                                   equal_nan=False))
    if isinstance(made, numbers.Real) and isinstance(got, numbers.Real):
        return math.isclose(got, made, rel_tol=rtol, abs_tol=atol)
    return got == made


def _refused(*args, **kwargs):
    """The code a reference runs while refused. It runs with the reference's globals, so it
    names builtins only."""
    raise RuntimeError("attnlab's own version was called; a graded answer computes it itself")


class refusing:
    """Within `with refusing(reference)`, calling `reference` raises RuntimeError: its code is
    swapped for `_refused`'s, so every name bound to it (attnlab.X, exNN.X, a student's alias,
    a functools.partial or a def that calls it) refuses alike. A decorated function (such as
    one under `@torch.no_grad()`) is refused through the function it wraps. Only plain
    functions without a closure can be swapped; anything else is left as it is (None too)."""

    def __init__(self, reference):
        reference = inspect.unwrap(reference) if callable(reference) else reference
        swappable = inspect.isfunction(reference) and not reference.__code__.co_freevars
        self.reference = reference if swappable else None

    def __enter__(self):
        if self.reference is not None:
            self.code = self.reference.__code__
            self.reference.__code__ = _refused.__code__
        return self

    def __exit__(self, *exc):
        if self.reference is not None:
            self.reference.__code__ = self.code
        return False


def grader_seed() -> int | None:
    """The grader's secret seed while a grader judges a check (`attnlab.exercises.grading`),
    else None: a hand-written check draws its graded inputs from it."""
    return None if _grading is None else _grading.seed


def none_returned(fn) -> Verdict:
    """The verdict on a student's function that returned None: ○ while its body still holds the
    placeholder, else ✗, since code that runs and hands back nothing forgot `return`."""
    placeholder = _placeholder_left(fn)
    if placeholder is not None:
        return Verdict.todo(f"not attempted yet (your function returns None); replace the "
                            f"`{placeholder}` and run the cell again.")
    return Verdict.wrong("your function runs but returns None",
                         "a function hands back only what it `return`s: end yours with `return` "
                         "and the result.")


def _placeholder_left(fn) -> str | None:
    """The placeholder still in `fn`'s body: the student edition's `...` or the nbgrader
    release's `pass` (some exercises give a first line or two before it), else None. A function
    whose source cannot be read (a lambda, a builtin) counts as untouched ("..."), so it gets ○
    rather than a ✗ it may not deserve."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return "..."
    defs = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(defs) != 1:
        return "..."
    body = defs[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    if any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
           and node.value.value is ... for node in body) or not body:
        return "..."
    return "pass" if any(isinstance(node, ast.Pass) for node in body) else None

def _compared(compare: Callable | None, got, expected, args: tuple, atol: float,
              rtol: float, what: str = "your result") -> str | None:
    """`compare(got, expected, *args)`, or the plain comparison where there is none or where it
    cannot read this result (a compare names the typical mistakes; it need not expect
    every hostile value, such as a tensor of integers where floats belong)."""
    if compare is not None:
        try:
            return compare(got, expected, *args)
        except Exception:  # our own helper failed: the plain comparison still answers
            pass
    return result_problem(got, expected, atol=atol, rtol=rtol, name=what)


def _numbers(guess, n: int) -> tuple[list[float] | None, str | None]:
    """(n floats, None) or (None, what is wrong with the guess as a list of n numbers)."""
    if isinstance(guess, (torch.Tensor, np.ndarray)):
        guess = guess.tolist()
    if isinstance(guess, (str, bytes)) or not isinstance(guess, Sequence):
        return None, f"expected a list of {n} numbers, got {_kind(guess)}"
    if len(guess) != n:
        return None, f"expected {n} numbers, got {len(guess)}"
    values = []
    for g in guess:
        value, problem = as_number(g, "each guess")
        if problem:
            return None, problem
        values.append(value)
    return values, None


def prediction(guess, *, name: str, read: Callable, describe: Callable[[object], str],
               lesson: str, todo: str, write: str) -> None:
    """The flow of every *predict* exercise: the guess written down before the measurement,
    set beside it. A prediction is neither right nor wrong (what it teaches is the gap), so it
    never gets ✓ or ✗.

    `read(guess)` returns (value, None) or (None, what is wrong); `describe(value)` says "you
    predicted ...; measured ...". Prints one line: ○ while there is no guess it can read
    (`todo`, or what is wrong and `write`, what to write instead), else ✎ with the description
    and the `lesson`, one sentence of why. A guess first given after this check had already
    shown the measurement (the cell ran before, with no guess or another) is marked as written
    after it. Returns None: the guess stays the student's, so running the cell again prints
    the same line.
    """
    state = _predictions.get(name, _Shown()) if _grading is not None else \
        _predictions.setdefault(name, _Shown())  # a grader reads the state, never writes it
    value, problem = None, None
    if not untouched(guess):
        read_out, crash = call_safely(read, guess, seconds=5 * TIME_LIMIT_S,
                                      who="reading your guess")
        value, problem = (None, crash) if crash is not None else read_out
    key = None if value is None else repr(value)
    if _grading is not None and state.shown and key is not None and key not in state.before:
        say(TODO, name, "this guess was written after the measurement was shown")
        return None
    if _grading is not None:
        state = _Shown()  # judged as if shown now: a guess given is a guess made before
    if not state.shown:  # this run shows the measurement for the first time
        state.shown = True
        if key is not None:
            state.before.add(key)
    if untouched(guess):
        say(TODO, name, todo)
    elif problem is not None:
        say(TODO, name, f"{_sentence(problem)} {write}")
    else:
        late = "" if key in state.before else " (written after the measurement was shown)"
        say(PREDICTED, name, f"{_sentence(describe(value) + late)} {lesson}".rstrip())
    return None


@dataclass
class _Shown:
    """What a predict check remembers in this kernel: whether it has shown its measurement, and
    the guesses it was given before that."""
    shown: bool = False
    before: set = field(default_factory=set)


def check_prediction(guess, measured, *, name: str, tolerance: float, digits: int = 3,
                     lesson: str = "") -> None:
    """A *predict* exercise on a number (or an equal-length list of numbers): `prediction` with
    the guess and the measurement side by side, and how far apart they are (within `tolerance`,
    absolute and per entry, reads as close)."""
    many = isinstance(measured, (Sequence, np.ndarray, torch.Tensor))
    values = measured.tolist() if hasattr(measured, "tolist") else measured
    measured_list = [float(m) for m in values] if many else [float(measured)]

    def read(guess):
        if many:
            return _numbers(guess, len(measured_list))
        value, problem = as_number(guess, "your guess")
        return (None, problem) if problem else ([value], None)

    def describe(guesses):
        gap = max(abs(g - m) for g, m in zip(guesses, measured_list))
        shown = ", ".join(fmt(g, digits, guard=False) for g in guesses)
        truth = ", ".join(fmt(m, digits, guard=False) for m in measured_list)
        how = f"within {tolerance:g}" if gap <= tolerance else \
            f"{fmt(gap, digits, guard=False)} apart{' at most' if many else ''}"
        return f"you predicted {shown}; measured {truth} ({how})"

    return prediction(
        guess, name=name, read=read, describe=describe, lesson=lesson,
        todo="no prediction yet; write your guess in the cell above before running.",
        write=(f"Write a list of {len(measured_list)} plain numbers, one per measured value."
               if many else "Write a plain number such as 0.25."))


@dataclass(frozen=True, repr=False)
class Predict:
    """A *predict* check on a number (or a list of numbers), declared: `check(guess, measured)`
    sets the guess beside the measurement (`check_prediction`). `example` is a measured value
    as the notebook passes it, for the tests and the grader."""
    name: str
    tolerance: float
    lesson: str
    example: object
    digits: int = 3

    @property
    def exercise(self) -> Exercise:
        return Exercise("predict", lambda: (self.example,))

    def __repr__(self) -> str:
        return f"<predict check {self.name!r}>"

    def __call__(self, guess, measured) -> None:
        return check_prediction(guess, measured, name=self.name, tolerance=self.tolerance,
                                digits=self.digits, lesson=self.lesson)


def _ordinal(i: int) -> str:
    words = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
    return words[i] if i < len(words) else f"{i + 1}th"


@dataclass(frozen=True, eq=False)
class Opaque:
    """A value a student's function returned in the kernel that `make grade` cannot take back
    as data (not a tensor, array, number, string, None, or a tuple or list of them): only
    its description (`_kind`, written in the kernel) comes back, and the ✗ line names it as
    it would have named the value itself. It equals nothing."""
    kind: str


def _kind(x) -> str:
    """A short description of what a student passed, for a ✗ line."""
    if x is None:
        return "None"
    if isinstance(x, Opaque):
        return x.kind
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, np.ndarray):
        return f"a NumPy array of shape {x.shape} (use torch.tensor or torch ops)"
    if isinstance(x, str):
        return f"the string {x[:30]!r}" + ("..." if len(x) > 30 else "")
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} item{'' if len(x) == 1 else 's'}"
    kind = type(x).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


# Every notebook imports this package: from here on, a cell run before the cell that makes one
# of its names says which cell to run first, instead of a bare NameError (see `order`).
from . import order as _order  # noqa: E402 - after the checks it does not need

_order.install()

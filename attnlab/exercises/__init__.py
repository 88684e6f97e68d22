"""Exercise checks: instant, friendly, offline feedback for the notebooks' exercises.

A check never raises. It prints one line (a ✗: a few short lines, the hint on its own). An
*implement* or *explore* check returns something the cells below can use:

- `✓ ...` the answer is right; the check returns the student's answer;
- `✗ ...` not yet: what is wrong, and a hint that does not give the answer away; the check
  returns the reference answer, so the rest of the notebook still runs;
- `○ ...` not attempted (the placeholder `...` is still there, or the function still returns
  None); the check returns the reference answer.

A *predict* check (`prediction`) sets the guess beside the measurement and says why, with `✎`:
a prediction is neither right nor wrong, so it never gets ✓ or ✗, and a guess first given
after the measurement was shown says so. It returns None and leaves the guess as it was, so
running the cell again prints the same line.

One flow does this, `check_answer(answer, judge, ...)`: an untouched answer gets ○; otherwise
`judge(answer)` says what is wrong (a string), or nothing (None: right), or gives a `Verdict`
for more (the ✓ text and returned value, a ✗ with its own hint, a ○); a judge that raises or
runs past its time limit gives ✗. Three checks build on it for the three kinds of exercise:
`check_function` (*implement*: a few lines, compared with attnlab's version on inputs the check
makes), `check_prediction` (*predict*: a number guessed before the cell that measures; it uses
`prediction`, the flow of predictions, which has no ✓ or ✗) and
`check_number` (*explore*: a number found by experimenting). The per-notebook modules
(`attnlab.exercises.ex01`, ...) hold the questions' references and hints and call these.

Every public function of a per-notebook module is a check and carries `@exercise(kind, args=...)`:
its kind and example arguments after the answer, so that `checks()` finds it and the tests feed
it hostile answers (None, a string, NaN, a function that raises or never returns, ...) without
being told about it.

A hint is a string, or a pair (nudge, method): the first ✗ of a check shows the nudge, later ones
add the method. Printed numbers are rounded (`attnlab.report.fmt`) so a line is the same on any
CPU.

A check's line is feedback, not a grade. Graders (`make grade`, nbgrader's locked test cells)
call the check again through `attnlab.exercises.grading.judge`, in grading mode (`_grading`):
the line goes to the grader instead of the screen, an implement check draws fresh inputs
(`check_function(..., fresh=)`) and its reference refuses to run inside the student's function.
"""
from __future__ import annotations

import ast
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

from ..report import fmt

RIGHT, WRONG, TODO = "✓", "✗", "○"
PREDICTED = "✎"  # a prediction set beside its measurement: never right or wrong
KINDS = ("implement", "predict", "explore")
WIDTH = 80  # characters per line of a ✗ (see `say`)
TIME_LIMIT_S = 2.0  # a student's function that takes longer than this is stopped; read at call
CHECK_WORK_S = 5.0  # on top of the student's calls: the check's own work (the reference, the
#                     classic mistakes it recognises), which a loaded machine slows
#                    time, so a test may set it lower (tests/conftest.py does)
_ANSWER = object()  # Verdict.value's default: the check returns the answer it was given
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


def exercise(kind: str, args: tuple | Callable[[], tuple] = ()):
    """Register a check: `@exercise("predict", args=(0.5,))` above `def check(guess, measured)`.

    `args` is a tuple, or a function that makes one (for data worth building only when used).
    The check itself is unchanged; it gains an `exercise` attribute.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    make = args if callable(args) else (lambda: tuple(args))

    def register(check: Callable) -> Callable:
        check.exercise = Exercise(kind, make)
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
            if inspect.isfunction(obj) and obj.__module__ == module.__name__ \
                    and not attr.startswith("_"):
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


def result_problem(got, expected, *, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """`tensor_problem` for a tensor result, or for each part of a tuple of them (all parts)."""
    if not isinstance(expected, tuple):
        return tensor_problem(got, expected, atol=atol, rtol=rtol)
    n = len(expected)
    if not isinstance(got, tuple) or len(got) != n:
        return f"your function should return a tuple of {n} tensors, got {_kind(got)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        problem = tensor_problem(g, e, name=f"the {_ordinal(i)} result", atol=atol, rtol=rtol)
        if problem:
            return problem
    return None


def check_function(fn, reference: Callable, inputs: Sequence[tuple], *, name: str,
                   hint: str | tuple[str, str], atol: float = 1e-5, rtol: float = 1e-4,
                   seconds: float | None = None, compare: Callable | None = None,
                   success: str | None = None,
                   fresh: Callable[[int], Sequence[tuple]] | None = None):
    """An *implement* exercise: `fn` against `reference` on each argument tuple in `inputs`.

    Each call of `fn` is stopped after `seconds` (None: `TIME_LIMIT_S` as it is when called).
    `compare(got, expected, *args) -> problem or None` replaces the comparison of tensors (or
    tuples of them) where an exercise can name its typical mistakes (a transposed mask, say);
    `success` replaces the ✓ line's text. Returns `fn` when it matches on every input, else
    `reference`, so later cells can always call what is returned.

    While a grader judges (`attnlab.exercises.grading`), the inputs are `fresh(seed)`, drawn
    from the grader's secret seed (the inputs shown in this module are not the ones graded),
    the reference's results are computed first, and then `reference` refuses to run while `fn`
    is called: attnlab's own function, or a wrapper that calls it, is not the student's work.
    """
    grading = _grading is not None
    if grading and fresh is not None:
        inputs = fresh(_grading.seed)
    expected_all = [reference(*args) for args in inputs] if grading else None

    def judge(fn):
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        for i, args in enumerate(inputs):
            with _refusing(reference if grading else None):
                got, problem = call_safely(fn, *args, seconds=seconds)
            if problem is None and got is None and i == 0:
                return none_returned(fn)
            if problem is None:
                expected = expected_all[i] if grading else reference(*args)
                problem = _compared(compare, got, expected, args, atol, rtol)
            if problem is not None:
                given = ", ".join(f"a {tuple(a.shape)} tensor" if isinstance(a, torch.Tensor)
                                  else repr(a) if isinstance(a, (numbers.Number, str))
                                  else f"a {type(a).__name__}" for a in args)
                return f"given {given}: {problem}"
        return None

    n = len(inputs)
    per_call = TIME_LIMIT_S if seconds is None else seconds
    return check_answer(
        fn, judge, name=name, reference=reference, hint=hint,
        success=success or f"matches attnlab's version on {n} random input{'' if n == 1 else 's'}",
        todo="not attempted yet; write your function above and run the cell again.",
        seconds=per_call * n + CHECK_WORK_S)



def _refused(*args, **kwargs):
    """The code a reference runs while refused. It runs with the reference's globals, so it
    names builtins only."""
    raise RuntimeError("attnlab's own version was called; a graded answer computes it itself")


class _refusing:
    """Within `with _refusing(reference)`, calling `reference` raises RuntimeError: its code is
    swapped for `_refused`'s, so every name bound to it (attnlab.X, exNN.X, a student's alias,
    a functools.partial or a def that calls it) refuses alike. Only plain functions without a
    closure can be swapped; anything else is left as it is (None too)."""

    def __init__(self, reference):
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
              rtol: float) -> str | None:
    """`compare(got, expected, *args)`, or the plain comparison where there is none or where it
    cannot read this result (a compare names the typical mistakes; it need not expect
    every hostile value, such as a tensor of integers where floats belong)."""
    if compare is not None:
        try:
            return compare(got, expected, *args)
        except Exception:  # our own helper failed: the plain comparison still answers
            pass
    return result_problem(got, expected, atol=atol, rtol=rtol)


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


def check_number(answer, is_right: Callable[[float], bool], *, name: str, expected: str,
                 hint: str | tuple[str, str], reference: float, success: str = ""):
    """An *explore* exercise: a number the student found; `is_right(value)` decides.

    `expected` says in words what the number should satisfy (shown when it is not). Returns
    the answer when right, else `reference`.
    """
    def judge(answer):
        value, problem = as_number(answer)
        if problem:
            return f"{problem} ({expected})"
        if is_right(value):
            return None
        return f"{fmt(value, 4, guard=False)} does not satisfy it yet ({expected})"

    return check_answer(answer, judge, name=name, reference=reference, hint=hint,
                        success=success, todo="not attempted yet; put your number in the cell "
                                              "above.")


def _ordinal(i: int) -> str:
    words = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
    return words[i] if i < len(words) else f"{i + 1}th"


def _kind(x) -> str:
    """A short description of what a student passed, for a ✗ line."""
    if x is None:
        return "None"
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

"""Exercise checks: instant, friendly, offline feedback for the notebooks' exercises.

A check never raises. It prints one line and returns something the cells below can use:

- `✓ ...` the answer is right; the check returns the student's answer;
- `✗ ...` not yet: what is wrong, and a hint that does not give the answer away; the check
  returns the reference answer, so the rest of the notebook still runs;
- `○ ...` not attempted (the placeholder `...` is still there, or the function still returns
  None); the check returns the reference answer.

Three kinds of exercise use three checks: `check_prediction` (a guess written down before the
cell that measures), `check_function` (a few lines implemented, compared with attnlab's version
on inputs the check makes) and `check_number` (a number found by exploring). The per-notebook
modules (`attnlab.exercises.ex01`, ...) hold the questions' references and hints and call these.

Hostile answers are expected: None, a string, an int where a tensor belongs, the wrong shape or
dtype, NaN, a function that raises or never returns. Each gets a `✗` that names what was
expected. Printed numbers are rounded (`attnlab.report.fmt`) so the line is the same on any CPU.
"""
from __future__ import annotations

import math
import numbers
import signal
import threading
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..report import fmt

RIGHT, WRONG, TODO = "✓", "✗", "○"
TIME_LIMIT_S = 2.0  # a student's function that takes longer than this is stopped; read at call
#                    time, so a test may set it lower (tests/conftest.py does)


class _TimeLimit(Exception):
    pass


def say(mark: str, message: str, hint: str | None = None) -> None:
    """Print the one feedback line: mark, message and (for ✗) the hint."""
    line = f"{mark} {message}"
    if hint and mark == WRONG:
        line += f" Hint: {hint}"
    print(line)


def untouched(answer) -> bool:
    """True while the placeholder is still in place (`...`) or nothing was given (None)."""
    return answer is ... or answer is None


def call_safely(fn: Callable, *args, seconds: float | None = None):
    """Call a student's `fn(*args)` with a time limit; returns (value, problem or None).

    `seconds` defaults to `TIME_LIMIT_S` as it is when called. The limit uses SIGALRM, so it
    applies in the main thread (where notebook cells run); it interrupts a Python loop, and an
    operation inside PyTorch as soon as it returns.
    """
    if seconds is None:
        seconds = TIME_LIMIT_S
    in_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if in_main:
        def alarm(signum, frame):
            raise _TimeLimit
        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args), None
    except _TimeLimit:
        return None, f"your function did not finish within {seconds:g} s (an endless loop?)"
    except Exception as error:  # the student's code: any exception is feedback, not a crash
        text = str(error).splitlines()[0][:160] if str(error) else ""
        return None, f"your function raised {type(error).__name__}" + (f": {text}" if text else "")
    finally:
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


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


def check_function(fn, reference: Callable, inputs: Sequence[tuple], *, name: str, hint: str,
                   atol: float = 1e-5, rtol: float = 1e-4, seconds: float | None = None,
                   compare: Callable | None = None, success: str | None = None):
    """An *implement* exercise: `fn` against `reference` on each argument tuple in `inputs`.

    Each call of `fn` is stopped after `seconds` (None: `TIME_LIMIT_S` as it is when called).
    `compare(got, expected) -> problem or None` replaces the tensor comparison where an exercise
    can name its typical mistakes (a transposed mask, say); `success` replaces the ✓ line's text.
    Returns `fn` when it matches on every input, else `reference`, so later cells can always
    call what is returned.
    """
    if fn is ... or fn is None:
        say(TODO, f"{name}: not attempted yet; write your function above and run the cell again.")
        return reference
    if not callable(fn):
        say(WRONG, f"{name}: expected a function, got {_kind(fn)}.", hint)
        return reference
    for i, args in enumerate(inputs):
        got, problem = call_safely(fn, *args, seconds=seconds)
        if problem is None and got is None and i == 0:
            say(TODO, f"{name}: not attempted yet (your function returns None); "
                      "replace the `...` and run the cell again.")
            return reference
        expected = reference(*args)
        if problem is None:
            if isinstance(expected, tuple):
                if not isinstance(got, tuple) or len(got) != len(expected):
                    problem = (f"your function should return a tuple of {len(expected)} tensors, "
                               f"got {_kind(got)}")
                else:
                    parts = zip(got, expected, ("first", "second", "third"))
                    problem = next((p for g, e, part in parts
                                    if (p := tensor_problem(g, e, name=f"the {part} result",
                                                            atol=atol, rtol=rtol))), None)
            elif compare is not None:
                problem = compare(got, expected)
            else:
                problem = tensor_problem(got, expected, atol=atol, rtol=rtol)
        if problem is not None:
            shapes = ", ".join(str(tuple(a.shape)) if isinstance(a, torch.Tensor) else repr(a)
                               for a in args)
            say(WRONG, f"{name}: on inputs of shapes {shapes}, {problem}.", hint)
            return reference
    success = success or f"matches attnlab's version on {len(inputs)} random inputs"
    say(RIGHT, f"{name}: {success}.")
    return fn


def check_prediction(guess, measured, *, name: str, tolerance: float, digits: int = 3,
                     lesson: str = ""):
    """A *predict* exercise: the guess written down before the cell that measured `measured`.

    `guess` and `measured` are numbers or equal-length sequences of numbers; a guess within
    `tolerance` (absolute, per entry) is right. Either way the line shows both, since a wrong
    prediction that is then explained is the point of the exercise. Returns the guess when
    right, else the measured value.
    """
    many = isinstance(measured, (Sequence, np.ndarray, torch.Tensor))
    if many:
        values = measured.tolist() if hasattr(measured, "tolist") else measured
        measured_list = [float(m) for m in values]
    else:
        measured_list = [float(measured)]
    if untouched(guess):
        say(TODO, f"{name}: no prediction yet; "
                  "write your guess in the cell above before running.")
        return measured
    if many:
        if isinstance(guess, torch.Tensor) or isinstance(guess, np.ndarray):
            guess = guess.tolist()
        if isinstance(guess, (str, bytes)) or not isinstance(guess, Sequence):
            say(WRONG,
                f"{name}: expected a list of {len(measured_list)} numbers, got {_kind(guess)}.",
                "write e.g. [0.1, 0.2, 0.7].")
            return measured
        if len(guess) != len(measured_list):
            say(WRONG, f"{name}: expected {len(measured_list)} numbers, got {len(guess)}.",
                "one number per measured value.")
            return measured
        guesses = []
        for g in guess:
            value, problem = as_number(g, "each guess")
            if problem:
                say(WRONG, f"{name}: {problem}.", "write plain numbers such as 0.25.")
                return measured
            guesses.append(value)
    else:
        value, problem = as_number(guess, "your guess")
        if problem:
            say(WRONG, f"{name}: {problem}.", "write a plain number such as 0.25.")
            return measured
        guesses = [value]
    shown_guess = ", ".join(fmt(g, digits, guard=False) for g in guesses)
    shown_measured = ", ".join(fmt(m, digits, guard=False) for m in measured_list)
    off = max(abs(g - m) for g, m in zip(guesses, measured_list))
    if off <= tolerance:
        say(RIGHT,
            f"{name}: you predicted {shown_guess}; measured {shown_measured}. {lesson}".rstrip())
        return guess
    say(WRONG, f"{name}: you predicted {shown_guess}; measured {shown_measured} "
               f"(more than {tolerance:g} apart).",
        lesson or "compare with the measurement and see why.")
    return measured


def check_number(answer, is_right: Callable[[float], bool], *, name: str, expected: str, hint: str,
                 reference: float, success: str = ""):
    """An *explore* exercise: a number the student found; `is_right(value)` decides.

    `expected` says in words what the number should satisfy (shown when it is not a number).
    Returns the answer when right, else `reference`.
    """
    if untouched(answer):
        say(TODO, f"{name}: not attempted yet; put your number in the cell above.")
        return reference
    value, problem = as_number(answer)
    if problem:
        say(WRONG, f"{name}: {problem} ({expected}).", hint)
        return reference
    try:
        ok = bool(is_right(value))
    except Exception:  # a check of ours must never raise at the student
        ok = False
    if ok:
        say(RIGHT, f"{name}: {success}".rstrip() if success else f"{name}: right.")
        return answer
    say(WRONG, f"{name}: {fmt(value, 4, guard=False)} does not satisfy it yet ({expected}).", hint)
    return reference


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
    return f"a {type(x).__name__}"

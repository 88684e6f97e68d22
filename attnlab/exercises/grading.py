"""The one grading rule of the series, for `make grade` and nbgrader's locked test cells alike.

A check's printed line is feedback for the student, and a kernel's state is the student's to
change: neither can be a grade (a cell can print `✓ attention: right.`, or write the dict the
old `require` read). So a grader asks again, itself, after the check cell ran:
`judge(name, answer, args)` calls the check `name` ("ex01.attention") on the answer the
student's variable holds, in grading mode (`attnlab.exercises._grading`):

- nothing is printed and no kernel state is written or read as a verdict: the check's line
  comes back as (mark, check name, message);
- an *implement* check draws its inputs from the grader's secret seed (`Implement`'s
  `inputs(seed=...)`), so the student's function must compute numbers it has not seen; its other
  arguments are the ones the check registered (`@exercise(args=...)`), not the kernel's;
- the reference is computed first, then refuses to run while the student's function is called
  (`refusing`): attnlab's function, or a thin wrapper around it, earns no point;
- an *explore* answer is judged by the check's own rule on the values the notebook passed;
- a *prediction* earns its point when a readable guess is there at the check's cell and was not
  written after the check had shown the measurement.

`report` (what `make grade` appends after each check cell, with a nonce only the grader knows)
publishes the verdict as display data the grader reads; `require` (nbgrader's locked test
cells) raises unless it is ✓ or ✎.

What it does not stop: the judge runs inside the student's kernel, so a student who rewrites
attnlab's checks, torch or this module in that kernel, or who reads the seed from the stack of
the call that grades them, can still forge a grade. The bar is that printing a check's line,
writing kernel state, or handing in attnlab's own function scores nothing.
"""
from __future__ import annotations

import os
import secrets

from .. import exercises as _engine  # `_engine._grading`: where a judged check's line goes
from . import PREDICTED, RIGHT, TODO, WRONG, checks, untouched

MIME = "application/x-attnlab-grade+json"  # the display data `report` publishes
GRADED = (RIGHT, PREDICTED)  # the marks that earn the point


class _Grading:
    """Where a check's verdict goes while it is judged: its lines, not the screen."""

    def __init__(self, seed: int):
        self.seed = seed
        self.lines: list[tuple[str, str, str]] = []


def secret_seed() -> int:
    """The seed of the graded inputs: `ATTNLAB_GRADING_SEED` where the grader set it, else
    a fresh random one (never stored in a notebook)."""
    given = os.environ.get("ATTNLAB_GRADING_SEED", "")
    return int(given) if given.isdigit() else secrets.randbits(31)


def judge(name: str, answer, args=lambda: (), *,
          seed: int | None = None) -> tuple[str, str, str]:
    """(mark, check name, message) for the answer to the check `name` ("exNN.function").

    `answer` and `args` are functions of no argument (`lambda: my_attention`), called here, so
    that an answer that does not exist (a deleted variable) is not attempted rather than an
    error. An implement check gets its registered arguments, not `args`. Prints nothing.
    """
    check = checks().get(name)
    if check is None:
        return WRONG, name, f"no check named {name!r}"
    seed = secret_seed() if seed is None else seed
    try:
        answer = answer()
    except Exception as error:  # noqa: BLE001 - the student's answer is missing or broken
        return TODO, _shown(check, name, seed), \
            f"no answer to grade ({type(error).__name__}: {error})"[:200]
    if untouched(answer):  # the placeholder: not attempted, whatever else is missing
        return _called(check, name, seed, ..., check.exercise.args)
    return _called(check, name, seed, answer,
                   check.exercise.args if check.exercise.kind == "implement" else args)


def _called(check, name: str, seed: int, answer, args) -> tuple[str, str, str]:
    """The first line of `check(answer, *args())` in grading mode."""
    try:
        args = tuple(args())
    except Exception as error:  # noqa: BLE001 - the notebook's measurement is missing
        return WRONG, _shown(check, name, seed), \
            f"the values this check needs are missing ({type(error).__name__})"
    state = _Grading(seed)
    outer, _engine._grading = _engine._grading, state
    try:
        check(answer, *args)
    except Exception as error:  # noqa: BLE001 - a check never raises; if it does, no point
        state.lines.append((WRONG, name, f"the check failed ({type(error).__name__})"))
    finally:
        _engine._grading = outer
    if not state.lines:
        return WRONG, name, "the check gave no verdict"
    return state.lines[0]  # the check's own line; any check the student's code ran comes later


def _shown(check, name: str, seed: int) -> str:
    """The name the check shows (its lines' name), for a row that joins the others."""
    return _called(check, name, seed, ..., check.exercise.args)[1]


def require(name: str, answer, args=lambda: ()) -> None:
    """nbgrader's locked test cell: raise AssertionError unless `judge` gives ✓ (or ✎)."""
    mark, shown, message = judge(name, answer, args)
    if mark not in GRADED:
        raise AssertionError(f"{mark} {shown}: {message}")


def report(nonce: str, name: str, answer, args=lambda: (), *, seed: int | None = None) -> None:
    """`make grade`'s cell after a check cell: `judge`, published as display data with the
    grader's `nonce`, which the grader alone reads (a printed line is not read)."""
    from IPython.display import publish_display_data  # noqa: PLC0415 - only in a kernel

    mark, shown, message = judge(name, answer, args, seed=seed)
    publish_display_data({MIME: {"nonce": nonce, "check": name, "mark": mark, "name": shown,
                                 "message": message}})

"""The one grading rule of the series, for `make grade` and nbgrader's locked test cells alike.

A check's printed line is feedback for the student, and a kernel's state is the student's to
change: neither can be a grade (a cell can print `✓ attention: right.`, or write the dict the
old `require` read). So a grader asks again, itself, after the check cell ran, in grading mode
(`attnlab.exercises._grading`): nothing is printed and no kernel state is written or read as a
verdict; the check's line comes back as (mark, check name, message).

- an *implement* check draws its inputs from the grader's secret seed (`Implement`'s
  `inputs(seed=...)`), so the student's function must compute numbers it has not seen; its other
  arguments are the ones the check registered (`@exercise(args=...)`), not the kernel's;
- the reference is computed first, then refuses to run while the student's function is called
  (`refusing`): attnlab's function, or a thin wrapper around it, earns no point;
- an *explore* answer is judged by the check's own rule on the values the notebook passed;
- a *prediction* earns its point when a readable guess is there at the check's cell and was not
  written after the check had shown the measurement.

Where the judging runs is what makes a grader trustworthy. `make grade`
(`attnlab.classroom.grade`) is the grader to trust: it judges every check in its own process,
which no cell of the notebook can reach. For a declared implement check (an `Implement`) it
draws the seed, makes the inputs and computes the references there (`prepare`); the kernel gets
the inputs as data (tensors and numbers, a module as its weights, read with
`torch.load(weights_only=True)`) and only calls the student's function on them, under the same
time limits and refusals (`answer`, `Implement.calls`); what it hands back is read as data only
(tensors, arrays, numbers, strings, and tuples, lists, sets and dicts of them; anything else
comes back as its description, `Opaque`) and compared, and the named mistake found, in the
grader's process (`returned`, `Implement.judged`). The three hand-written implement checks take
the same road through the `split` each carries (`split` finds it): ex02's `multi_head_module`
(the grader ships the reference's weights and the inputs; the kernel builds the student's class,
loads the weights and runs its forward; the results are compared here), ex03's `uniform_scores`,
whose verdict depends only on the scores its function returns for the scores the hook sees
(shipped; the weights those scores give in the model are judged here), and ex09's `decode_step`
(the kernel runs the student's step after step on a cache it keeps there and ships each step's
output and what the step did to the cache; each output is compared with recomputing the prefix
here).

For an explore or predict check the kernel ships, as the same data, the answer, the values the
check is given (through the check's `measure` where they are not data, such as ex06's model; a
function among them, such as ex11's `copy_loss_without`, as the calls the check makes of it) and
what the kernel remembers of its predictions (which guesses were there before the measurement
was shown) (`measure`); the check's own rule runs on them in the grader's process (`measured`),
and a value that is not data there gets ✗. What the kernel says itself can only be ✗ or ○. So
rewriting attnlab, torch or this module in the kernel, printing, or writing kernel state earns
nothing there: only results that are right on inputs the kernel had not seen, and values the
check's rule accepts, do. What the kernel still holds is where those come from: the refusal runs
in the kernel, so attnlab code it does not cover (a copy of a refused function's code, a helper
the reference calls) is the route left; and the values an explore or predict check is given are
the notebook's own measurements, computed there (as they always were), as is the record of which
guesses came before a measurement.

In the kernel, `judge` judges a check whole (`report` publishes its line as display data tagged
with the grader's nonce): `make grade` uses it only for a hand-written implement check without a
split (none at present; `out_of_kernel` tells them apart). nbgrader's locked test cells call
`require`, which judges in the kernel the cell runs in; the course's nbgrader_config.py has
nbgrader's autograde run `make grade`'s judge in nbgrader's own process in their place
(`attnlab.classroom.nbgrade`), so nbgrader's points do not come from the kernel either. Where
`judge` or `require` does run in a kernel (a student's own assert, nbgrader run without that
config), a student who rewrites attnlab, torch or this module there, or reads the seed off the
grading call's stack, can still forge a verdict; the bar there is that printing a check's line,
writing kernel state, or handing in attnlab's own function scores nothing.
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import exercises as _engine  # `_engine._grading`: where a judged check's line goes
from . import (
    PREDICTED,
    RIGHT,
    TODO,
    WRONG,
    Implement,
    Opaque,
    Verdict,
    _kind,
    call_safely,
    checks,
    untouched,
)

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
        return TODO, _shown(check, name, seed), _no_answer(error)
    if untouched(answer):  # the placeholder: not attempted, whatever else is missing
        return _called(check, name, seed, ..., check.exercise.args)
    return _called(check, name, seed, answer,
                   check.exercise.args if check.exercise.kind == "implement" else args)


def _no_answer(error: BaseException | str) -> str:
    described = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return f"no answer to grade ({described})"[:200]


def _called(check, name: str, seed: int, answer, args) -> tuple[str, str, str]:
    """The first line of `check(answer, *args())` in grading mode."""
    try:
        args = tuple(args())
    except Exception as error:  # noqa: BLE001 - the notebook's measurement is missing
        return WRONG, _shown(check, name, seed), \
            f"the values this check needs are missing ({type(error).__name__})"
    return _graded(name, seed, lambda: check(answer, *args))


def _graded(name: str, seed: int, run: Callable[[], object]) -> tuple[str, str, str]:
    """The first line `run()` gives in grading mode: the check's own line (any check the
    student's code ran comes later)."""
    state = _Grading(seed)
    outer, _engine._grading = _engine._grading, state
    try:
        run()
    except Exception as error:  # noqa: BLE001 - a check never raises; if it does, no point
        state.lines.append((WRONG, name, f"the check failed ({type(error).__name__})"))
    finally:
        _engine._grading = outer
    if not state.lines:
        return WRONG, name, "the check gave no verdict"
    return state.lines[0]


def _shown(check, name: str, seed: int) -> str:
    """The name the check shows (its lines' name), for a row that joins the others."""
    return _called(check, name, seed, ..., check.exercise.args)[1]


def require(name: str, answer, args=lambda: ()) -> None:
    """nbgrader's locked test cell: raise AssertionError unless `judge` gives ✓ (or ✎). Run in
    the student's kernel it is only as strong as the in-kernel judge, so the course's nbgrader
    config has autograde judge the cell in nbgrader's own process instead
    (`attnlab.classroom.nbgrade`), and score that verdict."""
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


# --- `make grade`: an implement check judged in the grader's own process -------------------------

def out_of_kernel(name: str) -> bool:
    """Whether `make grade` judges the check `name` in its own process: every implement check
    with a `split` (`prepare`, `answer`, `returned`) and every explore and predict check
    (`measure`, `measured`). The others (a hand-written implement check without a split) are
    judged in the kernel."""
    check = checks().get(name)
    return split(name) is not None or (
        check is not None and check.exercise.kind in ("explore", "predict"))


def split(name: str):
    """The two halves of the implement check `name` that `make grade` runs (`made`, `expected`,
    `calls` in the kernel, `judged` here, `name`, `seconds_for`): an `Implement` itself, or
    the `split` a hand-written check carries (ex03's `uniform_scores`); else None."""
    check = checks().get(name)
    return check if isinstance(check, Implement) else getattr(check, "split", None)


def shipped_values(name: str) -> bool:
    """Whether `make grade` judges the check `name` from values the kernel ships (`measure`):
    an explore or predict check, whose answer is a value, not a function to call."""
    return out_of_kernel(name) and split(name) is None


@dataclass
class Prepared:
    """What the grader's process keeps of one implement check while the kernel runs: the
    inputs it made and the reference's results on them."""
    name: str
    made: list[tuple]
    expected: list


def prepare(name: str, seed: int, inputs: Path) -> Prepared:
    """In the grader's process, before the notebook runs: the inputs of the implement check
    `name` drawn from `seed` (which never leaves this process), the reference's results on
    them, and the inputs written to the file `inputs` as data for the kernel: tensors and plain
    values as they are, a module as its weights (`state_dict`)."""
    check = split(name)
    made = list(check.made(*checks()[name].exercise.args(), seed=seed))
    expected = check.expected(made)
    torch.save([[_shipped(a) for a in args] for args in made], inputs)
    return Prepared(name, made, expected)


def _shipped(a) -> tuple:
    if isinstance(a, torch.Tensor):
        return ("tensor", a.detach().clone().requires_grad_(a.requires_grad))
    if isinstance(a, torch.nn.Module):
        return ("module", a.state_dict())
    if a is None or type(a) in (bool, int, float, str):
        return ("value", a)
    raise TypeError(f"an input of {_kind(a)} cannot be sent to the kernel as data")


def _rebuilt(shipped: list, name: str) -> list[tuple]:
    """The inputs `prepare` wrote, in the kernel. A module is the one the check's inputs make
    here (its kind and sizes are public, and so are any hooks that watch it), with the
    grader's weights loaded into it."""
    check, public, made = split(name), None, []
    for i, args in enumerate(shipped):
        row = []
        for j, (kind, value) in enumerate(args):
            if kind == "module":
                public = public or check.made(*checks()[name].exercise.args())
                public[i][j].load_state_dict(value)
                value = public[i][j]
            row.append(value)
        made.append(tuple(row))
    return made


def answer(name: str, answer, inputs: str, outputs: str) -> None:
    """`make grade`'s cell after an implement check's cell, in the student's kernel: the
    student's function (`answer()`) called on the inputs in the file `inputs`
    (`Implement.calls`), and what came back written to the file `outputs` as data. It judges
    nothing: the grader's process reads `outputs` (`returned`)."""
    try:
        record = _answered(name, answer, inputs)
    except Exception as error:  # noqa: BLE001 - this half failed here (or a cell broke it)
        record = {"error": f"{type(error).__name__}: {error}"[:200]}
    torch.save(record, outputs)


def _answered(name: str, answer, inputs: str) -> dict:
    check = split(name)
    try:
        given = answer()
    except Exception as error:  # noqa: BLE001 - the student's answer is missing or broken
        return {"missing": f"{type(error).__name__}: {error}"}
    if untouched(given):
        return {"untouched": True}
    made = _rebuilt(torch.load(inputs, weights_only=True), name)
    done, crash = call_safely(check.calls, given, made, seconds=check.seconds_for(len(made)),
                              who="checking your answer")
    if crash is not None or isinstance(done, str):
        return {"verdict": [WRONG, crash or done]}
    if isinstance(done, Verdict):
        return {"verdict": [done.mark, done.text]}
    return {"calls": [[_plain(got), [_plain(c) if isinstance(c, torch.Tensor) else None
                                     for c in copies],
                       problem, [[j, attr, _plain(value)] for (j, attr), value in record.items()]]
                      for got, copies, problem, record in done]}


def _plain(x):
    """`x`, a value the student's code made, as data that `torch.load(weights_only=True)` reads
    back, tagged so that `_value` rebuilds it as it was; what is not a tensor, an array, a
    plain number or string, None, or a tuple, list, set or dict of them, only as its
    description."""
    if isinstance(x, torch.Tensor):
        return ("tensor", x.detach().as_subclass(torch.Tensor))
    if isinstance(x, np.ndarray | np.generic) and x.dtype.kind in "biufc":
        return ("array" if isinstance(x, np.ndarray) else "scalar",
                torch.from_numpy(np.array(x, ndmin=1, copy=True)))
    if x is None or type(x) in (bool, int, float, complex, str):
        return ("value", x)
    if isinstance(x, tuple | list):
        return ("tuple" if isinstance(x, tuple) else "list", [_plain(item) for item in x])
    if type(x) in (set, frozenset):
        return ("set", [_plain(item) for item in x])
    if type(x) is dict:
        return ("dict", [[_plain(key), _plain(value)] for key, value in x.items()])
    return ("other", _kind(x))


def _value(data):
    """The value `_plain` made, checked as it is read: anything else raises ValueError."""
    kind, value = data
    if kind == "tensor" and type(value) is torch.Tensor:
        return value
    if kind in ("array", "scalar") and type(value) is torch.Tensor:
        return value.numpy() if kind == "array" else value.numpy()[0]
    if kind == "value" and (value is None or type(value) in (bool, int, float, complex, str)):
        return value
    if kind in ("tuple", "list") and type(value) is list:
        items = [_value(item) for item in value]
        return tuple(items) if kind == "tuple" else items
    if kind == "set" and type(value) is list:
        return {_value(item) for item in value}  # an item that cannot be in a set: TypeError
    if kind == "dict" and type(value) is list and all(type(p) is list and len(p) == 2
                                                      for p in value):
        return {_value(key): _value(item) for key, item in value}
    if kind == "other" and type(value) is str:
        return Opaque(value[:200])
    raise ValueError(f"not a value the grader reads back ({kind!r})")


def returned(prepared: Prepared, outputs: Path) -> tuple[str, str, str]:
    """In the grader's process, right after the grading cell ran: (mark, check name, message)
    for what the kernel wrote to `outputs` (`answer`), judged here against `prepared`. The file
    is read as data only (`torch.load(weights_only=True)`); a file that is missing or that this
    grader cannot read gets ✗."""
    check = split(prepared.name)
    if not Path(outputs).is_file():
        return WRONG, check.name, "your notebook handed back nothing for this check"
    try:
        record = torch.load(outputs, weights_only=True)
        done = _done(record, prepared.made)
    except Exception as error:  # noqa: BLE001 - whatever the kernel wrote: no point
        return WRONG, check.name, ("the grader could not read what your notebook handed back "
                                   f"({type(error).__name__})")
    if isinstance(done, tuple):  # a line the kernel's record gives without judging
        return done[0], check.name, done[1]
    return _graded(check.name, 0,
                   lambda: check.judged(done, prepared.made, prepared.expected))


def _done(record: dict, made: list[tuple]):
    """The kernel's `record` as `Implement.judged` takes it, or the (mark, message) it gives at
    once (the grading cell failed, no answer); ValueError where it is not what `answer` writes,
    or claims a mark only the grader gives."""
    if set(record) == {"error"}:
        return WRONG, f"the grading cell failed in your notebook ({record['error']})"[:200]
    if set(record) == {"missing"}:
        return TODO, _no_answer(str(record["missing"]))
    if set(record) == {"untouched"}:
        return ...
    if set(record) == {"verdict"}:
        mark, text = record["verdict"]
        if mark not in (WRONG, TODO) or type(text) is not str:
            raise ValueError("a verdict the kernel cannot give")
        return Verdict(mark, text)
    if set(record) != {"calls"} or len(record["calls"]) > len(made):
        raise ValueError("not a record of calls")
    done = []
    for args, (got, after, problem, watched) in zip(made, record["calls"]):
        copies = tuple(_value(c) if isinstance(a, torch.Tensor) else a
                       for a, c in zip(args, after, strict=True))
        if any(isinstance(a, torch.Tensor) and type(c) is not torch.Tensor
               for a, c in zip(args, copies)) or not (problem is None or type(problem) is str):
            raise ValueError("not a call's record")
        done.append((_value(got), copies, problem,
                     {(int(j), str(attr)): list(_value(value)) for j, attr, value in watched}))
    return done


# --- `make grade`: an explore or predict check judged in the grader's own process -----------------

def measure(name: str, answer, args, outputs: str) -> None:
    """`make grade`'s cell after an explore or predict check's cell, in the student's kernel:
    the answer (`answer()`) and the values the check is given (`args()`, through the check's
    `measure` where it has one), written to the file `outputs` as data (`_plain`), with each
    function among them as the calls the check makes of it (`_Recording`) and what this
    kernel remembers of its predictions (whether a measurement was shown before a guess). It
    judges nothing: the grader's process runs the check on that data (`measured`)."""
    try:
        record = _measuring(name, answer, args)
    except Exception as error:  # noqa: BLE001 - this half failed here (or a cell broke it)
        record = {"error": f"{type(error).__name__}: {error}"[:200]}
    torch.save(record, outputs)


def _measuring(name: str, answer, args) -> dict:
    check = checks()[name]
    try:
        given = answer()
    except Exception as error:  # noqa: BLE001 - the student's answer is missing or broken
        return {"missing": f"{type(error).__name__}: {error}"}
    remembered = {str(key): [bool(state.shown), sorted(map(str, state.before))]
                  for key, state in _engine._predictions.items()}
    if untouched(given):  # not attempted: `judge` reads none of the notebook's values
        return {"answer": _plain(None), "args": [], "predictions": remembered}
    try:
        values = tuple(args())
        if check.exercise.measure is not None:
            values = tuple(check.exercise.measure(*values))
    except Exception as error:  # noqa: BLE001 - the notebook's measurement is missing
        return {"absent": type(error).__name__}
    values = tuple(_Recording(v) if _function(v) else v for v in values)
    if any(isinstance(v, _Recording) for v in values):  # the calls the check makes of them
        judge(name, lambda: given, lambda: values)
    return {"answer": _plain(given),
            "args": [["calls", [[_plain(a), _plain(r)] for a, r in v.calls]]
                     if isinstance(v, _Recording) else ["data", _plain(v)] for v in values],
            "predictions": remembered}


def _function(v) -> bool:
    """Whether the value `v` a check is given is a function of the notebook's (a measurement
    the check makes itself, such as ex11's `copy_loss_without`)."""
    return callable(v) and not isinstance(v, torch.Tensor | torch.nn.Module | type)


class _Recording:
    """A function of the notebook's as a check is given it in the kernel, recording the calls
    the check makes, and their results, to ship them."""

    def __init__(self, fn: Callable):
        self.fn, self.calls = fn, []

    def __call__(self, *args):
        result = self.fn(*args)
        self.calls.append((args, result))
        return result


class _Replay:
    """In the grader's process, the function a check was given in the kernel: the results
    it gave there, by arguments. A call it did not record raises LookupError."""

    def __init__(self, calls: list):
        self.calls = {repr(tuple(args)): result for args, result in calls}

    def __call__(self, *args):
        key = repr(tuple(args))
        if key not in self.calls:
            raise LookupError("a value this check needs was not measured in your notebook")
        return self.calls[key]


def measured(name: str, outputs: Path, seed: int) -> tuple[str, str, str]:
    """In the grader's process, right after the grading cell ran: (mark, check name, message)
    for the explore or predict check `name`, the check's own rule run here (`judge`) on what
    the kernel wrote to `outputs` (`measure`), read as data only. A file that is missing or
    that this grader cannot read, or values that are not data, get ✗."""
    check = checks()[name]
    if not Path(outputs).is_file():
        return WRONG, _shown(check, name, seed), "your notebook handed back nothing for this check"
    try:
        record = torch.load(outputs, weights_only=True)
        done = _explored(record)
    except Exception as error:  # noqa: BLE001 - whatever the kernel wrote: no point
        return WRONG, _shown(check, name, seed), (
            "the grader could not read what your notebook handed back "
            f"({type(error).__name__})")
    if len(done) == 2:  # a line the kernel's record gives without judging
        return done[0], _shown(check, name, seed), done[1]
    given, values, shown = done
    opaque = next((v for v in values if isinstance(v, Opaque)), None)
    if opaque is not None:
        return WRONG, _shown(check, name, seed), (
            f"the values this check needs could not be read back as data ({opaque.kind})")
    kept = dict(_engine._predictions)  # the kernel's, for this judgement only
    _engine._predictions.clear()
    _engine._predictions.update(shown)
    try:
        return judge(name, lambda: given, lambda: values, seed=seed)
    finally:
        _engine._predictions.clear()
        _engine._predictions.update(kept)


def _explored(record: dict) -> tuple:
    """The kernel's `record` as (answer, values, predictions' state), or the (mark, message)
    it gives at once; ValueError where it is not what `measure` writes."""
    if set(record) == {"error"}:
        return WRONG, f"the grading cell failed in your notebook ({record['error']})"[:200]
    if set(record) == {"missing"}:
        return TODO, _no_answer(str(record["missing"]))
    if set(record) == {"absent"}:
        return WRONG, f"the values this check needs are missing ({str(record['absent'])[:60]})"
    if set(record) != {"answer", "args", "predictions"} or type(record["args"]) is not list:
        raise ValueError("not a record of values")
    values = []
    for kind, value in record["args"]:
        if kind == "data":
            values.append(_value(value))
        elif kind == "calls" and type(value) is list:
            values.append(_Replay([(_value(a), _value(r)) for a, r in value]))
        else:
            raise ValueError("not a value the grader reads back")
    shown = {}
    for key, (was_shown, before) in record["predictions"].items():
        if type(key) is not str or type(was_shown) is not bool or \
                not all(type(b) is str for b in before):
            raise ValueError("not what a kernel remembers of a prediction")
        shown[key] = _engine._Shown(was_shown, set(before))
    return _value(record["answer"]), tuple(values), shown

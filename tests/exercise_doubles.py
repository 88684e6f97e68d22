"""Shared stand-ins and helpers for the exercise-check tests (tests/test_exercises.py and
tests/test_exNN.py).

Hostile "student answers" that every check must turn into one feedback line instead of a
traceback or a hang, whatever arguments the exercise passes:

- `loops_forever` never returns (the check's time limit must stop it; tests/conftest.py sets
  `attnlab.exercises.TIME_LIMIT_S` to 0.3 s so that this takes 0.3 s, not 2 s);
- `raises` raises ZeroDivisionError("oops") (the ✗ line names it);
- `placeholder` is the notebook's untouched stub, a body of `...` that returns None (○).

`one_line(capsys)` reads what a check printed and asserts it is exactly one feedback: one line,
or for ✗ a first line and indented short lines after it; it returns (mark, text), mark being the
first character (✓, ✗, ○ or ✎) and text the lines joined again. `expect(capsys, check, answers,
mark, words, *args)` asserts that each answer gets such a line with `mark` and `words` (and, for
✗, a hint); a failure names the case by its `words`, so one test can walk a whole table of
typical mistakes and still say which one broke.

Test files import these with `from exercise_doubles import ...`: pytest's default `prepend`
import mode puts tests/ (the rootdir of these files, which has no __init__.py) on sys.path.
"""
from attnlab.exercises import PREDICTED, RIGHT, TODO, WIDTH, WRONG


def loops_forever(*args):
    while True:
        pass


def raises(*args):
    raise ZeroDivisionError("oops")


def placeholder(*args):
    ...  # your code here


def forgot_return(*args):
    """Written, but without a `return`."""
    result = args[0] if args else None  # noqa: F841 - the mistake: computed, never returned


def one_line(capsys) -> tuple[str, str]:
    """(mark, text) of the one feedback a check printed, its lines joined again; fails unless
    exactly one: a line that starts with a mark, and for a ✗ only indented lines after it, each
    at most WIDTH characters (a ✓, ○ or ✎ is a single line)."""
    lines = capsys.readouterr().out.splitlines()
    assert lines and lines[0][:1] in {RIGHT, WRONG, TODO, PREDICTED}, lines
    if lines[0][0] != WRONG:
        assert len(lines) == 1, lines  # exactly one feedback line
        return lines[0][0], lines[0]
    assert all(line.startswith("  ") and not line.startswith("   ") for line in lines[1:]), lines
    assert all(len(line) <= WIDTH for line in lines if " " in line.strip()), lines
    return WRONG, " ".join(line.strip() for line in lines)


def expect(capsys, check, answers, mark: str, words: str, *args) -> list:
    """Call `check(answer, *args)` for each answer: each must print one line that starts with
    `mark` and holds `words`; a ✗ line has a hint. Returns what the check returned for each."""
    returned = []
    for answer in answers:
        got = check(answer, *args)
        sign, line = one_line(capsys)
        assert sign == mark and words in line, (words, answer, line)
        if sign == "✗":
            assert " Hint: " in line, (words, line)
        returned.append(got)
    return returned

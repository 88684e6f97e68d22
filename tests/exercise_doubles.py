"""Shared stand-ins for the exercise-check tests (tests/test_exercises.py, tests/test_exNN.py).

Hostile "student answers" that every implement-check must turn into one feedback line instead
of a traceback or a hang, whatever arguments the exercise passes:

- `loops_forever` never returns (the check's time limit must stop it; tests/conftest.py sets
  `attnlab.exercises.TIME_LIMIT_S` to 0.3 s so that this takes 0.3 s, not 2 s);
- `raises` raises ZeroDivisionError("oops") (the ✗ line names it);
- `placeholder` is the notebook's untouched stub, a body of `...` that returns None (○).

`one_line(capsys)` reads what a check printed and asserts it is exactly one line; it returns
(mark, line), mark being the line's first character: ✓, ✗ or ○.

Test files import these with `from exercise_doubles import ...`: pytest's default `prepend`
import mode puts tests/ (the rootdir of these files, which has no __init__.py) on sys.path.
"""


def loops_forever(*args):
    while True:
        pass


def raises(*args):
    raise ZeroDivisionError("oops")


def placeholder(*args):
    ...  # your code here


def one_line(capsys) -> tuple[str, str]:
    """(mark, line) of the one feedback line a check printed; fails unless exactly one."""
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines  # exactly one feedback line
    return lines[0][0], lines[0]

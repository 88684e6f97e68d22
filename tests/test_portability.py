"""Every student's machine: the checks, `make grade`, `make nbgrader`, `make release` and the
lessons' code work on Windows and macOS as on Linux, and whatever the locale.

Two ways. The source is read for what breaks there before anything runs: a POSIX-only module
imported at a module's top (Windows cannot even import the module), and text read or written
without saying UTF-8 (Windows' cp1252, or an ASCII locale, garbles or refuses ✓). And a fresh
Python runs as on Windows under an ASCII locale (`helpers.ascii_windows_like`: no `resource`,
no process groups, no SIGALRM, no UTF-8 mode): the checks, with a student's endless loop, and
the classroom tools' imports. The grader, and the release and nbgrader exports, run end to end
that way in tests/test_grade.py (make test-all: they take a minute).
"""
import ast
import shutil
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
from helpers import ROOT, ascii_windows_like

from attnlab.classroom import grade
from attnlab.exercises import call_safely

PACKAGE = ROOT / "attnlab"
POSIX_ONLY_MODULES = {"resource", "fcntl", "termios", "tty", "pty", "pwd", "grp", "posix",
                      "syslog", "crypt", "spwd", "nis"}
POSIX_ONLY_NAMES = {("signal", "SIGALRM"), ("signal", "setitimer"), ("signal", "getitimer"),
                    ("signal", "ITIMER_REAL"), ("signal", "SIGKILL"), ("os", "fork"),
                    ("os", "killpg"), ("os", "setsid"), ("os", "getuid"),
                    ("os", "sched_getaffinity")}
BINARY_BY_DEFAULT = {"gzip", "bz2", "lzma"}  # their open() is binary unless the mode has "t"
NOT_TEXT = {"os", "tarfile", "zipfile", "webbrowser"}  # an .open() that takes no encoding


def _sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE.rglob("*.py"))}


def _module_level(tree: ast.Module):
    """Every node that runs when the module is imported: not inside a function's body."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def posix_only_at_import(tree: ast.Module) -> list[str]:
    """What a module does at import that Windows lacks: an import of a POSIX-only module, or a
    POSIX-only name of `os` or `signal` (SIGALRM, fork, ...) read outside a function."""
    found = []
    for node in _module_level(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] in POSIX_ONLY_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = {(node.module, a.name) for a in node.names}
            if node.module.split(".")[0] in POSIX_ONLY_MODULES or names & POSIX_ONLY_NAMES:
                found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and (node.value.id, node.attr) in POSIX_ONLY_NAMES:
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode string a call was given (positionally at `position`, or as mode=), if literal."""
    given = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    return given.value if isinstance(given, ast.Constant) else None


def text_without_encoding(tree: ast.Module) -> list[str]:
    """Every call that reads or writes text in the locale's encoding because it names none:
    open() in text mode, Path.open / read_text / write_text, a subprocess run with text=True."""
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        keywords = {k.arg for k in call.keywords}
        if "encoding" in keywords:
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        owner = func.value.id if isinstance(func, ast.Attribute) \
            and isinstance(func.value, ast.Name) else None
        text = False
        if name == "open" and owner is None:  # the builtin
            text = "b" not in (_mode(call, 1) or "r")
        elif name == "open" and owner in BINARY_BY_DEFAULT:
            text = "t" in (_mode(call, 1) or "rb")
        elif name == "open" and owner not in NOT_TEXT:  # a Path's
            text = "b" not in (_mode(call, 0) or "r")
        elif name == "read_text":
            text = not call.args
        elif name == "write_text":
            text = len(call.args) < 2
        elif name in ("run", "Popen", "check_output") and owner == "subprocess":
            text = bool(keywords & {"text", "universal_newlines"})
        if text:
            found.append(f"line {call.lineno}: {ast.unparse(call)[:90]}")
    return found


def test_the_source_scans_find_what_breaks_on_windows():
    """The scans below would fail on what they look for (and only on it)."""
    bad = ast.parse(textwrap.dedent("""
        import resource
        import signal
        from os import fork
        LIMIT = signal.SIGALRM
        text = open("a").read()
        Path("b").write_text(text)
        Path("c").open("w")
        subprocess.run(["x"], text=True)
        def lazy():
            import resource
            return signal.setitimer
        """))
    fine = ast.parse(textwrap.dedent("""
        import signal
        data = open("a", "rb").read()
        Path("b").write_text("✓", encoding="utf-8")
        gzip.open("c")
        os.open("d", os.O_RDONLY)
        subprocess.run(["x"], text=True, encoding="utf-8")
        """))
    def lines(found):
        return sorted(int(f.split(":")[0].removeprefix("line ")) for f in found)

    assert lines(posix_only_at_import(bad)) == [2, 4, 5]  # not the names inside lazy()
    assert lines(text_without_encoding(bad)) == [6, 7, 8, 9]
    assert posix_only_at_import(fine) == [] and text_without_encoding(fine) == []


def test_no_module_needs_a_posix_only_piece_to_be_imported():
    found = {path: hits for path, tree in _sources().items()
             if (hits := posix_only_at_import(tree))}
    assert not found, f"import it in the function that needs it (grade.limit_memory): {found}"


def test_every_text_file_is_read_and_written_as_utf8():
    found = {path: hits for path, tree in _sources().items()
             if (hits := text_without_encoding(tree))}
    assert not found, f"say encoding='utf-8' (and newline='' for a CSV): {found}"


# A student's function that loops for ever, and retries whatever fails: a stop that is an
# Exception would be caught by its own `except Exception` (the alarm lands inside the sleep).
STUDENT_SESSION = """
import threading, time
import attnlab
import attnlab.exercises as exercises
from attnlab.classroom import course, grade, student  # nothing POSIX-only to import
from attnlab.exercises import ex01

exercises.TIME_LIMIT_S = 0.5

def mine(q, k, v):
    ends = time.monotonic() + 20  # endless to a 0.5 s limit; a stop it swallowed fails
    while time.monotonic() < ends:
        try:
            time.sleep(0.01)
        except Exception:
            pass

started = time.monotonic()
ex01.attention(mine)
print(f"stopped after {time.monotonic() - started:.1f} s")
ex01.attention(attnlab.scaled_dot_product_attention)
print("threads left:", [t.name for t in threading.enumerate() if t.name == "attnlab-check"])
print("memory:", grade.limit_memory(1))
"""


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_as_on_windows_under_an_ascii_locale_a_check_stops_an_endless_loop_and_goes_on(tmp_path):
    """No SIGALRM: the call runs in a thread, is stopped after its time (the thread too), and the
    next check answers; a console that cannot show ✓ shows ?, and no check raises."""
    done = subprocess.run([sys.executable, "-c", STUDENT_SESSION], env=ascii_windows_like(tmp_path),
                          capture_output=True, encoding="utf-8", errors="replace", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("? attention: given a (3, 4) tensor"), lines  # ✗, shown as ?
    assert "did not finish within 0.5 s (an endless loop?)" in " ".join(lines[:3])
    took = next(float(line.split()[2]) for line in lines if line.startswith("stopped after"))
    assert took < 2, lines  # the first input's call, at 0.5 s
    assert "? attention: matches attnlab's version on 3 random inputs." in lines  # ✓
    assert "threads left: []" in lines  # the runaway loop was stopped, not left running
    assert any(line.startswith("memory: the memory limit (1 GB) is not applied on this system")
               for line in lines), lines


def test_with_the_alarm_a_loop_that_catches_exception_is_stopped_too(capsys):
    """Linux and macOS (SIGALRM): the alarm lands inside the student's `try`; the stop is no
    Exception, so the loop cannot swallow it and the check answers on time."""
    def retries(*args):
        ends = time.monotonic() + 5  # endless to a 0.2 s limit; a stop it swallowed fails
        while time.monotonic() < ends:
            try:
                time.sleep(0.01)
            except Exception:
                pass

    assert call_safely(retries, seconds=0.2)[1] == (
        "your function did not finish within 0.2 s (an endless loop?)")


def test_the_memory_limit_is_applied_where_the_system_allows_and_noted_where_not(monkeypatch):
    applied = []
    linux = types.SimpleNamespace(RLIMIT_AS=9, setrlimit=lambda kind, limits: applied.append(
        (kind, limits)))

    def refuse(kind, limits):  # what macOS answers for RLIMIT_AS
        raise ValueError("current limit exceeds maximum limit")

    monkeypatch.setitem(sys.modules, "resource", linux)
    assert grade.limit_memory(2) is None and applied == [(9, (2 * 2**30, 2 * 2**30))]
    monkeypatch.setitem(sys.modules, "resource", types.SimpleNamespace(RLIMIT_AS=9,
                                                                       setrlimit=refuse))
    assert grade.limit_memory(2) == ("the memory limit (2 GB) is not applied on this system "
                                     "(current limit exceeds maximum limit)")
    monkeypatch.setitem(sys.modules, "resource", None)  # Windows: no such module
    assert grade.limit_memory(0.5).startswith("the memory limit (0.5 GB) is not applied")


def test_grades_go_where_git_ignores_them_unless_the_instructor_says_otherwise(
        tmp_path, monkeypatch, capsys):
    """`make grade` and the module write to the same default, build/grades.csv, which git
    ignores in the repository; OUT=... / --out puts them elsewhere, and the run says where."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert f"--out $(or $(OUT),{grade.DEFAULT_OUT.as_posix()})" in makefile
    written = []
    monkeypatch.setattr(grade, "grade", lambda folder, out, *rest: written.append(out) or [])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "subs").mkdir()
    assert grade.main(["subs"]) == 0 and written == [grade.DEFAULT_OUT]
    assert f"0 rows written to {grade.DEFAULT_OUT}" in capsys.readouterr().out
    assert grade.main(["subs", "--out", str(tmp_path / "elsewhere" / "g.csv")]) == 0
    assert written[-1] == tmp_path / "elsewhere" / "g.csv" and written[-1].parent.is_dir()
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to ignore")
    default = grade.DEFAULT_OUT
    paths = [default, default.with_name("grades-by-check.md"),
             default.with_name("grades-by-check.png"), Path("grades.csv"),
             Path("notebooks") / "grades.csv"]
    ignored = subprocess.run(["git", "check-ignore", *map(str, paths)], cwd=ROOT,
                             capture_output=True, encoding="utf-8").stdout.split()
    assert sorted(ignored) == sorted(p.as_posix() for p in paths)

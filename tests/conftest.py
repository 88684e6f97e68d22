"""Shared test settings and helpers, the student edition as a test, and the order in which
`make test` hands its scopes to the two workers.

Fixtures live here; the helpers test files import (`from helpers import ...`) live in
tests/helpers.py.

Nothing here may change os.environ for plotting: notebook kernels inherit the environment, and
an MPLBACKEND=Agg there would silently drop every inline figure.
"""
import configparser
import copy
import os
import re
import socket
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")

import matplotlib  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402
from helpers import ROOT, need  # noqa: E402

import attnlab.exercises  # noqa: E402
from attnlab import assets  # noqa: E402
from attnlab.classroom import runner, student  # noqa: E402
from attnlab.minilm import load_minilm  # noqa: E402

torch.set_num_threads(1)

SANITIZE = ROOT / "tests" / "sanitize.cfg"  # nbval's --nbval-sanitize-with file, used here too
STUDENT_NOTEBOOK = re.compile(r"[0-9][0-9]_.*\.ipynb")


@pytest.fixture
def no_network(monkeypatch):
    """A download (attnlab.assets._download) or a socket connection fails the test. pytest.fail
    is not an Exception, so no `except Exception` in attnlab can turn it into a message."""
    monkeypatch.setattr(assets, "_download",
                        lambda asset: pytest.fail(f"test tried to download {asset.name}"))
    monkeypatch.setattr(socket.socket, "connect",
                        lambda *args, **kwargs: pytest.fail("test used the network"))


@pytest.fixture(autouse=True)
def fresh_predictions(monkeypatch):
    """Each test starts as a fresh kernel does: no predict check has shown its measurement."""
    monkeypatch.setattr(attnlab.exercises, "_predictions", {})


@pytest.fixture(autouse=True)
def short_time_limit(monkeypatch):
    """A student's function that never returns is stopped after 0.3 s instead of 2 s, to keep
    the exercise tests fast: the checks read `attnlab.exercises.TIME_LIMIT_S` when called."""
    monkeypatch.setattr(attnlab.exercises, "TIME_LIMIT_S", 0.3)


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 (attnlab.minilm), loaded once per worker; skipped where it is absent."""
    need("minilm/model.safetensors", "minilm/vocab.txt", "minilm/config.json")
    return load_minilm()


# ----------------------------------------------------------------------------- the student edition

def sanitize_rules(path: Path = SANITIZE) -> list[tuple[str, str]]:
    """(regex, replacement) pairs of an nbval sanitize file: one section each."""
    parser = configparser.ConfigParser()
    parser.read(path, encoding="utf-8")
    return [(parser[s]["regex"], parser[s]["replace"]) for s in parser.sections()]


SANITIZE_RULES = sanitize_rules()


class CellMismatch(Exception):
    """A student cell's outputs are not what the full edition promises (the message says how)."""


class StudentNotebook(pytest.File):
    """notebooks/student/NN_name.ipynb, executed once in a fresh kernel, then compared with the
    full edition notebooks/NN_name.ipynb cell by cell (by cell id; attnlab.classroom.student's
    `compare_cell` says what must be equal). One scope per notebook, so `--dist loadscope` runs
    each notebook whole on one worker, beside other notebooks on the other."""

    def collect(self):
        self.full_path = self.path.parent.parent / self.path.name  # notebooks/NN_name.ipynb
        self.full = nbformat.read(self.full_path, as_version=4)
        self.nb = nbformat.read(self.path, as_version=4)
        yield StudentRun.from_parent(self, name="runs top to bottom")
        for i, j in student.compared_cells(self.full, self.nb):
            yield StudentCell.from_parent(self, name=f"Cell {i}", index=i, full_index=j)

    def setup(self):
        """Execute the notebook as nbval executes the full one: the kernel starts in notebooks/
        (the full edition's folder) with this process's environment; nbval-skip cells are not
        run."""
        nb = copy.deepcopy(self.nb)
        for cell in nb.cells:
            if cell.cell_type == "code" and "nbval-skip" in cell.metadata.get("tags", []):
                cell.cell_type, cell.outputs = "raw", []  # nbclient runs code cells only
        self.executed, self.seconds, self.error = runner.execute(self.full_path, nb=nb)
        raised = [i for i, c in enumerate(self.executed.cells) if self.error is not None
                  and any(o.get("output_type") == "error" for o in c.get("outputs", []))]
        self.raised_at = raised[0] if raised else None


class _StudentItem(pytest.Item):
    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CellMismatch):
            return f"{self.parent.nodeid} {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


class StudentRun(_StudentItem):
    """The student edition runs top to bottom without raising, as the full edition does."""

    def runtest(self):
        notebook = self.parent
        if notebook.error is None:
            return
        if notebook.raised_at is not None:
            cell = notebook.executed.cells[notebook.raised_at]
            trace = next(o for o in cell.outputs if o.get("output_type") == "error")
            tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(trace.get("traceback", [])))
            raise CellMismatch(f"did not run top to bottom: cell {notebook.raised_at} "
                               f"({student.first_line(cell)!r}) raised:\n"
                               + "\n".join(tb.splitlines()[-15:]))
        raise CellMismatch(f"did not run top to bottom: {notebook.error}")


class StudentCell(_StudentItem):
    """One code cell's text outputs against the full edition's (student.compare_cell)."""

    def __init__(self, *, index: int, full_index: int, **kwargs):
        super().__init__(**kwargs)
        self.index, self.full_index = index, full_index

    def runtest(self):
        notebook = self.parent
        if notebook.raised_at is not None and self.index > notebook.raised_at:
            pytest.skip(f"not reached: cell {notebook.raised_at} raised")
        cell = notebook.executed.cells[self.index]
        diff = student.compare_cell(notebook.full.cells[self.full_index], cell, SANITIZE_RULES)
        if diff is not None:
            raise CellMismatch(f"cell {self.index} (full edition cell {self.full_index}): "
                               f"{student.first_line(cell)!r}\n{diff}")


class StudentEditionPlugin:
    """Collects student/NN_name.ipynb (notebooks/student/ in this repository) as a
    StudentNotebook, compared with ../NN_name.ipynb, instead of nbval's notebook.

    Registered as a plugin (not a conftest hook) because pytest asks a conftest's
    pytest_collect_file only about files below that conftest's folder."""

    @pytest.hookimpl(wrapper=True)
    def pytest_collect_file(self, file_path, parent):
        collected = yield
        if file_path.parent.name == "student" and STUDENT_NOTEBOOK.fullmatch(file_path.name):
            # nbval would replay the student edition's stored outputs, and it stores none
            collected = [c for c in collected if not type(c).__module__.startswith("nbval")]
            collected.append(StudentNotebook.from_parent(parent, path=file_path))
        return collected


def pytest_configure(config):
    config.pluginmanager.register(StudentEditionPlugin(), "attnlab-student-edition")


# ----------------------------------------------------------------------------- order of scopes

def pytest_collection_modifyitems(items):
    """Hand the longest scopes out first, by a rule that needs no measured seconds: every module
    with a browser test (Chromium and JupyterLab), then every notebook of both editions (each a
    fresh kernel running a whole lesson), then the unit-test modules, each group in collection
    order. `--dist loadscope --no-loadscope-reorder` keeps each scope on one worker and this
    order, so the many short unit-test modules fill the gaps at the end and both workers finish
    together. (xdist's own order starts with the scopes that have the most tests: the exercise
    tables.)"""
    def scope(item):
        return item.nodeid.split("::")[0]

    browser = {scope(item) for item in items if item.get_closest_marker("browser")}

    def rank(item):
        if scope(item) in browser:
            return 0
        return 1 if scope(item).endswith(".ipynb") else 2

    items.sort(key=rank)  # stable: each scope's items keep their order

"""Shared test settings, fixtures, the student edition under nbval, and the order in which
`make test` hands its scopes to the two workers.

Fixtures live here; the helpers test files import (`from helpers import ...`) live in
tests/helpers.py.

Nothing here may change os.environ for plotting: notebook kernels inherit the environment, and
an MPLBACKEND=Agg there would silently drop every inline figure.
"""
import copy
import os
import re
import socket

os.environ.setdefault("KERAS_BACKEND", "torch")

import matplotlib  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402
from nbval.plugin import IPyNbFile  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402
from helpers import need  # noqa: E402

import attnlab.exercises  # noqa: E402
from attnlab.plumbing import assets  # noqa: E402
from attnlab.pretrained.minilm import load_minilm  # noqa: E402

torch.set_num_threads(1)

STUDENT_NOTEBOOK = re.compile(r"[0-9][0-9]_.*\.ipynb")


@pytest.fixture
def no_network(monkeypatch):
    """A download (attnlab.plumbing.assets._download) or a socket connection fails the test.
    pytest.fail is not an Exception, so no `except Exception` in attnlab can turn it into a
    message."""
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
    """all-MiniLM-L6-v2 (attnlab.pretrained.minilm), loaded once per worker; skipped where it is
    absent."""
    need("minilm/model.safetensors", "minilm/vocab.txt", "minilm/config.json")
    return load_minilm()


# ----------------------------------------------------------------------------- the student edition

def _not_attempted(output):
    """A full-edition output as the student run must show it: each check line that is right
    (`✓ `) or a prediction given (`✎ `) not attempted (`○ `). sanitize.cfg's rule reads any
    `○ name: ...` line as the same line, so nbval compares the rest exactly."""
    output = copy.deepcopy(output)
    if output.get("output_type") == "stream":
        output["text"] = re.sub(r"(?m)^[✓✎] ", "○ ", "".join(output["text"]))
    return output


class Notebook(IPyNbFile):
    """nbval's notebook, whose kernel gets three tries to start. Two workers start kernels at
    the same moment, and a kernel that binds a port the other has just taken dies before it
    answers ("Kernel died before replying to kernel_info"; jupyter_client picks its ports at
    random). nbval stops the dead kernel before it raises, so starting again is clean."""

    def setup(self):
        for attempt in range(3):
            try:
                return super().setup()
            except RuntimeError:
                if attempt == 2:
                    raise


class StudentEdition(Notebook):
    """notebooks/student/NN_name.ipynb under strict nbval: executed in a fresh kernel in its own
    folder (where students run it), each code cell's outputs compared with those of the full
    edition's cell of the same id (../NN_name.ipynb), its checks not attempted."""

    def collect(self):
        full_path = self.path.parent.parent / self.path.name
        full = {cell.id: cell for cell in nbformat.read(full_path, as_version=4).cells}
        for item in super().collect():
            if item.cell.id not in full:
                raise self.CollectError(f"student/{self.path.name}: cell id {item.cell.id!r} is "
                                        f"not in the full edition: run `make student`")
            reference = full[item.cell.id]
            item.cell.outputs = [_not_attempted(o) for o in reference.outputs]
            item.cell.execution_count = reference.execution_count  # nbval: "a cell that ran"
            item.add_marker(pytest.mark.integration)  # make test-all, with the browser tests
            yield item


class StudentEditionPlugin:
    """Collects student/NN_name.ipynb as a StudentEdition instead of nbval's notebook (which
    would replay the student edition's stored outputs, and it stores none), and every other
    notebook as a Notebook.

    Registered as a plugin (not a conftest hook) because pytest asks a conftest's
    pytest_collect_file only about files below that conftest's folder."""

    @pytest.hookimpl(wrapper=True)
    def pytest_collect_file(self, file_path, parent):
        collected = yield
        if not any(isinstance(c, IPyNbFile) for c in collected):
            return collected
        student = file_path.parent.name == "student" and STUDENT_NOTEBOOK.fullmatch(file_path.name)
        return [c for c in collected if not isinstance(c, IPyNbFile)] + [
            (StudentEdition if student else Notebook).from_parent(parent, path=file_path)]


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

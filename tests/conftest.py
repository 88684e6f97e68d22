"""Shared test settings: headless plotting and one torch thread in this process.

Nothing here may change os.environ for plotting: nbval's notebook kernels inherit the
environment, and an MPLBACKEND=Agg there would silently drop every inline figure.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import matplotlib  # noqa: E402
import pytest  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402

import attnlab.exercises  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def short_time_limit(monkeypatch):
    """A student's function that never returns is stopped after 0.3 s instead of 2 s, to keep
    the exercise tests fast: the checks read `attnlab.exercises.TIME_LIMIT_S` when called."""
    monkeypatch.setattr(attnlab.exercises, "TIME_LIMIT_S", 0.3)


# The scopes that take longest in `make test`, slowest first (seconds per scope on 2 cores, from
# --durations=0): the two Chromium modules (about 50 each); both editions of notebooks 04 (25),
# 05 (24), 06 (21), 07 (15), 03 (15) and 08 (12); the app and training tests (12). With
# `--dist loadscope --no-loadscope-reorder` xdist hands scopes out in collection order, so the
# many short modules fill the gaps at the end and both workers finish together. xdist's own
# order starts with the modules that have the most tests (the exercise tables): one worker then
# ran on alone for 30 s at the end.
SLOWEST_FIRST = ("tests/test_site.py", "tests/test_browser.py",
                 "04_", "05_", "06_", "07_", "03_", "08_",
                 "tests/test_sentiment.py", "tests/test_train.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        scope = item.nodeid.split("::")[0]  # a notebook file or a test module
        name = scope.rsplit("/", 1)[-1]
        return next((i for i, key in enumerate(SLOWEST_FIRST)
                     if scope == key or name.startswith(key)), len(SLOWEST_FIRST))

    items.sort(key=rank)  # stable: each scope's items keep their order

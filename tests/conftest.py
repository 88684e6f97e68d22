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

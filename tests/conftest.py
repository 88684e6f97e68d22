"""Shared test settings: headless plotting and one torch thread in this process.

Nothing here may change os.environ for plotting: nbval's notebook kernels inherit the
environment, and an MPLBACKEND=Agg there would silently drop every inline figure.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_num_threads(1)

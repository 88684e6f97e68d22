"""Shared test settings: headless plotting, the torch backend for Keras, one torch thread."""
import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("KERAS_BACKEND", "torch")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_num_threads(1)

"""Determinism for notebooks and tests: strict nbval compares every printed number, so every
source of randomness and of thread-order float differences is pinned here, in one place.

The series has one seed, ATTNLAB_SEED (default 0). Every data draw, initial weight and batch
order in attnlab goes through `seed_of`, so `ATTNLAB_SEED=1 make run` runs every notebook on
other data, other first weights and other batches: what a notebook says of its trained models
must hold there too (CI runs the series with 1 and 2).
"""
import math
import os
import random

import numpy as np
import torch

from .checks import check_int

SEED = "ATTNLAB_SEED"
SEED_STRIDE = 1_000_003  # a prime: the seeds 0, 1, 2 ... of one series never meet another's


def series_seed() -> int:
    """The series' seed: ATTNLAB_SEED as a whole number >= 0, 0 when it is not set."""
    text = os.environ.get(SEED, "").strip() or "0"
    if not text.isdigit():
        raise ValueError(f"{SEED} must be a whole number >= 0 (the series' seed), got {text!r}; "
                         f"unset it for the stored outputs (seed 0)")
    return int(text)


def seed_of(seed: int) -> int:
    """The seed a draw really uses when the code asks for `seed`: `seed` itself in the series
    with seed 0 (the one whose outputs are stored), moved by SEED_STRIDE × ATTNLAB_SEED in any
    other. Draws asked for with different seeds (a training set and a test set) stay different,
    and all of them change together with the series' seed."""
    return seed + SEED_STRIDE * series_seed()


def seed_everything(seed: int = 0, threads: int = 1) -> None:
    """Seed Python, NumPy and torch (with `seed_of(seed)`), and use `threads` torch threads.

    One thread makes float reductions happen in one fixed order, so results repeat bit for bit
    on the same machine and to printed precision elsewhere.
    """
    seed, threads = check_int("seed", seed, minimum=0), check_int("threads", threads, minimum=1)
    seed = seed_of(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)


NUDGE = "ATTNLAB_NUDGE_ULP"  # set to 1 by `make test-portable`


def nudge(x):
    """`x` as computed, or, with ATTNLAB_NUDGE_ULP=1, every element moved one unit in the last
    place towards +inf (a NumPy array or a torch tensor, dtype kept).

    Why: another CPU computes the float32 outputs of a pre-trained network (MobileNetV2's
    embeddings, MiniLM's sentence vectors) with other last bits, and those outputs are the
    inputs of the models the notebooks train. `make test-portable` sets the variable and
    compares every stored output: a notebook whose printed results depend on those last bits
    (a chaotic training, a value on a rounding edge) fails here, not on somebody else's CPU.
    """
    if os.environ.get(NUDGE) != "1":
        return x
    if isinstance(x, torch.Tensor):
        return torch.nextafter(x, torch.full_like(x, math.inf))
    return np.nextafter(x, np.asarray(np.inf, dtype=x.dtype))

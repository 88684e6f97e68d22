"""Determinism for notebooks and tests: strict nbval compares every printed number, so every
source of randomness and of thread-order float differences is pinned here, in one place."""
import os
import random

import numpy as np
import torch

from .checks import check_int


def seed_everything(seed: int = 0, threads: int = 1) -> None:
    """Seed Python, NumPy and torch, and use `threads` torch threads.

    One thread makes float reductions happen in one fixed order, so results repeat bit for bit
    on the same machine and to printed precision elsewhere.
    """
    seed, threads = check_int("seed", seed, minimum=0), check_int("threads", threads, minimum=1)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)

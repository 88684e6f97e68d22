"""parallel_map: the same results, printed text, random state and errors as the plain loop,
whether the calls run in forked children or one after another."""
import os
import random
import signal
import sys
import time

import numpy as np
import pytest
import torch

from attnlab.plumbing import parallel
from attnlab.plumbing.parallel import parallel_map, remember

needs_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")


@pytest.fixture(params=["children", "serial"])
def mode(request, monkeypatch):
    """Both ways of running: two forked workers (also on a 1-core runner), or the caller alone."""
    if request.param == "children":
        if not sys.platform.startswith("linux"):
            pytest.skip("forks on Linux only")
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
        monkeypatch.setenv(parallel.WORKERS, "2")
    else:
        monkeypatch.setenv(parallel.WORKERS, "1")
    return request.param


def draw(seed):
    """A small training's worth of randomness: the global RNGs, seeded and not."""
    torch.manual_seed(seed)
    x = torch.randn(64, 8, dtype=torch.float64)  # (64, 8)
    w = torch.randn(8, 8, dtype=torch.float64, requires_grad=True)
    loss = (x @ w).tanh().pow(2).mean()
    loss.backward()
    print(f"call {seed}: loss {loss.item():.6f}")
    return w.grad, random.random(), np.random.rand()


def test_same_results_text_and_state_as_the_loop(mode, capsys):
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    results = parallel_map(draw, [3, 1, 2])
    after = torch.rand(1), random.random(), np.random.rand()
    out = capsys.readouterr().out

    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    state = torch.get_rng_state(), random.getstate(), np.random.get_state()
    expected = []
    for seed in [3, 1, 2]:  # the loop, each call from the caller's state
        torch.set_rng_state(state[0])
        random.setstate(state[1])
        np.random.set_state(state[2])
        expected.append(draw(seed))
    torch.set_rng_state(state[0])
    random.setstate(state[1])
    np.random.set_state(state[2])
    assert out == capsys.readouterr().out  # the same text, in items' order
    assert out.splitlines()[0].startswith("call 3")
    for (g, r, n), (g2, r2, n2) in zip(results, expected):
        assert torch.equal(g, g2) and r == r2 and n == n2
    assert after == (torch.rand(1), random.random(), np.random.rand())  # the caller's RNG kept


def test_a_lambda_and_an_empty_list(mode):
    offset = 10
    assert parallel_map(lambda i: i + offset, range(5)) == [10, 11, 12, 13, 14]
    assert parallel_map(abs, []) == []
    pids = set(parallel_map(lambda i: os.getpid(), range(4)))
    assert (os.getpid() not in pids) == (mode == "children")  # really forked, or really not


def fails_on_two(i):
    if i == 2:
        raise ValueError("two is not allowed")
    return i


def test_the_first_error_is_raised_again(mode):
    with pytest.raises(ValueError, match="two is not allowed") as info:
        parallel_map(fails_on_two, [1, 2, 3, 2])
    if mode == "children":  # the child's traceback rides along as a note
        assert "fails_on_two" in "".join(info.value.__notes__)


def test_cache_entries_come_back(mode):
    cache = remember({})
    try:
        def fill(i):
            cache.setdefault(i, torch.full((2,), float(i)))
            return cache[i]

        results = parallel_map(fill, [1, 2])
        assert sorted(cache) == [1, 2] and cache[2] is results[1]
    finally:
        parallel._CACHES.remove(cache)


@needs_fork
def test_a_child_that_dies_is_named(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setenv(parallel.WORKERS, "2")
    with pytest.raises(RuntimeError, match="call 1 stopped without a result"):
        parallel_map(lambda i: os.kill(os.getpid(), signal.SIGKILL) if i == 1 else i, [0, 1])


@needs_fork
def test_a_worker_that_uses_no_cpu_is_stopped_and_named(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setenv(parallel.WORKERS, "2")
    monkeypatch.setattr(parallel, "STALL_SECONDS", 1.5)
    with pytest.raises(RuntimeError, match=r"running call 1 has used no CPU time for 1.5 s"):
        parallel_map(lambda i: time.sleep(600 * i), [0, 1])  # call 1 blocks, as on a futex


@needs_fork
def test_an_unpicklable_result_is_explained(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setenv(parallel.WORKERS, "2")
    with pytest.raises(TypeError, match="cannot be sent back"):
        parallel_map(lambda i: (lambda: i), [0, 1])


def test_workers(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setenv(parallel.WORKERS, "3")
    linux = sys.platform.startswith("linux")
    assert parallel.workers(10) == (3 if linux else 1)
    assert parallel.workers(2) == (2 if linux else 1)
    monkeypatch.delenv(parallel.WORKERS)
    assert parallel.workers(20) == (8 if linux else 1)
    torch.set_num_threads(2)  # torch's pool may be live: a fork would inherit it, dead
    try:
        assert parallel.workers(20) == 1
    finally:
        torch.set_num_threads(1)
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(parallel.WORKERS, bad)
        with pytest.raises(ValueError, match="ATTNLAB_WORKERS must be a whole number"):
            parallel.workers(2)
    with pytest.raises(TypeError, match="fn must be a function"):
        parallel_map(3, [1])

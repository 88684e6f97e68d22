"""Independent trainings side by side: `parallel_map(fn, items)` is `[fn(item) for item in
items]`, each call in a process of its own while the machine has a core to spare.

Why: a lesson that rests on training shows several seeds (issue 26), and each seed is a full
training on one torch thread (one thread keeps float sums in one order). A 2-core laptop then
leaves a core idle for the whole cell. Forked children run the same code from the same state
on one thread each, so every result is bit for bit what the loop gives; only the waiting is
shorter.

The two ways give the same results and the same printed text whatever the number of cores:
- every call starts from the caller's random state (Python, NumPy, torch) and leaves it as it
  was, also when it runs in the caller's process;
- what a call prints is printed by the caller, call by call, in the order of `items`;
- an exception a call raises is raised again by the caller (the first one in `items`'
  order), its traceback text attached as a note.
Results come back by pickle; entries a call adds to a cache registered with `remember` (the
trainers' caches of trained models) are copied into the caller's, as if it had run there.

When it forks: only on Linux (`os.fork` elsewhere is missing or unsafe with the libraries
torch loads), and only while torch runs on one thread in the caller, as every notebook of the
series sets. A fork copies the caller's memory but only its calling thread: a thread pool that
torch (OpenMP, oneDNN, MKL) started on two threads is, in the child, a pool whose threads are
gone, and the child's first parallel operation waits for them for ever (a plain script on its
default threads hung that way in `embed_images`). On one thread torch never enters a parallel
region, so a pool left over from earlier work is never waited on; on several threads torch
already uses the cores, and the calls run one after another in the caller. So they do too on
macOS and Windows, with one core, or with ATTNLAB_WORKERS=1; ATTNLAB_WORKERS=k allows at most k
processes at once.

A worker that stops making progress is not waited on for ever: one that has used no CPU time for
STALL_SECONDS is stopped, and the caller raises an error that names the call and the way out.
"""
from __future__ import annotations

import contextlib
import io
import os
import pickle
import random
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

WORKERS = "ATTNLAB_WORKERS"
STALL_SECONDS = 120.0  # a worker with no CPU time for this long is blocked, not slow
_CACHES: list[dict] = []  # caches whose new entries a child hands back (see `remember`)
_in_child = False  # True in a forked child: a parallel_map there runs its calls in turn


def remember(cache: dict) -> dict:
    """Register `cache` (a dict of results by their arguments) so that what a call adds to it
    in a child process is added to the caller's too; returns it."""
    _CACHES.append(cache)
    return cache


def workers(n_calls: int) -> int:
    """How many processes `parallel_map` uses for `n_calls` calls: 1 (the caller alone) off
    Linux, where the caller's torch runs on more than one thread (a fork would inherit its
    thread pool: see the module docstring) and inside a call it runs (no process forks more),
    else the cores this process may use, at most ATTNLAB_WORKERS and at most n_calls."""
    text = os.environ.get(WORKERS, "").strip()
    if text and not (text.isdigit() and int(text) >= 1):
        raise ValueError(f"{WORKERS} must be a whole number >= 1 (processes at once), got "
                         f"{text!r}; unset it to use every core")
    if (_in_child or not sys.platform.startswith("linux") or not hasattr(os, "fork")
            or torch.get_num_threads() > 1):
        return 1
    cores = len(os.sched_getaffinity(0))
    return max(1, min(n_calls, cores, int(text) if text else cores))


@contextlib.contextmanager
def _isolated():
    """Run a call as a child would: the random states restored afterwards, the printed text
    captured (yielded as two StringIO objects, stdout and stderr)."""
    states = random.getstate(), np.random.get_state()
    out, err = io.StringIO(), io.StringIO()
    try:
        with (torch.random.fork_rng(devices=[]), contextlib.redirect_stdout(out),
              contextlib.redirect_stderr(err)):
            yield out, err
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])


def _call(fn, item) -> dict:
    """fn(item), isolated: {'result' or 'error', 'stdout', 'stderr', 'cached'} (the entries the
    call added to each registered cache, by the cache's index)."""
    before = [set(cache) for cache in _CACHES]
    report = {}
    with _isolated() as (out, err):
        try:
            report["result"] = fn(item)
        except Exception as error:  # noqa: BLE001 - handed to the caller, raised there
            report["error"] = error
            report["traceback"] = traceback.format_exc()
    report["stdout"], report["stderr"] = out.getvalue(), err.getvalue()
    report["cached"] = {i: {key: cache[key] for key in set(cache) - seen}
                        for i, (cache, seen) in enumerate(zip(_CACHES, before))}
    return report


def _worker(fn, items: list, folder: Path, python_state) -> None:
    """A forked worker: claim the next unclaimed call (creating its claim file is atomic, so
    each call runs once), run it, pickle its report to the folder; then leave at once (os._exit:
    no atexit handler, no flush of the parent's buffers, no kernel socket touched). One worker
    runs several calls, so what the first call warms up (lazy imports, caches) serves the rest."""
    global _in_child
    _in_child, code = True, 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # an interrupt stops the worker outright
        for i, item in enumerate(items):
            try:
                claim = os.open(folder / f"{i}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue  # another worker has it
            os.write(claim, str(os.getpid()).encode())  # who runs it, should it get stuck
            os.close(claim)
            random.setstate(python_state)  # each call from the caller's state (`random` reseeds
            report = _call(fn, item)       # itself in a forked child)
            try:
                data = pickle.dumps(report)
            except Exception as error:  # noqa: BLE001 - an unpicklable result or exception
                data = pickle.dumps({"error": TypeError(
                    f"parallel_map: the call's "
                    f"{'result' if 'result' in report else 'exception'} cannot be sent back to "
                    f"the notebook ({error}); return tensors, arrays, numbers, lists, dicts or "
                    f"models"), "traceback": "", "stdout": report["stdout"],
                    "stderr": report["stderr"], "cached": {}})
            (folder / f"{i}.part").write_bytes(data)
            (folder / f"{i}.part").rename(folder / f"{i}.pickle")  # complete, or not there
        code = 0
    finally:
        os._exit(code)


def _in_children(fn, items: list, n_workers: int) -> list[dict]:
    """Every call in one of n_workers forked workers; the reports in items' order."""
    # Adam's first step imports torch._dynamo (about 2 s): once here, not once in every worker
    # and again in the caller's next training
    import torch._dynamo  # noqa: F401, PLC0415

    folder = Path(tempfile.mkdtemp(prefix="attnlab-parallel-"))
    python_state, running = random.getstate(), set()
    try:
        sys.stdout.flush()  # nothing buffered is written twice
        sys.stderr.flush()
        for _ in range(n_workers):
            pid = os.fork()
            if pid == 0:
                _worker(fn, items, folder, python_state)
            running.add(pid)
        checked = time.monotonic()
        progress = {pid: (None, checked) for pid in running}  # CPU seconds, and since when
        while running:  # wait for our workers only: the kernel may have other children
            time.sleep(0.01)
            running -= {pid for pid in running if os.waitpid(pid, os.WNOHANG)[0]}
            if time.monotonic() - checked < 1.0:
                continue
            checked = time.monotonic()  # once a second: has each worker used CPU since?
            for pid in running:
                if (cpu := _cpu_seconds(pid)) != progress[pid][0]:
                    progress[pid] = (cpu, checked)
                elif checked - progress[pid][1] >= STALL_SECONDS:
                    raise _stalled(folder, pid)  # the finally below stops the workers
        return [_read(folder / f"{i}.pickle", i) for i in range(len(items))]
    finally:
        for pid in running:  # an interrupt in the caller: stop the workers
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()


def _cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used so far, all its threads (Linux's /proc); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name: state, ppid, ...
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _stalled(folder: Path, pid: int) -> RuntimeError:
    """The error for a worker that has used no CPU for STALL_SECONDS (the caller stops it)."""
    calls = [int(claim.stem) for claim in sorted(folder.glob("*.claim"))
             if claim.read_text(encoding="ascii") == str(pid)
             and not (folder / f"{claim.stem}.pickle").exists()]
    which = f"call {calls[0]}" if calls else "a call"
    return RuntimeError(
        f"parallel_map: the process running {which} has used no CPU time for "
        f"{STALL_SECONDS:g} s: it is blocked, not working (a lock or thread pool inherited from "
        f"the process that forked it can do this), so it was stopped. Set {WORKERS}=1 to run "
        f"the calls one after another in this process, and report this at the project's issues")


def _read(file: Path, i: int) -> dict:
    """The report a worker left in `file`, or one that says why there is none."""
    if file.exists():
        return pickle.loads(file.read_bytes())
    return {"error": RuntimeError(
        f"parallel_map: the process running call {i} stopped without a result (out of memory, "
        f"or killed?); run the call alone, or set {WORKERS}=1"),
        "traceback": "", "stdout": "", "stderr": "", "cached": {}}


def parallel_map(fn, items) -> list:
    """[fn(item) for item in items], the calls side by side in processes of their own where the
    machine has more than one core (see the module docstring: the results, the printed text and
    the random state after it are the same either way). `fn` may be a lambda or a function
    defined in the notebook."""
    if not callable(fn):
        raise TypeError(f"fn must be a function to call on each item, got {type(fn).__name__}")
    items = list(items)
    n_workers = workers(len(items))
    if n_workers == 1:
        reports = [_call(fn, item) for item in items]
    else:
        reports = _in_children(fn, items, n_workers)
        for report in reports:
            for i, added in report["cached"].items():
                _CACHES[i].update(added)
    for report in reports:  # the text in items' order, then the first error
        sys.stdout.write(report["stdout"])
        sys.stderr.write(report["stderr"])
    for report in reports:
        if "error" in report:
            error = report["error"]
            if report["traceback"] and n_workers > 1:
                error.add_note("in the process that ran it:\n" + report["traceback"])
            raise error
    return [report["result"] for report in reports]

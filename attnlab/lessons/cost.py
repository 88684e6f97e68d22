"""What attention costs, measured: time, peak memory, FLOPs, and the paths a signal travels.

Notebook 09 turns the usual "attention vs recurrence" table into measurements on this machine.
Everything it needs to measure lives here, written so the numbers are trustworthy:

- `measure_times`: median time (wall clock, or the thread's CPU clock that a shared machine's
  other work does not inflate) after a warm-up, interleaving every case in each round, so a
  burst of load hits all cases alike instead of skewing one of them;
- `peak_memory`: the peak of the bytes PyTorch's CPU allocator held during a call, read from the
  profiler's allocation records (every allocation, including scratch buffers inside fused C++
  kernels that Python never sees; `tracemalloc` sees none of them);
- `count_flops` / `layer_flops`: floating-point operations, counted exactly
  by PyTorch's FlopCounterMode and written out as formulas;
- `loglog_slope` (shared with notebook 02): the exponent p of y ~ x^p on log-log axes, which
  tells T² from T whatever the machine's speed;
- `dependency_depth`, `first_token_gradient`: the path from the first token to the last
  output, in dependent operations and in gradient; `with_forget_bias`: an LSTM whose forget
  gates start nearer 1 (its gradient then fades more slowly);
- `sci`: a measured number in scientific notation, guarded like `attnlab.plumbing.report.fmt`;
- `process_peak_memory`: the most memory this process has held, as the operating system counts
  it (notebook 11: what a laptop needs for a 135-million-weight model), on Linux, macOS and
  Windows alike.

The KV cache and the online softmax, which the same notebook measures with these tools, are
concepts of their own: `attnlab.core.kv_cache`, `attnlab.core.online_softmax`.
"""
from __future__ import annotations

import copy
import gc
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

# The autograd profiler, not its torch.profiler wrapper: same allocation records, without the
# wrapper's first-use import of the compiler stack (seconds on a small machine).
from torch.autograd.profiler import profile
from torch.utils.flop_counter import FlopCounterMode

from ..plumbing.checks import check_choice, check_int, check_number
from ..plumbing.report import fmt
from .scaling import loglog_slope  # noqa: F401  (one fit for the series; re-exported here)

# The profiler's tracing library (Kineto) logs "profiler_start/stop" lines on stderr at its
# default level; 6 keeps it quiet (a user's own setting wins). Read when the profiler first runs.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def measure_times(thunks: Mapping, *, repeats: int = 5, warmup: int = 1,
                  min_sample_s: float = 0.005, clock: str = "wall") -> dict:
    """Median seconds per call of each zero-argument callable in `thunks` (key -> callable).

    `clock` is "wall" (time.perf_counter: elapsed time) or "thread" (time.thread_time: the CPU
    time of this thread). On a machine shared with other work, wall time also counts every
    moment the operating system handed the core to another process; the thread's CPU time
    counts only the call's own work, so it repeats far better. It sees only the calling
    thread, hence "thread" requires torch.get_num_threads() == 1 (then every kernel runs there).

    Why it is built this way:
    - `warmup` untimed calls first (allocator, caches, lazy kernel selection settle);
    - a call faster than `min_sample_s` is repeated within one sample, so the timer's resolution
      and Python's loop overhead do not dominate small sizes;
    - the `repeats` rounds interleave all cases (round r times every case once), so a burst of
      load from another process lands on all of them, and the median drops such outliers;
    - the garbage collector is paused while timing, as `timeit` does.
    Inputs should be built outside the callables: only the call itself is timed.
    """
    if not isinstance(thunks, Mapping) or not thunks:
        raise TypeError(f"thunks must be a non-empty mapping of key -> callable, "
                        f"got {type(thunks).__name__}")
    for key, fn in thunks.items():
        if not callable(fn):
            raise TypeError(f"thunks[{key!r}] must be callable, got {type(fn).__name__}")
    check_int("repeats", repeats, minimum=1)
    check_int("warmup", warmup, minimum=0)
    check_number("min_sample_s", min_sample_s, minimum=0, maximum=10, exclusive_maximum=True)
    check_choice("clock", clock, ("wall", "thread"))
    if clock == "thread" and torch.get_num_threads() != 1:
        raise ValueError(f"clock='thread' times only the calling thread, but torch uses "
                         f"{torch.get_num_threads()} threads; call torch.set_num_threads(1) first")
    now = time.perf_counter if clock == "wall" else time.thread_time

    number = {}
    for key, fn in thunks.items():
        for _ in range(warmup):
            fn()
        start = now()
        fn()  # one more call, timed, to choose how many calls make one sample
        once = max(now() - start, 1e-9)
        number[key] = max(1, min(10_000, math.ceil(min_sample_s / once)))

    samples = {key: [] for key in thunks}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for key, fn in thunks.items():
                n = number[key]
                start = now()
                for _ in range(n):
                    fn()
                samples[key].append((now() - start) / n)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {key: statistics.median(s) for key, s in samples.items()}


def peak_memory(fn: Callable[[], object]) -> int:
    """Peak bytes of CPU tensor memory allocated during `fn()`, above what was held before.

    Read from the PyTorch profiler's allocation records (`profile_memory=True`): one record per
    allocation and per free by the CPU allocator, in time order, including the scratch buffers a
    fused C++ kernel allocates internally. The running sum of those records is the memory held
    at each moment; its maximum is the peak. The result of `fn()` is dropped inside the measured
    window, so what it returns counts while it exists. Counts are exact and repeat bit for bit
    (no sampling, no timing), unlike process-level measures (RSS) that the C library's free
    lists and other threads blur.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable, got {type(fn).__name__}")
    with profile(profile_memory=True) as prof:
        result = fn()
        del result
    results = getattr(prof, "kineto_results", None)
    if results is None:
        raise RuntimeError("this torch version's profiler does not expose its allocation records "
                           "(profile().kineto_results); peak_memory needs them")
    records = [e for e in results.events() if e.name() == "[memory]"]
    records.sort(key=lambda e: e.start_ns())  # stable: records of one instant keep their order
    held = peak = 0
    for record in records:
        held += record.nbytes()  # + for an allocation, - for a free
        peak = max(peak, held)
    return int(peak)


def count_flops(fn: Callable[[], object]) -> int:
    """Floating-point operations of `fn()`, counted by PyTorch's FlopCounterMode.

    It counts matrix products (a (m, k) @ (k, n) product is 2·m·k·n: one multiply and one add
    per term) and ignores element-wise work such as softmax, which is O(T²) too but a factor
    ~d smaller. A fused oneDNN LSTM kernel is invisible to it (counts 0): count an LSTM in
    float64, which PyTorch runs step by step with ordinary matrix products.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable, got {type(fn).__name__}")
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def layer_flops(kind: str, seq_len: int, d_model: int, batch: int = 1) -> int:
    """Matrix-product FLOPs of one layer over a sequence of `seq_len` tokens of width d_model.

    "attention" (multi-head self-attention, any number of heads): the four d×d projections,
    4 · 2·T·d², plus the score part 4·T²·d  ->  8·T·d² + 4·T²·d.
    "lstm" (one LSTM layer, hidden size d): per step, four gates from input and hidden state,
    2·(d + d)·4d  ->  16·T·d². Linear in T, but the T steps must run one after another.
    """
    check_choice("kind", kind, ("attention", "lstm"))
    T, d = check_int("seq_len", seq_len, minimum=1), check_int("d_model", d_model, minimum=1)
    check_int("batch", batch, minimum=1)
    if kind == "attention":
        return batch * (8 * T * d * d + 4 * T * T * d)
    return batch * 16 * T * d * d


def _last_output(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The layer's output at the last position, for layers returning a tensor or a tuple whose
    first element is the (B, T, d) output (nn.LSTM, attnlab.MultiHeadAttention)."""
    out = layer(x)
    if isinstance(out, tuple):
        out = out[0]
    if not isinstance(out, torch.Tensor) or out.dim() != 3 or out.shape[:2] != x.shape[:2]:
        raise ValueError(
            f"layer must map x (B, T, d) to an output (B, T, d_out) (or a tuple starting with it), "
            f"got {type(out).__name__} {tuple(out.shape) if isinstance(out, torch.Tensor) else ''}"
        )
    return out[:, -1]  # (B, d_out)


def _float64_copy(layer) -> nn.Module:
    if not isinstance(layer, nn.Module):
        raise TypeError(f"layer must be a torch.nn.Module, got {type(layer).__name__}")
    # float64: tiny gradients do not underflow, and an LSTM runs step by step in PyTorch's own
    # code (the fused oneDNN kernel is float32 only), so every step is visible to autograd.
    return copy.deepcopy(layer).double().eval()


def dependency_depth(layer: nn.Module, seq_len: int, d_model: int) -> int:
    """The longest chain of operations, each needing the one before, from the first token's
    input to the last token's output of `layer` (on one random sequence of `seq_len` tokens).

    This is the number of steps that must run one after another before the last output exists:
    no hardware can run them in parallel, and it is the length of the path a signal from the
    first token travels to the last output. It is read off the autograd graph, with each token
    its own leaf tensor. The longest chain is used, not the shortest path: the graph links
    whole tensors, so an operation applied to all tokens at once (an LSTM projects every input
    in one product) makes short paths that no number actually travels; the longest chain from
    the first token follows the recurrence, which every number from that token must travel.
    """
    T, d = check_int("seq_len", seq_len, minimum=1), check_int("d_model", d_model, minimum=1)
    layer = _float64_copy(layer)
    gen = torch.Generator().manual_seed(0)
    tokens = [torch.randn(1, d, generator=gen, dtype=torch.float64, requires_grad=True)
              for _ in range(T)]
    x = torch.stack(tokens, dim=1)  # (1, T, d)
    root = _last_output(layer, x).grad_fn
    first = id(tokens[0])

    def children(node):
        return [fn for fn, _ in node.next_functions if fn is not None]

    # longest chain to the first token's leaf, each node finished after its children (an
    # explicit post-order: a long LSTM's graph is deeper than Python's recursion limit)
    longest, work = {}, [(root, False)]
    while work:
        node, expanded = work.pop()
        if expanded:
            if id(getattr(node, "variable", None)) == first:  # the AccumulateGrad of token 0
                longest[node] = 0
            else:
                reach = [longest[c] for c in children(node) if longest[c] is not None]
                longest[node] = 1 + max(reach) if reach else None
        elif node not in longest:
            longest[node] = None  # in progress; a graph without cycles never comes back to it
            work.append((node, True))
            work.extend((c, False) for c in children(node) if c not in longest)
    if longest[root] is None:
        raise ValueError("the layer's last output does not depend on the first token")
    return longest[root]


def first_token_gradient(layer: nn.Module, distances: Sequence[int], d_model: int, *,
                         n_samples: int = 16, seed: int = 0) -> np.ndarray:
    """Median over `n_samples` random sequences of ‖∂(Σ y_last) / ∂x_first‖ for each distance.

    For distance n the sequence has n + 1 tokens: how strongly the last output responds to the
    first token n positions away is what training can use to learn a dependency that long.
    The layer is copied to float64 (the original is untouched) so small values do not underflow.
    """
    d = check_int("d_model", d_model, minimum=1)
    check_int("n_samples", n_samples, minimum=1)
    if not isinstance(distances, Sequence) or not distances:
        raise ValueError(f"distances must be a non-empty sequence of positive integers, "
                         f"got {distances!r}")
    for n in distances:
        check_int("each distance", n, minimum=1)
    layer = _float64_copy(layer)
    gen = torch.Generator().manual_seed(seed)
    norms = []
    for n in distances:
        x = torch.randn(n_samples, n + 1, d, generator=gen, dtype=torch.float64, requires_grad=True)
        _last_output(layer, x).sum().backward()  # sequences are independent: one backward for all
        grad = x.grad[:, 0].norm(dim=-1)  # (n_samples,)   sensitivity of y_last to x_first
        norms.append(float(grad.median()))
    return np.array(norms)


def with_forget_bias(lstm: nn.LSTM, bias: float) -> nn.LSTM:
    """A copy of a one-layer `lstm` whose forget gates start at about sigmoid(bias).

    The forget gate f (between 0 and 1) sets how much of the LSTM's memory survives a step:
    c_t = f_t · c_(t-1) + (new input). PyTorch draws every bias from U(-1/√h, 1/√h), so an
    untrained LSTM starts with f ≈ sigmoid(0) = 0.5 and forgets half its memory at each step. A
    forget-gate bias of 1 (Gers et al. 2000; Jozefowicz et al. 2015) or more makes it keep most
    of it. PyTorch stacks the gates as (input, forget, cell, output), so the forget gate's biases
    are rows h..2h of bias_ih_l0 and bias_hh_l0: the first becomes `bias`, the second 0.
    """
    if not isinstance(lstm, nn.LSTM):
        raise TypeError(f"lstm must be a torch.nn.LSTM, got {type(lstm).__name__}")
    if lstm.num_layers != 1 or lstm.bidirectional or not lstm.bias:
        raise ValueError("lstm must be a one-layer, one-direction nn.LSTM with biases")
    bias = check_number("bias", bias)
    copied, h = copy.deepcopy(lstm), lstm.hidden_size
    with torch.no_grad():
        copied.bias_ih_l0[h:2 * h] = bias
        copied.bias_hh_l0[h:2 * h] = 0.0
    return copied


def sci(value: float, digits: int = 1) -> str:
    """`value` in scientific notation with `digits` decimals in the mantissa (5.1e-57).

    The mantissa goes through `attnlab.plumbing.report.fmt`, so while the notebooks are recorded a
    value next to a rounding edge of its last printed digit is refused, as fmt refuses it.
    """
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:.{digits}e}"
    exponent = math.floor(math.log10(abs(value)))
    mantissa = value / 10.0 ** exponent
    if abs(float(fmt(mantissa, digits, guard=False))) >= 10:  # 9.96 -> 10.0: one more power of ten
        exponent, mantissa = exponent + 1, mantissa / 10
    return f"{fmt(mantissa, digits)}e{exponent:+03d}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A plain-text table with aligned columns (cells are printed with str)."""
    if not rows or any(len(r) != len(headers) for r in rows):
        raise ValueError(f"every row must have {len(headers)} cells, one per header")
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def process_peak_memory() -> int | None:
    """The peak resident memory of this process in bytes, as the operating system counts it
    (PyTorch's allocator, Python and every library together); None where it cannot be read.

    POSIX reports ru_maxrss in KiB on Linux and in bytes on macOS; Windows has no `resource`
    module and reports the peak working set through psapi's GetProcessMemoryInfo."""
    if sys.platform == "win32":
        import ctypes  # noqa: PLC0415 - Windows only
        from ctypes import wintypes  # noqa: PLC0415

        class Counters(ctypes.Structure):
            _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD)] + [
                (name, ctypes.c_size_t) for name in (
                    "PeakWorkingSetSize", "WorkingSetSize", "QuotaPeakPagedPoolUsage",
                    "QuotaPagedPoolUsage", "QuotaPeakNonPagedPoolUsage",
                    "QuotaNonPagedPoolUsage", "PagefileUsage", "PeakPagefileUsage")]
        counters = Counters(cb=ctypes.sizeof(Counters))
        try:
            ok = ctypes.windll.psapi.GetProcessMemoryInfo(
                ctypes.windll.kernel32.GetCurrentProcess(), ctypes.byref(counters),
                counters.cb)
        except (AttributeError, OSError):
            return None
        return int(counters.PeakWorkingSetSize) if ok else None
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024

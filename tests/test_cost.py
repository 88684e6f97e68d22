"""attnlab.lessons.cost: each measuring function checked on cases whose answer is known exactly."""
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import raises_each
from torch import nn

import attnlab
from attnlab.lessons import cost
from attnlab.plumbing import report


class CumSum(nn.Module):
    """y_t = x_1 + ... + x_t: every output sees every earlier token with weight exactly 1."""

    def forward(self, x):
        return x.cumsum(dim=1)


# --- measure_times -------------------------------------------------------------------------

def test_measure_times_calls_warmup_calibration_then_repeats():
    calls = {"a": 0, "b": 0}

    def bump(key):
        def fn():
            calls[key] += 1
        return fn

    result = cost.measure_times({"a": bump("a"), "b": bump("b")}, repeats=4, warmup=2,
                                min_sample_s=0)
    assert set(result) == {"a", "b"} and all(v >= 0 for v in result.values())
    assert calls == {"a": 2 + 1 + 4, "b": 2 + 1 + 4}  # warm-up, one calibration call, repeats


def test_measure_times_repeats_fast_calls_within_a_sample():
    calls = []
    cost.measure_times({"fast": lambda: calls.append(1)}, repeats=3, warmup=0, min_sample_s=0.001)
    assert len(calls) > 1 + 3 * 5  # a no-op takes far less than 1 ms, so each sample loops


def test_measure_times_orders_by_work_and_reports_median_seconds():
    sleeps = {"short": lambda: time.sleep(0.001), "long": lambda: time.sleep(0.006)}
    result = cost.measure_times(sleeps, repeats=5, warmup=0, min_sample_s=0)
    assert result["long"] >= 0.006
    assert result["long"] > result["short"]


def test_thread_clock_ignores_time_spent_off_the_cpu():
    sleep = {"sleep": lambda: time.sleep(0.005)}
    wall = cost.measure_times(sleep, repeats=3, warmup=0, min_sample_s=0)
    cpu = cost.measure_times(sleep, repeats=3, warmup=0, min_sample_s=0, clock="thread")
    assert wall["sleep"] >= 0.005 and cpu["sleep"] < 0.002


def test_thread_clock_refuses_several_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(ValueError, match="set_num_threads"):
            cost.measure_times({"x": lambda: None}, clock="thread")
    finally:
        torch.set_num_threads(before)


def test_measure_times_wants_a_mapping_of_callables():
    raises_each([(lambda: cost.measure_times({}), "non-empty mapping"),
                 (lambda: cost.measure_times({"x": 3}), r"thunks\['x'\] must be callable")],
                TypeError)


# --- peak_memory ---------------------------------------------------------------------------

N = 1_000_000


def test_peak_memory_counts_one_allocation_exactly():
    peak = cost.peak_memory(lambda: torch.empty(N))
    assert 4 * N <= peak < 4 * N + 1024


def test_peak_memory_is_the_peak_not_the_sum():
    def one_after_another():
        for _ in range(3):
            a = torch.empty(N)
            del a

    def all_at_once():
        return [torch.empty(N) for _ in range(3)]

    assert cost.peak_memory(one_after_another) < 4 * N + 1024
    assert cost.peak_memory(all_at_once) >= 3 * 4 * N


def test_peak_memory_is_exactly_repeatable_and_sees_the_score_matrix():
    T, d = 256, 32
    q, k, v = (torch.randn(1, 1, T, d) for _ in range(3))
    with torch.no_grad():
        ours = [cost.peak_memory(lambda: attnlab.scaled_dot_product_attention(q, k, v))
                for _ in range(2)]
        fused = cost.peak_memory(lambda: F.scaled_dot_product_attention(q, k, v))
    assert ours[0] == ours[1]
    assert ours[0] >= 2 * 4 * T * T  # scores and weights, both (T, T) float32, alive together
    assert fused < 4 * T * T  # the fused kernel never holds a whole T×T matrix


def test_the_measures_refuse_what_is_not_callable():
    with pytest.raises(TypeError, match="fn must be a zero-argument callable"):
        cost.peak_memory(torch.empty(3))
    with pytest.raises(TypeError, match="fn must be a zero-argument callable"):
        cost.count_flops("not callable")


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_peak_memory_keeps_stderr_clean():
    """The notebook must not print the profiler's start/stop log lines on stderr."""
    code = ("import torch; from attnlab.lessons import cost; "
            "print(cost.peak_memory(lambda: torch.empty(10)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == "" and int(out.stdout) >= 40


# --- FLOPs ---------------------------------------------------------------------------------

def test_layer_flops_matches_the_counter():
    for T, d, heads in [(10, 16, 2), (33, 24, 3)]:
        mha = attnlab.MultiHeadAttention(d, heads)
        lstm = nn.LSTM(d, d, batch_first=True).double()  # float64: step by step, counted
        x = torch.randn(2, T, d)
        with torch.no_grad():
            assert cost.count_flops(lambda mha=mha, x=x: mha(x)) == \
                cost.layer_flops("attention", T, d, batch=2), (T, d, heads)
            assert cost.count_flops(lambda lstm=lstm, x=x: lstm(x.double())) == \
                cost.layer_flops("lstm", T, d, batch=2), (T, d, heads)


# --- paths, gradients, order ---------------------------------------------------------------

def test_dependency_depth_grows_with_recurrence_and_not_with_attention():
    torch.manual_seed(0)
    lstm, mha = nn.LSTM(8, 8, batch_first=True), attnlab.MultiHeadAttention(8, 2)
    lstm_depth = [cost.dependency_depth(lstm, T, 8) for T in (16, 32, 64)]
    assert lstm_depth[0] >= 16
    assert lstm_depth[2] - lstm_depth[1] == 2 * (lstm_depth[1] - lstm_depth[0])
    # attention's chain does not grow with T; rows under 16 keys take attnlab's written-out
    # softmax (a few more operations), so short and long sequences are compared separately
    assert len({cost.dependency_depth(mha, T, 8) for T in (16, 32, 64)}) == 1
    assert len({cost.dependency_depth(mha, T, 8) for T in (4, 8, 12)}) == 1
    assert next(lstm.parameters()).dtype == torch.float32  # measured on a copy


def test_dependency_depth_of_a_cumulative_sum():
    # stack -> cumsum -> select: the first token's leaf is three operations below the output
    assert cost.dependency_depth(CumSum(), 5, 4) == 3


def test_first_token_gradient_is_exact_on_a_cumulative_sum():
    g = cost.first_token_gradient(CumSum(), [1, 5, 50], 9, n_samples=3)
    np.testing.assert_allclose(g, [3.0, 3.0, 3.0])  # ∂(Σ y_T)/∂x_1 = (1, ..., 1): norm sqrt(9)


def test_first_token_gradient_vanishes_through_an_lstm_but_not_through_attention():
    torch.manual_seed(0)
    lstm, mha = nn.LSTM(16, 16, batch_first=True), attnlab.MultiHeadAttention(16, 2)
    g_lstm = cost.first_token_gradient(lstm, [1, 64], 16, n_samples=4)
    g_attn = cost.first_token_gradient(mha, [1, 64], 16, n_samples=4)
    assert g_lstm[1] < 1e-6 * g_lstm[0]
    assert g_attn[1] > 1e-3 * g_attn[0]
    np.testing.assert_array_equal(g_lstm, cost.first_token_gradient(lstm, [1, 64], 16, n_samples=4))


def test_first_token_gradient_rejects_bad_arguments():
    with pytest.raises(ValueError, match="distances"):
        cost.first_token_gradient(CumSum(), [], 4)
    with pytest.raises(TypeError, match="layer"):
        cost.first_token_gradient(lambda x: x, [1], 4)
    with pytest.raises(ValueError, match=r"\(B, T, d"):
        cost.first_token_gradient(nn.Flatten(), [2], 4)


def test_a_forget_bias_keeps_the_lstm_gradient_alive_longer():
    torch.manual_seed(0)
    lstm = nn.LSTM(8, 8, batch_first=True)
    before = lstm.bias_ih_l0.detach().clone()
    biased = cost.with_forget_bias(lstm, 3.0)
    torch.testing.assert_close(lstm.bias_ih_l0.detach(), before)  # the original is untouched
    assert (biased.bias_ih_l0[8:16] == 3).all() and (biased.bias_hh_l0[8:16] == 0).all()
    torch.testing.assert_close(biased.bias_ih_l0[:8], before[:8])  # the other gates keep theirs
    g = {b: cost.first_token_gradient(m, [32], 8, n_samples=4)[0]
         for b, m in ((None, lstm), (1, cost.with_forget_bias(lstm, 1.0)), (3, biased))}
    assert g[None] < g[1] < g[3]


def test_with_forget_bias_rejects_what_it_cannot_set():
    with pytest.raises(TypeError, match="nn.LSTM"):
        cost.with_forget_bias(nn.GRU(4, 4), 1.0)
    with pytest.raises(ValueError, match="one-layer"):
        cost.with_forget_bias(nn.LSTM(4, 4, num_layers=2), 1.0)


def test_sci_writes_a_mantissa_and_a_power_of_ten():
    for value, text in [(5.12329172e-57, "5.1e-57"), (-0.02, "-2.0e-02"), (9.97e-3, "1.0e-02"),
                        (0.0, "0.0e+00")]:
        assert cost.sci(value) == text, value


def test_sci_refuses_a_mantissa_on_a_rounding_edge_while_recording(monkeypatch):
    monkeypatch.setenv("ATTNLAB_RECORDING", "1")
    with pytest.raises(report.FragileOutput):
        cost.sci(2.2500001e-5)  # mantissa 2.25...: the first decimal could print as 2 or 3
    assert cost.sci(2.3e-5) == "2.3e-05"


def test_format_table_aligns_columns():
    text = cost.format_table(["T", "ms"], [(64, "1.5"), (1024, "30.25")])
    lines = text.splitlines()
    assert lines[0] == "T     ms" and lines[1] == "----  -----" and lines[3] == "1024  30.25"
    with pytest.raises(ValueError, match="2 cells"):
        cost.format_table(["T", "ms"], [(1,)])


def test_process_peak_memory_is_the_os_count_in_bytes(monkeypatch):
    resource = pytest.importorskip("resource")
    peak = cost.process_peak_memory()
    assert 10 * 2**20 < peak < 2**40  # this process has torch loaded: tens of MB at least
    assert peak >= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux -> bytes
    monkeypatch.setitem(sys.modules, "resource", None)  # as on a system without it
    assert cost.process_peak_memory() is None

# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · What attention costs
#
# Attention tutorials often end with the same table: self-attention against a recurrent layer
# (RNN/LSTM). Here each row of that table becomes a measurement on this machine: time, memory,
# floating-point operations, the chain of steps from the first token to the last, and the
# gradient that makes that trip.
#
# All measuring code is in `attnlab.cost`. Times are medians of several interleaved runs after a
# warm-up, on the thread's CPU clock: torch runs on one thread here, and that clock counts only
# our own work, not the moments a shared machine gives the core to someone else. Times still
# differ from machine to machine, so the cells that print them are not compared by the tests
# and only check facts that hold anywhere (a slope inside a band, growth with T).

# %%
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import NullLocator
import torch.nn.functional as F
from torch import nn

import attnlab
from attnlab import cost

attnlab.seed_everything(0)

# %% [markdown]
# ## The claims
#
# T is the sequence length, d the width of each token's vector.

# %%
CLAIMS = [
    ("path length, token 1 -> token T", "O(1): one step", "O(T): T steps"),
    ("sequential steps (parallelism)", "O(1): all tokens at once", "O(T): one token after another"),
    ("compute per layer", "O(T²·d) scores + O(T·d²)", "O(T·d²)"),
    ("memory per layer", "O(T²) weights per head", "O(T·d)"),
    ("long dependencies", "direct path: no step-by-step decay", "gradient fades over T steps"),
    ("position information", "must be added", "built in (order of the steps)"),
]
print(cost.format_table(["", "self-attention", "recurrent layer"], CLAIMS))

# %% [markdown]
# ## 1 · Attention against T: time and memory
#
# Attention as the equation writes it, `attnlab.scaled_dot_product_attention`, stores the whole
# T×T matrix of scores and then of weights. PyTorch's fused
# `torch.nn.functional.scaled_dot_product_attention` computes the same output block by block
# and never holds the T×T matrix. Same inputs for both: one sequence, 2 heads of width 64.

# %%
SEQ_LENS = [128, 256, 512, 1024, 2048]
HEADS, D_HEAD = 2, 64
qkv = {T: [torch.randn(1, HEADS, T, D_HEAD) for _ in range(3)] for T in SEQ_LENS}  # q, k, v: (1, H, T, 64)
IMPLS = {"attnlab": attnlab.scaled_dot_product_attention, "fused": F.scaled_dot_product_attention}

with torch.no_grad():
    out_ours, _ = attnlab.scaled_dot_product_attention(*qkv[256])
    out_fused = F.scaled_dot_product_attention(*qkv[256])
same = bool((out_ours - out_fused).abs().max() < 1e-5)
print(f"same output: max |difference| < 1e-5: {same}")
assert same

# %% [markdown]
# **Time.** A T² cost has slope 2 on log-log axes, whatever the machine's speed. The slope is
# fitted from T = 256 on, where the T² work dominates fixed per-call overheads.

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    sdpa_times = cost.measure_times(
        {(name, T): (lambda f=f, T=T: f(*qkv[T])) for name, f in IMPLS.items() for T in SEQ_LENS},
        repeats=7, warmup=1, clock="thread")
t_ours = np.array([sdpa_times["attnlab", T] for T in SEQ_LENS])
t_fused = np.array([sdpa_times["fused", T] for T in SEQ_LENS])
slope_ours = cost.loglog_slope(SEQ_LENS[1:], t_ours[1:])
slope_fused = cost.loglog_slope(SEQ_LENS[1:], t_fused[1:])
print(cost.format_table(
    ["T", "attnlab ms", "fused ms", "attnlab / fused"],
    [(T, f"{a * 1e3:.2f}", f"{b * 1e3:.2f}", f"{a / b:.1f}") for T, a, b in zip(SEQ_LENS, t_ours, t_fused)]))
print(f"log-log slope of time (T >= {SEQ_LENS[1]}): attnlab {slope_ours:.2f}, fused {slope_fused:.2f}")
for t in (t_ours, t_fused):  # 4× the length is 16× the work: time must at least double
    assert all(t[i + 2] > 2 * t[i] for i in range(len(SEQ_LENS) - 2)), "time must grow with T"
assert 1.4 < slope_ours < 3.5 and 1.4 < slope_fused < 3.5, (slope_ours, slope_fused)

# %% [markdown]
# **Memory.** `cost.peak_memory` reads PyTorch's allocation records while the call runs (every
# allocation, including the fused kernel's scratch buffers) and reports the peak above what was
# held before. Next to it: the size of one T×T float32 matrix per head, counted by hand,
# 4 bytes · H · T².

# %%
with torch.no_grad():
    sdpa_mem = {(name, T): cost.peak_memory(lambda f=f, T=T: f(*qkv[T]))
                for name, f in IMPLS.items() for T in SEQ_LENS}
tt_bytes = np.array([4 * HEADS * T * T for T in SEQ_LENS])  # one (H, T, T) float32 matrix
m_ours = np.array([sdpa_mem["attnlab", T] for T in SEQ_LENS])
print(cost.format_table(
    ["T", "T×T matrix MiB (by hand)", "attnlab peak MiB (measured)", "peak / T×T matrix"],
    [(T, f"{c / 2**20:.2f}", f"{m / 2**20:.2f}", f"{m / c:.2f}") for T, c, m in zip(SEQ_LENS, tt_bytes, m_ours)]))
mem_slope_ours = cost.loglog_slope(SEQ_LENS[1:], m_ours[1:])
print(f"log-log slope of attnlab's peak memory (T >= {SEQ_LENS[1]}): {mem_slope_ours:.2f}")
assert 1.9 < mem_slope_ours < 2.1
held = m_ours[-1] / tt_bytes[-1]
if held >= 1.9:
    print(f"At T = {SEQ_LENS[-1]} the peak is {held:.2f} T×T matrices: the scores and the softmax "
          f"weights exist at the same moment.")
else:
    print(f"At T = {SEQ_LENS[-1]} the peak is {held:.2f} T×T matrices.")

# %% [markdown]
# The fused kernel's peak (its scratch buffers depend on the machine, so this cell is not
# compared by the tests):

# %% tags=["nbval-ignore-output"]
m_fused = np.array([sdpa_mem["fused", T] for T in SEQ_LENS])
mem_slope_fused = cost.loglog_slope(SEQ_LENS, m_fused)
print(cost.format_table(
    ["T", "attnlab MiB", "fused MiB", "attnlab / fused"],
    [(T, f"{a / 2**20:.2f}", f"{b / 2**20:.2f}", f"{a / b:.1f}") for T, a, b in zip(SEQ_LENS, m_ours, m_fused)]))
print(f"log-log slope of the fused kernel's peak memory: {mem_slope_fused:.2f}")
gap = m_ours[-1] / m_fused[-1]
assert mem_slope_fused < 1.5, "the fused kernel must not store the T×T matrix"
assert gap > 8, gap
if m_fused[-1] < tt_bytes[-1]:
    print(f"At T = {SEQ_LENS[-1]} the fused kernel needs {gap:.0f}× less memory: less than one T×T "
          f"matrix, so it never stores one.")
else:
    print(f"At T = {SEQ_LENS[-1]} the fused kernel needs {gap:.0f}× less memory, but still at least "
          f"one T×T matrix.")

# %%
def length_axis(ax, lengths, ylabel, title):
    """Log-log axes with the measured sequence lengths as the x ticks (reused below)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(lengths, labels=[str(T) for T in lengths])
    ax.set(xlabel="sequence length T", ylabel=ylabel, title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4))
ax_t.plot(SEQ_LENS, t_ours * 1e3, "o-", label="attnlab (stores T×T)")
ax_t.plot(SEQ_LENS, t_fused * 1e3, "s-", label="torch fused")
ax_t.plot(SEQ_LENS, t_ours[-1] * 1e3 * (np.array(SEQ_LENS) / SEQ_LENS[-1]) ** 2, "k:", label="∝ T²")
length_axis(ax_t, SEQ_LENS, "forward time (ms)", "time")
ax_m.plot(SEQ_LENS, m_ours / 2**20, "o-", label="attnlab, measured")
ax_m.plot(SEQ_LENS, m_fused / 2**20, "s-", label="torch fused, measured")
ax_m.plot(SEQ_LENS, tt_bytes / 2**20, "k:", label="one T×T matrix (by hand)")
length_axis(ax_m, SEQ_LENS, "peak memory (MiB)", "peak memory")
plt.show()

# %% [markdown]
# ## 2 · "Four times the context costs sixteen times the attention compute"
#
# The score part, $QK^\top$ and then weights·$V$, is two matrix products of T·T·d terms each.
# `cost.count_flops` counts the operations PyTorch actually performs (FlopCounterMode);
# `cost.attention_flops` is the formula 2·T·T·(d_k + d_v).

# %%
with torch.no_grad():
    counted = {T: cost.count_flops(lambda T=T: attnlab.scaled_dot_product_attention(*qkv[T]))
               for T in SEQ_LENS}
for T in SEQ_LENS:
    assert counted[T] == cost.attention_flops(T, T, D_HEAD, batch=HEADS)
pairs = [(T, 4 * T) for T in SEQ_LENS if 4 * T in SEQ_LENS]
print(cost.format_table(
    ["T", "4T", "FLOPs at T", "FLOPs at 4T", "ratio"],
    [(a, b, f"{counted[a]:,}", f"{counted[b]:,}", f"{counted[b] / counted[a]:.1f}") for a, b in pairs]))
assert all(counted[b] == 16 * counted[a] for a, b in pairs)
print(f"each 4× step in T multiplies the counted score FLOPs by {counted[pairs[0][1]] / counted[pairs[0][0]]:g}")

# %% [markdown]
# What one waits for is time:

# %% tags=["nbval-ignore-output"]
time_ratio = {(name, a): sdpa_times[name, b] / sdpa_times[name, a] for a, b in pairs for name in IMPLS}
print(cost.format_table(["context", "implementation", "time ratio"],
                        [(f"{a} -> {b}", name, f"{time_ratio[name, a]:.1f}") for a, b in pairs for name in IMPLS]))
ratio, ratio_fused = time_ratio["attnlab", pairs[-1][0]], time_ratio["fused", pairs[-1][0]]
assert 6 < ratio < 80 and 6 < ratio_fused < 80, (ratio, ratio_fused)


def near_16(r):
    return 16 / 1.25 < r < 16 * 1.25


a, b = pairs[-1]
print(f"{a} -> {b}: attnlab takes {ratio:.0f}× longer, the fused kernel {ratio_fused:.0f}×.")
if near_16(ratio) and near_16(ratio_fused):
    print("Both are within 25% of 16×: time follows the operation count.")
elif ratio > 16 * 1.25 and near_16(ratio_fused):
    print(f"The fused kernel, which never stores the T×T matrix, follows the operation count. The extra\n"
          f"in the written-out version goes with what only it does: writing and reading two T×T\n"
          f"matrices ({m_ours[-1] / 2**20:.0f} MiB at T = {b}).")
else:
    for name, r in (("attnlab", ratio), ("fused", ratio_fused)):
        print(f"{name}: {'more' if r > 16 else 'less'} than the 16× the operation count predicts.")

# %% [markdown]
# A whole self-attention layer also has its four d×d projections, 8·T·d² operations that grow
# only linearly. So 4× the context costs between 4× and 16×, closer to 16× the more T exceeds d
# (`cost.layer_flops`, checked against the counter for d = 64):

# %%
D_MODEL = 64
mha = attnlab.MultiHeadAttention(D_MODEL, 4)
with torch.no_grad():
    n_counted = cost.count_flops(lambda: mha(torch.randn(1, 256, D_MODEL)))
assert n_counted == cost.layer_flops("attention", 256, D_MODEL)
LAYER_GRID = [16, 64, 256, 1024, 4096]
layer_ratio = [cost.layer_flops("attention", 4 * T, D_MODEL) / cost.layer_flops("attention", T, D_MODEL)
               for T in LAYER_GRID]
print(cost.format_table(["T", "T / d", "layer FLOPs(4T) / FLOPs(T)"],
                        [(T, f"{T / D_MODEL:.2f}", f"{r:.2f}") for T, r in zip(LAYER_GRID, layer_ratio)]))
assert all(4 < r < 16 for r in layer_ratio) and all(np.diff(layer_ratio) > 0)

# %%
fig, (ax_r, ax_l) = plt.subplots(1, 2, figsize=(11, 4))
labels = [f"{a}->{b}" for a, b in pairs]
xs = np.arange(len(pairs))
ax_r.bar(xs - 0.2, [time_ratio["attnlab", a] for a, _ in pairs], 0.4, label="attnlab time")
ax_r.bar(xs + 0.2, [time_ratio["fused", a] for a, _ in pairs], 0.4, label="fused time")
ax_r.axhline(16, color="k", ls=":", label="score FLOPs (counted): 16×")
ax_r.set(xticks=xs, xticklabels=labels, xlabel="context T -> 4T", ylabel="ratio", title="4× context: score part",
         ylim=(0, 1.5 * max(max(time_ratio.values()), 16)))
ax_r.legend(loc="upper left", ncol=2, fontsize=8)
ax_l.semilogx(np.array(LAYER_GRID) / D_MODEL, layer_ratio, "o-", label="whole layer, d = 64")
ax_l.axhline(16, color="k", ls=":", label="score part alone")
ax_l.axhline(4, color="gray", ls=":", label="linear cost")
ax_l.set(xlabel="T / d", ylabel="FLOPs(4T) / FLOPs(T)", title="4× context: whole attention layer")
ax_l.legend()
plt.show()

# %% [markdown]
# ## 3 · A self-attention layer against an LSTM layer
#
# Both map a (1, T, 64) sequence to a (1, T, 64) sequence: `attnlab.MultiHeadAttention(64, 4)`
# and `torch.nn.LSTM(64, 64)`. First what can be counted exactly: operations, and the longest
# chain of operations that must run one after another (`cost.dependency_depth`, read off the
# autograd graph from the first token to the last output). Operations divided by that chain is
# the work a parallel machine could do at each step.

# %%
LAYER_LENS = [64, 128, 256, 512, 1024]
lstm = nn.LSTM(D_MODEL, D_MODEL, batch_first=True)
x_len = {T: torch.randn(1, T, D_MODEL) for T in LAYER_LENS}

lstm64 = copy.deepcopy(lstm).double()  # float64 LSTM runs step by step, so the counter sees it
with torch.no_grad():
    assert cost.count_flops(lambda: lstm64(x_len[64].double())) == cost.layer_flops("lstm", 64, D_MODEL)

depth = {(kind, T): cost.dependency_depth(layer, T, D_MODEL)
         for kind, layer in (("lstm", lstm), ("attention", mha)) for T in LAYER_LENS}
flops = {key: cost.layer_flops(key[0], key[1], D_MODEL) for key in depth}
work = {key: flops[key] / depth[key] for key in depth}  # operations available at each step
print(cost.format_table(
    ["T", "LSTM MFLOPs", "attention MFLOPs", "LSTM chain", "attention chain",
     "LSTM MFLOPs/step", "attention MFLOPs/step"],
    [(T, f"{flops['lstm', T] / 1e6:.1f}", f"{flops['attention', T] / 1e6:.1f}", depth["lstm", T],
      depth["attention", T], f"{work['lstm', T] / 1e6:.3f}", f"{work['attention', T] / 1e6:.3f}")
     for T in LAYER_LENS]))
depth_slope_lstm = cost.loglog_slope(LAYER_LENS, [depth["lstm", T] for T in LAYER_LENS])
depth_slope_attn = cost.loglog_slope(LAYER_LENS, [depth["attention", T] for T in LAYER_LENS])
flop_slope_lstm = cost.loglog_slope(LAYER_LENS[2:], [flops["lstm", T] for T in LAYER_LENS[2:]])
flop_slope_attn = cost.loglog_slope(LAYER_LENS[2:], [flops["attention", T] for T in LAYER_LENS[2:]])
print(f"log-log slope of the chain: LSTM {depth_slope_lstm:.2f}, attention {depth_slope_attn:.2f}")
print(f"log-log slope of the FLOPs (T >= {LAYER_LENS[2]}): LSTM {flop_slope_lstm:.2f}, attention {flop_slope_attn:.2f}")
assert all(depth["lstm", T] >= T for T in LAYER_LENS) and depth_slope_lstm > 0.9
assert len({depth["attention", T] for T in LAYER_LENS}) == 1, "attention's chain must not depend on T"
flop_cross = next(T for T in LAYER_LENS if flops["attention", T] > flops["lstm", T])
print(f"attention needs more operations than the LSTM from T = {flop_cross} on "
      f"(the formulas are equal at T = 2d = {2 * D_MODEL})")

# %% [markdown]
# **Time and memory.** These layers run on one CPU thread, where nothing runs side by side
# anyway, so the LSTM's long chain costs it nothing extra here. On parallel hardware (a GPU)
# attention's short, fixed chain lets it process all T tokens at once, while the LSTM's T steps
# still wait for each other; on one thread the operation count and the memory traffic decide.

# %% tags=["nbval-ignore-output"]
LAYERS = {"lstm": lstm, "attention": mha}
with torch.no_grad():
    layer_times = cost.measure_times(
        {(kind, T): (lambda m=m, T=T: m(x_len[T])) for kind, m in LAYERS.items() for T in LAYER_LENS},
        repeats=7, warmup=1, clock="thread")
    layer_mem = {(kind, T): cost.peak_memory(lambda m=m, T=T: m(x_len[T]))
                 for kind, m in LAYERS.items() for T in LAYER_LENS}
t_lstm = np.array([layer_times["lstm", T] for T in LAYER_LENS])
t_attn = np.array([layer_times["attention", T] for T in LAYER_LENS])
m_lstm = np.array([layer_mem["lstm", T] for T in LAYER_LENS])
m_attn = np.array([layer_mem["attention", T] for T in LAYER_LENS])
print(cost.format_table(
    ["T", "LSTM ms", "attention ms", "LSTM µs per step", "LSTM MiB", "attention MiB"],
    [(T, f"{a * 1e3:.2f}", f"{b * 1e3:.2f}", f"{a / T * 1e6:.1f}", f"{c / 2**20:.2f}", f"{d / 2**20:.2f}")
     for T, a, b, c, d in zip(LAYER_LENS, t_lstm, t_attn, m_lstm, m_attn)]))
time_slope_lstm = cost.loglog_slope(LAYER_LENS[1:], t_lstm[1:])
time_slope_attn = cost.loglog_slope(LAYER_LENS[2:], t_attn[2:])
mem_slope_lstm = cost.loglog_slope(LAYER_LENS, m_lstm)
mem_slope_attn = cost.loglog_slope(LAYER_LENS, m_attn)
print(f"log-log slopes, time: LSTM {time_slope_lstm:.2f} (T >= {LAYER_LENS[1]}), "
      f"attention {time_slope_attn:.2f} (T >= {LAYER_LENS[2]})")
print(f"log-log slopes, peak memory: LSTM {mem_slope_lstm:.2f}, attention {mem_slope_attn:.2f}")
assert 0.5 < time_slope_lstm < 1.5 and 1.3 < time_slope_attn < 4.0, (time_slope_lstm, time_slope_attn)
assert time_slope_attn > time_slope_lstm + 0.4, "attention's time must grow faster with T than the LSTM's"
assert mem_slope_lstm < 1.3 and 1.7 < mem_slope_attn < 2.2, (mem_slope_lstm, mem_slope_attn)
speed = t_attn / t_lstm  # > 1: attention is slower
print("attention time / LSTM time: " + ", ".join(f"T={T}: {r:.1f}" for T, r in zip(LAYER_LENS, speed)))
slower_from = next((T for i, T in enumerate(LAYER_LENS) if all(speed[i:] > 1)), None)
widens = bool(all(np.diff(speed[-3:]) > 0))
if slower_from is None:
    print("At the longest T measured, attention was not slower than the LSTM.")
else:
    print(f"Attention was slower than the LSTM at every T from {slower_from} on"
          + (", and the gap widens with T: T² against T." if widens else "."))

# %%
fig, (ax_t, ax_m, ax_d) = plt.subplots(1, 3, figsize=(15, 4))
for kind, marker in (("lstm", "o-"), ("attention", "s-")):
    label = "LSTM" if kind == "lstm" else "self-attention"
    ax_t.plot(LAYER_LENS, [layer_times[kind, T] * 1e3 for T in LAYER_LENS], marker, label=label)
    ax_m.plot(LAYER_LENS, [layer_mem[kind, T] / 2**20 for T in LAYER_LENS], marker, label=label)
    ax_d.plot(LAYER_LENS, [depth[kind, T] for T in LAYER_LENS], marker, label=label)
length_axis(ax_t, LAYER_LENS, "forward time (ms)", "time")
length_axis(ax_m, LAYER_LENS, "peak memory (MiB)", "peak memory")
length_axis(ax_d, LAYER_LENS, "operations one after another", "chain: first token -> last output")
plt.show()

# %% [markdown]
# ## 4 · Path length: the gradient from the last output back to the first token
#
# To learn that the first token matters for the last output, training needs the gradient
# ∂y_T / ∂x_1. In an LSTM it is a product of T per-step factors; in self-attention the last
# output reads the first token directly. `cost.first_token_gradient` gives its norm, median of
# 16 random sequences, for each distance (freshly initialised layers, d = 32, float64).

# %%
DISTANCES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
torch.manual_seed(0)
small_lstm, small_attn = nn.LSTM(32, 32, batch_first=True), attnlab.MultiHeadAttention(32, 4)
g_lstm = cost.first_token_gradient(small_lstm, DISTANCES, 32)
g_attn = cost.first_token_gradient(small_attn, DISTANCES, 32)
print(cost.format_table(["distance", "LSTM ‖∂y_T/∂x_1‖", "attention ‖∂y_T/∂x_1‖"],
                        [(n, f"{a:.2e}", f"{b:.2e}") for n, a, b in zip(DISTANCES, g_lstm, g_attn)]))
far = np.array(DISTANCES) >= 8
per_step = float(np.exp(np.polyfit(np.array(DISTANCES)[far], np.log(g_lstm[far]), 1)[0]))
grad_slope_attn = cost.loglog_slope(np.array(DISTANCES)[far], g_attn[far])
print(f"LSTM: the gradient is multiplied by {per_step:.2f} per step (exponential decay)")
print(f"attention: log-log slope {grad_slope_attn:.2f} (a power of the distance)")
assert per_step < 0.9 and -1.5 < grad_slope_attn < -0.5
assert g_attn[-1] > 1e6 * g_lstm[-1]
print(f"at distance {DISTANCES[-1]} attention's gradient is {g_attn[-1] / g_lstm[-1]:.1e} times the LSTM's")

# %%
fig, ax = plt.subplots(figsize=(6, 4))
ax.semilogy(DISTANCES, g_lstm, "o-", label="LSTM")
ax.semilogy(DISTANCES, g_attn, "s-", label="self-attention")
ax.set(xlabel="distance from the first token to the last output", ylabel="‖∂y_T / ∂x_1‖",
       title="gradient that reaches the first token")
ax.legend()
ax.grid(True, which="both", alpha=0.3)
plt.show()

# %%
if grad_slope_attn < -0.5:
    print(f"Attention's gradient shrinks too, like distance^{grad_slope_attn:.2f}: the last token "
          f"spreads its weight over all T tokens, each getting about 1/T of it. But that is a power "
          f"of the distance, while the LSTM's is a factor {per_step:.2f} raised to the distance.")
else:
    print(f"Attention's gradient hardly depends on the distance (slope {grad_slope_attn:.2f}), while "
          f"the LSTM's is a factor {per_step:.2f} raised to the distance.")

# %% [markdown]
# ## 5 · Position information
#
# Shuffle the tokens. If the layer cannot see order, its outputs are shuffled the same way and
# nothing else changes: `cost.order_sensitivity` is then 0.

# %%
x_order = torch.randn(1, 16, 32)
perm = torch.randperm(16)
with_positions = nn.Sequential(attnlab.PositionalEncoding(32), small_attn)
sensitivity = {
    "self-attention": cost.order_sensitivity(small_attn, x_order, perm),
    "self-attention + positions": cost.order_sensitivity(with_positions, x_order, perm),
    "LSTM": cost.order_sensitivity(small_lstm, x_order, perm),
}
print(cost.format_table(["layer", "order sensitivity"], [(k, f"{v:.3f}") for k, v in sensitivity.items()]))
assert sensitivity["self-attention"] < 1e-5
assert sensitivity["self-attention + positions"] > 0.01 and sensitivity["LSTM"] > 0.01

# %%
fig, ax = plt.subplots(figsize=(6, 3))
bars = ax.barh(list(sensitivity), list(sensitivity.values()))
ax.bar_label(bars, fmt="%.3f", padding=3)
ax.set_xlim(0, 1.2 * max(sensitivity.values()))
ax.set(xlabel="‖f(shuffled x) − shuffled f(x)‖ / ‖f(x)‖", title="does the layer see word order?")
plt.show()

# %% [markdown]
# ## The table, measured
#
# Each verdict below is computed from this notebook's numbers ("holds" when the measurement
# agrees with the claim).

# %%
def verdict(ok):
    return "holds" if ok else "does NOT hold here"


T_max = LAYER_LENS[-1]
measured = [
    ("path length / sequential steps (chain slope)", f"{depth_slope_lstm:.2f}", f"{depth_slope_attn:.2f}",
     verdict(depth_slope_lstm > 0.9 and abs(depth_slope_attn) < 0.05)),
    (f"parallelism (MFLOPs per step, T={T_max})", f"{work['lstm', T_max] / 1e6:.3f}",
     f"{work['attention', T_max] / 1e6:.1f}", verdict(work["attention", T_max] > 100 * work["lstm", T_max])),
    (f"compute per layer (FLOPs slope, T >= {LAYER_LENS[2]})", f"{flop_slope_lstm:.2f}", f"{flop_slope_attn:.2f}",
     verdict(flop_slope_attn > flop_slope_lstm + 0.4)),
    ("4× context, score FLOPs", "-", f"{counted[pairs[-1][1]] / counted[pairs[-1][0]]:.0f}×",
     verdict(counted[pairs[-1][1]] == 16 * counted[pairs[-1][0]])),
    ("memory per layer (slope of written-out attention)", "-", f"{mem_slope_ours:.2f}",
     verdict(abs(mem_slope_ours - 2) < 0.1)),
    (f"long dependencies (gradient at distance {DISTANCES[-1]})", f"{g_lstm[-1]:.1e}", f"{g_attn[-1]:.1e}",
     verdict(g_attn[-1] > 1e6 * g_lstm[-1])),
    ("position information (order sensitivity)",
     f"{sensitivity['LSTM']:.3f}", f"{sensitivity['self-attention']:.3f}",
     verdict(sensitivity["self-attention"] < 1e-5 < sensitivity["LSTM"])),
]
print(cost.format_table(["claim", "LSTM", "self-attention", "verdict"], measured))

# %% [markdown]
# The measured times and memory of the two layers (machine-dependent, not compared by the tests):

# %% tags=["nbval-ignore-output"]
timed = [
    ("compute per layer (time slope)", f"{time_slope_lstm:.2f}", f"{time_slope_attn:.2f}",
     verdict(time_slope_attn > time_slope_lstm + 0.4)),
    ("memory per layer (peak slope)", f"{mem_slope_lstm:.2f}", f"{mem_slope_attn:.2f}",
     verdict(mem_slope_attn > mem_slope_lstm + 0.4)),
    *[(f"4× context, {name} time (claim 16×)", "-", f"{r:.0f}×",
       "holds" if near_16(r) else ("costs more than claimed" if r > 16 else "costs less than claimed"))
      for name, r in (("attnlab", ratio), ("fused", ratio_fused))],
    ("fused kernel memory slope", "-", f"{mem_slope_fused:.2f}", verdict(mem_slope_fused < 1.5)),
]
print(cost.format_table(["claim", "LSTM", "self-attention", "verdict"], timed))

# %% [markdown]
# **What to take away**, from the verdicts above:

# %%
holds = {row[0]: row[-1] == "holds" for row in measured}
if all(holds.values()):
    print("Every counted row of the table holds on this machine: self-attention buys a constant chain\n"
          "between any two tokens and a gradient that does not decay step by step, pays for it with T²\n"
          "compute and, written out, T² memory, and cannot see word order without added positions.")
else:
    print("Rows that did not hold here:", ", ".join(k for k, ok in holds.items() if not ok))

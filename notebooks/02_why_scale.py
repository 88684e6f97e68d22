# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Why divide by √d_k?
#
# Attention computes $\text{softmax}(q \cdot k / \sqrt{d_k})$. The paper that introduced it
# ("Attention Is All You Need", 2017) justifies the $\sqrt{d_k}$ in one sentence: for large
# $d_k$ the dot products grow large, pushing the softmax "into regions where it has extremely
# small gradients". Here we measure each part of that sentence instead of taking it on trust.

# %% [markdown]
# ## What you will learn
#
# - how the spread of $q \cdot k$ grows with $d_k$, and why it grows like $\sqrt{d_k}$;
# - what that spread does to the softmax: without the division it becomes nearly *one-hot*
#   (all the weight on one key);
# - what a saturated softmax does to the gradient that trains the queries;
# - that the division costs nothing (it folds into $W_Q$) and that it is a softmax *temperature*.
#
# Assumes: notebook 01 (the attention formula), mean, variance and standard deviation, and that
# training follows the gradient of a loss.

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnlab
from attnlab import scaling
from attnlab.exercises import ex02
from attnlab.plots import SCALED_COLOR, UNSCALED_COLOR, against_d_k, against_temperature
from attnlab.report import fmt
from attnlab.widgets import SoftmaxScaleExplorer

attnlab.seed_everything(0)
d_ks = np.array(scaling.DEFAULT_D_KS)

# %% [markdown]
# ## 1 · How the spread of q·k grows with d_k
#
# Queries and keys here have independent entries drawn from $\mathcal{N}(0, 1)$ (mean 0,
# variance 1), the setting of the paper's argument. $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ adds
# up $d_k$ such products.
#
# **Predict first:** at $d_k = 4$ the standard deviation of $q \cdot k$ is about 2. What is it
# at $d_k = 256$?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: std(q·k) is about 2 at d_k = 4. What is it at d_k = 256? (64? 128? 16?)

# %%
guess = ...  # your prediction: std(q·k) at d_k = 256, one number
### BEGIN SOLUTION
guess = 16.0  # d_k independent terms of variance 1: variance d_k, std sqrt(d_k)
### END SOLUTION

# %% [markdown]
# Measured over 4000 random pairs per $d_k$ (the measurements live in `attnlab.scaling`):

# %%
std = scaling.dot_product_std(d_ks, n_samples=4000, seed=0)
print(f"{'d_k':>5} {'std(q·k)':>9} {'sqrt(d_k)':>9} {'ratio':>6}")
for d, s in zip(d_ks, std):
    print(f"{d:>5} {fmt(s, 3):>9} {fmt(np.sqrt(d), 3):>9} {fmt(s / np.sqrt(d), 3):>6}")
slope = scaling.loglog_slope(d_ks, std)
print(f"fitted slope on log-log axes: {fmt(slope, 3)}  (std ∝ d_k^{fmt(slope, 3)})")
assert 0.45 < slope < 0.55, f"std(q·k) should grow like sqrt(d_k) (slope 0.5), measured {slope}"
assert np.all(np.abs(std / np.sqrt(d_ks) - 1) < 0.1), "std(q·k) / sqrt(d_k) should be about 1"

# %%
guess = ex02.std_at_256(guess, std[d_ks == 256][0])

# %% tags=["hide-input"]
against_d_k(d_ks, std, std / np.sqrt(d_ks), "standard deviation",
            labels=("std(q·k)", "std(q·k / √d_k)"), log_y=True, reference=np.sqrt(d_ks),
            reference_label="√d_k", title=f"spread of the dot product (fitted slope {slope:.2f})")
plt.show()

# %% [markdown]
# The variances of the $d_k$ terms add up to $d_k$, so the standard deviation is $\sqrt{d_k}$:
# 16.362 at $d_k = 256$, a fitted slope of 0.499 on log-log axes. Dividing by $\sqrt{d_k}$ brings
# the spread back to about 1 whatever $d_k$ is: that is the whole point of the scale.

# %% [markdown]
# ## 2 · What that spread does to the softmax
#
# Softmax depends on *differences* between scores. When the scores spread over tens of units,
# $e^{s}$ makes the largest one dwarf the rest. We take 16 keys per query and record the largest
# weight, averaged over 500 queries (1/16 = 0.0625 would be uniform, 1 one-hot).

# %%
top = scaling.max_softmax_weight(d_ks, n_keys=16, n_samples=500, seed=0)
print(f"{'d_k':>5} {'unscaled':>9} {'scaled':>7}")
for d, a, b in zip(d_ks, top["unscaled"], top["scaled"]):
    print(f"{d:>5} {fmt(a, 2):>9} {fmt(b, 2):>7}")
print(f"unscaled: {fmt(top['unscaled'][0], 3)} at d_k = 4, "
      f"{fmt(top['unscaled'][-1], 3)} at d_k = 1024")
print(f"scaled: between {fmt(top['scaled'].min(), 3)} and {fmt(top['scaled'].max(), 3)}")

assert (np.diff(top["unscaled"]) > 0).all(), "unscaled: the largest weight should grow with d_k"
assert top["unscaled"][-1] > 0.95, "unscaled: at d_k=1024 the softmax should be nearly one-hot"
assert np.ptp(top["scaled"]) < 0.05, "scaled: the largest weight should not depend on d_k"

# %% tags=["hide-input"]
against_d_k(d_ks, top["unscaled"], top["scaled"], "mean largest weight", reference=1 / 16,
            reference_label="uniform (1/16)", ylim=(0, 1.05),
            title="how peaked is the softmax? (16 keys)")
plt.show()

# %% [markdown]
# Without the division the largest weight grows with every doubling of $d_k$, from 0.431 to
# 0.964: at $d_k = 1024$ the softmax is nearly one-hot. With it the largest weight stays between
# 0.239 and 0.252 at every $d_k$.

# %% [markdown]
# ## 3 · How much gradient reaches the query
#
# Learning needs gradient. The softmax's slope,
# $\partial w_i / \partial s_j = w_i(\delta_{ij} - w_j)$, is zero when one weight is 1 and the
# others 0, so a *saturated* softmax (one weight near 1, the rest near 0) should pass almost
# nothing back. We send a random gradient back from the attention output (as a later layer
# would) and measure how much reaches the query, $\lVert \partial L / \partial q \rVert$, the
# signal that would train the query projection $W_Q$: the median over 500 queries (16 keys,
# 16-dimensional values).

# %%
grad = scaling.softmax_gradient_norm(d_ks, n_keys=16, n_samples=500, seed=0)
print(f"{'d_k':>5} {'unscaled':>9} {'scaled':>7}")
for d, a, b in zip(d_ks, grad["unscaled"], grad["scaled"]):
    print(f"{d:>5} {fmt(a, 4):>9} {fmt(b, 3):>7}")
peak = int(np.argmax(grad["unscaled"]))
shrink = grad["scaled"][-1] / grad["unscaled"][-1]
larger = d_ks[grad["unscaled"] > grad["scaled"]]
print(f"unscaled: largest at d_k = {d_ks[peak]}, larger than scaled for d_k = {larger.tolist()}")
print(f"at d_k = {d_ks[-1]} the unscaled gradient is {fmt(shrink, 0)}× smaller than the scaled one")

assert (np.diff(grad["unscaled"][peak:]) < 0).all(), "unscaled: past its peak it keeps falling"
assert shrink > 100, "unscaled: at d_k = 1024 the gradient should be over 100× smaller"
assert larger.tolist() == [4, 8, 16, 32, 64] and d_ks[peak] == 16
assert grad["scaled"].max() / grad["scaled"].min() < 1.25, "scaled: the gradient should stay put"

# %% tags=["hide-input"]
against_d_k(d_ks, grad["unscaled"], grad["scaled"], "median ‖∂L/∂q‖", log_y=True,
            title="gradient reaching the query")
plt.show()

# %% [markdown]
# Without the scale, the gradient at $d_k = 1024$ is 952× smaller than with it: the query
# projection would barely learn. With the scale it stays between 0.895 and 1.068 at every $d_k$.
# For small $d_k$ (4 to 64) the unscaled gradient is even *larger*: without the division each
# score moves $\sqrt{d_k}$ times faster when $q$ moves. It is largest at $d_k = 16$; beyond that
# the softmax saturates and its slope vanishes.

# %% [markdown]
# ## 4 · The division costs nothing: fold it into W_Q
#
# In a model the queries are $Q = XW_Q$ (notebook 01). Dividing every score by $\sqrt{d_k}$ is
# the same as dividing the queries, so the division can be stored in $W_Q$ once:
# $(XW_Q / \sqrt{d_k})(XW_K)^\top = (XW_Q)(XW_K)^\top / \sqrt{d_k}$.
#
# **Implement:** `fold_scale(W_Q)` returns $W_Q$ with $1/\sqrt{d_k}$ folded in. $W_Q$ is
# (d_model, d_k), or (heads, d_model, d_k) with one matrix per head.

# %%
def fold_scale(W_Q):
    ### BEGIN SOLUTION
    return W_Q / math.sqrt(W_Q.shape[-1])  # d_k: the width of one query
    ### END SOLUTION


fold = ex02.fold_scale(fold_scale)  # your function if it is right, the reference otherwise

# %% [markdown]
# Now the check that matters: the unscaled softmax of the folded queries against real scaled
# attention, on 10 random tokens with $d_{model} = 32$ and $d_k = 64$.

# %%
g = torch.Generator().manual_seed(0)
X = torch.randn(1, 10, 32, generator=g, dtype=torch.float64)  # (B, T, d_model)
W_Q, W_K, W_V = (torch.randn(32, 64, generator=g, dtype=torch.float64) for _ in range(3))
with_scale, _ = attnlab.scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)  # divides
folded, _ = attnlab.scaled_dot_product_attention(X @ fold(W_Q), X @ W_K, X @ W_V, scale=1.0)
same = torch.allclose(folded, with_scale, rtol=0, atol=1e-12)
print(f"output {tuple(folded.shape)}; folded W_Q, no division = scaled attention: {same}")
assert same, "folding 1/sqrt(d_k) into W_Q must leave the output unchanged"

# %% [markdown]
# The outputs agree to $10^{-12}$: the scale needs no division at run time in a trained model.

# %% [markdown]
# ## 5 · The scale is a temperature
#
# $\text{softmax}(s / \tau)$ with a *temperature* $\tau$: a large $\tau$ flattens the weights
# towards uniform, a small one sharpens them towards one-hot. The unscaled softmax is $\tau = 1$,
# scaled attention is $\tau = \sqrt{d_k}$. At $d_k = 64$ with 16 keys (500 fresh queries):

# %%
for tau in (1.0, 2.0, 4.0, 8.0):
    print(f"τ = {tau:g}: mean largest weight {fmt(scaling.peak_weight_at_temperature(tau), 3)}")

# %% [markdown]
# **Explore:** find a temperature $\tau$ at which the mean largest weight is 0.5 (±0.02). Try
# values with `scaling.peak_weight_at_temperature(tau)` and write your $\tau$ below.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: τ = 2 gives 0.690, τ = 4 gives 0.454. Where is 0.5?

# %%
temperature = ...  # a τ > 0 whose mean largest weight is 0.5 (± 0.02)
### BEGIN SOLUTION
temperature = 3.52
### END SOLUTION
temperature = ex02.temperature(temperature)

# %% tags=["hide-input"]
taus = np.geomspace(0.5, 16, 11)
marks = [(tau, scaling.peak_weight_at_temperature(tau), label, color)
         for tau, label, color in ((1.0, "τ = 1 (unscaled)", UNSCALED_COLOR),
                                   (8.0, "τ = √64 (scaled)", SCALED_COLOR),
                                   (float(temperature), f"τ = {float(temperature):g}", "black"))]
peaks = np.array([scaling.peak_weight_at_temperature(t) for t in taus])
assert (np.diff(peaks) < 0).all(), "the mean largest weight should fall as τ grows"
against_temperature(taus, peaks, marks, title="softmax(q·k / τ), d_k = 64, 16 keys")
plt.show()

# %% [markdown]
# The mean largest weight falls steadily as $\tau$ grows. The $\sqrt{d_k}$ of attention is one
# particular temperature: the one that brings the spread of the scores back to 1 (section 1),
# whatever $d_k$ is.

# %% [markdown]
# ## Try it: one query, eight keys, more and more dimensions
#
# The slider keeps the same query and keys and only adds dimensions (the first $d_k$
# coordinates of one fixed random draw). Left: softmax of the raw scores; right: with the scale.
# This is **one** draw, not an average over 500 like section 2. How far can one draw stray?

# %%
explorer = SoftmaxScaleExplorer(d_ks=d_ks.tolist(), d_k=64)
print("largest unscaled weight")
print(f"{'d_k':>5} {'this draw':>10} {'average of 500 (section 2)':>27}")
for d in (4, 64, 1024):
    print(f"{d:>5} {fmt(explorer.view(d)['max_unscaled'], 3):>10} "
          f"{fmt(top['unscaled'][d_ks == d][0], 3):>27}")
one = {d: explorer.view(d)["max_unscaled"] for d in (4, 64)}
average = {d: top["unscaled"][d_ks == d][0] for d in (4, 64)}
assert one[64] < one[4] and average[64] > average[4], "this draw goes against the average"

# %% [markdown]
# In this draw the largest unscaled weight at $d_k = 64$ (0.576) is *below* the one at
# $d_k = 4$ (0.612), while the average over 500 draws rises from 0.431 to 0.849. A single query
# can go against the trend; the averages of section 2 are what the conclusions rest on.

# %%
print(explorer.text())

# %% tags=["hide-input"]
explorer.draw()
plt.show()

# %%
explorer.widget

# %% [markdown]
# The numbers this notebook measured, once more:

# %%
lessons = {
    "std(q·k) at d_k = 256": fmt(std[d_ks == 256][0], 3),
    "log-log slope of std(q·k)": fmt(slope, 3),
    "unscaled largest weight, d_k = 4, 1024": f"{fmt(top['unscaled'][0], 3)}, "
                                               f"{fmt(top['unscaled'][-1], 3)}",
    "scaled largest weight, min, max": f"{fmt(top['scaled'].min(), 3)}, "
                                       f"{fmt(top['scaled'].max(), 3)}",
    "gradient at d_k = 1024, scaled / unscaled": fmt(shrink, 0),
    "mean largest weight at τ = 1, τ = 8": f"{fmt(marks[0][1], 3)}, {fmt(marks[1][1], 3)}",
}
for name, value in lessons.items():
    print(f"{name:<42} {value}")
assert list(lessons.values()) == ["16.362", "0.499", "0.431, 0.964", "0.239, 0.252", "952",
                                  "0.842, 0.240"]

# %% [markdown]
# ## What we learned
#
# - The spread of $q \cdot k$ grows like $\sqrt{d_k}$: 16.362 at $d_k = 256$, a log-log slope of
#   0.499; dividing by $\sqrt{d_k}$ brings it back to about 1.
# - Without the division the softmax tends to one-hot (mean largest weight 0.431 at $d_k = 4$,
#   0.964 at 1024); with it the largest weight stays between 0.239 and 0.252.
# - A saturated softmax passes almost no gradient: at $d_k = 1024$ the query gets 952× less
#   gradient without the scale than with it.
# - The division is free: folded into $W_Q$, the unscaled softmax gives the same outputs.
# - The scale is a temperature: at $d_k = 64$ the mean largest weight falls steadily from 0.842
#   at $\tau = 1$ (unscaled) to 0.240 at $\tau = \sqrt{64} = 8$ (scaled), and 0.5 lies between,
#   at the $\tau$ you found.
# - One random draw can go against an average; conclusions rest on the averages.

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
# Attention computes $\text{softmax}(q \cdot k / \sqrt{d_k})$. The paper justifies the
# $\sqrt{d_k}$ in one sentence: for large $d_k$ the dot products grow large, pushing the softmax
# "into regions where it has extremely small gradients". Here we measure each part of that
# sentence instead of taking it on trust:
#
# 1. how the spread of $q \cdot k$ grows with $d_k$;
# 2. what that does to the softmax, with and without the division;
# 3. what it does to the gradient that trains the query.
#
# Queries and keys have independent $\mathcal{N}(0, 1)$ entries, the setting of the paper's
# argument. The measurements live in `attnlab.scaling`; every softmax comes from
# `attnlab.scaled_dot_product_attention` (`scale=1.0` is the unscaled variant).

# %%
import matplotlib.pyplot as plt
import numpy as np

import attnlab
from attnlab import scaling
from attnlab.plots import against_d_k
from attnlab.widgets import SoftmaxScaleExplorer

attnlab.seed_everything(0)
d_ks = np.array(scaling.DEFAULT_D_KS)
print("d_k:", d_ks.tolist())

# %% [markdown]
# ## 1 · How the spread of q·k grows with d_k
#
# $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ adds up $d_k$ independent terms of variance 1, so we
# expect its variance to be $d_k$ and its standard deviation $\sqrt{d_k}$. Measured over 4000
# random pairs per $d_k$:

# %%
std = scaling.dot_product_std(d_ks, n_samples=4000, seed=0)
print(f"{'d_k':>5} {'std(q·k)':>9} {'sqrt(d_k)':>9} {'ratio':>6}")
for d, s in zip(d_ks, std):
    print(f"{d:>5} {s:9.2f} {np.sqrt(d):9.2f} {s / np.sqrt(d):6.3f}")
slope = scaling.loglog_slope(d_ks, std)
print(f"fitted slope on log-log axes: {slope:.3f}  (std ∝ d_k^{slope:.3f})")
assert 0.45 < slope < 0.55, f"std(q·k) should grow like sqrt(d_k) (slope 0.5), measured slope {slope:.3f}"
assert np.all(np.abs(std / np.sqrt(d_ks) - 1) < 0.1), "std(q·k / sqrt(d_k)) should be about 1 at every d_k"

# %%
against_d_k(d_ks, std, std / np.sqrt(d_ks), "standard deviation", labels=("std(q·k)", "std(q·k / √d_k)"),
            log_y=True, reference=np.sqrt(d_ks), reference_label="√d_k",
            title=f"spread of the dot product (fitted slope {slope:.2f})")
plt.show()

# %% [markdown]
# Dividing by $\sqrt{d_k}$ brings the spread back to about 1 whatever $d_k$ is: that is the whole
# point of the scale.
#
# ## 2 · What that spread does to the softmax
#
# Softmax depends on *differences* between scores. When the scores spread over tens of units,
# $e^{s}$ makes the largest one dwarf the rest. We take 16 keys per query and record the largest
# weight, averaged over 500 queries (1/16 = 0.0625 would be uniform, 1 one-hot).

# %%
top = scaling.max_softmax_weight(d_ks, n_keys=16, n_samples=500, seed=0)
print(f"{'d_k':>5} {'unscaled':>9} {'scaled':>7}")
for d, a, b in zip(d_ks, top["unscaled"], top["scaled"]):
    print(f"{d:>5} {a:9.3f} {b:7.3f}")

assert (np.diff(top["unscaled"]) > 0).all(), "unscaled: the largest weight should grow with d_k"
assert top["unscaled"][-1] > 0.9, "unscaled: at d_k=1024 the softmax should be nearly one-hot"
assert np.ptp(top["scaled"]) < 0.05, "scaled: the largest weight should not depend on d_k"

# %%
against_d_k(d_ks, top["unscaled"], top["scaled"], "mean largest weight", reference=1 / 16,
            reference_label="uniform (1/16)", ylim=(0, 1.05), title="how peaked is the softmax? (16 keys)")
plt.show()

# %% [markdown]
# ## 3 · How much gradient reaches the query
#
# Learning needs gradient. The softmax's slope, $\partial w_i / \partial s_j = w_i(\delta_{ij} - w_j)$,
# is zero when one weight is 1 and the others 0, so a saturated softmax should pass almost
# nothing back. We send a random gradient back from the attention output (as a later layer
# would) and measure how much reaches the query, $\lVert \partial L / \partial q \rVert$, the
# signal that would train the query projection $W_Q$. We report the median over 500 queries
# (16 keys, 16-dimensional values).

# %%
grad = scaling.softmax_gradient_norm(d_ks, n_keys=16, n_samples=500, seed=0)
print(f"{'d_k':>5} {'unscaled':>10} {'scaled':>8}")
for d, a, b in zip(d_ks, grad["unscaled"], grad["scaled"]):
    print(f"{d:>5} {a:10.2e} {b:8.3f}")
peak = int(np.argmax(grad["unscaled"]))
ratio = grad["unscaled"][-1] / grad["scaled"][-1]
print(f"unscaled peaks at d_k = {d_ks[peak]}; at d_k = {d_ks[-1]} it is {ratio:.1e} × the scaled gradient")

assert (np.diff(grad["unscaled"][peak:]) < 0).all(), "unscaled: past its peak the gradient should keep falling"
assert grad["unscaled"][-1] < 0.01 * grad["unscaled"][peak], "unscaled: the gradient should collapse by 100×"
assert grad["scaled"].max() / grad["scaled"].min() < 2, "scaled: the gradient should stay the same size"

# %%
against_d_k(d_ks, grad["unscaled"], grad["scaled"], "median ‖∂L/∂q‖", log_y=True,
            title="gradient reaching the query")
plt.show()

# %% [markdown]
# What the measurement says:

# %%
if ratio < 0.01:
    print(f"Without the scale, the gradient at d_k = {d_ks[-1]} is {1 / ratio:.0f}× smaller than with it: "
          "the query projection would barely learn. With the scale it stays between "
          f"{grad['scaled'].min():.2f} and {grad['scaled'].max():.2f} at every d_k.")
else:
    print(f"At d_k = {d_ks[-1]} the unscaled gradient is still {ratio:.2f}× the scaled one: "
          "in this measurement the collapse is milder than the paper suggests.")
larger = d_ks[grad["unscaled"] > grad["scaled"]]
if len(larger):
    print(f"For d_k = {', '.join(str(d) for d in larger)} the unscaled gradient is even *larger* than the "
          f"scaled one: without the division each score moves √d_k times faster when q moves. It peaks at "
          f"d_k = {d_ks[peak]}; beyond that the softmax saturates and its slope vanishes.")

# %% [markdown]
# ## Try it: one query, eight keys, more and more dimensions
#
# The slider keeps the same query and keys and only adds dimensions (the first $d_k$ coordinates
# of one fixed random draw). Left: softmax of the raw scores; right: with the scale. Static view
# first (the same function the widget calls), then the widget (needs a live kernel).

# %%
explorer = SoftmaxScaleExplorer(d_ks=d_ks.tolist(), d_k=64)
for d in (4, 64, 1024):
    v = explorer.view(d)
    print(f"d_k = {d:>4}: largest weight unscaled {v['max_unscaled']:.3f}, scaled {v['max_scaled']:.3f}")
print()
print(explorer.text())
explorer.draw()
plt.show()

# %%
explorer.widget

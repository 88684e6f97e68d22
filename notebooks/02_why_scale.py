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
# small gradients". Here we measure each part of that sentence, on random queries and keys.

# %% [markdown]
# ## What you will learn
#
# - how the spread of $q \cdot k$ grows with $d_k$, and why;
# - what that spread does to the softmax, how far towards *one-hot* (all the weight on one key)
#   it goes without the division;
# - to write the softmax's slope, and how much gradient reaches the query, with and without the
#   division;
# - to write multi-head attention as a PyTorch module of your own, with masks, checked against
#   attnlab's with the same weights.
#
# Assumes: notebook 01 (the attention formula, multi-head attention), mean, variance and
# standard deviation, that a model learns by following the gradient of a loss, and PyTorch's
# `nn.Module` and `nn.Linear` (a layer is a class whose `forward` says what it computes).

# %% slideshow={"slide_type": "skip"}

import math

import numpy as np
import torch
from torch import nn

import attnlab
from attnlab.core.attention import causal_mask
from attnlab.exercises import ex02
from attnlab.lessons import scaling
from attnlab.plumbing.report import fmt
from attnlab.views.plots import against_d_k, show_figure
from attnlab.views.widgets import SoftmaxScaleExplorer

attnlab.seed_everything(0)
d_ks = np.array(scaling.DEFAULT_D_KS)

# %% [markdown]
# ## 1 · How the spread of q·k grows with d_k
#
# Queries and keys here have independent entries drawn from $\mathcal{N}(0, 1)$ (mean 0,
# variance 1), the setting of the paper's argument. $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ adds
# up $d_k$ such products.
#
# **Predict first:** at $d_k = 1$, $q \cdot k$ is one product of two such numbers, with standard
# deviation 1. What is the standard deviation of $q \cdot k$ at $d_k = 256$?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: std(q·k) is 1 at d_k = 1. What is it at d_k = 256? (256? 64? 16?)

# %%
guess = ...  # your prediction: std(q·k) at d_k = 256, one number
### BEGIN SOLUTION
guess = 16.0  # d_k independent terms of variance 1: variance d_k, std sqrt(d_k)
### END SOLUTION

# %% [markdown]
# Measured over 4000 random pairs per $d_k$ (the measurements live in `attnlab.lessons.scaling`):

# %%
std = scaling.dot_product_std(d_ks, n_samples=4000, seed=0)
print(f"{'d_k':>5} {'std(q·k)':>9} {'sqrt(d_k)':>9} {'ratio':>6}")
for d, s in zip(d_ks, std):
    print(f"{d:>5} {fmt(s, 3):>9} {fmt(np.sqrt(d), 3):>9} {fmt(s / np.sqrt(d), 3):>6}")
slope = scaling.loglog_slope(d_ks, std)
print(f"fitted slope on log-log axes: {fmt(slope, 3)}  (std ∝ d_k^{fmt(slope, 3)})")

# %% tags=["remove-cell"]
assert abs(std[d_ks == 256][0] - 16) < 1 and abs(slope - 0.5) < 0.02, "about 16, about 0.5"
assert np.all(np.abs(std / np.sqrt(d_ks) - 1) < 0.1), "std(q·k) / sqrt(d_k) should be about 1"

# %%
ex02.std_at_256(guess, std[d_ks == 256][0])

# %% tags=["hide-input"]
against_d_k(d_ks, std, std / np.sqrt(d_ks), "standard deviation",
            labels=("std(q·k)", "std(q·k / √d_k)"), log_y=True, reference=np.sqrt(d_ks),
            reference_label="√d_k", title=f"spread of the dot product (fitted slope {slope:.2f})")
show_figure()

# %% [markdown]
# The variances of the $d_k$ terms add up to $d_k$, so the standard deviation is $\sqrt{d_k}$:
# about 16 at $d_k = 256$, a fitted slope of about 0.5 on log-log axes. Dividing by $\sqrt{d_k}$ brings
# the spread back to about 1 at every $d_k$ in the plot, from 4 to 1024.

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

# %% tags=["remove-cell"]
assert (np.diff(top["unscaled"]) > 0).all(), "unscaled: the largest weight should grow with d_k"
assert top["unscaled"][0] < 0.5 and top["unscaled"][-1] > 0.9, "below 0.5, above 0.9"
assert (np.abs(top["scaled"] - 0.25) < 0.03).all(), "scaled: about 0.25 at every d_k"

# %% tags=["hide-input"]
against_d_k(d_ks, top["unscaled"], top["scaled"], "mean largest weight", reference=1 / 16,
            reference_label="uniform (1/16)", ylim=(0, 1.05),
            title="how peaked is the softmax? (16 keys)")
show_figure()

# %% [markdown]
# Without the division the largest weight grows with every doubling of $d_k$, from below 0.5 to
# above 0.9: at $d_k = 1024$ the softmax is nearly one-hot. With it the largest weight stays
# about 0.25 at every $d_k$.

# %% [markdown]
# ### Try it: one query, eight keys, more and more dimensions
#
# The slider keeps the same query and keys and only adds dimensions (the first $d_k$
# coordinates of one fixed random draw). Left: softmax of the raw scores; right: with the scale.
# This is **one** draw, not an average over 500 like the table above. How far can one draw
# stray?

# %%
explorer = SoftmaxScaleExplorer(d_ks=d_ks.tolist(), d_k=64)
print("largest unscaled weight")
print(f"{'d_k':>5} {'this draw':>10} {'average of 500 (above)':>23}")
for d in (4, 64, 1024):
    print(f"{d:>5} {fmt(explorer.view(d)['max_unscaled'], 3):>10} "
          f"{fmt(top['unscaled'][d_ks == d][0], 3):>23}")

# %% [markdown]
# The slider's draw is draw 0 of `scaling.softmax_pair`. Draws 0 to 199, each one query and eight
# keys, show how often one draw goes against the average between $d_k = 4$ and $d_k = 64$:

# %%
N_DRAWS = 200
one = np.array([[scaling.softmax_pair(d, seed=s)["unscaled"].max() for d in (4, 64)]
                for s in range(N_DRAWS)])  # (200, 2)   each draw's largest unscaled weight
against = one[:, 1] < one[:, 0]  # (200,)   lower at d_k = 64 than at d_k = 4
print(f"mean largest unscaled weight over {N_DRAWS} draws: {fmt(one[:, 0].mean(), 2)} at "
      f"d_k = 4, {fmt(one[:, 1].mean(), 2)} at d_k = 64")
print(f"draws whose largest weight is lower at d_k = 64 than at d_k = 4: {against.sum()} of "
      f"{N_DRAWS} (the slider's draw: {'one of them' if against[0] else 'not one of them'})")

# %% tags=["remove-cell"]
assert one[:, 1].mean() > one[:, 0].mean() + 0.1, "the average rises"
assert 0 < against.sum() < N_DRAWS / 4, "some draws, fewer than a quarter, go against it"

# %% [markdown]
# The average rises with $d_k$, yet some draws, fewer than a quarter of them, go the other way:
# one query's largest weight is lower at $d_k = 64$ than at $d_k = 4$. A single query can stray
# from the trend; the averages are what the conclusions rest on.

# %%
print(explorer.text())

# %% tags=["hide-input"]
explorer.draw()
show_figure()

# %%
explorer.widget

# %% [markdown]
# ## 3 · How much gradient reaches the query
#
# Learning needs gradient, and the gradient reaches the scores through the softmax. Its
# *slope* says how much weight $w_i$ moves when score $s_j$ moves:
# $\partial w_i / \partial s_j = w_i(\delta_{ij} - w_j)$, where $\delta_{ij}$ (Kronecker's
# delta) is 1 when $i = j$ and 0 otherwise. One query with $n$ keys has an $n \times n$ matrix
# of slopes, and it needs only the weights, not the scores.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Implement** `my_softmax_slope(w)`: weights `w` of shape (..., n), each row summing to 1,
# give the slopes (..., n, n), entry [i, j] $= w_i(\delta_{ij} - w_j)$, for a batch too. The
# check compares yours with attnlab's on one row, a batch and a saturated row.
#
# <details><summary>Hint 1</summary>
#
# $\delta_{ij}$ is the identity matrix. Build the two terms, $w_i \delta_{ij}$ and
# $w_i w_j$, as (..., n, n) tensors, one entry per pair (i, j).
# </details>
# <details><summary>Hint 2</summary>
#
# `torch.diag_embed(w)` puts `w` on the diagonal of an (..., n, n) matrix, and
# `w.unsqueeze(-1) * w.unsqueeze(-2)` is the product $w_i w_j$ for every pair; subtract the
# second from the first.
# </details>

# %% slideshow={"slide_type": "subslide"}
def my_softmax_slope(w):
    """w (..., n) softmax weights -> (..., n, n) slopes dw_i/ds_j."""
    ### BEGIN SOLUTION
    return torch.diag_embed(w) - w.unsqueeze(-1) * w.unsqueeze(-2)  # (..., n, n)
    ### END SOLUTION


softmax_slope = ex02.softmax_slope(my_softmax_slope)  # yours if right, attnlab's otherwise

# %% [markdown]
# Your slopes on the draws of the slider above: for each of 200 queries with eight keys, the
# largest slope in absolute value, the median over the 200 queries.

# %%
print(f"{'d_k':>5} {'unscaled':>9} {'scaled':>7}   median largest |dw_i/ds_j|")
slopes = {}
for d in (4, 64, 256, 1024):
    pairs = [scaling.softmax_pair(d, seed=s) for s in range(N_DRAWS)]
    slopes[d] = {kind: np.median([softmax_slope(torch.from_numpy(p[kind])).abs().max().item()
                                  for p in pairs]) for kind in ("unscaled", "scaled")}
    print(f"{d:>5} {fmt(slopes[d]['unscaled'], 3):>9} {fmt(slopes[d]['scaled'], 3):>7}")

# %% tags=["remove-cell"]
assert slopes[1024]["unscaled"] < 1e-3 < 0.1 < slopes[1024]["scaled"], "vanishes; stays"
assert all(0.1 < slopes[d]["scaled"] < 0.3 for d in slopes), "scaled: about 0.2 at every d_k"

# %% [markdown]
# With the scale the largest slope stays about 0.2 at every $d_k$. Without it, it falls to
# 0.000 at $d_k = 1024$: where one weight is 1 and the others 0, every $w_i(\delta_{ij} - w_j)$
# is 0, so a *saturated* softmax passes almost nothing back. How much of the gradient then
# reaches the query? We send a random gradient back from the attention output (as a later
# layer would) and measure $\lVert \partial L / \partial q \rVert$, the signal that trains
# the query projection $W_Q$: the median over 500 queries (16 keys, 16-dimensional values).

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

# %% tags=["remove-cell"]
assert (np.diff(grad["unscaled"][peak:]) < 0).all(), "unscaled: past its peak it keeps falling"
# 20 series seeds: 218 to 3,367 times smaller at d_k = 1024, larger for d_k 4 to 64 in each
assert shrink > 100 and larger.tolist() == [4, 8, 16, 32, 64], "over 100 times; 4 to 64"
assert d_ks[peak] in (8, 16, 32), "largest at a small d_k, not at the ends"
assert (np.abs(grad["scaled"] - 1) < 0.2).all(), "scaled: about 1 at every d_k"

# %% tags=["hide-input"]
against_d_k(d_ks, grad["unscaled"], grad["scaled"], "median ‖∂L/∂q‖", log_y=True,
            title="gradient reaching the query")
show_figure()

# %% [markdown]
# Without the scale, the gradient at $d_k = 1024$ is over a hundred times smaller than with it
# (218 to 3,367 times over 20 series seeds);
# with the scale it stays about 1 at every $d_k$. For small $d_k$ (4 to 64) the unscaled
# gradient is even *larger*: without the division each score moves $\sqrt{d_k}$ times faster
# when $q$ moves. It peaks at a small $d_k$ (printed above); beyond that the softmax saturates
# and its slope vanishes.
#
# All of this is about queries and keys whose entries have variance 1. Whether a model's
# queries and keys look like that is a question about the model, and nothing above answers it:
# notebook 03 trains a model, and notebook 04's *Going further* asks it of that model's scores,
# and what the scale changes while the model trains.

# %% [markdown]
# ## 4 · Your own multi-head attention module
#
# Notebook 01's ten-line function took its four matrices as arguments. A model keeps them
# inside an `nn.Module`, as `nn.Linear` layers that training updates; `attnlab.MultiHeadAttention`
# is one, and every model of this series is built from it. Now write your own.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Implement** `MyMultiHeadAttention(d_model, n_heads)`: four `nn.Linear(d_model, d_model)`
# layers named `q`, `k`, `v` and `out`, and `forward(x, mask=None)` returning the output
# (B, T, d_model) and the weights (B, H, T, T). Each head compares vectors of
# $d_{head} = d_{model} / H$ numbers, so the scale this notebook measured is $1/\sqrt{d_{head}}$.
# A mask broadcasts to (B, H, T, T), True where a query may attend: fill the other scores with
# $-\infty$ before the softmax. The check builds your class with $d_{model} = 16$ and 4 heads,
# loads attnlab's weights into it, and compares the two without a mask, with padding and with
# a causal mask.

# %% slideshow={"slide_type": "subslide"}
class MyMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        # the four layers: self.q, self.k, self.v and self.out
        ### BEGIN SOLUTION
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        ### END SOLUTION

    def forward(self, x, mask=None):
        """x (B, T, d_model), mask (broadcasts to (B, H, T, T)) or None -> output, weights."""
        B, T, d_model = x.shape
        ### BEGIN SOLUTION
        H, D = self.n_heads, self.d_head
        q, k, v = (layer(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)   project, split
                   for layer in (self.q, self.k, self.v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)  # (B, H, T, T)   each row sums to 1
        heads = weights @ v  # (B, H, T, D)
        return self.out(heads.transpose(1, 2).reshape(B, T, d_model)), weights  # merge, mix
        ### END SOLUTION


MultiHead = ex02.multi_head_module(MyMultiHeadAttention)  # yours if right, attnlab's otherwise

# %% [markdown]
# Your module with a causal mask, the mask of every decoder (notebook 08): a query may read
# itself and the tokens before it. The weights of the first head, on six random tokens:

# %%
torch.manual_seed(attnlab.seed_of(0))
layer = MultiHead(d_model=32, n_heads=4)
with torch.no_grad():
    _, weights = layer(torch.randn(1, 6, 32), causal_mask(6))  # (1, 4, 6, 6)
for t, row in enumerate(weights[0, 0]):
    print(f"query {t}: " + " ".join(fmt(w, 2) for w in row.tolist()))
future = weights.triu(1).abs().max().item()  # the largest weight on a later token
print(f"largest weight on a later token, any head: {fmt(future, 3)}; "
      f"rows sum to 1: {torch.allclose(weights.sum(-1), torch.ones(1, 4, 6))}")

# %% tags=["remove-cell"]
assert future == 0.0 and torch.allclose(weights.sum(-1), torch.ones(1, 4, 6))
assert torch.allclose(weights[0, :, 0, 0], torch.ones(4)), "the first query reads only itself"

# %% [markdown]
# Every weight above the diagonal is exactly 0: $e^{-\infty} = 0$, so no query reads a later
# token, and the first query, which has only itself, gives itself all of its weight. The
# library's `MultiHeadAttention` does the same, with grouped-query heads and rotary positions
# added (notebooks 05 and 09).

# %% [markdown]
# ## What we learned
#
# - The spread of $q \cdot k$ grows like $\sqrt{d_k}$: about 16 at $d_k = 256$, a log-log slope
#   of about 0.5; dividing by $\sqrt{d_k}$ brings it back to about 1.
# - Without the division the softmax tends to one-hot (mean largest weight below 0.5 at
#   $d_k = 4$, above 0.9 at 1024). Its slope $w_i(\delta_{ij} - w_j)$ then vanishes, so a
#   saturated softmax passes almost no gradient: at $d_k = 1024$ the query gets hundreds of
#   times less gradient without the scale than with it.
# - All of this holds for queries and keys with entries of variance 1. A trained model's are
#   learned: notebook 04 measures notebook 03's (in *Going further*).
# - A multi-head attention module is four `nn.Linear` layers around that formula, each head
#   scaled by $1/\sqrt{d_{head}}$; yours, with attnlab's weights, computes what attnlab's does.

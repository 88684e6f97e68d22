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
# small gradients". Here we measure each part of that sentence, and then what the scale does in
# a model that trains.

# %% [markdown]
# ## What you will learn
#
# - how the spread of $q \cdot k$ grows with $d_k$, and why it grows like $\sqrt{d_k}$;
# - what that spread does to the softmax (without the division it becomes nearly *one-hot*,
#   all the weight on one key) and to the gradient that reaches the query;
# - how spread the scores of a real model are, before and after training;
# - what the scale changes when a model trains, and why training is not left to find it.
#
# Assumes: notebook 01 (the attention formula, multi-head attention), mean, variance and
# standard deviation, and that a model trains by following the gradient of a loss, one small
# step at a time (notebook 03 writes that loop out).

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnlab
from attnlab import scaling
from attnlab.exercises import ex02
from attnlab.plots import accuracy_curves, against_d_k
from attnlab.report import fmt
from attnlab.train import initial_model, train_classifier
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

# %% tags=["remove-cell"]
assert fmt(std[d_ks == 256][0], 3) == "16.362" and fmt(slope, 3) == "0.499"
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

# %% tags=["remove-cell"]
assert (np.diff(top["unscaled"]) > 0).all(), "unscaled: the largest weight should grow with d_k"
assert [fmt(top["unscaled"][i], 3) for i in (0, -1)] == ["0.431", "0.964"]
assert [fmt(f(top["scaled"]), 3) for f in (np.min, np.max)] == ["0.239", "0.252"]

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

# %% tags=["remove-cell"]
one = {d: explorer.view(d)["max_unscaled"] for d in (4, 64)}
average = {d: top["unscaled"][d_ks == d][0] for d in (4, 64)}
assert one[64] < one[4] and average[64] > average[4], "this draw goes against the average"
assert [fmt(one[d], 3) for d in (64, 4)] == ["0.576", "0.612"]
assert [fmt(average[d], 3) for d in (4, 64)] == ["0.431", "0.849"]

# %% [markdown]
# In this draw the largest unscaled weight at $d_k = 64$ (0.576) is *below* the one at
# $d_k = 4$ (0.612), while the average over 500 draws rises from 0.431 to 0.849. A single query
# can go against the trend; the averages are what the conclusions rest on.

# %%
print(explorer.text())

# %% tags=["hide-input"]
explorer.draw()
plt.show()

# %%
explorer.widget

# %% [markdown]
# ## 3 · How much gradient reaches the query
#
# Learning needs gradient. The softmax's slope,
# $\partial w_i / \partial s_j = w_i(\delta_{ij} - w_j)$, is zero when one weight is 1 and the
# others 0, so a *saturated* softmax (one weight near 1, the rest near 0) should pass almost
# nothing back. We send a random gradient back from the attention output (as a later layer
# would) and measure how much reaches the query, $\lVert \partial L / \partial q \rVert$, the
# signal that trains the query projection $W_Q$: the median over 500 queries (16 keys,
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

# %% tags=["remove-cell"]
assert (np.diff(grad["unscaled"][peak:]) < 0).all(), "unscaled: past its peak it keeps falling"
assert fmt(shrink, 0) == "952" and larger.tolist() == [4, 8, 16, 32, 64] and d_ks[peak] == 16
assert [fmt(f(grad["scaled"]), 3) for f in (np.min, np.max)] == ["0.895", "1.068"]

# %% tags=["hide-input"]
against_d_k(d_ks, grad["unscaled"], grad["scaled"], "median ‖∂L/∂q‖", log_y=True,
            title="gradient reaching the query")
plt.show()

# %% [markdown]
# Without the scale, the gradient at $d_k = 1024$ is 952× smaller than with it; with the scale
# it stays between 0.895 and 1.068 at every $d_k$. For small $d_k$ (4 to 64) the unscaled
# gradient is even *larger*: without the division each score moves $\sqrt{d_k}$ times faster
# when $q$ moves. It is largest at $d_k = 16$; beyond that the softmax saturates and its slope
# vanishes.
#
# All of this is about queries and keys whose entries have variance 1. Whether a model's
# queries and keys look like that is a question about the model, and nothing above answers it.

# %% [markdown]
# ## 4 · The scores of a real model
#
# Notebook 03 trains a small Transformer to classify short reviews: a token vector per word,
# one attention layer with 4 heads of $d_{head} = 8$, a feed-forward layer, a classifier.
# `attnlab.train.train_classifier()` trains it in a few seconds. Its queries and keys are
# learned projections of learned token vectors, not draws from $\mathcal{N}(0, 1)$. How spread
# are the scores its softmax sees?
#
# **Implement** `my_score_spread(attn, h, real)`: the standard deviation of the scaled scores
# $q \cdot k \times$ scale of an attention layer `attn` on its input `h` (B, T, d_model), over
# every (query, key) pair of two real tokens (`real` (B, T) is False at padding), all heads
# together. `attn.project(h)` returns the heads' queries, keys and values (B, H, T, d_head) each
# (notebook 01's projection and split); `attn.scale` is the layer's scale, None for the usual
# $1/\sqrt{d_{head}}$.
#
# <details><summary>Hint 1</summary>
#
# The softmax of one head sees one score per (query, key) pair of one review. Which of those
# pairs does padding spoil, and which axes of the scores say it?
# </details>
# <details><summary>Hint 2</summary>
#
# Compute all the scores at once, (B, H, T, T), times the scale. Build a (B, T, T) pair mask
# from `real` with one new axis for the query role and one for the key role, give it a head axis,
# select the scores where it is True, and take their standard deviation.
# </details>

# %%
def my_score_spread(attn, h, real):
    ### BEGIN SOLUTION
    q, k, _ = attn.project(h)  # (B, H, T, d_head) each
    scale = attn.scale if attn.scale is not None else 1 / math.sqrt(attn.d_head)
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, T, T)   what the softmax sees
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)   both tokens real
    return scores.masked_select(pairs).std()
    ### END SOLUTION


score_spread = ex02.score_spread(my_score_spread)  # yours if it is right, attnlab's otherwise

# %% [markdown]
# **Predict first.** Section 1's queries and keys give scaled scores of spread 1. What is the
# spread of notebook 03's model at initialisation, before any training? Write it down, then run
# the measurement: your function on the 400 test reviews, at initialisation and after training.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: near 1, like section 1? Larger? Smaller? By how much? Then: and after training?

# %%
spread_guess = ...  # your prediction: the spread of the scaled scores at initialisation
### BEGIN SOLUTION
spread_guess = 0.02  # entries of q and k near 0.14, d_head = 8: 0.14² × √8 / √8 ≈ 0.02
### END SOLUTION

# %%
trained = train_classifier()  # notebook 03's model, trained (float64, seed 0)
x_test, _, _ = trained.test.tensors(trained.vocab)  # (400, T) token ids, padded
real = x_test != trained.vocab.PAD  # (400, T)
untrained = initial_model(len(trained.vocab))  # the same model before its first step
spreads, largest = {}, {}
for name, model in (("initialisation", untrained), ("trained", trained.model)):
    with torch.no_grad():
        spreads[name] = float(score_spread(model.blocks[0].attn, model.embed(x_test), real))
    best = model.attention_maps(x_test)[0].amax(-1)  # (400, H, T)   each query's largest weight
    largest[name] = best[real[:, None, :].expand_as(best)].mean().item()  # over real queries
print(f"test accuracy after training: {fmt(trained.test_accuracy, 3)}")
print(f"{'':<15} {'spread of the scores':>21} {'mean largest weight':>20}")
for name in spreads:
    print(f"{name:<15} {fmt(spreads[name], 3):>21} {fmt(largest[name], 3):>20}")

# %% tags=["remove-cell"]
assert [fmt(spreads[name], 3) for name in spreads] == ["0.020", "1.023"]
assert [fmt(largest[name], 3) for name in largest] == ["0.101", "0.273"]

# %%
spread_guess = ex02.spread_at_init(spread_guess, spreads["initialisation"])

# %% [markdown]
# At initialisation the scores spread 0.020, not 1: nn.Linear draws $W_Q$ and $W_K$ with
# entries of about $1/\sqrt{d_{model}}$ and the token vectors have length about 1, so the
# entries of $q$ and $k$ start small, and their products smaller still. The softmax starts
# almost uniform. After training the scores spread 1.023, and a query's largest weight is 0.273
# on average, far from one-hot (1). This model's softmax does not saturate, before or after
# training: section 3's vanishing gradient never happens to it. So what does the scale do here?

# %% [markdown]
# ## 5 · Training without the scale
#
# With $d_{head} = 8$ the scale divides by $\sqrt 8 \approx 2.8$. We give the model one head of
# $d_{head} = 64$ instead ($d_{model} = 64$), where it divides by 8, and train it with notebook
# 03's recipe for 5 epochs (passes over the 1,600 training reviews).
# `scaling.train_at_scale(scale, seed=..., epochs=...)` does it; `scale=None` is the usual
# $1/\sqrt{d_{head}}$. The test accuracy after each epoch:

# %%
EPOCHS = 5
scaled_run = scaling.train_at_scale(None, seed=0, epochs=EPOCHS)  # softmax(q·k / 8)
print("scaled, seed 0:", " ".join(fmt(a, 3) for a in scaled_run.history["test_acc"]))

# %% [markdown]
# **Explore.** Train the same model with `scale=1.0` (no division) and seed 0. Section 3 says
# what to expect of unscaled scores at $d_k = 64$; section 4 says how large this model's scores
# are. What is its test accuracy after 4 epochs? Compare its whole curve with the one above.
#
# <details><summary>Hint 1</summary>
#
# One argument of the cell above changes; everything else stays.
# </details>
# <details><summary>Hint 2</summary>
#
# The history's `"test_acc"` list holds one test accuracy per epoch, the first epoch at index 0.
# You may train for 4 epochs only: the first epochs do not depend on how many follow.
# </details>

# %%
accuracy = ...  # the test accuracy after 4 epochs with scale=1.0, seed 0
### BEGIN SOLUTION
unscaled_run = scaling.train_at_scale(1.0, seed=0, epochs=4)
accuracy = unscaled_run.history["test_acc"][3]  # epoch 4
### END SOLUTION
accuracy = ex02.accuracy_without_scale(accuracy)

# %% [markdown]
# One run could be luck. Three seeds of each (each seed draws other reviews, other initial
# weights and another batch order), with the spread of each model's scores (section 4's
# measurement) at the start and after training:

# %%
SEEDS = (0, 1, 2)
VARIANTS = {"scaled": {}, "scale 1.0": {"scale": 1.0}, "folded": {"fold": True}}  # their arguments
runs = {"scaled": [scaled_run] + [scaling.train_at_scale(None, seed=s, epochs=EPOCHS)
                                  for s in SEEDS[1:]],
        "scale 1.0": [scaling.train_at_scale(1.0, seed=s, epochs=EPOCHS) for s in SEEDS]}


def spread_of(model, run):
    """The spread of `model`'s scaled scores on the test reviews of `run`."""
    x, _, _ = run.test.tensors(run.vocab)  # (400, T)
    with torch.no_grad():
        return float(score_spread(model.blocks[0].attn, model.embed(x), x != run.vocab.PAD))


# %% tags=["hide-input"]
def table(names):
    """Per run: test accuracy after epochs 4 and 5, spread of the scores at the start and after
    training; printed, and returned as {name: [row per seed]}."""
    print(f"{'':<10} {'seed':>4} {'after 4 epochs':>15} {'after 5':>8} {'spread: start':>14} "
          f"{'trained':>8}")
    rows = {}
    for name in names:
        rows[name] = [(run.history["test_acc"][3], run.history["test_acc"][4],
                       spread_of(scaling.initial_at_scale(**VARIANTS[name], seed=seed), run),
                       spread_of(run.model, run))
                      for seed, run in zip(SEEDS, runs[name])]
        for seed, row in zip(SEEDS, rows[name]):
            print(f"{name:<10} {seed:>4} {fmt(row[0], 3):>15} {fmt(row[1], 3):>8} "
                  f"{fmt(row[2], 2):>14} {fmt(row[3], 2):>8}")
    return rows


rows = table(["scaled", "scale 1.0"])

# %% tags=["remove-cell"]
assert tuple(runs["scale 1.0"][0].history["test_acc"]) == ex02.UNSCALED_CURVE
assert tuple(scaled_run.history["test_acc"]) == ex02.SCALED_CURVE
column = {name: list(zip(*rows[name])) for name in rows}  # name -> 4 columns of 3 seeds
assert max(column["scaled"][0]) < min(column["scale 1.0"][0]), "scale 1.0 ahead after 4 epochs"
assert [fmt(f(column[n][0]), 3) for n in ("scaled", "scale 1.0") for f in (min, max)] == \
    ["0.767", "0.812", "0.887", "0.912"]
assert fmt(min(column["scaled"][1] + column["scale 1.0"][1]), 3) == "0.897"
assert [fmt(v, 2) for v in column["scaled"][2] + column["scale 1.0"][2]] == \
    ["0.01"] * 3 + ["0.08", "0.07", "0.07"]
assert [fmt(f(column[n][3]), 2) for n in ("scaled", "scale 1.0") for f in (min, max)] == \
    ["0.40", "0.83", "2.42", "4.19"]

# %% tags=["hide-input"]
accuracy_curves({name: [r.history for r in group] for name, group in runs.items()}, chance=0.5,
                figsize=(8, 4), title="one head of d_head = 64, three seeds each")
plt.show()

# %% [markdown]
# Without the division the model does not stall. It learns *faster*: after 4 epochs it is at
# 0.887 to 0.912, against 0.767 to 0.812 with the scale, in each seed; after 5 epochs every run
# is at 0.897 or above. Section 3's gradient shrank only for scores as spread as section 1's
# at $d_k \geq 128$; these start at 0.07 to 0.08 without the scale (0.01 with it): the softmax is
# nowhere near saturation. What the missing division changes is how fast the scores grow: after
# training they spread 2.42 to 4.19, against 0.40 to 0.83 with the scale.

# %% [markdown]
# ## 6 · Free at inference, not in training
#
# In a trained model the division can be stored in $W_Q$ once:
# $(XW_Q / \sqrt{d_k})(XW_K)^\top = (XW_Q)(XW_K)^\top / \sqrt{d_k}$, so at inference the scale
# costs nothing. Then why not leave the division out and let training find the right size of
# $W_Q$? Try it: fold the scale into $W_Q$ at initialisation ($W_Q / 8$, and its bias $/ 8$)
# and train without a division. At step 0 this *is* the scaled model: every score, weight and
# prediction is the same. `scaling.train_at_scale(fold=True)` trains it.
#
# **Predict first:** after training, will the folded model's scores be spread like the scaled
# model's (it starts as the scaled model) or like the unscaled one's (it trains without a
# division)? Write `"scaled"` or `"unscaled"`.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: same function at step 0, same data, same batches, same optimiser. Can the two
# trainings differ at all? Let them argue before running.

# %%
folded_guess = ...  # "scaled" or "unscaled"
### BEGIN SOLUTION
folded_guess = "unscaled"  # Adam steps each weight by about lr: an 8× smaller W_Q moves 8× faster
### END SOLUTION

# %%
runs["folded"] = [scaling.train_at_scale(fold=True, seed=s, epochs=EPOCHS) for s in SEEDS]
rows.update(table(["folded"]))

# %% tags=["remove-cell"]
column = {name: list(zip(*rows[name])) for name in rows}
assert column["folded"][2] == column["scaled"][2], "folded: the scaled model at step 0"
assert max(column["scaled"][3]) < min(column["folded"][3]), "folded: wider than scaled"
assert [fmt(f(column["folded"][3]), 2) for f in (min, max)] == ["2.31", "2.92"]
assert [fmt(v, 3) for v in column["folded"][0]] == ["0.905", "0.810", "0.795"]

# %%
trained_spreads = {name: [row[3] for row in rows[name]] for name in rows}
folded_guess = ex02.folded_spread(folded_guess, trained_spreads)

# %% tags=["hide-input"]
accuracy_curves({name: [r.history for r in group] for name, group in runs.items()}, chance=0.5,
                figsize=(8, 4), title="the scale folded into W_Q at initialisation, three seeds")
plt.show()

# %% [markdown]
# The folded model starts as the scaled one, yet its scores end up spread 2.31 to 2.92, like
# the unscaled model's and three or more times the scaled model's. Its accuracy after 4 epochs
# (0.905, 0.810, 0.795) lies between the two. The reason is the optimiser. Adam, which the
# series uses, moves every weight by about the learning rate per step, whatever the size of its
# gradient. The folded $W_Q$ is 8 times smaller, so the same step changes it, and the queries,
# 8 times more relative to their size. The $1/\sqrt{d_k}$ is not only the scores' size at
# initialisation: with Adam it also sets how fast they move, and a model with the scale folded
# into its weights is another model to train.

# %% [markdown] slideshow={"slide_type": "subslide"}
# The numbers this notebook measured, once more:

# %% tags=["hide-input"]
def span(values, digits):
    return f"{fmt(min(values), digits)} to {fmt(max(values), digits)}"


after_4 = {name: [row[0] for row in rows[name]] for name in rows}
lessons = {
    "std(q·k) at d_k = 256": fmt(std[d_ks == 256][0], 3),
    "log-log slope of std(q·k)": fmt(slope, 3),
    "unscaled largest weight, d_k = 4, 1024": f"{fmt(top['unscaled'][0], 3)}, "
                                               f"{fmt(top['unscaled'][-1], 3)}",
    "gradient at d_k = 1024, scaled / unscaled": fmt(shrink, 0),
    "notebook 03: spread at start, trained": f"{fmt(spreads['initialisation'], 3)}, "
                                             f"{fmt(spreads['trained'], 3)}",
    "notebook 03: mean largest weight, trained": fmt(largest["trained"], 3),
    "d_head = 64, after 4 epochs, scaled": span(after_4["scaled"], 3),
    "d_head = 64, after 4 epochs, scale 1.0": span(after_4["scale 1.0"], 3),
    "d_head = 64, trained spread, scaled": span(trained_spreads["scaled"], 2),
    "d_head = 64, trained spread, scale 1.0": span(trained_spreads["scale 1.0"], 2),
    "d_head = 64, trained spread, folded": span(trained_spreads["folded"], 2),
}
for name, value in lessons.items():
    print(f"{name:<42} {value}")

# %% [markdown]
# ## What we learned
#
# - The spread of $q \cdot k$ grows like $\sqrt{d_k}$: 16.362 at $d_k = 256$, a log-log slope of
#   0.499; dividing by $\sqrt{d_k}$ brings it back to about 1.
# - Without the division the softmax tends to one-hot (mean largest weight 0.431 at $d_k = 4$,
#   0.964 at 1024), and a saturated softmax passes almost no gradient: at $d_k = 1024$ the query
#   gets 952× less gradient without the scale than with it.
# - A model's queries and keys are not section 1's: notebook 03's scaled scores spread 0.020 at
#   initialisation and 1.023 after training (mean largest weight 0.273). Its softmax does not
#   saturate.
# - Trained without the division at $d_{head} = 64$, that model learns faster, not slower: 0.887
#   to 0.912 after 4 epochs against 0.767 to 0.812 with the scale (three seeds). Its scores grow
#   wider: 2.42 to 4.19 against 0.40 to 0.83.
# - The scale is free at inference (fold it into $W_Q$) but not in training: folded in at
#   initialisation, the same function at step 0 ends with scores spread 2.31 to 2.92, like the
#   unscaled model's, because Adam's step does not shrink with the weights.

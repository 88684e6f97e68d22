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
# - how spread the scores of a small model (notebook 03's) are, before and after training, and
#   what a LayerNorm before attention changes;
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
assert abs(std[d_ks == 256][0] - 16) < 1 and abs(slope - 0.5) < 0.02, "about 16, about 0.5"
assert np.all(np.abs(std / np.sqrt(d_ks) - 1) < 0.1), "std(q·k) / sqrt(d_k) should be about 1"

# %%
ex02.std_at_256(guess, std[d_ks == 256][0])

# %% tags=["hide-input"]
against_d_k(d_ks, std, std / np.sqrt(d_ks), "standard deviation",
            labels=("std(q·k)", "std(q·k / √d_k)"), log_y=True, reference=np.sqrt(d_ks),
            reference_label="√d_k", title=f"spread of the dot product (fitted slope {slope:.2f})")
plt.show()

# %% [markdown]
# The variances of the $d_k$ terms add up to $d_k$, so the standard deviation is $\sqrt{d_k}$:
# about 16 at $d_k = 256$, a fitted slope of about 0.5 on log-log axes. Dividing by $\sqrt{d_k}$ brings
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
assert top["unscaled"][0] < 0.5 and top["unscaled"][-1] > 0.9, "below 0.5, above 0.9"
assert (np.abs(top["scaled"] - 0.25) < 0.03).all(), "scaled: about 0.25 at every d_k"

# %% tags=["hide-input"]
against_d_k(d_ks, top["unscaled"], top["scaled"], "mean largest weight", reference=1 / 16,
            reference_label="uniform (1/16)", ylim=(0, 1.05),
            title="how peaked is the softmax? (16 keys)")
plt.show()

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
assert shrink > 300 and larger.tolist() == [4, 8, 16, 32, 64], "hundreds of times; 4 to 64"
assert d_ks[peak] in (8, 16, 32), "largest at a small d_k, not at the ends"
assert (np.abs(grad["scaled"] - 1) < 0.2).all(), "scaled: about 1 at every d_k"

# %% tags=["hide-input"]
against_d_k(d_ks, grad["unscaled"], grad["scaled"], "median ‖∂L/∂q‖", log_y=True,
            title="gradient reaching the query")
plt.show()

# %% [markdown]
# Without the scale, the gradient at $d_k = 1024$ is hundreds of times smaller than with it;
# with the scale it stays about 1 at every $d_k$. For small $d_k$ (4 to 64) the unscaled
# gradient is even *larger*: without the division each score moves $\sqrt{d_k}$ times faster
# when $q$ moves. It peaks at a small $d_k$ (printed above); beyond that the softmax saturates
# and its slope vanishes.
#
# All of this is about queries and keys whose entries have variance 1. Whether a model's
# queries and keys look like that is a question about the model, and nothing above answers it.

# %% [markdown]
# ## 4 · The scores of notebook 03's model
#
# Notebook 03 trains a small Transformer to classify short reviews: a token vector per word
# plus a learned position vector, one attention layer with 4 heads of $d_{head} = 8$, a
# feed-forward layer, a classifier. Its token vectors are drawn small (entries of variance
# $1/d_{model}$, length about 1), and its block is post-norm, as in the 2017 paper: no LayerNorm
# before attention. `attnlab.train.train_classifier()` trains it in a few seconds. Its queries
# and keys are learned projections of learned token vectors, not draws from
# $\mathcal{N}(0, 1)$. How spread are the scores its softmax sees?
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
block = untrained.blocks[0]
with torch.no_grad():  # a pre-norm block (GPT-2, Llama) gives attention LayerNorm(x) instead of x
    prenorm = float(score_spread(block.attn, block.norm1(untrained.embed(x_test)), real))
print(f"test accuracy after training: {fmt(trained.test_accuracy, 3)}")
print(f"{'':<15} {'spread of the scores':>21} {'mean largest weight':>20}")
for name in spreads:
    print(f"{name:<15} {fmt(spreads[name], 3):>21} {fmt(largest[name], 3):>20}")
print(f"initialisation, its input through a LayerNorm first (pre-norm): spread {fmt(prenorm, 3)}")

# %% tags=["remove-cell"]
assert 0.01 < spreads["initialisation"] < 0.03, "about 0.02"
assert 0.5 < spreads["trained"] < 2 and largest["trained"] < 0.5, "about 1; far from one-hot"
assert largest["initialisation"] < 0.15, "almost uniform at the start"
assert abs(prenorm - 1 / 3) < 0.05, "pre-norm: about 1/3"

# %%
ex02.spread_at_init(spread_guess, spreads["initialisation"])

# %% [markdown]
# At initialisation the scores spread about 0.02, not 1: nn.Linear draws $W_Q$ and $W_K$ with
# entries of about $1/\sqrt{d_{model}}$ and the token vectors have length about 1, so the
# entries of $q$ and $k$ start small, and their products smaller still. The softmax starts
# almost uniform. That is this model's choice: a pre-norm block normalises each token vector to
# entries of variance 1 first, and the same untrained layer then spreads its scores about 1/3
# (nn.Linear's weights have variance $1/(3 d_{model})$, so $q$ and $k$ have entries of variance
# 1/3), larger but still below 1. After training this model's scores spread about 1, and a
# query's largest weight stays below 0.5 on average, far from one-hot (1). Its softmax does not
# saturate, before or after training: section 3's vanishing gradient never happens to it. So
# what does the scale do here?

# %% [markdown]
# ## 5 · Training without the scale
#
# With $d_{head} = 8$ the scale divides by $\sqrt 8 \approx 2.8$. We give the model one head of
# $d_{head} = 64$ instead ($d_{model} = 64$), where it divides by 8, and train it with notebook
# 03's recipe for 5 epochs (passes over the 1,600 training reviews).
# `scaling.train_at_scale(scale, seed=..., epochs=...)` does it; `scale=None` is the usual
# $1/\sqrt{d_{head}}$. The cell trains three seeds of each variant, for a table further down;
# here, seed 0's test accuracy after each epoch:

# %%
EPOCHS = 5
SEEDS = (0, 1, 2)
VARIANTS = {"scaled": {}, "scale 1.0": {"scale": 1.0}, "folded": {"fold": True}}  # their arguments
runs = {name: [scaling.train_at_scale(**VARIANTS[name], seed=s, epochs=EPOCHS) for s in SEEDS]
        for name in ("scaled", "scale 1.0")}  # shown after the exercise below
scaled_run = runs["scaled"][0]  # softmax(q·k / 8), seed 0
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
accuracy = ex02.accuracy_without_scale(accuracy, {name: runs[name][0].history["test_acc"]
                                                   for name in ("scale 1.0", "scaled")})

# %% [markdown]
# One run could be luck. Three seeds of each (each seed draws other reviews, other initial
# weights and another batch order), with the spread of each model's scores (section 4's
# measurement) at the start and after training:

# %%
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
column = {name: np.array(list(zip(*rows[name]))) for name in rows}  # name -> (4 columns, 3 seeds)
ahead = column["scale 1.0"][0] - column["scaled"][0]  # (3,)   after 4 epochs, seed by seed
assert ahead.mean() > 0.04 and (ahead > 0).sum() >= 2, "ahead on average and in most seeds"
assert min(column["scaled"][1].min(), column["scale 1.0"][1].min()) > 0.7, "all above 0.7"
assert np.allclose(column["scale 1.0"][2], 8 * column["scaled"][2]), "8 times wider at the start"
assert column["scaled"][2].max() < 0.015, "about 0.01 at the start"
assert (column["scale 1.0"][3] > 2 * column["scaled"][3]).all(), "twice as wide, every seed"

# %% tags=["hide-input"]
accuracy_curves({name: [r.history for r in group] for name, group in runs.items()}, chance=0.5,
                figsize=(8, 4), title="one head of d_head = 64, three seeds each")
plt.show()

# %% [markdown]
# Without the division the model does not stall. It learns *faster*: after 4 epochs it is ahead
# on average over the three seeds, and in most of them; after 5 epochs every run of either kind
# is above 0.7. Section 3's gradient shrank only for scores as spread as section 1's at
# $d_k \geq 128$; without the scale these start 8 times wider than with it, whose spread is about
# 0.01: the softmax is nowhere near saturation. What the missing division changes is how fast
# the scores grow: after training they are more than twice as spread as the scaled model's, in
# every seed.

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
folded_guess = "unscaled"  # an 8× smaller W_Q with an 8× larger gradient: Adam moves it 8× faster
### END SOLUTION

# %%
runs["folded"] = [scaling.train_at_scale(fold=True, seed=s, epochs=EPOCHS) for s in SEEDS]
rows.update(table(["folded"]))

# %% tags=["remove-cell"]
column = {name: np.array(list(zip(*rows[name]))) for name in rows}
assert np.allclose(column["folded"][2], column["scaled"][2]), "folded: the scaled model at step 0"
assert (column["folded"][3] > 1.5 * column["scaled"][3]).all(), "wider than scaled, every seed"

# %%
trained_spreads = {name: [row[3] for row in rows[name]] for name in rows}
ex02.folded_spread(folded_guess, trained_spreads)

# %% tags=["remove-cell"]
assert folded_guess == "unscaled", "the prose says: nearer the unscaled model's"

# %% tags=["hide-input"]
accuracy_curves({name: [r.history for r in group] for name, group in runs.items()}, chance=0.5,
                figsize=(8, 4), title="the scale folded into W_Q at initialisation, three seeds")
plt.show()

# %% [markdown]
# The folded model starts as the scaled one, yet in every seed its scores end up wider than the
# scaled model's of the same seed, on the whole nearer the unscaled model's. Why? Compare the
# two models' $W_Q$ and its gradient at step 0, on one batch:

# %%
x_train, y_train, _ = scaled_run.train.tensors(scaled_run.vocab)  # (1600, T), (1600,)
w_q, grads = {}, {}
for name in ("scaled", "folded"):
    model = scaling.initial_at_scale(**VARIANTS[name], seed=0)  # step 0, the same function
    torch.nn.functional.cross_entropy(model(x_train[:64]), y_train[:64]).backward()  # one batch
    w_q[name] = model.blocks[0].attn.q.weight.detach()  # (64, 64)
    grads[name] = model.blocks[0].attn.q.weight.grad  # (64, 64)   ∂L/∂W_Q
print(f"folded / scaled: W_Q {fmt(float(w_q['folded'].norm() / w_q['scaled'].norm()), 3)}×, "
      f"its gradient {fmt(float(grads['folded'].norm() / grads['scaled'].norm()), 3)}×")

# %% tags=["remove-cell"]
assert torch.allclose(grads["folded"], 8 * grads["scaled"]), "8 times the gradient, entry by entry"
assert torch.allclose(8 * w_q["folded"], w_q["scaled"]), "8 times smaller"

# %% [markdown]
# The folded $W_Q$ is 8 times smaller and, by the chain rule, gets a gradient 8 times larger.
# Adam, which the series uses, moves every weight by about the learning rate per step whatever
# the size of its gradient, so the folded $W_Q$, and the queries, move 8 times faster relative
# to their size. Plain SGD, a step of learning rate × gradient, would not undo this: it would
# move them $8 \times 8 = 64$ times faster. The $1/\sqrt{d_k}$ is not only the scores' size at
# initialisation: it also sets how fast they move, and a model with the scale folded into its
# weights is another model to train.

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
    "notebook 03 at start, input LayerNorm-ed": fmt(prenorm, 3),
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
# - The spread of $q \cdot k$ grows like $\sqrt{d_k}$: about 16 at $d_k = 256$, a log-log slope
#   of about 0.5; dividing by $\sqrt{d_k}$ brings it back to about 1.
# - Without the division the softmax tends to one-hot (mean largest weight below 0.5 at
#   $d_k = 4$, above 0.9 at 1024), and a saturated softmax passes almost no gradient: at
#   $d_k = 1024$ the query gets hundreds of times less gradient without the scale than with it.
# - A model's queries and keys are not section 1's: notebook 03's model (small token vectors,
#   no LayerNorm before attention) starts with scaled scores of spread about 0.02 (about 1/3
#   with a LayerNorm first) and ends near 1. Its softmax does not saturate.
# - Trained without the division at $d_{head} = 64$, that model learns faster, not slower:
#   ahead after 4 epochs on average over three seeds. Its scores grow more than twice as wide
#   as with the scale, in every seed.
# - The scale is free at inference (fold it into $W_Q$) but not in training: folded in at
#   initialisation, the same function at step 0 ends with wider scores than the scaled model,
#   nearer the unscaled one's, because the folded $W_Q$ is 8 times smaller and gets 8 times the
#   gradient: an optimiser's step moves it faster relative to its size (Adam 8 times, SGD 64).

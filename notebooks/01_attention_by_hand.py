# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Attention by hand
#
# Attention answers one question: *given what I am looking for (a query), how much should I take
# from each of the things I could look at (keys), and what do I get back (values)?*
#
# $$\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V$$

# %% [markdown]
# ## What you will learn
#
# - to compute attention by hand on numbers you can check: scores, scaling, softmax, weighted
#   average of the values;
# - to write it yourself in three lines of PyTorch that work on whole batches;
# - why attention is a *soft* lookup, and why no key gets exactly zero weight without a mask;
# - how multi-head self-attention projects, splits into heads, attends, merges and mixes, in
#   about ten lines.
#
# Assumes: vectors and the dot product, matrix multiplication, $e^x$, and PyTorch tensors
# (`@`, `.shape`, `.transpose`).

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.exercises import ex01
from attnlab.plumbing.report import fmt
from attnlab.views import diagrams
from attnlab.views.plots import attention_heatmap, head_grid, show_figure
from attnlab.views.widgets import AttentionPlayground

attnlab.seed_everything(0)


def vec(xs, digits=3):
    """A small vector as [0.405, 0.246, 0.349], each number through fmt."""
    return "[" + ", ".join(fmt(x, digits) for x in torch.as_tensor(xs).tolist()) + "]"


# %% [markdown]
# ## The worked example
#
# One query and three keys, each a vector of $d_k = 4$ numbers, and a value of 2 numbers per
# key. The query matches key 0 exactly, key 2 partly and key 1 not at all.

# %%
Q = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # (1, d_k)   one query
K = torch.tensor([[1.0, 0.0, 0.0, 0.0],  # (3, d_k)   three keys
                  [0.0, 1.0, 0.0, 0.0],
                  [0.7, 0.7, 0.0, 0.0]])
V = torch.tensor([[10.0, 0.0],  # (3, d_v)   one value per key
                  [0.0, 10.0],
                  [5.0, 5.0]])
d_k = K.shape[-1]
key_names = [f"k{j} = {vec(K[j], 1)}" for j in range(len(K))]
print(f"d_k = {d_k}, sqrt(d_k) = {fmt(math.sqrt(d_k), 3)}")

# %% [markdown]
# **Predict first.** The three weights will sum to 1. How much of the weight does each key
# get? Write three numbers in the next cell before running the ones below it.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: the query matches key 0 exactly, key 2 partly and key 1 not at
# all. What share of the weight does each key get? Does key 1 get 0?

# %%
guess = ...  # your prediction: three weights that sum to 1, e.g. [0.6, 0.1, 0.3]
### BEGIN SOLUTION
guess = [0.45, 0.2, 0.35]
### END SOLUTION

# %% [markdown]
# **Step 1: raw scores.** How well does the query match each key? The *dot product*
# $q \cdot k_j = \sum_i q_i k_{j,i}$: large when the two point the same way, 0 when they are
# orthogonal.

# %%
raw = Q @ K.T  # (1, 3)   q·k_j
for j in range(len(K)):
    print(f"{key_names[j]:<26}  q·k = {fmt(raw[0, j], 3)}")

# %% [markdown]
# **Step 2: scaled scores.** Divide by $\sqrt{d_k}$ (notebook 02 measures why).

# %%
scaled = raw / math.sqrt(d_k)  # (1, 3)   q·k_j / sqrt(d_k)
for j in range(len(K)):
    print(f"k{j}:  {fmt(raw[0, j], 3)} / {math.sqrt(d_k):g} = {fmt(scaled[0, j], 3)}")

# %% [markdown]
# **Step 3: softmax.** The *softmax* turns scores into weights that are positive and sum to 1:
# $w_j = e^{s_j} / \sum_i e^{s_i}$. By hand first, then with `scaled_dot_product_attention`,
# which the whole series uses.

# %%
output, weights = attnlab.scaled_dot_product_attention(Q, K, V)  # (1, d_v), (1, 3)

exps = [math.exp(s) for s in scaled[0].tolist()]
total = sum(exps)
print(f"{'key':<4} {'score':>6} {'exp(score)':>11} {'by hand':>8} {'attnlab':>8}")
for j in range(len(K)):
    print(f"k{j:<3} {fmt(scaled[0, j], 3):>6} {fmt(exps[j], 3):>11} {fmt(exps[j] / total, 3):>8} "
          f"{fmt(weights[0, j], 3):>8}")
print(f"sum of exp = {fmt(total, 3)};  sum of weights = {fmt(weights.sum(), 3)}")

# %% tags=["remove-cell"]
assert torch.allclose(weights[0], torch.tensor(exps) / total, atol=1e-6), "by hand disagrees"
assert torch.allclose(weights.sum(-1), torch.ones(1)), "each row of weights must sum to 1"
assert vec(weights[0]) == "[0.405, 0.246, 0.349]"

# %%
ex01.predict_weights(guess, weights[0])

# %% [markdown]
# Key 1 does not match at all ($q \cdot k_1 = 0$), yet it gets 0.246 of the weight. Softmax never
# gives exactly 0: $e^{s} > 0$ for every score $s$. To exclude a key (padding, or a future word
# that a model must not see), attention uses a *mask*: a True/False per key, and a False key's
# score becomes a hugely negative number before the softmax, so its $e^{s}$ is exactly 0.

# %%
may_attend = torch.tensor([[True, False, True]])  # (1, 3)   False: the query may not see key 1
_, masked = attnlab.scaled_dot_product_attention(Q, K, V, mask=may_attend)  # (1, 3)
print(f"no mask:      weights {vec(weights[0])}")
print(f"key 1 masked: weights {vec(masked[0])}")

# %% tags=["remove-cell"]
assert masked[0, 1].item() == 0.0 and torch.allclose(masked.sum(), torch.tensor(1.0))
assert vec(masked[0]) == "[0.537, 0.000, 0.463]"

# %% [markdown]
# With the mask, key 1 gets exactly 0.
#
# **Step 4: output.** The output is the weighted average of the values: $\sum_j w_j v_j$.

# %%
terms = [weights[0, j] * V[j] for j in range(len(K))]  # each (d_v,)
for j, term in enumerate(terms):
    print(f"{fmt(weights[0, j], 3)} × {vec(V[j], 1)} = {vec(term)}")
by_hand = sum(terms)
print(f"sum          = {vec(by_hand)}")
print(f"attnlab      = {vec(output[0])}")

# %% tags=["remove-cell"]
assert torch.allclose(output[0], by_hand, atol=1e-5), "output = weighted average of the values"
assert vec(output[0]) == "[5.797, 4.203]"

# %% [markdown]
# The whole computation in one picture: one row (the query), one column per key.

# %% tags=["hide-input"]
_, ax = plt.subplots(figsize=(8, 2))
attention_heatmap(weights, ["q"], ["k0", "k1", "k2"], ax=ax,
                  title="attention weights of the worked example")
show_figure()

# %% [markdown]
# ## Your turn: attention in three lines
#
# Write `my_attention(q, k, v)` for whole batches: `q` is (..., T_q, d_k), `k` is
# (..., T_k, d_k), `v` is (..., T_k, d_v), with any number of leading dimensions (sequences in
# a batch, heads). Return `(output, weights)`, as `attnlab.scaled_dot_product_attention` does.
# The check runs your function and attnlab's on three random inputs, batched ones included.
#
# <details><summary>Hint 1</summary>
#
# The four steps of the worked example, for every query at once. In each tensor, which
# dimension runs over the keys and which over the numbers of one vector?
# </details>
# <details><summary>Hint 2</summary>
#
# Swap only the last two dimensions of k (`.T` reverses all of them, batch and heads included),
# multiply, divide by the square root of the queries' last dimension, take the softmax over the
# last dimension (the keys), and multiply the weights by v.
# </details>

# %%
def my_attention(q, k, v):
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)   each row sums to 1
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)
    ### END SOLUTION


attention = ex01.attention(my_attention)  # your function if it is right, attnlab's otherwise

# %% [markdown]
# ## A soft lookup table
#
# A Python dict is a *hard* lookup: the query must equal a key, and you get exactly that key's
# value. Attention is a *soft* lookup: every key matches a little, and you get a blend of the
# values, weighted by how well each key matches.
#
# The longer the query, the further apart the scores and the more the softmax concentrates on
# the best key. We stretch the query and measure how close it gets to a hard lookup.

# %%
stretches = [1, 2, 4, 8, 16, 32]
Q_stretched = torch.cat([c * Q for c in stretches])  # (6, d_k)   one query per stretch
out_s, w_s = attention(Q_stretched, K, V)  # (6, d_v), (6, 3)
for c, wrow, orow in zip(stretches, w_s, out_s):
    print(f"{c:>2} × q: weights {vec(wrow)}  output {vec(orow, 2)}")
w0 = w_s[:, 0]  # (6,)   key 0's weight, per stretch

# %% tags=["remove-cell"]
assert (w0[1:] > w0[:-1]).all(), "a longer query should put more weight on the aligned key"
assert fmt(w0[-1], 3) == "0.992" and (w_s > 0).all(), "at 32 × q key 0 takes 0.992, none gets 0"

# %% tags=["hide-input"]
_, ax = plt.subplots(figsize=(8, 3.8))
attention_heatmap(w_s, [f"{c} × q" for c in stretches], ["k0", "k1", "k2"], ax=ax,
                  title="stretching the query")
show_figure()

# %% [markdown]
# At 32 × q key 0 takes 0.992 of the weight and the output is almost its value [10, 0]: the soft
# lookup has become nearly a hard one. Key 1's "0.000" is rounding: its weight is $e^{-16}$
# times key 0's, small but not zero.

# %% [markdown]
# ## Playground: make key 2 win
#
# Move the query with the sliders: the bars show the weights, and below them the output (the
# widget needs a live kernel).
#
# **Explore:** key 2 has never won so far. Find a query (four numbers between −3 and 3) for which
# key 2 gets the largest weight, with the sliders or by reasoning, and write it below.
#
# <details><summary>Hint 1</summary>
#
# Key 2 is not the best match for a query that points like key 0, nor for one that points like
# key 1. What does key 2 have that neither of them has?
# </details>
# <details><summary>Hint 2</summary>
#
# Key 2 has a share of both directions. Write each key's score $q \cdot k$ as a sum over the
# four coordinates and look for a query that scores key 0 and key 1 equally.
# </details>

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: which query makes key 2 = [0.7, 0.7, 0, 0] win against key 0 = [1, 0, 0, 0]
# and key 1 = [0, 1, 0, 0]?

# %%
playground = AttentionPlayground(K, V, query=Q[0], key_labels=key_names)
print(playground.text())  # where it starts, as text too: what shows where the widget cannot
playground.widget

# %%
my_query = ...  # four numbers in [-3, 3] for which key 2 gets the largest weight
### BEGIN SOLUTION
my_query = [1.0, 1.0, 0.0, 0.0]  # halfway between k0 and k1
### END SOLUTION
winner = ex01.key_2_wins(my_query, K)

# %% [markdown]
# One query that works lies halfway between key 0 and key 1: $q = [1, 1, 0, 0]$ scores 1 with
# each of them and 1.4 with key 2, which has a share of both directions.
#
# Direction or length: which counts for more? Add a fourth key, $k_3 = [2, 0, 0, 0]$: the
# direction of key 0, twice as long. It points the query's way less well than key 2 does.
#
# **Predict first:** with the four keys, which key gets the largest weight for $q = [1, 1, 0, 0]$?
# Write its number, 0 to 3.

# %%
winner_guess = ...  # 0, 1, 2 or 3
### BEGIN SOLUTION
winner_guess = 3  # q·k = |q| |k| cos θ: twice the length beats a better direction here
### END SOLUTION

# %%
halfway = torch.tensor([1.0, 1.0, 0.0, 0.0])  # (d_k,)   the query halfway between k0 and k1
K4 = torch.cat([K, torch.tensor([[2.0, 0.0, 0.0, 0.0]])])  # (4, d_k)   k3: key 0, twice as long
_, w4 = attnlab.scaled_dot_product_attention(halfway[None], K4, K4)  # (1, 4)
dots = K4 @ halfway  # (4,)   q·k
lengths = K4.norm(dim=-1)  # (4,)   |k|
cosines = dots / (lengths * halfway.norm())  # (4,)   cos θ, the agreement of the directions
print(f"query {vec(halfway, 1)}, length {fmt(halfway.norm(), 3)}")
print(f"{'key':<25} {'|k|':>6} {'cos θ':>6} {'q·k':>5} {'weight':>7}")
for j, name in enumerate(key_names + [f"k3 = {vec(K4[3], 1)}"]):
    print(f"{name:<25} {fmt(lengths[j], 3):>6} {fmt(cosines[j], 3):>6} {fmt(dots[j], 1):>5} "
          f"{fmt(w4[0, j], 3):>7}")

# %% tags=["remove-cell"]
assert w4[0].argmax() == 3 and cosines[2] > cosines[3] and dots[3] > dots[2]
assert [fmt(x, 1) for x in dots] == ["1.0", "1.0", "1.4", "2.0"]
assert [fmt(x, 3) for x in cosines] == ["0.707", "0.707", "1.000", "0.707"]

# %%
ex01.predict_winner(winner_guess, w4[0])

# %% [markdown]
# Key 3 agrees with the query's direction less well than key 2 (cosine 0.707 against 1.000) and
# still wins, 2.0 against 1.4: $q \cdot k = \lVert q\rVert\,\lVert k\rVert \cos\theta$, the
# agreement of the directions times both lengths. A key wins by pointing the query's way *or* by
# being long. To compare directions alone, scale every vector to length 1 first; then
# $q \cdot k$ is the cosine. Notebook 06 does that before retrieving images by their embeddings.

# %% [markdown]
# ## Several heads over a sentence
#
# In a Transformer (the family of models built from attention layers) nobody types in Q, K
# and V. Each *token* (a word, or a piece of one) has an *embedding*, a learned vector, and the
# rows of X, the embeddings of a sentence, are *projected* three ways by learned matrices:
# $Q = XW_Q$, $K = XW_K$, $V = XW_V$. Every token is at once a query and a key:
# *self-attention*. *Multi-head* attention gives each of n_heads *heads* its own slice of
# d_head = d_model / n_heads numbers of every token's query, key and value: head $h$ gets the
# numbers $h \cdot d_{head}$ to $(h + 1) \cdot d_{head} - 1$. Each head attends on its own; then
# the heads' outputs are put side by side again (*merge*) and mixed by one more matrix, $W_O$.

# %% [markdown]
# The whole path, with 4 heads (one colour each):

# %% tags=["hide-input"]
diagrams.show("qkv_heads")

# %% [markdown]
# You write the two moves between the shapes.

# %% [markdown]
# ### Split the heads
#
# **Implement** `split_heads(x, n_heads)`: from x (B, T, d_model) to (B, n_heads, T, d_head),
# where `[b, h, t]` is head h's slice of token t of sequence b.
#
# <details><summary>Hint 1</summary>
#
# Two steps. A head needs, for every token, its own d_head consecutive numbers of that token,
# and nothing from another token. Which shape lets you pick them out, and which axis is in the
# wrong place after that?
# </details>
# <details><summary>Hint 2</summary>
#
# First cut the last axis into (n_heads, d_head), leaving B and T where they are; then swap the
# token axis with the head axis. A reshape straight to (B, n_heads, T, d_head) has the right
# shape and the wrong numbers.
# </details>

# %%
def my_split_heads(x, n_heads):
    ### BEGIN SOLUTION
    B, T, d_model = x.shape
    x = x.view(B, T, n_heads, d_model // n_heads)  # (B, T, H, d_head)   each token cut in H
    return x.transpose(1, 2)  # (B, H, T, d_head)   head axis before the token axis
    ### END SOLUTION


split_heads = ex01.split_heads(my_split_heads)  # yours if it is right, attnlab's otherwise

# %% [markdown]
# What the split does to two tokens of 6 numbers each, cut into 3 heads:

# %%
numbers = torch.arange(12.0).view(1, 2, 6)  # (B=1, T=2, d_model=6): token 0 is 0..5, token 1 6..11
print(split_heads(numbers, 3)[0])  # (H=3, T=2, d_head=2)

# %% [markdown]
# Head 0 holds each token's first two numbers, head 1 the next two, head 2 the last two.
#
# ### Merge the heads
#
# **Implement** `merge_heads(x)`: the way back, from (B, n_heads, T, d_head) to
# (B, T, n_heads · d_head), each token's heads side by side in head order.
#
# <details><summary>Hint 1</summary>
#
# Merging undoes splitting: undo its two steps, in the reverse order.
# </details>
# <details><summary>Hint 2</summary>
#
# Swap the head axis and the token axis back, so that each token holds its heads one after the
# other, then flatten the last two axes into one. After a transpose the numbers are no longer in
# memory order: `.view` refuses, `.reshape` copies where it must.
# </details>

# %%
def my_merge_heads(x):
    ### BEGIN SOLUTION
    B, H, T, d_head = x.shape
    x = x.transpose(1, 2)  # (B, T, H, d_head)   each token's heads next to each other
    return x.reshape(B, T, H * d_head)  # (B, T, d_model)
    ### END SOLUTION


merge_heads = ex01.merge_heads(my_merge_heads)  # yours if it is right, attnlab's otherwise

# %% [markdown]
# ### Multi-head attention in ten lines
#
# With your split and merge, multi-head self-attention is project, split, attend, merge, mix:

# %%
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):
    """x (B, T, d_model), four (d_model, d_model) matrices -> output, weights (B, H, T, T)."""
    q = split_heads(x @ W_Q, n_heads)  # (B, H, T, d_head)   project, then split
    k = split_heads(x @ W_K, n_heads)  # (B, H, T, d_head)
    v = split_heads(x @ W_V, n_heads)  # (B, H, T, d_head)
    heads, weights = attention(q, k, v)  # (B, H, T, d_head), (B, H, T, T)   each head alone
    return merge_heads(heads) @ W_O, weights  # (B, T, d_model)   merge, then mix


# %% [markdown]
# We check it against `attnlab.MultiHeadAttention` with the same matrices. Its layers are
# `nn.Linear`, which stores each matrix transposed ($x W = x\,\cdot$ `weight.T`). The layer is
# **untrained**: random matrices, seeded.

# %%
tokens = "the cat sat on the mat".split()
vocab = {word: i for i, word in enumerate(dict.fromkeys(tokens))}
ids = torch.tensor([[vocab[t] for t in tokens]])  # (1, T)

torch.manual_seed(attnlab.seed_of(0))
embed = torch.nn.Embedding(len(vocab), 16)
mha = attnlab.MultiHeadAttention(d_model=16, n_heads=4, bias=False)
W_Q, W_K, W_V, W_O = (layer.weight.T for layer in (mha.q, mha.k, mha.v, mha.out))  # (16, 16) each
with torch.no_grad():
    x = embed(ids)  # (1, T, 16)
    out, heads = multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads=4)  # (1, T, 16), (1, 4, T, T)
    out_lib, heads_lib = mha(x)
same = torch.allclose(out, out_lib, atol=1e-6) and torch.allclose(heads, heads_lib, atol=1e-6)
print(f"x {tuple(x.shape)} -> output {tuple(out.shape)}, weights {tuple(heads.shape)}")
print(f"equal to attnlab.MultiHeadAttention with the same matrices: {same}")

# %% tags=["remove-cell"]
assert same, "the ten-line multi-head attention must match attnlab's"

# %% tags=["hide-input"]
T = len(tokens)
head_grid(heads[0], tokens, title=f"untrained self-attention, 4 heads (uniform = 1/T = 1/{T})",
          with_mean=False, panel_size=2.5)
show_figure()

# %% [markdown]
# Does any head prefer a word? Beside each head's largest weights we print the uniform level,
# $1/T$, the weight of a query that does not prefer any key.

# %%
top = heads[0].amax(-1)  # (H, T)   each query's largest weight, per head
print(f"uniform weight 1/T = {fmt(1 / T, 3)}")
for h in range(heads.shape[1]):
    print(f"head {h}: largest weight per query {vec(top[h], 2)}")
print(f"a query's largest weight: {fmt(top.mean() * T, 1)} × uniform on average, "
      f"{fmt(top.max() * T, 1)} × at most")

# %% tags=["remove-cell"]
assert torch.allclose(heads.sum(-1), torch.ones(1, 4, T), atol=1e-6), "rows must sum to 1"

# %% [markdown]
# Is that this draw's luck? The same layer, with 100 other random draws of its matrices and
# embeddings:

# %%
def largest_weights(seed):
    """(mean, max) over the queries of each one's largest weight, × uniform, for one draw."""
    torch.manual_seed(seed)
    layer = attnlab.MultiHeadAttention(d_model=16, n_heads=4, bias=False)
    x = torch.nn.Embedding(len(vocab), 16)(ids)  # (1, T, 16)
    with torch.no_grad():
        top = layer(x)[1][0].amax(-1) * T  # (H, T)   each query's largest weight × T
    return top.mean().item(), top.max().item()


draws = torch.tensor([largest_weights(attnlab.seed_of(0) + s) for s in range(1, 101)])  # (100, 2)
print(f"on average: {fmt(draws[:, 0].min(), 1)} to {fmt(draws[:, 0].max(), 1)} × uniform; "
      f"at most: {fmt(draws[:, 1].min(), 1)} to {fmt(draws[:, 1].max(), 1)} ×")

# %% tags=["remove-cell"]
# Over 400 draws the average ratio ranged 1.2-1.9: 2.5 leaves a margin for draws nobody checked
assert top.mean() * T < 2.5 and draws[:, 0].max() < 2.5, "untrained: near uniform on average"
spread = draws.max(0).values - draws.min(0).values  # (2,)   the two ranges' widths
assert spread[1] > spread[0], "the largest weight varies more than the average largest weight"

# %% [markdown]
# On average a query's largest weight stays close to the uniform share, in this draw and in all
# 100 others; the single largest weight varies more from draw to draw (the second range).
# Random matrices make some keys match a little better by chance, nothing more. Naming a head's
# "favourite word" here would read meaning into noise. Notebook 03 trains such a layer and
# measures what its heads attend to.
#
# "the" occurs twice. Do its two rows differ?

# %%
first, second = [i for i, t in enumerate(tokens) if t == "the"]
identical = torch.equal(heads[0, :, first], heads[0, :, second])
print(f"rows of 'the' (positions {first} and {second}) identical in every head: {identical}")

# %% tags=["remove-cell"]
assert identical, "without positions, equal tokens must attend identically"

# %% [markdown]
# They do not differ: both tokens have the same embedding, and nothing here tells the layer
# *where* a token sits, so it cannot tell them apart. Notebook 05 adds positions and measures
# when that matters.

# %% [markdown]
# ## What we learned
#
# - Attention is four steps you can do by hand: scores $q \cdot k$, divided by $\sqrt{d_k}$,
#   softmax, weighted average of the values. On the worked example: weights
#   [0.405, 0.246, 0.349], output [5.797, 4.203].
# - Softmax never gives exactly 0: key 1, with score 0, kept 0.246 of the weight. Only a mask
#   gives 0: with key 1 masked the weights became [0.537, 0.000, 0.463].
# - Three lines of PyTorch compute attention for any batch shape; the check compared them with
#   attnlab's on three random inputs.
# - Attention is a soft lookup that hardens as the scores spread: at 32 × q key 0 took 0.992.
# - A score is direction times length: for $q = [1, 1, 0, 0]$ the long key [2, 0, 0, 0] (cosine
#   0.707) scored 2.0 and beat key 2 (cosine 1.000, score 1.4). Comparing directions alone needs
#   vectors of length 1.
# - Multi-head self-attention is split, attend, merge between the projections, about ten lines
#   with your `split_heads` and `merge_heads`, equal to `attnlab.MultiHeadAttention`; untrained,
#   a query's largest weight stayed close to uniform on average, in 101 random draws, and equal
#   tokens attend identically without positions.

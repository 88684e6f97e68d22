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
from attnlab.plots import attention_heatmap, head_grid
from attnlab.report import fmt
from attnlab.widgets import AttentionPlayground

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
# **Predict first.** The three weights will be positive and sum to 1. How much of the weight
# does each key get? Write three numbers in the next cell before running the ones below it.

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
# the one implementation the whole series uses.

# %%
output, weights = attnlab.scaled_dot_product_attention(Q, K, V)  # (1, d_v), (1, 3)

exps = [math.exp(s) for s in scaled[0].tolist()]
total = sum(exps)
print(f"{'key':<4} {'score':>6} {'exp(score)':>11} {'by hand':>8} {'attnlab':>8}")
for j in range(len(K)):
    print(f"k{j:<3} {fmt(scaled[0, j], 3):>6} {fmt(exps[j], 3):>11} {fmt(exps[j] / total, 3):>8} "
          f"{fmt(weights[0, j], 3):>8}")
print(f"sum of exp = {fmt(total, 3)};  sum of weights = {fmt(weights.sum(), 3)}")

assert torch.allclose(weights[0], torch.tensor(exps) / total, atol=1e-6), "by hand disagrees"
assert torch.allclose(weights.sum(-1), torch.ones(1)), "each row of weights must sum to 1"
assert weights[0].argmax().item() == 0, "the key aligned with the query must get the largest weight"

# %%
guess = ex01.predict_weights(guess, weights[0])

# %% [markdown]
# Key 1 does not match at all ($q \cdot k_1 = 0$), yet it gets 0.246 of the weight. Softmax never
# gives exactly 0: $e^{s} > 0$ for every score $s$, so every key keeps a share. To exclude a key
# (padding, or a future word that a model must not see), attention uses a *mask*: a True/False
# per key, and a False key's score is replaced by a hugely negative number before the softmax,
# so that its $e^{s}$ is exactly 0.

# %%
may_attend = torch.tensor([[True, False, True]])  # (1, 3)   False: the query may not see key 1
_, masked = attnlab.scaled_dot_product_attention(Q, K, V, mask=may_attend)  # (1, 3)
print(f"no mask:      weights {vec(weights[0])}")
print(f"key 1 masked: weights {vec(masked[0])}")
assert (weights > 0.2).all(), "without a mask every key keeps a large share here"
assert masked[0, 1].item() == 0.0 and torch.allclose(masked.sum(), torch.tensor(1.0))

# %% [markdown]
# With the mask, key 1 gets exactly 0 and keys 0 and 2 share the whole weight.
#
# **Step 4: output.** The output is the weighted average of the values: $\sum_j w_j v_j$.

# %%
terms = [weights[0, j] * V[j] for j in range(len(K))]  # each (d_v,)
for j, term in enumerate(terms):
    print(f"{fmt(weights[0, j], 3)} × {vec(V[j], 1)} = {vec(term)}")
by_hand = sum(terms)
print(f"sum          = {vec(by_hand)}")
print(f"attnlab      = {vec(output[0])}")
assert torch.allclose(output[0], by_hand, atol=1e-5), "output = weighted average of the values"

# %% [markdown]
# The whole computation in one picture: one row (the query), one column per key.

# %% tags=["hide-input"]
attention_heatmap(weights, ["q"], key_names, title="attention weights of the worked example")
plt.show()

# %% [markdown]
# ## Your turn: attention in three lines
#
# Write `my_attention(q, k, v)` for whole batches: `q` is (..., T_q, d_k), `k` is
# (..., T_k, d_k), `v` is (..., T_k, d_v), with any number of leading dimensions (sequences in
# a batch, heads). Return `(output, weights)`, as `attnlab.scaled_dot_product_attention` does.
# The check runs your function and attnlab's on three random inputs, batched ones included.
#
# <details><summary>Hint</summary>
#
# `k.T` reverses *all* the dimensions of a batched tensor; `k.transpose(-2, -1)` swaps only the
# last two. `torch.softmax(scores, dim=-1)` normalises over the keys.
# </details>

# %%
def my_attention(q, k, v):
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k)   each row sums to 1
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)
    ### END SOLUTION


attention = ex01.attention(my_attention)  # your function if it is right, attnlab's otherwise
assert torch.allclose(attention(Q, K, V)[0], output, atol=1e-6)

# %% [markdown]
# ## A soft lookup table
#
# A Python dict is a *hard* lookup: the query must equal a key, and you get exactly that key's
# value. Attention is a *soft* lookup: every key matches a little, and you get a blend of the
# values, weighted by how well each key matches.
#
# The longer the query vector, the larger the gaps between the scores and the more the softmax
# concentrates on the best key. We stretch the query and measure how close the soft lookup gets
# to the hard one.

# %%
stretches = [1, 2, 4, 8, 16, 32]
Q_stretched = torch.cat([c * Q for c in stretches])  # (6, d_k)   one query per stretch
out_s, w_s = attention(Q_stretched, K, V)  # (6, d_v), (6, 3)
for c, wrow, orow in zip(stretches, w_s, out_s):
    print(f"{c:>2} × q: weights {vec(wrow)}  output {vec(orow, 2)}")

w0 = w_s[:, 0]
assert (w0[1:] > w0[:-1]).all(), "a longer query should put more weight on the aligned key"
assert w0[-1] > 0.99 and (w_s > 0).all(), "at 32 × q key 0 takes almost all, yet no key exactly 0"

# %% tags=["hide-input"]
attention_heatmap(w_s, [f"{c} × q" for c in stretches], key_names, title="stretching the query")
plt.show()

# %% [markdown]
# At 32 × q key 0 takes 0.992 of the weight and the output is almost its value [10, 0]: the soft
# lookup has become nearly a hard one. Key 1's "0.000" is rounding: its weight is $e^{-16}$
# times key 0's, small but not zero.

# %% [markdown]
# ## Playground: make key 2 win
#
# Move the query with the sliders: the bars show the weights, and the output below them is the
# weighted average of the values (the widget needs a live kernel).
#
# **Explore:** key 2 has never won so far. Find a query (four numbers between −3 and 3) for which
# key 2 gets the largest weight, with the sliders or by reasoning, and write it below.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: which query makes key 2 = [0.7, 0.7, 0, 0] win against key 0 = [1, 0, 0, 0]
# and key 1 = [0, 1, 0, 0]?

# %%
playground = AttentionPlayground(K, V, query=Q[0], key_labels=key_names)
playground.widget

# %%
my_query = ...  # four numbers in [-3, 3] for which key 2 gets the largest weight
### BEGIN SOLUTION
my_query = [1.0, 1.0, 0.0, 0.0]  # halfway between k0 and k1
### END SOLUTION
winner = ex01.key_2_wins(my_query, K)
print(playground.text(playground.view(winner)))
assert playground.view(winner)["weights"].argmax() == 2

# %% [markdown]
# A query halfway between key 0 and key 1 scores 1 with each of them but 1.4 with key 2, which
# has a share of both directions: key 2 wins. A key wins by pointing the query's way, not by
# being equal to it.

# %% [markdown]
# ## Several heads over a sentence
#
# In a Transformer (the family of models built from attention layers) nobody types in Q, K
# and V. Each *token* (a word, or a piece of one) has an *embedding*, a learned vector, and the
# rows of X, the embeddings of a sentence, are *projected* three ways by learned matrices:
# $Q = XW_Q$, $K = XW_K$, $V = XW_V$. Every token is at once a query and a key:
# *self-attention*. *Multi-head* attention splits the d_model columns into n_heads slices of
# d_head = d_model / n_heads, lets each slice (a *head*) attend on its own, puts the heads'
# outputs side by side again (*merge*) and mixes them with one more matrix, $W_O$.

# %%
def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):
    """x (B, T, d_model), four (d_model, d_model) matrices -> output, weights (B, H, T, T)."""
    B, T, d_model = x.shape
    d_head = d_model // n_heads

    def split(t):  # (B, T, d_model) -> (B, H, T, d_head): head h gets its own d_head columns
        return t.view(B, T, n_heads, d_head).transpose(1, 2)

    q, k, v = split(x @ W_Q), split(x @ W_K), split(x @ W_V)  # (B, H, T, d_head) each
    heads, weights = attention(q, k, v)  # (B, H, T, d_head), (B, H, T, T)
    merged = heads.transpose(1, 2).reshape(B, T, d_model)  # (B, T, d_model)   heads side by side
    return merged @ W_O, weights  # (B, T, d_model), (B, H, T, T)


# %% [markdown]
# We check it against `attnlab.MultiHeadAttention` with the same matrices. Its layers are
# `nn.Linear`, which stores each matrix transposed ($x W = x\,\cdot$ `weight.T`). The layer is
# **untrained**: random matrices, seeded.

# %%
tokens = "the cat sat on the mat".split()
vocab = {word: i for i, word in enumerate(dict.fromkeys(tokens))}
ids = torch.tensor([[vocab[t] for t in tokens]])  # (1, T)

torch.manual_seed(0)
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
assert same, "the ten-line multi-head attention must match attnlab's"

# %% tags=["hide-input"]
T = len(tokens)
head_grid(heads[0], tokens, title=f"untrained self-attention, 4 heads (uniform = 1/T = 1/{T})",
          with_mean=False)
plt.show()

# %% [markdown]
# Does any head prefer a word? Beside each head's largest weights we print the uniform level,
# $1/T$, the weight of a query that does not prefer any key.

# %%
top = heads[0].amax(-1)  # (H, T)   each query's largest weight, per head
print(f"uniform weight 1/T = {fmt(1 / T, 3)}")
for h in range(heads.shape[1]):
    print(f"head {h}: largest weight per query {vec(top[h], 2)}")
print(f"largest of all: {fmt(top.max(), 3)} = {fmt(top.max() * T, 1)} × uniform")
assert torch.allclose(heads.sum(-1), torch.ones(1, 4, T), atol=1e-6), "rows must sum to 1"
assert top.max() < 2.5 / T, "an untrained layer's weights should stay within 2.5 × uniform"

# %% [markdown]
# No query gives any key more than 2.3 times the uniform share: random matrices make some keys
# match a little better by chance, nothing more. Naming a head's "favourite word" here would
# read meaning into noise. Notebook 03 trains such a layer and measures what its heads attend to.
#
# "the" occurs twice. Do its two rows differ?

# %%
first, second = [i for i, t in enumerate(tokens) if t == "the"]
identical = torch.equal(heads[0, :, first], heads[0, :, second])
print(f"rows of 'the' (positions {first} and {second}) identical in every head: {identical}")
assert identical, "without positions, equal tokens must attend identically"

# %% [markdown]
# They do not differ: both tokens have the same embedding, and nothing here tells the layer
# *where* a token sits, so it cannot tell them apart. Notebook 04 adds positions and measures
# when that matters.
#
# The numbers this notebook measured, once more:

# %%
lessons = {
    "worked example, weights": vec(weights[0]),
    "worked example, output": vec(output[0]),
    "key 1 masked, weights": vec(masked[0]),
    "32 × q, weight of key 0": fmt(w0[-1], 3),
    "untrained heads, largest weight × T": fmt(top.max() * T, 1),
}
for name, value in lessons.items():
    print(f"{name:<36} {value}")
assert lessons["worked example, weights"] == "[0.405, 0.246, 0.349]"
assert lessons["key 1 masked, weights"] == "[0.537, 0.000, 0.463]"
assert lessons["32 × q, weight of key 0"] == "0.992"
assert lessons["untrained heads, largest weight × T"] == "2.3"

# %% [markdown]
# ## What we learned
#
# - Attention is four steps you can do by hand: scores $q \cdot k$, divided by $\sqrt{d_k}$,
#   softmax, weighted average of the values. On the worked example: weights
#   [0.405, 0.246, 0.349], output [5.797, 4.203].
# - Softmax never gives exactly 0: key 1, with score 0, kept 0.246 of the weight. Only a mask
#   gives 0: with key 1 masked the weights became [0.537, 0.000, 0.463].
# - Three lines of PyTorch (`transpose(-2, -1)`, `softmax(dim=-1)`, `@ v`) compute attention for
#   any batch shape; the check compared them with attnlab's on three random inputs.
# - Attention is a soft lookup that hardens as the scores spread: at 32 × q key 0 took 0.992.
# - Multi-head self-attention is ten lines (project, split, attend, merge, $W_O$) and equals
#   `attnlab.MultiHeadAttention`; untrained, its largest weight was 2.3 × uniform, and equal
#   tokens attend identically without positions.

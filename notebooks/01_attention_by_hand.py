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
#
# We work through it on numbers small enough to check with a pencil, then play with the query,
# then look at several heads attending over a real sentence. Each step is done by hand and
# checked against `attnlab.scaled_dot_product_attention`, the one implementation the whole
# series uses.

# %%
import math

import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.plots import attention_heatmap, head_grid
from attnlab.widgets import AttentionPlayground

attnlab.seed_everything(0)

# %% [markdown]
# ## The worked example
#
# One query and three keys, each with $d_k = 4$ numbers, and a 2-number value per key.
# The query matches key 0 exactly, key 2 partly and key 1 not at all.

# %%
Q = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # (1, d_k)   one query
K = torch.tensor([[1.0, 0.0, 0.0, 0.0],  # (3, d_k)   three keys
                  [0.0, 1.0, 0.0, 0.0],
                  [0.7, 0.7, 0.0, 0.0]])
V = torch.tensor([[10.0, 0.0],  # (3, d_v)   one value per key
                  [0.0, 10.0],
                  [5.0, 5.0]])
d_k = K.shape[-1]
key_names = [f"k{j} = {[round(x, 1) for x in K[j].tolist()]}" for j in range(len(K))]
print(f"d_k = {d_k}, sqrt(d_k) = {math.sqrt(d_k):.3f}")

# %% [markdown]
# **Step 1 — raw scores.** How well does the query match each key? The dot product $q \cdot k_j$:
# large when they point the same way, 0 when they are orthogonal.

# %%
raw = Q @ K.T  # (1, 3)   q·k_j
for j in range(len(K)):
    print(f"{key_names[j]:<26}  q·k = {raw[0, j].item():.3f}")

# %% [markdown]
# **Step 2 — scaled scores.** Divide by $\sqrt{d_k}$ (notebook 02 measures why).

# %%
scaled = raw / math.sqrt(d_k)  # (1, 3)   q·k_j / sqrt(d_k)
for j in range(len(K)):
    print(f"k{j}:  {raw[0, j].item():.3f} / {math.sqrt(d_k):.3g} = {scaled[0, j].item():.3f}")

# %% [markdown]
# **Step 3 — softmax.** Turn scores into weights that are positive and sum to 1:
# $w_j = e^{s_j} / \sum_i e^{s_i}$. By hand first, then with `scaled_dot_product_attention`.

# %%
output, weights = attnlab.scaled_dot_product_attention(Q, K, V)  # (1, d_v), (1, 3)

exps = [math.exp(s) for s in scaled[0].tolist()]
total = sum(exps)
print(f"{'key':<4} {'score':>6} {'exp(score)':>11} {'by hand':>8} {'attnlab':>8}")
for j in range(len(K)):
    print(f"k{j:<3} {scaled[0, j].item():6.3f} {exps[j]:11.3f} {exps[j] / total:8.3f} {weights[0, j].item():8.3f}")
print(f"sum of exp = {total:.3f};  sum of weights = {weights.sum().item():.3f}")

assert torch.allclose(weights[0], torch.tensor(exps) / total, atol=1e-6), "softmax by hand disagrees"
assert torch.allclose(weights.sum(-1), torch.ones(1)), "each row of weights must sum to 1"
assert weights[0].argmax().item() == 0, "the key aligned with the query must get the largest weight"

# %% [markdown]
# **Step 4 — output.** The output is the weighted average of the values:
# $\sum_j w_j v_j$.

# %%
terms = [weights[0, j] * V[j] for j in range(len(K))]  # each (d_v,)
for j, term in enumerate(terms):
    print(f"{weights[0, j].item():.3f} × {V[j].tolist()} = {[round(x, 3) for x in term.tolist()]}")
by_hand = sum(terms)
print(f"sum          = {[round(x, 3) for x in by_hand.tolist()]}")
print(f"attnlab      = {[round(x, 3) for x in output[0].tolist()]}")
assert torch.allclose(output[0], by_hand, atol=1e-5), "output must equal the weighted average of values"

# %% [markdown]
# The whole computation in one picture: one row (the query), one column per key.

# %%
attention_heatmap(weights, ["q"], key_names, title="attention weights of the worked example")
plt.show()

# %% [markdown]
# ## A soft lookup table
#
# A Python dict is a *hard* lookup: the query must equal a key, and you get exactly that key's
# value. Attention is a *soft* lookup: every key matches a little, and you get a blend of the
# values, weighted by how well each key matches. Here the best match, key 0, has value
# [10, 0], but the output blends in the others.
#
# The longer the query vector, the larger the score gaps and the more the softmax concentrates
# on the best key. Let us stretch the query and measure how close the soft lookup gets to the
# hard one.

# %%
stretches = [1, 2, 4, 8, 16, 32]
Q_stretched = torch.cat([c * Q for c in stretches])  # (6, d_k)   one query per stretch
out_s, w_s = attnlab.scaled_dot_product_attention(Q_stretched, K, V)  # (6, d_v), (6, 3)
for c, wrow, orow in zip(stretches, w_s, out_s):
    print(f"{c:>2} × q: weights {[round(x, 3) for x in wrow.tolist()]}  output {[round(x, 2) for x in orow.tolist()]}")

attention_heatmap(w_s, [f"{c} × q" for c in stretches], key_names, title="stretching the query")
plt.show()

# %%
w0 = w_s[:, 0]
assert (w0[1:] > w0[:-1]).all(), "a longer query should put more weight on the aligned key"
if w0[-1] > 0.95:
    print(f"At {stretches[-1]} × q key 0 takes {w0[-1].item():.3f} of the weight: the soft lookup has "
          "become (almost) a hard one.")
else:
    print(f"Even at {stretches[-1]} × q key 0 takes only {w0[-1].item():.3f} of the weight: key 2 "
          "still matches well enough to keep a share.")

# %% [markdown]
# ## Playground
#
# Move the query with the sliders: the bars show the weights, and the output below them is the
# weighted average of the values. Try pointing the query at key 1 (`query[1]` up, `query[0]`
# down), or making it longer. First the static view (the same function the widget calls), then
# the widget itself (it needs a live kernel).

# %%
playground = AttentionPlayground(K, V, query=Q[0], key_labels=key_names)
print(playground.text())
start = playground.view()
assert torch.allclose(torch.as_tensor(start["weights"]), weights[0].double(), atol=1e-6)

# %%
playground.widget

# %% [markdown]
# ## Several heads over a sentence
#
# In a Transformer the queries, keys and values are not typed in by hand: each token's
# embedding is projected three ways by learned matrices, and every token is at once a query
# (looking) and a key (being looked at) — *self*-attention. `MultiHeadAttention` does this
# `n_heads` times in parallel with different projections, so each head can look for something
# different.
#
# The weights below come from an **untrained** layer (random projections, seeded): they show the
# shape of the computation, not learned meaning. Notebook 03 trains them.

# %%
tokens = "the cat sat on the mat".split()
vocab = {word: i for i, word in enumerate(dict.fromkeys(tokens))}
ids = torch.tensor([[vocab[t] for t in tokens]])  # (1, T)

torch.manual_seed(0)
embed = torch.nn.Embedding(len(vocab), 16)
mha = attnlab.MultiHeadAttention(d_model=16, n_heads=4)
with torch.no_grad():
    x = embed(ids)  # (1, T, 16)
    out, heads = mha(x)  # (1, T, 16), (1, 4, T, T)
print(f"tokens {tokens}\nx {tuple(x.shape)} -> output {tuple(out.shape)}, weights {tuple(heads.shape)}")

# %%
head_grid(heads[0], tokens, title="untrained multi-head self-attention: one map per head")
plt.show()

# %%
print("each query's most attended key, per head:")
for h in range(heads.shape[1]):
    picks = [tokens[j] for j in heads[0, h].argmax(-1).tolist()]
    print(f"head {h}: " + "  ".join(f"{q}->{k}" for q, k in zip(tokens, picks)))

assert torch.allclose(heads.sum(-1), torch.ones(1, 4, len(tokens)), atol=1e-6), "rows must sum to 1"
spread = (heads[0, :, None] - heads[0, None, :]).abs().amax().item()  # largest difference between two heads
print(f"largest difference between two heads' weights: {spread:.3f}")
assert spread > 0.01, "different projections should give different heads"

# %% [markdown]
# "the" occurs twice. Do its two rows differ?

# %%
first, second = [i for i, t in enumerate(tokens) if t == "the"]
gap = (heads[0, :, first] - heads[0, :, second]).abs().amax().item()
print(f"largest difference between the rows of 'the' (positions {first} and {second}): {gap:.6f}")
assert gap < 1e-6, "without positions, equal tokens must attend identically"

# %% [markdown]
# They do not: both tokens have the same embedding, and nothing here tells the layer *where* a
# token sits, so it cannot tell them apart. Notebook 04 adds positions and measures when that
# matters.

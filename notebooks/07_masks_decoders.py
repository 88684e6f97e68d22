# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Masks, decoders and generation
#
# The encoder of notebooks 03 and 04 reads a whole sentence at once. A *decoder* writes one: it
# predicts the next token, appends it, and predicts again. That is how GPT-style models
# generate text, and it needs one new line of attention, the *causal mask*. This notebook builds
# the mask, measures what leaks without it, lets a decoder read another sequence through
# *cross-attention*, and writes the loop that generates.

# %% [markdown]
# ## What you will learn
#
# - what the causal mask is, and to build it yourself in one line;
# - what leaks without it: a model that looks perfect while it trains yet cannot write, measured;
# - greedy decoding: the loop that turns a next-token model into a generator, and sampling with
#   a temperature;
# - cross-attention: queries from the text being written, keys and values from the text being
#   read, and the alignment it learns.
#
# Assumes: notebook 01 (attention, masks, heads) and notebook 03 (an encoder block, trained
# with Adam on a cross-entropy loss).

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.exercises import ex07
from attnlab.generation import (
    BOS,
    LENGTH,
    SORT_RECIPE,
    alignment_share,
    evaluate_sorter,
    generate,
    loss_floor,
    reverse_task,
    show,
    sort_task,
    train_reverser,
    train_sorter,
)
from attnlab.plots import attention_heatmap
from attnlab.report import fmt

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The causal mask
#
# A decoder is trained on whole sequences at once: every position predicts the token after it,
# all positions in parallel. When it generates, though, the tokens after position t do not exist
# yet. So in training, position t must not see them either: query t may attend to keys
# 0, 1, …, t (itself and the past) and to nothing later. The *causal mask* says so: a (T, T)
# table of True/False, row = query, column = key, True = may attend.
#
# **Your turn:** write `my_causal_mask(T)`, returning a bool tensor of shape (T, T) that is True
# on and below the diagonal.
#
# <details><summary>Hint</summary>
#
# Entry (i, j) is True when j ≤ i. `torch.arange(T)` holds the positions; compare it, as a
# column `[:, None]`, with itself as a row `[None, :]`. Or start from `torch.ones(T, T)` and
# look up `torch.tril`.
# </details>

# %%
def my_causal_mask(T):
    ### BEGIN SOLUTION
    position = torch.arange(T)  # (T,)
    return position[None, :] <= position[:, None]  # (T, T)   key j <= query i
    ### END SOLUTION


causal_mask = ex07.causal_mask(my_causal_mask)  # your function if it is right, attnlab's otherwise
print(causal_mask(4))

# %% [markdown]
# Before the softmax, every score the mask forbids becomes −∞; e^−∞ = 0, so a forbidden key gets
# exactly zero weight and the others share all of it. That is the one line a decoder adds to
# attention. Below it is written out on random queries and keys, and checked against attnlab.

# %%
T, d_k = 6, 8
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(T, d_k, generator=g) for _ in range(3))  # (T, d_k) each
mask = causal_mask(T)  # (T, T)
scores = q @ k.T / math.sqrt(d_k)  # (T, T)
scores = scores.masked_fill(~mask, float("-inf"))  # the mask line: no score for the future
weights = torch.softmax(scores, dim=-1)  # (T, T)   e^-inf = 0

_, reference = attnlab.scaled_dot_product_attention(q, k, v, mask)  # (T, T)
assert torch.allclose(weights, reference, atol=1e-6)
future = ~mask
print(f"weights on future keys: {int((weights[future] == 0).sum())} of {int(future.sum())} "
      f"are exactly 0; every row sums to {fmt(weights.sum(-1).min(), 3)}")
assert torch.all(weights[future] == 0) and torch.allclose(weights.sum(-1), torch.ones(T))

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
labels = [str(t) for t in range(T)]
attention_heatmap(mask.float(), labels, labels, ax=axes[0], cmap="Greys", annotate=False,
                  title="causal mask (black = may attend)")
attention_heatmap(weights, labels, labels, ax=axes[1], title="weights of random scores")
plt.tight_layout()
plt.show()

# %% [markdown]
# Row 0 can only look at itself, so its one weight is 1.00; row 5 shares its weight among all
# six. attnlab writes the most negative float instead of −∞, so that a query with no key at all
# (possible with padding) gets zero weights instead of NaN.

# %% [markdown]
# ## 2 · A task for a decoder: sort six digits
#
# Each sequence is `BOS` (a token that marks the beginning), six random digits, `SEP` (a
# separator), then the same digits sorted. The model reads it left to right and, at every
# position, predicts the next token. Its *loss* is the cross-entropy of that prediction,
# −ln p(right token), in nats, averaged over the 13 next tokens of a sequence.
#
# Six of the 13 are random digits: nothing before them says which comes, so the best possible
# prediction gives each digit 1/10 and pays ln 10 = 2.303 nats. The other seven (`SEP` and the
# sorted digits) follow from what came before, exactly, and can cost 0. The average,
# 6 × 2.303 / 13, is the task's *floor*: no model that cannot see the future can expect a lower
# loss.

# %%
examples = sort_task(3, seed=1000)  # (3, 14) the first three test sequences
for seq in examples:
    print(show(seq))
floor = loss_floor()
print(f"\nfloor: 6 × ln 10 / 13 = {fmt(floor, 3)} nats")

# %% [markdown]
# ## 3 · The leak: one model, trained with and without the mask
#
# The same decoder-only model, trained twice from the same initial weights by the same recipe
# on the same sequences: once with the causal mask, once without. It has token and position embeddings, one block (masked
# self-attention, then a *feed-forward* layer: a small two-layer network applied to each
# position on its own) and a linear layer that scores the 12 possible next tokens. *Adam*, the
# optimiser of notebook 03 (gradient descent with a step size adapted to each weight), takes
# 300 steps of 64 new sequences each. The models compute in float64, so that the printed
# results come out the same on any CPU.
#
# *Teacher forcing* is how a decoder trains and how it is most easily scored: the true sequence
# is the input, and each position's prediction is compared with the true next token. To
# *generate*, it gets the prompt (`BOS`, digits, `SEP`) and writes the sorted digits itself,
# each one fed back as input for the next.
#
# **Predict first.** Without the mask, the model will get the sorted digits right under teacher
# forcing. What share of them will it get right when it writes them itself?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: trained without the causal mask, the model scores (almost) 1.0 on the sorted
# digits under teacher forcing. What share does it get right when it generates them itself:
# about 1, about 0.1 (chance among 10 digits), or in between?

# %%
guess = ...  # your prediction: a share between 0 and 1
### BEGIN SOLUTION
guess = 0.3
### END SOLUTION

# %%
print("recipe:", SORT_RECIPE)
masked, masked_losses = train_sorter(causal=True, seed=0)
unmasked, unmasked_losses = train_sorter(causal=False, seed=0)
n_params = sum(p.numel() for p in masked.parameters())
print(f"{n_params:,} parameters each")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(8, 3.4))
ax.plot(masked_losses, label="with the causal mask")
ax.plot(unmasked_losses, label="without it")
ax.axhline(floor, color="black", linestyle="--", linewidth=1, label=f"floor {fmt(floor, 3)}")
ax.set(xlabel="training step", ylabel="loss (nats)", yscale="log",
       title="next-token loss while training")
ax.legend()
plt.show()

# %%
test = sort_task(500, seed=1000)  # (500, 14) new sequences, never trained on
results = {"with the mask": evaluate_sorter(masked, test),
           "without it": evaluate_sorter(unmasked, test)}
print(f"{'':15} {'loss':>6}   {'sorted digits right':^26}   {'attention on':>12}")
print(f"{'':15} {'':>6}   {'teacher-forced':>14} {'generated':>11}   {'the future':>12}")
for name, r in results.items():
    print(f"{name:15} {fmt(r['loss'], 3):>6}   {fmt(r['teacher_forced'], 4):>14} "
          f"{fmt(r['generated'], 4):>11}   {fmt(r['future'], 3):>12}")
print(f"{'(floor)':15} {fmt(floor, 3):>6}")

on, off = results["with the mask"], results["without it"]
assert floor <= on["loss"] < floor + 0.02, "with the mask the loss sits just above the floor"
assert off["loss"] < 0.01, "without the mask the loss falls far below the floor"
assert min(on["teacher_forced"], off["teacher_forced"]) > 0.995, "both look perfect in training"
assert on["generated"] > 0.99 and off["generated"] < 0.6
assert on["future"] == 0.0 and off["future"] > 0.5

# %% [markdown]
# With the mask, the loss stays just above the floor of 1.063 and the model sorts: 0.9993 of the
# digits it writes are right (2 of 3,000 are wrong). Without it, the loss falls to 0.002, below
# what any model that cannot see the future can reach, and teacher forcing scores it almost as
# well as the other (0.9990). Yet when it writes the digits itself it gets only 0.4227 of them
# right: 0.712 of its attention went to later positions, where the answers are. A loss below
# the floor is the sign of a leak.

# %%
guess = ex07.unmasked_generation(guess, off["generated"])

# %% [markdown]
# Where does each model look? Below, the attention of every query position (row) to every key
# (column), averaged over the 500 test sequences and the two heads. Positions: `BOS`, the
# digits d1–d6, `SEP`, and the sorted digits s1–s5 (s6 is only ever predicted, never read).

# %% tags=["hide-input"]
names = ["BOS", *[f"d{i}" for i in range(1, 7)], "SEP", *[f"s{i}" for i in range(1, 6)]]
maps, mean_maps = {}, {}
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, (name, model) in zip(axes, (("with the mask", masked), ("without it", unmasked))):
    with torch.no_grad():
        _, (w,) = model(test[:, :-1], return_attention=True)  # one block: (500, H, 13, 13)
    maps[name], mean_maps[name] = w, w.mean((0, 1))  # (500, H, 13, 13), (13, 13)
    attention_heatmap(mean_maps[name], names, names, ax=ax, title=name)
plt.tight_layout()
plt.show()
assert (mean_maps["with the mask"][:6, 0] > 0.5).all(), "queries before a random digit rest on BOS"
assert (mean_maps["with the mask"][7:, 1:7].sum(-1) > 0.5).all(), "the sorted half reads d1-d6"
assert torch.diagonal(mean_maps["without it"], offset=1).mean() > 0.5, "unmasked: reads t + 1"

# %% [markdown]
# With the mask, everything above the diagonal is 0. The positions whose next token is a random
# digit (`BOS` to d5) have nothing useful to read and rest on `BOS`; from `SEP` on, the queries
# read the digits d1–d6. Without the mask, the bright line just above the diagonal is each
# position reading the token right after it: the very token it is asked to predict.
#
# **Explore:** how much of the unmasked model's attention sits exactly one position ahead of
# each query? Compute the mean weight of query t on key t + 1 from `maps["without it"]`
# (shape (500, 2, 13, 13)) and write it below.

# %%
one_ahead = ...  # the mean weight on key t + 1, a number between 0 and 1
### BEGIN SOLUTION
one_ahead = torch.diagonal(maps["without it"], offset=1, dim1=-2, dim2=-1).mean().item()
### END SOLUTION
one_ahead = ex07.one_step_ahead(one_ahead, maps["without it"])

# %% [markdown]
# ## 4 · Generating: greedy decoding
#
# A next-token model becomes a generator with a loop: score the next token, pick one, append it,
# repeat. *Greedy* decoding picks the most likely token every time. Here is the whole loop, run
# on the prompts of all 500 test sequences and checked against `attnlab.generation.generate`
# (which the measurements above used).

# %%
def greedy(model, prompt, steps):
    seq = prompt  # (B, T0)
    with torch.no_grad():
        for _ in range(steps):
            logits = model(seq)[:, -1]  # (B, 12)   scores for the token after the last one
            next_token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)   the most likely
            seq = torch.cat([seq, next_token], dim=1)  # (B, T + 1)   fed back as input
    return seq


prompts = test[:, :LENGTH + 2]  # (500, 8)   BOS, six digits, SEP
written = {"with the mask": greedy(masked, prompts, LENGTH)[:, LENGTH + 2:],  # (500, 6)
           "without it": greedy(unmasked, prompts, LENGTH)[:, LENGTH + 2:]}
assert torch.equal(written["with the mask"], generate(masked, prompts, LENGTH)[:, LENGTH + 2:])

# %%
for i in range(3):
    print(f"{show(prompts[i]):<30} right: {show(test[i, LENGTH + 2:])}")
    for name, digits in written.items():
        print(f"{'':>12}{name:>18}: {show(digits[i])}")
repeats = {name: (d[:, 1:] == d[:, :-1]).double().mean().item() for name, d in written.items()}
print("\nshare of written digits that repeat the digit before: "
      + ", ".join(f"{name} {fmt(r, 3)}" for name, r in repeats.items()))
assert repeats["without it"] > 2 * repeats["with the mask"]

# %% [markdown]
# The unmasked model repeats the digit before far more often than a sorted answer does: it
# writes something digit-like, not the sorted digits. Trained with the answer in view, it never
# had to learn to sort.
#
# **Sampling.** Instead of the most likely token, a generator can draw one at random from
# softmax(scores / temperature): at temperature 1 the model's own probabilities, below 1
# sharper (towards greedy), above 1 flatter. Started from `BOS` alone, the masked model then
# invents six digits and sorts them. The draws change from run to run and machine to machine,
# so this cell's output is not compared by the tests; run it a few times.

# %% tags=["nbval-ignore-output"]
start = torch.full((200, 1), BOS)  # (200, 1)   200 sequences, nothing but BOS
for temperature in (0.5, 1.0, 2.0):
    samples = generate(masked, start, 2 * LENGTH + 1, temperature=temperature)  # (200, 14)
    digits, sorted_half = samples[:, 1:LENGTH + 1], samples[:, LENGTH + 2:]
    ok = (sorted_half == digits.sort(dim=-1).values).all(dim=-1).double().mean().item()
    print(f"temperature {temperature}: {show(samples[0])}   sorted right in {ok:.0%} of 200")
    assert temperature > 1.0 or ok > 0.8, "at temperature <= 1 the sorter still sorts"

# %% [markdown]
# ## 5 · Cross-attention: an encoder–decoder that reverses
#
# In the original Transformer a decoder also reads a second sequence: the sentence to
# translate. An encoder reads the source without a mask; the decoder writes the target with the
# causal mask and, in each block, attends to the encoder's output: queries from the target,
# keys and values from the source. That is *cross-attention*, `MultiHeadAttention` with a
# `context`; its weights are (B, heads, T target positions, S source positions).

# %%
cross = attnlab.MultiHeadAttention(32, 1)
x = torch.randn(1, 4, 32)  # (B, T, d_model)   4 target tokens written so far
memory = torch.randn(1, 6, 32)  # (B, S, d_model)   the encoder's output for 6 source tokens
out, w = cross(x, context=memory)  # queries from x, keys and values from memory
print("output", tuple(out.shape), " weights", tuple(w.shape))

# %% [markdown]
# The task: the source is six random digits, the target the same digits reversed. To write
# target digit i the decoder needs source digit 5 − i, so a decoder that has learned the task
# should look there. One encoder block, one decoder block, one head, 200 steps of Adam.

# %%
reverser, _ = train_reverser(seed=0)
src, tgt = reverse_task(500, seed=1000)  # (500, 6), (500, 7): BOS + the reversed digits
out = generate(reverser, tgt[:, :1], LENGTH, source=src)  # greedy, from BOS
accuracy = (out[:, 1:] == tgt[:, 1:]).double().mean().item()
with torch.no_grad():
    _, (cross_w,) = reverser(src, tgt[:, :-1], return_attention=True)  # (500, 1, 6, 6)
share = alignment_share(cross_w)
print(f"digits written right (greedy): {fmt(accuracy, 3)}")
print(f"cross-attention on the mirrored source digit: {fmt(share, 3)}")
assert accuracy > 0.99 and share > 0.9

# %% tags=["hide-input"]
i = 0
rows = [f"writes {d}" for d in tgt[i, 1:].tolist()]
attention_heatmap(cross_w[i, 0], rows, [str(d) for d in src[i].tolist()],
                  title=f"cross-attention, source {show(src[i])}")
plt.xlabel("source digit (key)")
plt.ylabel("target step (query)")
plt.show()

# %% [markdown]
# Nobody told the model where to look; it found the alignment from the loss alone: step i reads
# source position 5 − i, with 0.990 of the weight on average. Attention was first invented for
# exactly this, to align the words of a translation with the words of its source (Bahdanau,
# Cho and Bengio, 2014).

# %% [markdown]
# ## What we learned
#
# - The causal mask is one line: scores of later keys become −∞ before the softmax, so each
#   position gets exactly 0 weight on the future (15 of 15 entries above).
# - Without it a next-token model cheats: loss 0.002 against a floor of 1.063 and 0.9990 of the
#   sorted digits right under teacher forcing, but only 0.4227 when it writes them itself, with
#   0.712 of its attention on the future. With the mask: loss 1.069, and 0.9993 right when it
#   writes them. A loss below the floor means the model sees what it should not.
# - Greedy decoding is a loop of three lines: score, pick the most likely, append. Sampling with
#   a temperature draws the token instead, and the sorter still sorts the digits it invents.
# - Cross-attention lets a decoder read another sequence: the reverser put 0.990 of its
#   cross-attention on the mirrored source digit, an alignment learned from the loss alone.

# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 · Masks, decoders and generation
#
# The encoder of notebooks 03 and 05 reads a whole sentence at once. A *decoder* writes one, as
# GPT-style models do: predict the next token, append it, repeat. It needs one new line of
# attention: the *causal mask*.

# %% [markdown]
# ## What you will learn
#
# - the causal mask, joined with a padding mask, built yourself;
# - the teacher-forcing loss, written yourself; what leaks without the mask;
# - whether the decoder needs attention, where it looks, the token it "rests" on;
# - the decoder block with cross-attention, post-norm and pre-norm, and the alignment it learns;
# - optional: greedy decoding, beam search, sampling; position encodings past the training length.
#
# Assumes: notebooks 01, 03 and 04 (section 5: notebook 07's `[CLS]` test).

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import attnlab
from attnlab.core.blocks import DecoderBlock
from attnlab.core.generation import beam_search, distinct_outputs, generate, sequence_logprob
from attnlab.core.interventions import hide_key
from attnlab.core.measures import alignment_share, pointing_scores
from attnlab.core.models import DecoderOnly
from attnlab.core.recipes import SORTER
from attnlab.core.training import fit
from attnlab.exercises import ex08
from attnlab.lessons.decoders import (
    LENGTH,
    evaluate_sorter,
    loss_floor,
    reverse_task,
    show,
    sort_task,
    train_reverser,
    train_sorter,
)
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.views import diagrams
from attnlab.views.plots import attention_heatmap, mean_spread_bars, show_figure

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The causal mask
#
# A decoder trains on whole sequences, each position predicting the next token. Generating, it
# has no later tokens, so in training query t may attend to keys 0, 1, …, t only: the *causal
# mask*, a (T, T) table, row = query, column = key, True = may attend.

# %% tags=["hide-input"]
diagrams.show("causal_mask")

# %% [markdown]
# Before the softmax, forbidden scores become −∞; e^−∞ = 0, so forbidden keys get exactly zero
# weight. Here on random queries and keys:

# %%
T, d_k = 6, 8
g = torch.Generator().manual_seed(attnlab.seed_of(0))
q, k, v = (torch.randn(T, d_k, generator=g) for _ in range(3))  # (T, d_k) each
mask = attnlab.causal_mask(T)  # (T, T)   True where key j <= query i
scores = q @ k.T / d_k ** 0.5  # (T, T)
scores = scores.masked_fill(~mask, float("-inf"))  # the mask line: no score for the future
weights = torch.softmax(scores, dim=-1)  # (T, T)   e^-inf = 0
future = ~mask
print(mask)
print(f"weights on future keys: {int((weights[future] == 0).sum())} of {int(future.sum())} "
      "are exactly 0")

# %% tags=["remove-cell"]
_, reference = attnlab.scaled_dot_product_attention(q, k, v, mask)
assert torch.allclose(weights, reference, atol=1e-6)
assert torch.all(weights[future] == 0) and torch.allclose(weights.sum(-1), torch.ones(T))

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
labels = [str(t) for t in range(T)]
attention_heatmap(mask.float(), labels, labels, ax=axes[0], cmap="Greys", annotate=False,
                  title="causal mask (black = may attend)")
attention_heatmap(weights, labels, labels, ax=axes[1], annotate=False,
                  title="weights of random scores")
plt.tight_layout()
show_figure()

# %% [markdown]
# ### Padding and the future, one mask
#
# Batching fills short sequences up with a padding token. A decoder writing several prompts pads
# on the *left*, so each ends in the last column, where its next token is read. `real` marks the
# real tokens:

# %%
real = torch.tensor([[1, 1, 1, 1, 1, 1],
                     [0, 0, 1, 1, 1, 1],
                     [0, 0, 0, 0, 1, 1]], dtype=torch.bool)  # (B, T)   left-padded
B = real.shape[0]

# %% [markdown]
# **Your turn:** write `my_padding_and_causal(real)`, one bool mask, True where query i may
# attend key j: key j is a real token **and** j ≤ i. It must broadcast to multi-head scores,
# (B, H, T, T): batch, heads, queries, keys.
#
# <details><summary>Hint 1</summary>
#
# Two conditions, both required: one is about the key alone, one about the pair (query, key).
# Give each condition the axes it lives on, and let broadcasting line them up.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Index `real` so that it becomes (B, 1, 1, T), the key axis last; the causal part is a (T, T)
# tensor. Combine them with the operator that is True only when both are.
# </details>

# %%
def my_padding_and_causal(real):
    ### BEGIN SOLUTION
    keys = real[:, None, None, :]  # (B, 1, 1, T)   key j is a real token
    past = attnlab.causal_mask(real.shape[1], device=real.device)  # (T, T)   j <= i
    return keys & past  # (B, 1, T, T)   both at once
    ### END SOLUTION


padding_and_causal = ex08.padding_and_causal(my_padding_and_causal)

# %% [markdown]
# Compare real tokens' outputs under each mask with the prompt alone:

# %%
g = torch.Generator().manual_seed(attnlab.seed_of(1))
q, k, v = (torch.randn(B, 2, T, d_k, generator=g, dtype=torch.float64)
           for _ in range(3))  # (B, H, T, d_k) each
masks = {"causal mask only": attnlab.causal_mask(T), "padding and causal": padding_and_causal(real)}
padded_weights = {}
for name, m in masks.items():
    out, padded_weights[name] = attnlab.scaled_dot_product_attention(q, k, v, m)  # (B, H, T, d_k)
    gap = 0.0
    for b in range(B):
        n = int(real[b].sum())  # the prompt's real tokens: its last n positions
        alone, _ = attnlab.scaled_dot_product_attention(q[b, :, -n:], k[b, :, -n:], v[b, :, -n:],
                                                        attnlab.causal_mask(n))  # (H, n, d_k)
        gap = max(gap, (out[b, :, -n:] - alone).abs().max().item())
    print(f"{name:18}: real tokens' outputs differ from the prompt alone by up to {fmt(gap, 2)}")

# %% tags=["remove-cell"]
assert gap < 1e-12, "with both masks, padding changes nothing for the real tokens"
assert torch.equal(padded_weights["padding and causal"][2, :, :4],
                   torch.zeros(2, 4, T, dtype=torch.float64)), "leading pads have no key at all"

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
cols = ["PAD"] * 2 + [str(t) for t in range(2, T)]
for ax, (name, w) in zip(axes, padded_weights.items()):
    attention_heatmap(w[1, 0], cols, cols, ax=ax, annotate=False,
                      title=f"prompt 2, head 0: {name}")
plt.tight_layout()
show_figure()

# %% [markdown]
# Only with both masks do the real tokens' outputs equal the prompt alone. Leading pads have no
# key: attnlab gives them zero weights; nothing reads them.

# %% [markdown]
# ## 2 · A task for a decoder: sort six digits
#
# Each sequence is `BOS` (the beginning), six random digits, `SEP` (a separator), then the digits
# sorted. The *loss* is the cross-entropy, −ln p(right token) in *nats* (the unit of a
# natural-log loss; 1 nat ≈ 1.44 bits), averaged over the 13 next tokens.
#
# A random digit costs at best ln 10 = 2.303 nats (each digit gets 1/10); the other seven follow
# exactly from the past and can cost 0. The average, 6 × 2.303 / 13, is the task's
# *floor*: no model blind to the future can expect less.

# %%
examples = sort_task(3, seed=1000)  # (3, 14) the first three test sequences
for seq in examples:
    print(show(seq))
floor = loss_floor()
print(f"\nfloor: 6 × ln 10 / 13 = {fmt(floor, 3)} nats")

# %% [markdown]
# ## 3 · The decoder's loss: teacher forcing
#
# The decoder-only model: token and position embeddings, one block (section 6), a linear layer
# scoring the 12 possible next tokens.
#
# It trains by *teacher forcing*: input the true sequence without its last token,
# `seqs[:, :-1]`; target at each position the true next token, `seqs[:, 1:]`, whatever the model
# would have written.
#
# **Your turn:** write `my_next_token_loss(model, seqs)`, the mean cross-entropy over all
# positions and sequences. `model(x)` maps token ids (B, T) to logits (B, T, 12);
# `F.cross_entropy` takes logits (N, classes) and targets (N,).
#
# <details><summary>Hint 1</summary>
#
# Position t of the input must be scored on the token the model has not seen yet. Write down,
# for a sequence of 4 tokens, which input positions there are and which target each one gets.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Flatten the batch and position axes of the logits together (`flatten(0, 1)`) and of the
# targets likewise, then one cross-entropy, which averages over all of them.
# </details>

# %%
def my_next_token_loss(model, seqs):
    ### BEGIN SOLUTION
    logits = model(seqs[:, :-1])  # (B, T - 1, V)   position t scores the token after it
    targets = seqs[:, 1:]  # (B, T - 1)   the token after each position
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # mean over B·(T - 1)
    ### END SOLUTION


next_token_loss = ex08.next_token_loss(my_next_token_loss)

# %% [markdown]
# `train_sorter` trains with these lines (`attnlab.core.generation.next_token_loss`) through
# `attnlab.core.training.fit`.

# %% [markdown]
# ## 4 · The leak: one model, trained with and without the mask
#
# Same initial weights, same sequences: 300 steps of Adam, 64 new sequences each.
#
# To *generate*, the model gets the prompt (`BOS`, digits, `SEP`) and writes the sorted digits,
# each the most likely (*greedy* decoding), fed back as input.
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
guess = 0.4
### END SOLUTION

# %%
print("recipe:", SORTER)
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
show_figure()

# %%
test = sort_task(500, seed=1000)  # (500, 14) new sequences, never trained on
results = {"with the mask": evaluate_sorter(masked, test),
           "without it": evaluate_sorter(unmasked, test)}
print(f"{'':15} {'loss':>6}   {'sorted digits right':^26}")
print(f"{'':15} {'':>6}   {'teacher-forced':>14} {'generated':>11}")
for name, r in results.items():
    print(f"{name:15} {fmt(r['loss'], 3):>6}   {fmt(r['teacher_forced'], 4):>14} "
          f"{fmt(r['generated'], 4):>11}")
print(f"{'(floor)':15} {fmt(floor, 3):>6}")
on, off = results["with the mask"], results["without it"]
ex08.unmasked_generation(guess, off["generated"])

# %% tags=["remove-cell"]
assert floor <= on["loss"] < floor + 0.02, "with the mask the loss sits just above the floor"
assert off["loss"] < 0.01, "without the mask the loss falls far below the floor"
assert min(on["teacher_forced"], off["teacher_forced"]) > 0.995, "both look perfect in training"
assert on["generated"] > 0.99 and off["generated"] < 0.6

# %% [markdown]
# With the mask, the loss sits just above the floor and more than 0.99 of the written digits are
# right. Without it, the loss falls below 0.01 nats; teacher forcing rates both alike, yet it
# writes fewer than 0.6 of the digits right. A loss below the floor means a leak: the model read
# what it had to predict.

# %% [markdown]
# ## 5 · Does the sorter need its attention? Then: where does it look
#
# Give every key a query may see the same weight (`uniform_attention(model)`) and measure again.

# %%
with attnlab.uniform_attention(masked, unmasked):
    uniform = {name: evaluate_sorter(model, test)
               for name, model in (("with the mask", masked), ("without it", unmasked))}
print(f"{'':15} {'attention':>9}   {'loss':>6}   {'sorted digits right':^26}")
print(f"{'':15} {'':>9}   {'':>6}   {'teacher-forced':>14} {'generated':>11}")
for name in results:
    for kind, r in (("its own", results[name]), ("uniform", uniform[name])):
        print(f"{name:15} {kind:>9}   {fmt(r['loss'], 3):>6}   "
              f"{fmt(r['teacher_forced'], 4):>14} {fmt(r['generated'], 4):>11}")

# %% tags=["remove-cell"]
u_on, u_off = uniform["with the mask"], uniform["without it"]
assert u_on["generated"] < 0.45 and u_on["loss"] > on["loss"] + 0.8
# over 20 series seeds the unmasked model, uniform, scored 0.43-0.67 under teacher forcing
assert 0.35 < u_off["teacher_forced"] < 0.8 and u_off["loss"] > 1.0

# %% [markdown]
# With uniform weights the sorter gets fewer than half the digits right and its loss rises by
# more than 0.8 nats; the unmasked model's teacher-forced score falls to about half (at most
# 0.67 over 20 series seeds). Their maps,
# averaged over 500 test sequences and two heads (d1–d6: digits; s1–s5: sorted digits):

# %% tags=["hide-input"]
names = ["BOS", *[f"d{i}" for i in range(1, 7)], "SEP", *[f"s{i}" for i in range(1, 6)]]
maps, mean_maps = {}, {}
fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
for ax, (name, model) in zip(axes, (("with the mask", masked), ("without it", unmasked))):
    (maps[name],) = attnlab.attention_maps(model, test[:, :-1])  # one block: (500, H, 13, 13)
    mean_maps[name] = maps[name].mean((0, 1))  # (13, 13)
    attention_heatmap(mean_maps[name], names, names, ax=ax, title=name)
plt.tight_layout()
show_figure()

# %%
mean = mean_maps["with the mask"]  # (13, 13)
on_bos = mean[:LENGTH, 0]  # queries BOS..d5: their weight on BOS
on_digits = mean[LENGTH:, 1:LENGTH + 1].sum(-1)  # queries d6..s5: their weight on d1..d6
print(f"queries BOS to d5, weight on BOS:    {fmt(on_bos.min(), 2)} to {fmt(on_bos.max(), 2)}")
print(f"queries d6 to s5, weight on d1-d6:   {fmt(on_digits.min(), 2)} to "
      f"{fmt(on_digits.max(), 2)}")
print(f"without the mask, weight on later keys: {fmt(off['future'], 3)}, on key t+1 alone: "
      f"{fmt(torch.diagonal(mean_maps['without it'], offset=1).mean(), 2)}")

# %% tags=["remove-cell"]
assert (on_bos > 0.55).all() and (on_digits > 0.6).all(), "most of the weight, in every seed"
digit_shares = mean[LENGTH + 1:, 1:LENGTH + 1] / on_digits[1:, None]  # (6, 6)   SEP..s5 x d1..d6
assert (digit_shares > 0.5 / LENGTH).all(), "every digit gets at least half an even share"
assert torch.diagonal(mean_maps["without it"], offset=1).mean() > 0.4
assert on["future"] == 0.0 and off["future"] > 0.5

# %% [markdown]
# With the mask, queries `BOS` to d5, predicting random digits, put more than half their weight
# on `BOS`; from d6 on (d6 predicts `SEP`), most goes to the digits, spread over all six in this
# average. Without the mask, more than half goes to later positions: the bright line just above
# the diagonal is each position reading the token it must predict.
#
# An even *average* can hide a pointer: the next digit sits elsewhere in each sequence. Score
# each head per sequence on the queries writing a sorted digit (`SEP` to s5):

# %%
inputs, nexts = test[:, :-1], test[:, 1:]  # (500, 13) each: what each query reads and writes
query, key = torch.arange(13)[:, None], torch.arange(13)[None, :]  # (13, 1), (1, 13)
writes_digit = (query >= LENGTH + 1) & (key >= 1) & (key <= LENGTH)  # (13, 13)   SEP..s5 x d1..d6
candidates = writes_digit.expand(len(test), 13, 13)  # (500, 13, 13)
targets = candidates & (inputs[:, None, :] == nexts[:, :, None])  # key holds the next digit
pointing = pointing_scores(maps["with the mask"], targets, candidates)
print("head   weight on the digit written next (× even)   it gets the most weight")
for h in range(2):
    print(f"{h:4}   {fmt(pointing['times_even'][h], 2):>41}   {fmt(pointing['hit_rate'][h], 2):>23}")
print(f"{'a random pick':>45}   {fmt(pointing['base_rate'], 2):>11}")

# %% tags=["remove-cell"]
assert (pointing["times_even"] > 1.2).all()
assert (pointing["hit_rate"] > 1.5 * pointing["base_rate"]).all()

# %% [markdown]
# Both heads point at the digit they write next: more than 1.2 times an even share of their
# weight, and the most weight more than 1.5 times as often as a random pick.
#
# ### The weight on BOS: an attention sink
#
# An *attention sink* takes weight and gives back almost nothing, as MiniLM's `[CLS]` did in
# notebook 07. Test `BOS` with `hide_key`: zero its value (the weights stay) or hide it as a
# key.

# %%
self_attention = [block.self_attn for block in masked.blocks]
sink = {"as trained": on}
for name, how in (("BOS value zeroed", "value"), ("BOS hidden as a key", "mask")):
    with hide_key(*self_attention, position=0, how=how):
        sink[name] = evaluate_sorter(masked, test)
print(f"{'':20} {'loss: random digits':>20} {'the rest':>9} {'sorted digits right':>20}")
for name, r in sink.items():
    print(f"{name:20} {fmt(r['loss_random'], 3):>20} {fmt(r['loss_rest'], 3):>9} "
          f"{fmt(r['generated'], 4):>20}")

# %% tags=["remove-cell"]
def sink_costs(sink):
    """What zeroing BOS's value and hiding BOS as a key add to the random-digit loss."""
    base = sink["as trained"]["loss_random"]
    return (sink["BOS value zeroed"]["loss_random"] - base,
            sink["BOS hidden as a key"]["loss_random"] - base)


zeroed_cost, hidden_cost = sink_costs(sink)
# 20 series seeds: zeroing cost this sorter 0.06-0.62 nats; hiding, at least 4.3 times that
assert zeroed_cost < 1.0 and hidden_cost > 1.0 and hidden_cost > 3 * zeroed_cost

# %% [markdown]
# Zeroing `BOS`'s value raises the random digits' loss by less than a nat. Hiding it as a key
# sends its weight to earlier digits, and the random digits' loss jumps more than a nat above
# ln 10, the loss of a uniform guess: several times what zeroing cost.
# What the sorted digits lose depends on the training run; the next cell repeats both tests on
# sorters trained by the same recipe with seeds 1 and 2.

# %%
sorters = {0: masked, **{s: train_sorter(causal=True, seed=s)[0] for s in (1, 2)}}
print(f"{'seed':<5} {'digits right':>12} {'uniform':>8}   {'loss on the random digits':^36}")
print(f"{'':<5} {'':>12} {'':>8}   {'as trained':>10} {'value zeroed':>12} {'key hidden':>11}")
seed_sinks, right_uniform = {0: sink}, {0: uniform["with the mask"]["generated"]}  # seed 0: above
for s, model in sorters.items():
    if s not in seed_sinks:
        with attnlab.uniform_attention(model):
            right_uniform[s] = evaluate_sorter(model, test)["generated"]
        seed_sinks[s] = {"as trained": evaluate_sorter(model, test)}
        for name, how in (("BOS value zeroed", "value"), ("BOS hidden as a key", "mask")):
            with hide_key(*[block.self_attn for block in model.blocks], position=0, how=how):
                seed_sinks[s][name] = evaluate_sorter(model, test)
    r = {name: x["loss_random"] for name, x in seed_sinks[s].items()}
    print(f"{s:<5} {fmt(seed_sinks[s]['as trained']['generated'], 4):>12} "
          f"{fmt(right_uniform[s], 4):>8}   {fmt(r['as trained'], 2):>10} "
          f"{fmt(r['BOS value zeroed'], 2):>12} {fmt(r['BOS hidden as a key'], 2):>11}")

# %% tags=["remove-cell"]
for s in sorters:
    assert seed_sinks[s]["as trained"]["generated"] > 0.99 and right_uniform[s] < 0.45
    zeroed_cost, hidden_cost = sink_costs(seed_sinks[s])
    assert hidden_cost > 1.0 and hidden_cost > 3 * zeroed_cost  # 60 sorters: at least 4.3 times

# %% [markdown]
# In every seed the sorter sorts, needs its attention (uniform weights: fewer than half of the
# digits right), and hiding `BOS` as a key costs the random digits several times what zeroing
# its value costs.

# %% [markdown]
# ## 6 · Cross-attention: an encoder–decoder that reverses
#
# In the original Transformer the decoder also reads the sentence to translate: each block
# attends to the encoder's output, queries from the target, keys and values from the source.
# That is *cross-attention*: `MultiHeadAttention` with a `context`.

# %%
cross = attnlab.MultiHeadAttention(32, 1)
x = torch.randn(1, 4, 32)  # (B, T, d_model)   4 target tokens written so far
memory = torch.randn(1, 6, 32)  # (B, S, d_model)   the encoder's output for 6 source tokens
out, w = cross(x, context=memory)  # queries from x, keys and values from memory
print("output", tuple(out.shape), " weights", tuple(w.shape))

# %% [markdown]
# ### The decoder block, written out
#
# Three parts, each followed by a residual connection and LayerNorm ("post-norm", as in the
# original Transformer and notebook 03):
#
#     x = LayerNorm1(x + SelfAttention(x, mask))          itself and its past only
#     x = LayerNorm2(x + CrossAttention(x, context))      reads the encoder's output
#     x = LayerNorm3(x + FeedForward(x))
#
# The sorter, decoder-only, skips the middle line.
#
# **Your turn:** write `my_decoder_block(block, x, context, mask)` for an
# `attnlab.DecoderBlock`, with parts `block.self_attn`, `block.cross_attn` (both
# `MultiHeadAttention`, returning (output, weights)), `block.ff`, `block.norm1`, `norm2` and
# `norm3`. `context` is None without cross-attention.
#
# <details><summary>Hint 1</summary>
#
# Follow the three lines above in order; each part reads the x the line before produced.
# Cross-attention needs to be told which tensor is the context.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `a, _ = block.self_attn(x, mask)`, then `x = block.norm1(x + a)`; the cross-attention call is
# `block.cross_attn(x, context=context)` (queries from x); `block.ff(x)` returns the
# feed-forward output to add.
# </details>

# %%
def my_decoder_block(block, x, context, mask):
    """One post-norm decoder block: x (B, T, d_model), context (B, S, d_model) or None."""
    ### BEGIN SOLUTION
    a, _ = block.self_attn(x, mask)  # (B, T, d)   masked self-attention
    x = block.norm1(x + a)  # residual, then LayerNorm
    if context is not None:
        c, _ = block.cross_attn(x, context=context)  # (B, T, d)   queries x, keys/values context
        x = block.norm2(x + c)
    return block.norm3(x + block.ff(x))  # (B, T, d)   feed-forward, residual, LayerNorm
    ### END SOLUTION


decoder_block = ex08.decoder_block(my_decoder_block)

# %% [markdown]
# The target is the source's six random digits, reversed: target digit i is source digit 5 − i.
# One encoder block, one decoder block, one head, 200 steps of Adam.

# %%
reverser, _ = train_reverser(seed=0)
src, tgt = reverse_task(500, seed=1000)  # (500, 6), (500, 7): BOS + the reversed digits
with torch.no_grad():
    memory = reverser.encode(src)  # (500, 6, 32)
    h = reverser.tgt_embed(tgt[:, :-1], "tgt")  # (500, 6, 32)   the target read so far
    block = reverser.decoder[0]
    mine = decoder_block(block, h, memory, attnlab.causal_mask(LENGTH))  # (500, 6, 32)
    theirs = block(h, memory)
print("written out = attnlab's DecoderBlock on the 500 test targets (to 1e-12):",
      torch.allclose(mine, theirs, rtol=0, atol=1e-12))

# %% tags=["remove-cell"]
assert torch.equal(my_decoder_block(block, h, memory, attnlab.causal_mask(LENGTH)), theirs)

# %% [markdown]
# Does the reverser need its cross-attention? Make it uniform and measure again.

# %%
out = generate(reverser, tgt[:, :1], LENGTH, source=src)  # greedy, from BOS
cross_layers = [b.cross_attn for b in reverser.decoder]
with attnlab.uniform_attention(*cross_layers):
    out_uniform = generate(reverser, tgt[:, :1], LENGTH, source=src)
accuracy = (out[:, 1:] == tgt[:, 1:]).double().mean().item()
accuracy_uniform = (out_uniform[:, 1:] == tgt[:, 1:]).double().mean().item()
(cross_w,) = attnlab.attention_maps(reverser, src, tgt[:, :-1], where="cross_attn")  # (500, 1, 6, 6)
share = alignment_share(cross_w)
print(f"digits written right (greedy):                  {fmt(accuracy, 3)}")
print(f"... with uniform cross-attention:               {fmt(accuracy_uniform, 3)}")
print(f"cross-attention on the mirrored source digit:   {fmt(share, 3)}")

# %% tags=["remove-cell"]
assert accuracy > 0.99 and accuracy_uniform < 0.35 and share > 0.9

# %% tags=["hide-input"]
i = 0
rows = [f"writes {d}" for d in tgt[i, 1:].tolist()]
attention_heatmap(cross_w[i, 0], rows, [str(d) for d in src[i].tolist()], annotate=False,
                  title=f"cross-attention, source {show(src[i])}")
plt.xlabel("source digit (key)")
plt.ylabel("target step (query)")
show_figure()

# %% [markdown]
# It does: with uniform cross-attention the reverser writes fewer than 0.35 of the digits right,
# against more than 0.99. Step i reads source position 5 − i with more than 0.9 of the weight on
# average, learned from the loss alone.
#
# Bahdanau, Cho and Bengio (2014) brought attention into machine translation for such
# alignments, with an *additive* score (a small network of query and key); the scaled dot
# product is from the Transformer (Vaswani et al., 2017).

# %% [markdown]
# ### Pre-norm: the block of GPT-2 and Llama
#
# Most models since GPT-2, notebook 11's Llama among them, normalise what each part *reads*, not
# the sum (*pre-norm*):
#
#     x = x + SelfAttention(LayerNorm1(x), mask)
#     x = x + CrossAttention(LayerNorm2(x), context)
#     x = x + FeedForward(LayerNorm3(x))
#
# **Your turn:** write `my_pre_norm_block(block, x, context, mask)` for a
# `DecoderBlock(..., norm="pre")`, whose parts have the same names.
#
# <details><summary>Hint 1</summary>
#
# The same three parts in the same order; only where each LayerNorm sits changes.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `x = x + block.self_attn(block.norm1(x), mask)[0]`; with a context, the same with
# `block.cross_attn(block.norm2(x), context=context)`; then `x + block.ff(block.norm3(x))`.
# </details>

# %%
def my_pre_norm_block(block, x, context, mask):
    """One pre-norm decoder block: x (B, T, d_model), context (B, S, d_model) or None."""
    ### BEGIN SOLUTION
    x = x + block.self_attn(block.norm1(x), mask)[0]  # (B, T, d)   reads a normalised copy
    if context is not None:
        x = x + block.cross_attn(block.norm2(x), context=context)[0]
    return x + block.ff(block.norm3(x))  # (B, T, d)   x itself is never normalised
    ### END SOLUTION


pre_norm_block = ex08.pre_norm_block(my_pre_norm_block)

# %% [markdown]
# Silence both blocks (output layers zeroed); pass the same x through your two functions.

# %%
torch.manual_seed(attnlab.seed_of(0))
x = 1 + 3 * torch.randn(2, 6, 32)  # (B, T, d_model)   not normalised: mean 1, std 3
silenced = {}
for norm, write in (("post", decoder_block), ("pre", pre_norm_block)):
    silent = DecoderBlock(32, 2, 64, norm=norm, cross=False)
    with torch.no_grad():
        for layer in (silent.self_attn.out, silent.ff[-1]):  # every part now adds 0
            layer.weight.zero_()
            layer.bias.zero_()
        y = silenced[norm] = write(silent, x, None, attnlab.causal_mask(6))  # (2, 6, 32)
    print(f"{norm}-norm: largest |output − x| {fmt((y - x).abs().max(), 3)}, "
          f"std of the output {fmt(y.std(), 2)} (of x: {fmt(x.std(), 2)})")

# %% tags=["remove-cell"]
assert torch.equal(silenced["pre"], x), "pre-norm: a silent block returns x exactly"
post = silenced["post"]
assert (post - x).abs().max() > 1 and abs(post.std() - 1) < 0.05, "post-norm: normalised"

# %% [markdown]
# The silent post-norm block still normalises x; the pre-norm block returns x exactly. In a
# pre-norm model x runs untouched from first block to last, each part only adding to it: the
# *residual path* notebook 11 relies on. 03's *Going further* trains both at a high learning
# rate: only pre-norm learns there without a warm-up.

# %% [markdown]
# ## What we learned
#
# - The causal mask sets later keys' scores to −∞: exactly 0 weight on the future (15 of 15).
#   With a padding mask (`&`), padded prompts attend as if alone.
# - Without it a next-token model cheats (over half its attention on the future): loss far
#   below the floor, right under teacher forcing, yet fewer than 0.6 of the digits right when
#   writing (with the mask: more than 0.99).
# - The sorter needs its attention (uniform: fewer than half right); its heads point at the
#   digit they write next, which the average map hides; `BOS` is an attention sink: hiding it as
#   a key costs the random digits several times what zeroing its value does, in every seed.
# - The reverser needs its cross-attention (uniform: fewer than 0.35 right) and puts more than
#   0.9 of it on the mirrored source digit.
# - A pre-norm block normalises what each part reads, never x: silenced, it returns x exactly;
#   post-norm still normalises it.

# %% [markdown]
# ## Going further
#
# Optional: nothing on the main line needs this part. It turns the sorter's next-token scores
# into text three ways, greedy decoding, beam search and sampling (temperature, top-k, top-p),
# and compares them by the probability of what they write, by accuracy and by variety. Then
# *Past the training length* trains small decoders with notebook 05's four position encodings
# and asks what each does with positions longer than any seen in training.

# %% [markdown]
# ### Generating: greedy decoding, beam search, sampling
#
# A next-token model becomes a generator with a loop: score the next token, pick one, append it,
# repeat. *Greedy* decoding (section 4) picks the most likely token every time. Here is the
# whole loop, run on the prompts of all 500 test sequences (`attnlab.core.generation.generate` is the
# same loop).

# %%
def greedy(model, prompt, steps):
    seq = prompt  # (B, T0)
    with torch.no_grad():
        for _ in range(steps):
            logits = model(seq)[:, -1]  # (B, 12)   scores for the token after the last one
            next_token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)   the most likely
            seq = torch.cat([seq, next_token], dim=1)  # (B, T + 1)   fed back as input
    return seq


# %%
prompts, answer = test[:, :LENGTH + 2], test[:, LENGTH + 2:]  # (500, 8) BOS, digits, SEP; (500, 6)
written = {"with the mask": greedy(masked, prompts, LENGTH)[:, LENGTH + 2:],  # (500, 6)
           "without it": greedy(unmasked, prompts, LENGTH)[:, LENGTH + 2:]}
for i in range(3):
    print(f"{show(prompts[i]):<30} right: {show(answer[i])}")
    for name, digits in written.items():
        print(f"{'':>12}{name:>18}: {show(digits[i])}")
repeats = {name: (d[:, 1:] == d[:, :-1]).double().mean().item() for name, d in written.items()}
print("\nshare of written digits that repeat the digit before: "
      + ", ".join(f"{name} {fmt(r, 3)}" for name, r in repeats.items()))

# %% tags=["remove-cell"]
assert torch.equal(written["with the mask"], generate(masked, prompts, LENGTH)[:, LENGTH + 2:])
assert repeats["without it"] > 2 * repeats["with the mask"]

# %% [markdown]
# The unmasked model repeats the digit before far more often than a sorted answer does: it
# writes something digit-like, not the sorted digits. Trained with the answer in view, it never
# had to learn to sort. From here on, only the masked sorter.
#
# ### Beam search
#
# Greedy decoding can commit to a likely first token that leads only to unlikely continuations.
# *Beam search* keeps the `beam_width` most likely partial sequences at every step (scored by
# the sum of their tokens' log-probabilities), extends each by every token, and keeps the best
# `beam_width` again. With width 1 it is greedy. Compare the two by the log-probability the
# model gives what they write, ln p(s1 … s6 | prompt) (closer to 0 = more likely), and by
# accuracy, on the sorter and on a sorter trained by the same recipe for 100 steps instead of
# 300. The last row of each: the right answer's log-probability under the same model.

# %% slideshow={"slide_type": "subslide"}
early, _ = train_sorter(causal=True, seed=0, steps=100)  # the same recipe, a third of the steps
print(f"{'':20} {'':16} {'mean log-prob':>13} {'digits right':>13} {'sequences right':>16}")
beam_gain, mean_logp = {}, {}
for model_name, model in (("sorter (300 steps)", masked), ("sorter (100 steps)", early)):
    greedy_out = generate(model, prompts, LENGTH)  # (500, 14)
    beams, beam_logp = beam_search(model, prompts, LENGTH, beam_width=4)  # (500, 4, 14), (500, 4)
    rows = {"greedy": (greedy_out, sequence_logprob(model, greedy_out, LENGTH + 2)),
            "beam, width 4": (beams[:, 0], beam_logp[:, 0]),
            "the right answer": (test, sequence_logprob(model, test, LENGTH + 2))}
    for decoder, (out, logp) in rows.items():
        right = out[:, LENGTH + 2:] == answer  # (500, 6)
        print(f"{model_name:20} {decoder:16} {fmt(logp.mean(), 3):>13} "
              f"{fmt(right.double().mean(), 4):>13} {fmt(right.all(-1).double().mean(), 3):>16}")
    changed = int((beams[:, 0] != greedy_out).any(-1).sum())
    lp = mean_logp[model_name] = {decoder: logp.mean() for decoder, (_, logp) in rows.items()}
    beam_gain[model_name] = {"changed": changed, "gain": lp["beam, width 4"] - lp["greedy"],
                             "right": [(out[:, LENGTH + 2:] == answer).double().mean()
                                       for out in (greedy_out, beams[:, 0])]}
    print(f"{'':20} beam search wrote another answer than greedy for {changed} of 500 prompts")

# %% tags=["remove-cell"]
trained, short = beam_gain["sorter (300 steps)"], beam_gain["sorter (100 steps)"]
assert trained["changed"] <= 10 and abs(trained["gain"]) < 0.005
assert short["changed"] > 20 and short["gain"] > 0.01  # 30 seeds: 36-116 changed (seed 2: 136), gain >= 0.02
for lp in mean_logp.values():
    assert lp["the right answer"] <= lp["greedy"], "the model prefers its own answers"
assert mean_logp["sorter (100 steps)"]["the right answer"] < mean_logp["sorter (100 steps)"]["greedy"]

# %% [markdown]
# On the trained sorter beam search writes what greedy writes, for all or all but a few (at most
# 10) of the 500 prompts: at each step one token is so much more likely than the others that a detour
# rarely pays. Where it writes a wrong digit, that is not a search failure: the model gives
# its own answers at least as much probability as the right ones (the right answers' mean
# log-probability is not above greedy's, and on the sorter trained for 100 steps it is lower). Beam search finds what the model believes; it cannot fix what the model
# gets wrong. On the sorter trained for 100 steps, less sure of itself, beam search changes
# dozens of the 500 answers and raises the mean log-probability (by more than 0.01). What that
# does to the digits right is the next question.

# %% [markdown] slideshow={"slide_type": "subslide"}
# The same comparison for the sorters of seeds 1 and 2 (the 300-step ones of section 5, and two
# more trained for 100 steps):

# %%
print(f"{'seed':<5} {'steps':>5} {'answers changed':>16} {'log-prob gained':>16} "
      f"{'digits right: greedy':>21} {'beam':>7}")
seed_beams = {(0, 300): beam_gain["sorter (300 steps)"],
              (0, 100): beam_gain["sorter (100 steps)"]}  # seed 0: measured above
for s in sorters:
    short = early if s == 0 else train_sorter(causal=True, seed=s, steps=100)[0]
    for steps, model in ((300, sorters[s]), (100, short)):
        if (s, steps) not in seed_beams:
            greedy_out = generate(model, prompts, LENGTH)  # (500, 14)
            best = beam_search(model, prompts, LENGTH, beam_width=4)[0][:, 0]  # (500, 14)
            logp = [sequence_logprob(model, out, LENGTH + 2).mean() for out in (greedy_out, best)]
            right = [(out[:, LENGTH + 2:] == answer).double().mean() for out in (greedy_out, best)]
            seed_beams[s, steps] = {"changed": int((best != greedy_out).any(-1).sum()),
                                    "gain": logp[1] - logp[0], "right": right}
        b = seed_beams[s, steps]
        print(f"{s:<5} {steps:>5} {b['changed']:>16} {fmt(b['gain'], 4):>16} "
              f"{fmt(b['right'][0], 4):>21} {fmt(b['right'][1], 4):>7}")

# %% tags=["remove-cell"]
# Measured over 30 seeds' sorters: at 300 steps at most 2 answers changed and |gain| <= 0.0023;
# at 100 steps 36-116 changed (seed 2: 136), gain 0.02-0.08, digits right -0.004 (seed 11)
# to +0.042
for s in sorters:
    trained, early_s = seed_beams[s, 300], seed_beams[s, 100]
    assert trained["changed"] <= 10 and abs(trained["gain"]) < 0.005
    assert early_s["changed"] > 20 and early_s["gain"] > 0.01
more_right = sum(seed_beams[s, 100]["right"][1] > seed_beams[s, 100]["right"][0] for s in sorters)
assert more_right >= 2, "beam search's answers are right more often for most less-trained sorters"
assert all(abs(b["right"][1] - b["right"][0]) < 0.06 for b in seed_beams.values()), "by a little"

# %% [markdown]
# All three seeds tell the same story: beam search all but ignores the well-trained sorters and
# raises the probability of the less-trained ones' answers. Their digits right move by little,
# upwards for all three. (With another seed, one less-trained sorter got a few
# digits fewer right: beam search finds what the model finds more likely, and that is not
# always what is right.)

# %% [markdown]
# ### Sampling: temperature, top-k, top-p
#
# Instead of the most likely token, a generator can *draw* one from softmax(logits / τ): the
# logits divided by the *temperature* τ. At τ = 1 that is the model's own distribution. Two filters cut the unlikely tail before the draw:
# *top-k* keeps the k most likely tokens, *top-p* (nucleus sampling) the smallest set of most
# likely tokens whose probability reaches p. The rest get logit −∞, so probability 0, and the
# kept ones are renormalised.
#
# **Your turn:** write `my_top_p(logits, p)`: the logits (B, V) with every token outside the
# nucleus set to −∞ (`float("-inf")`), each kept token's logit unchanged and in its place.
#
# <details><summary>Hint 1</summary>
#
# Go through each row's tokens from the most likely down, adding up their probabilities; keep
# tokens while the total of the ones before is still short of p. The token that makes the total
# reach p is kept too.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `torch.softmax`, then `.sort(dim=-1, descending=True)` gives the probabilities and the token
# of each; the probability ahead of each token is `cumsum - probs`. Mark the tokens to drop
# (that is already ≥ p), put the marks back in token order with `scatter(-1, order, marks)`,
# and use `masked_fill` on the logits.
# </details>

# %%
def my_top_p(logits, p):
    ### BEGIN SOLUTION
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)  # (B, V) each
    ahead = probs.cumsum(dim=-1) - probs  # (B, V)   probability of the tokens before each one
    drop_sorted = ahead >= p  # (B, V)   the nucleus is full without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back in token order
    return logits.masked_fill(drop, float("-inf"))  # (B, V)
    ### END SOLUTION


top_p = ex08.top_p_filter(my_top_p)

# %% [markdown]
# `attnlab.sample_next` divides by the temperature, filters with
# `attnlab.core.generation.filter_logits` (top-k, then top-p, as written above) and draws. Next, the
# sorter samples its answer 10 times for each of 200 test prompts, at several temperatures.
#
# **Predict first.** At temperature 0.1 and at temperature 10: what share of the sorted digits
# will be right, and how many different answers will the 10 samples of one prompt give?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: greedy gets more than 0.99 of the digits right. At τ = 0.1,
# near that or lower? At τ = 10 (logits divided by 10): chance (0.1), or is the model still
# right often?
# And the number of distinct answers among 10 samples: 1, a few, or 10?

# %%
guess_accuracy = ...  # [at temperature 0.1, at 10]: share of sorted digits right, 0 to 1
guess_distinct = ...  # [at temperature 0.1, at 10]: different answers among 10 samples, 1 to 10
### BEGIN SOLUTION
guess_accuracy = [0.99, 0.1]
guess_distinct = [1, 8]
### END SOLUTION

# %%
n, samples = 200, 10  # 200 test prompts, 10 samples of each
repeated = prompts[:n].repeat_interleave(samples, dim=0)  # (2000, 8)
settings = {"greedy": None, "beam, width 4": None,
            **{f"temperature {t:g}": {"temperature": t} for t in (0.1, 0.5, 1.0, 2.0, 10.0)},
            "τ 2, top-k 2": {"temperature": 2.0, "top_k": 2},
            "τ 2, top-p 0.9": {"temperature": 2.0, "top_p": 0.9}}
table = {}
for name, kwargs in settings.items():
    if name == "greedy":  # no randomness: the 10 samples of a prompt are its one answer, 10 times
        out = generate(masked, prompts[:n], LENGTH).repeat_interleave(samples, 0)  # (2000, 14)
    elif name == "beam, width 4":
        out = beam_search(masked, prompts[:n], LENGTH, beam_width=4)[0][:, 0]  # (200, 14)
        out = out.repeat_interleave(samples, 0)  # (2000, 14)
    else:
        draws = torch.Generator().manual_seed(attnlab.seed_of(0))
        out = generate(masked, repeated, LENGTH, generator=draws, **kwargs)  # (2000, 14)
    answers = out[:, LENGTH + 2:].view(n, samples, LENGTH)  # (200, 10, 6)
    table[name] = {"log-prob": sequence_logprob(masked, out, LENGTH + 2).mean().item(),
                   "right": (answers == answer[:n, None]).double().mean().item(),
                   "distinct": distinct_outputs(answers).double().mean().item()}

# %%
print(f"{'':16} {'mean log-prob':>13} {'digits right':>13} {'different answers in 10':>24}")
for name, r in table.items():
    print(f"{name:16} {fmt(r['log-prob'], 2):>13} {fmt(r['right'], 4):>13} "
          f"{fmt(r['distinct'], 2):>24}")
cold, hot = table["temperature 0.1"], table["temperature 10"]
ex08.temperature_accuracy(guess_accuracy, [cold["right"], hot["right"]])
ex08.temperature_diversity(guess_distinct, [cold["distinct"], hot["distinct"]])

# %% tags=["remove-cell"]
greedy_right = table["greedy"]["right"]
assert greedy_right > 0.99 and table["beam, width 4"]["right"] > 0.99
assert abs(cold["right"] - greedy_right) < 0.002 and cold["distinct"] < 1.1, "τ 0.1 ≈ greedy"
rights = [table[f"temperature {t:g}"]["right"] for t in (0.1, 0.5, 1.0, 2.0, 10.0)]
assert rights == sorted(rights, reverse=True), "accuracy falls as the temperature rises"
assert max(rights[2:]) < greedy_right - 0.005, "from τ = 1 on, sampling loses accuracy"
kinds = [table[f"temperature {t:g}"]["distinct"] for t in (0.1, 0.5, 1.0, 2.0, 10.0)]
assert kinds == sorted(kinds) and hot["distinct"] == 10.0
assert hot["right"] < 0.25
for name in ("τ 2, top-k 2", "τ 2, top-p 0.9"):
    assert table["temperature 2"]["right"] + 0.05 < table[name]["right"] < greedy_right
    assert table[name]["distinct"] < table["temperature 2"]["distinct"] * 2 / 3

# %% [markdown]
# Greedy and beam search write the model's most likely digits, and here those are right more
# than 0.99 of the time. Where the most likely digit is right, every draw of another one is a
# wrong digit; where it is wrong, a draw can happen to be right. Sampling can beat greedy only
# where greedy errs, so with a model this often right it loses on balance. At τ = 0.1 sampling
# is all but greedy (within 0.002 of its accuracy, about one answer per prompt). From τ = 1 on,
# accuracy falls below greedy's and the answers multiply; at τ = 10 the digits are drawn almost
# uniformly (fewer than 0.25 right) and all 10 samples of a prompt differ. The filters take back
# most of the damage at τ = 2: top-k 2 and top-p 0.9 keep more of the digits right (by more
# than 0.05) than plain τ = 2, with under two thirds as many different answers, because they
# never draw from the unlikely tail.
#
# Why sample at all, then? For open-ended text, where many continuations are good and none is
# *the* answer. The reason given in the literature (Holtzman et al., 2020, who introduced
# top-p) is that the most likely continuations of a language model are often bland and
# repetitive, and that sampling with a truncated tail gives text that reads better. That is a
# claim about language models and human readers; this notebook does not measure it. What it
# does measure: with a model that is almost always right, the variety sampling adds here was
# paid for in accuracy.
#
# In short: beam search maximises the model's probability (on the trained sorters it writes
# what greedy writes, all but a few answers; on less-trained ones it raises the log-probability,
# and the accuracy by little, upwards here), and sampling trades accuracy for variety, less so when top-k or
# top-p cut the tail.

# %% [markdown]
# ### Past the training length
#
# Notebook 05 compared four position encodings in an encoder: learned, sinusoidal, rotary and
# none. A model trained on sequences up to length L meets a longer one. What does each encoding do with
# positions it never saw? A classifier over 5-15 words does not ask this; a decoder does. Take a
# task a one-block `DecoderOnly` learns in a second: sequences of random symbols 0-7, and at
# every position t ≥ 2 the model must name the symbol **two places back**, x[t − 2]. Only
# position says where that is, and the rule is the same at every position, so it could carry on
# to any length. Train on length L = 8; test on the positions 2-7 of length-8 sequences and on
# the positions 8-15 of length-16 ones, which no training sequence had.

# %%
V, BACK, L = 8, 2, 8  # symbols, how far back, training length
ENCODINGS = ("learned", "sinusoidal", "rotary", "none")  # notebook 05's four
STEPS, BATCH = 150, 32  # Adam steps, sequences per step


def two_back(n, length, seed):
    """n random sequences (n, length) of the symbols 0..V-1, and their targets: the symbol
    BACK places earlier (-100, ignored by the loss, where there is none)."""
    x = torch.randint(0, V, (n, length), generator=torch.Generator().manual_seed(attnlab.seed_of(seed)))  # (n, T)
    y = torch.full_like(x, -100)  # (n, T)
    y[:, BACK:] = x[:, :-BACK]  # y[t] = x[t - 2]
    return x, y


x, y = two_back(1, L, seed=0)
print("sequence:", x[0].tolist())
print("targets: ", ["-" if t < 0 else t for t in y[0].tolist()])

# %% [markdown]
# Four decoders of the same size, trained the same way (the same batches for the same seed),
# with learned positions (a table of L rows), the sinusoidal table, rotary positions, and none.
# A causal decoder reads each position's past only, so its answers at positions 0-7 of a
# length-16 sequence are its answers on the first 8 symbols.
#
# **Predict first.** Which of the four still solve the task (a test accuracy of at least 0.9 in
# every run) at positions 8-15?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: the learned table has no row for position 8; the sinusoidal
# table has one, never seen in training; rotary positions enter only as distances; a decoder
# without positions has only the causal mask. Which survive twice the training length?

# %%
survive = ...  # your prediction: a set of names from "learned", "sinusoidal", "rotary", "none"
### BEGIN SOLUTION
survive = {"rotary"}
### END SOLUTION

# %% tags=["hide-input"]
def train_decoder(positions, seed):
    """A one-block DecoderOnly trained on two_back sequences of length L through attnlab's fit."""
    torch.manual_seed(attnlab.seed_of(seed))  # the initial weights
    model = DecoderOnly(V, max_len=L if positions == "learned" else 2 * L, positions=positions,
                        dtype=torch.float64)
    batches = (two_back(BATCH, L, seed=1000 * seed + step) for step in range(STEPS))

    def loss_fn(model, batch):
        x, y = batch  # (B, L), (B, L)
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())  # -100 targets ignored
    fit(model, batches, loss_fn, lr=1e-2, decay_steps=STEPS)
    return model


def accuracy(predicted, y, start, stop):
    """Share of right answers at positions start..stop-1."""
    return (predicted[:, start:stop] == y[:, start:stop]).double().mean().item()


x_test, y_test = two_back(1000, 2 * L, seed=10**6)  # (1000, 16), (1000, 16)
built = iter(parallel_map(lambda job: train_decoder(*job), [(p, s) for p in ENCODINGS
                                                             for s in (0, 1)]))
decoders = {p: [next(built) for seed in (0, 1)] for p in ENCODINGS}
within, past = {}, {}
with torch.no_grad():
    for p, models in decoders.items():
        within[p] = [accuracy(m(x_test[:, :L]).argmax(-1), y_test, BACK, L) for m in models]
        try:
            past[p] = [accuracy(m(x_test).argmax(-1), y_test, L, 2 * L) for m in models]
        except ValueError as error:  # a learned table has no row for position L
            past[p], reason = [], error
print(f"{'encoding':11} {'positions 2-7 (seeds 0, 1)':>27}   {'positions 8-15':>14}")
for p in ENCODINGS:
    shown = "  ".join(fmt(a, 3) for a in past[p]) or f"cannot read position {L}"
    print(f"{p:11} {'  '.join(fmt(a, 3) for a in within[p]):>27}   {shown:>14}")
print(f"\nlearned, length {2 * L}: ValueError: {reason}")

# %% tags=["remove-cell"]
assert min(within["learned"] + within["sinusoidal"] + within["rotary"]) >= 0.99
assert past["learned"] == [] and min(past["rotary"]) >= 0.95  # 40 decoders: 0.984 at least
assert max(past["sinusoidal"]) < 0.2, "sinusoidal: near chance (1/8) past the training length"
assert max(within["none"]) < 0.5 and max(past["none"]) < 0.35

# %%
measured = {p for p in ENCODINGS if past[p] and min(past[p]) >= 0.9}
ex08.survivors(survive, measured)

# %% tags=["hide-input"]
fig = mean_spread_bars({"positions 2-7 (trained)": within,
                        "positions 8-15 (new)": {p: a for p, a in past.items() if a}},
                       chance=1 / V, title="two back: accuracy within and past the training length")
fig.axes[0].text(0.7, 0.2, f"learned:\ncannot read\nposition {L}", ha="center", fontsize=10)
show_figure()

# %% [markdown]
# Within the training length, learned, sinusoidal and rotary positions all solve the task. Past
# it, rotary positions still do: a rotary score depends only on the distance, and "two back" is
# the same distance at position 12 as at position 4. The sinusoidal decoder falls to near chance
# (1 in 8): its vectors for positions 8-15 exist, but it never saw them, and what it learned
# about positions 0-7 does not carry over. The learned table cannot even be read there.
#
# And the decoder without positions? It stays far below the others even within the training
# length, yet above chance. The causal mask gives every position its own past: position t reads
# the set of symbols 0..t, a different set at each position, where an encoder without positions
# gives every position the same set, the whole sentence. From a set alone, "two back" could be any
# earlier symbol; the best guess is the most frequent one. How well does that guess do?

# %%
def best_from_the_set(x, start, stop):
    """Accuracy of guessing, at each position t, the most frequent symbol among x[0..t-1]: the
    best any reader of the past as a set can do (each of them is x[t-2] equally likely)."""
    counts = F.one_hot(x, V).cumsum(1)  # (n, T, V)   counts[:, t] = symbols 0..t
    best = counts[:, start - 1:stop - 1].max(-1).values  # (n, stop-start)   over 0..t-1
    return (best / torch.arange(start, stop)).mean().item()  # a guess is right best/t of the time


ceiling = {"2-7": best_from_the_set(x_test, BACK, L), "8-15": best_from_the_set(x_test, L, 2 * L)}
print("no positions, seeds 0, 1:", "  ".join(fmt(a, 3) for a in within["none"]), "at positions 2-7,",
      "  ".join(fmt(a, 3) for a in past["none"]), "at 8-15")
print(f"the most frequent earlier symbol: {fmt(ceiling['2-7'], 3)} at positions 2-7, "
      f"{fmt(ceiling['8-15'], 3)} at 8-15 (chance: {fmt(1 / V, 3)})")

# %% tags=["remove-cell"]
assert all(abs(a - ceiling["2-7"]) < 0.03 for a in within["none"])
assert all(abs(a - ceiling["8-15"]) < 0.03 for a in past["none"])

# %% [markdown]
# The decoder without positions does just what a reader of the past as a set can do, at both
# lengths: it counts the symbols before it and names the most frequent. It is not blind to order
# as the encoder was (the mask gives it the past), but one layer without positions cannot point
# at "two places back".
#
# What these numbers support: on a task whose rule is a fixed distance, with one layer and two
# seeds, rotary positions carry the rule to twice the training length and sinusoidal positions
# do not. What they do not support: that rotary positions extrapolate in general. A task whose
# answer depends on the absolute position, or distances longer than any seen in training, would
# test them differently, and large language models with rotary positions are known to degrade
# past their training length too.

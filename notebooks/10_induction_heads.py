# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · In-context learning and induction heads
#
# A language model predicts text better the further it reads: after "Mr and Mrs Dursley", it
# expects "Dursley" after the next "Mrs". That is *in-context learning* at its simplest; in a
# transformer two attention heads do it together, an *induction circuit* (Elhage et al. 2021,
# "A Mathematical Framework for Transformer Circuits"; Olsson et al. 2022, "In-context Learning
# and Induction Heads"). We train the smallest model that forms one, watch it form, abruptly, and
# take it apart.

# %% [markdown]
# ## What you will learn
#
# - a task only copying from the context solves, and why the repeat's distance must vary;
# - an attention-only model in ten lines, trained with one and two layers, in three seeds;
# - two scores for what a head does, previous-token and induction, against uniform attention;
# - ablations: which heads the copying needs, which it can do without.
#
# Assumes: notebooks 08 (the causal mask, a decoder, the next-token loss) and 03 (training with
# Adam).

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.core import interventions, measures
from attnlab.core.generation import token_losses
from attnlab.core.models import AttentionOnly, AttentionOnlyLayer
from attnlab.core.recipes import INDUCTION
from attnlab.exercises import ex10
from attnlab.lessons.induction import (
    LENGTH,
    N_TEST,
    REPEAT,
    TEST_SEED,
    VOCAB,
    drop_step,
    evaluate,
    evaluate_by_length,
    repeat_task,
    show,
    smooth,
    train_induction,
)
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.views import diagrams
from attnlab.views.plots import BLUE, ORANGE, VERMILION, attention_heatmap, show_figure

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The task: copy what came after last time
#
# Each sequence is 24 random tokens, ids 0 to 31. Somewhere in it, a segment of 6 to 12 tokens
# is repeated right after itself. Below, copies are in brackets.

# %%
test = repeat_task(N_TEST, seed=TEST_SEED)  # 500 test sequences, never trained on
for i in range(3):
    print(show(test, i))

# %% [markdown]
# Most tokens are random: nothing before them says which of the 32 comes, so the best prediction
# gives each 1/32 and pays ln 32 nats. In the second copy, from its second token on, each token
# is the one that followed the previous occurrence of the token before it. These are the
# *repeated tokens*; all others, the second copy's first token included, are *random tokens*.

# %%
repeated = test.repeated  # (500, 23)   True where the next token is a repeated token
print(f"a random token costs ln {VOCAB} = {fmt(math.log(VOCAB), 3)} nats")
print(f"repeated tokens per sequence: {fmt(repeated.sum(1).double().mean(), 2)} of "
      f"{LENGTH - 1} predictions on average")
print(f"segment lengths in the test sequences: {sorted(set(test.size.tolist()))}; "
      f"{len(set(test.start.tolist()))} different starts")

# %% [markdown]
# **Why the length varies.** If every segment had 8 tokens, the token to copy would always sit
# 7 places back, and a head could find it by position alone (section 3 measures it). Here the length is 6 to 12 and the repeat starts anywhere, so
# only content says where to copy from: the earlier occurrence of the current token.

# %% [markdown]
# ## 2 · A model made of attention only
#
# Token and position embeddings; layers that each add what their heads read to every position's
# vector (the *residual stream*); a linear *unembedding* turning each vector into scores for the
# 32 possible next tokens. No feed-forward layer, no LayerNorm: whatever this model
# computes, attention computes. One layer:

# %%
class Layer(torch.nn.Module):
    """x + attention(x): the heads read the residual stream and add to it."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.attn = attnlab.MultiHeadAttention(d_model, n_heads)

    def forward(self, x):
        mask = attnlab.causal_mask(x.shape[1])  # (T, T)   itself and the past
        out, weights = self.attn(x, mask)  # (B, T, d), (B, H, T, T)
        return x + out  # the residual stream: x plus what the heads add


mine, theirs = Layer(32, 2), AttentionOnlyLayer(32, 2)
mine.load_state_dict(theirs.state_dict())
x = torch.randn(4, LENGTH, 32)  # (B, T, d_model)
(out, (w,)), (out_theirs, (w_theirs,)) = attnlab.run_with_maps(mine, x), attnlab.run_with_maps(theirs, x)
same = torch.equal(out, out_theirs) and torch.equal(w, w_theirs)
print("same output and weights as attnlab.core.models.AttentionOnlyLayer:", same)

# %% tags=["remove-cell"]
assert same

# %% [markdown]
# The model stacks one or two such layers, each with 2 heads of 16 dimensions; vectors have
# d = 32 numbers.

# %%
for n_layers in (1, 2):
    model = AttentionOnly(VOCAB, LENGTH, n_layers=n_layers)
    print(f"{n_layers} layer{'s' if n_layers > 1 else ' '}: "
          f"{sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# **Predict first.** A random token costs 3.47 nats, a perfectly copied one 0. What will the
# one-layer model's loss on the repeated tokens be once it is trained?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: one layer of attention can look at every earlier token but only once. Will it
# copy the repeated tokens (loss near 0), do nothing useful (3.47), or something in between?
# Let everyone write a number before running the training.

# %%
guess_one = ...  # your prediction: the one-layer model's loss on repeated tokens, in nats
### BEGIN SOLUTION
guess_one = 2.5
### END SOLUTION

# %% [markdown]
# ## 3 · Training: a plateau, then a drop
#
# Both models train by one recipe: Adam, 500 steps of 64 new sequences each, the loss the mean
# over all 23 next-token predictions. Curves are averaged over 25 steps.

# %%
print("recipe:", INDUCTION)
# parallel_map trains the two side by side where a core is free: the same models, sooner
two, one = parallel_map(lambda n_layers: train_induction(n_layers=n_layers, seed=0), (2, 1))

# %% [markdown]
# The *drop*: the steps in which the two-layer model's loss on repeated tokens (averaged over 25
# steps) falls from 2.5 to 1.5 nats. The *plateau*: the steps before it.

# %%
HIGH, LOW = 2.5, 1.5  # nats: the drop starts where the averaged loss falls below HIGH, ends at LOW
start, end = drop_step(two, level=HIGH), drop_step(two, level=LOW)
window = 25  # steps per average; the first average ends at step 24
gap = smooth(one.repeated, window) - smooth(two.repeated, window)  # (476,)
apart = int((gap.abs() > 0.1).nonzero()[0]) + window - 1
plateau_loss = smooth(two.losses, window)[:start - window + 1].min()  # all tokens, before the drop
print(f"the two models' losses on repeated tokens stay within 0.1 nats of each other "
      f"until step {apart}")
print(f"two layers: from {HIGH} to {LOW} nats between step {start} and step {end}")
print(f"one layer: lowest loss on repeated tokens (averaged) "
      f"{fmt(smooth(one.repeated, window).min(), 2)}")
print(f"training loss (all tokens) of the two-layer model before the drop: at least "
      f"{fmt(plateau_loss, 2)} (ln 32 = {fmt(math.log(VOCAB), 3)})")

# %% tags=["remove-cell"]
assert apart < start and end - start <= 100, "the curves part before an abrupt drop"
assert plateau_loss > 3.0 and drop_step(one, level=HIGH) is None

# %% tags=["hide-input"]
steps = range(window - 1, INDUCTION.steps)  # the step each 25-step average ends at
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
for ax, part, title in ((axes[0], "losses", "all tokens (the training loss)"),
                        (axes[1], "repeated", "repeated tokens")):
    ax.axvspan(0, start, color="0.9", label="plateau")
    ax.axvspan(start, end, color=ORANGE, alpha=0.3, label="drop")
    ax.plot(steps, smooth(getattr(two, part), window), label="2 layers")
    ax.plot(steps, smooth(getattr(one, part), window), label="1 layer")
    ax.axhline(math.log(VOCAB), color="black", linestyle="--", linewidth=1, label="ln 32")
    ax.set(xlabel="training step", title=title, xlim=(0, INDUCTION.steps))
axes[0].set_ylabel("loss (nats)")
axes[1].legend(loc="lower left")
plt.tight_layout()
show_figure()

# %% [markdown]
# On the 500 test sequences:

# %%
results = {"2 layers": evaluate(two.model, test), "1 layer": evaluate(one.model, test)}
print(f"{'':10} {'repeated':>9} {'random':>7}   (nats; ln 32 = {fmt(math.log(VOCAB), 2)})")
for name, r in results.items():
    print(f"{name:10} {fmt(r['repeated'], 2):>9} {fmt(r['random'], 2):>7}")
ratio = results["2 layers"]["repeated"] / results["1 layer"]["repeated"]
print(f"two layers' loss on repeated tokens / one layer's: {fmt(ratio, 2)}")

# %% tags=["remove-cell"]
r2, r1 = results["2 layers"], results["1 layer"]
assert ratio <= 0.5, "done when: the two-layer loss on repeated tokens is at most half"
assert r1["repeated"] > 2.5 and min(r1["random"], r2["random"]) > math.log(VOCAB)

# %%
ex10.one_layer_loss(guess_one, results["1 layer"]["repeated"])

# %% [markdown]
# One run is one draw of first weights and batches. Two more of each model, seeds 1 and 2:

# %%
two_1, two_2, one_1, one_2 = parallel_map(  # (layers, seed), the longer trainings first
    lambda run: train_induction(n_layers=run[0], seed=run[1]), [(2, 1), (2, 2), (1, 1), (1, 2)])
runs = {0: (two, one), 1: (two_1, one_1), 2: (two_2, one_2)}
print(f"{'':5} {'2 layers':^25}   {'1 layer':^17}   {'test, repeated':^16}")
print(f"{'seed':<5} {'drop starts':>12} {'lasts':>12}   {'lowest average':>17}   "
      f"{'2 layers':>8} {'1 layer':>7}")
replicated = {s: (drop_step(a, level=HIGH), drop_step(a, level=LOW),
                  smooth(b.repeated, window).min(),
                  evaluate(a.model, test)["repeated"], evaluate(b.model, test)["repeated"])
              for s, (a, b) in runs.items()}
for s, (first, last, lowest_one, loss_two, loss_one) in replicated.items():
    lasts = "-" if first is None or last is None else f"{last - first} steps"
    print(f"{s:<5} {'step ' + str(first):>12} {lasts:>12}   {fmt(lowest_one, 2):>17}   "
          f"{fmt(loss_two, 2):>8} {fmt(loss_one, 2):>7}")

# %% tags=["remove-cell"]
for first, last, lowest_one, loss_two, loss_one in replicated.values():
    assert first is not None and (last is None or last - first <= 100), "abrupt, every seed"
    assert loss_two <= 0.5 * loss_one, "every seed copies"
    assert lowest_one > HIGH and loss_one > 2.5, "no one-layer model gets below 2.5"
assert max(v[0] for v in replicated.values()) - min(v[0] for v in replicated.values()) >= 20
assert sum(v[1] is not None for v in replicated.values()) >= 2, "most complete it in 500 steps"

# %% [markdown]
# Every seed starts the drop, and ends below half the one-layer model's loss; the drop took a
# hundred steps or less (a late drop may not reach 1.5 nats by step 500: *lasts* then shows
# "-"). No one-layer model's loss on repeated tokens,
# averaged over 25 steps, ever gets below 2.5 nats. *When* the drop comes moves by tens of
# steps from seed to seed.

# %% [markdown]
# The training loss, mostly random tokens, stays above 3 nats until the drop.
#
# What brings one layer below ln 32 on repeated tokens? Its probability, at each position, on the
# tokens already seen:

# %%
with torch.no_grad():
    probs = one.model(test.tokens[:, :-1]).softmax(-1)  # (500, 23, 32)
seen = torch.nn.functional.one_hot(test.tokens[:, :-1], VOCAB).cummax(1).values  # (500, 23, 32)
on_seen = (probs * seen).sum(-1)  # (500, 23)   probability on the tokens seen so far
print(f"one layer: probability on the tokens already seen {fmt(on_seen.mean(), 2)}; "
      f"their share of the {VOCAB} tokens {fmt(seen.sum(-1).double().mean() / VOCAB, 2)}")

# %% tags=["remove-cell"]
share = seen.sum(-1).double().mean() / VOCAB  # the seen tokens' share of the vocabulary
assert on_seen.mean() > share + 0.1 and on_seen.mean() > 1 / 3 and 0.2 < share < 0.3

# %% [markdown]
# It bets on the tokens it has seen, more than a third of its probability on about a quarter of
# the vocabulary: a repeated token is always one of them, so it costs less than ln 32; which one
# comes next, one layer cannot tell. Random tokens pay: they cost both models more than ln 32.

# %% [markdown]
# Is one layer too weak to copy? Train it again, 150 steps, on repeats of always 8 tokens:

# %%
fixed = train_induction(n_layers=1, repeat=(8, 8), steps=150)
fixed_test = repeat_task(N_TEST, seed=TEST_SEED, repeat=(8, 8))  # (500, 24)
fixed_loss = evaluate(fixed.model, fixed_test)["repeated"]
(fixed_maps,) = attnlab.attention_maps(fixed.model, fixed_test.tokens)  # (500, 2, 24, 24)
seven_back = fixed_maps.diagonal(offset=-7, dim1=-2, dim2=-1).mean((0, -1))  # (2,) per head
print(f"one layer, repeats of always 8 tokens: loss on repeated tokens {fmt(fixed_loss, 2)}")
print("weight on the token 7 places back, per head:", ", ".join(fmt(w, 2) for w in seven_back))

# %% tags=["remove-cell"]
assert fixed_loss < 1.0 and fixed_loss < 0.5 * results["1 layer"]["repeated"]
assert (seven_back > 0.5).all()

# %% [markdown]
# With the distance fixed, one layer copies: below 1 nat on repeated tokens, in fewer than a
# third of the steps. Both heads put more than half their weight on the token 7 places back, by
# position alone.

# %% [markdown]
# ## 4 · Loss by position, before and after the drop
#
# The two-layer model's test loss at each position, for repeated and random tokens, on the
# plateau (the last weights saved, every 50 steps, at least 50 steps before the drop) and at the
# end. Repeated tokens start at position 7 at the earliest (a 6-token segment at the very start).

# %%
before_step = max(s for s in two.checkpoints if s <= start - 50)  # well inside the plateau
before = two.at(before_step)
by_position = {f"step {before_step}, before the drop": evaluate(before, test)["by_position"],
               f"step {INDUCTION.steps}, the end": evaluate(two.model, test)["by_position"]}

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(9, 3.8))
positions = range(1, LENGTH)  # the position of each predicted token
for (name, table), style in zip(by_position.items(), ("--", "-")):
    ax.plot(positions, table[:, 0], style, color=BLUE, marker="o", label=f"repeated, {name}")
    ax.plot(positions, table[:, 1], style, color=VERMILION, marker="s", label=f"random, {name}")
ax.axhline(math.log(VOCAB), color="black", linestyle=":", linewidth=1)
ax.set(xlabel="position of the predicted token", ylabel="loss (nats)", ylim=(0, 6.4),
       title="two-layer model: loss by position")
ax.legend(fontsize=10, loc="upper center", ncol=2)
show_figure()

# %% [markdown]
# Before the drop, repeated tokens cost less than random ones at every position, but not much
# less. After it, from position 10 on, they cost more than 1 nat less than before. But some
# random tokens now cost more: the token right after the second copy is random, yet the token
# before it occurred earlier, at the end of the first copy:

# %%
after_repeat = torch.zeros_like(repeated)  # (500, 23)   the prediction of the token after it
ends = test.start + 2 * test.size - 1  # (500,)   the position of the second copy's last token
rows = (ends < LENGTH - 1).nonzero()[:, 0]  # the sequences with a token after their repeat
after_repeat[rows, ends[rows]] = True
random_losses = {}
for name, model in (("before the drop", before), ("the end", two.model)):
    with torch.no_grad():
        losses = token_losses(model, test.tokens)  # (500, 23)
    random_losses[name] = (losses[after_repeat].mean(), losses[~repeated & ~after_repeat].mean())
    print(f"{name:16} random token right after the repeat {fmt(random_losses[name][0], 2)}, "
          f"other random tokens {fmt(random_losses[name][1], 2)}")

# %% tags=["remove-cell"]
table_before, table_after = by_position.values()  # (23, 2) each: repeated, random
gap_before = table_before[6:, 1] - table_before[6:, 0]  # (17,)   random - repeated, positions 7+
gap_after = table_after[6:, 1] - table_after[6:, 0]  # (17,)
assert (gap_before > 0).all() and gap_before.mean() < 0.5 * gap_after.mean()
assert (table_before[9:, 0] - table_after[9:, 0]).min() > 1.0, "from position 10 on"
assert table_after[6:8, 0].min() > table_after[10:, 0].max() + 0.5, "the first positions stay"
assert (table_after[6:, 1] > table_before[6:, 1]).any()
(after_0, other_0), (after_1, other_1) = random_losses.values()
assert after_1 - after_0 > 0.3 and after_1 - after_0 > 2 * (other_1 - other_0)

# %%
n = torch.arange(len(rows))
first = test.tokens[rows, test.start[rows]]  # (n,)   what followed last time: the segment's first
copies = {}
for name, model in (("before the drop", before), ("the end", two.model)):
    with torch.no_grad():
        at = model(test.tokens[:, :-1]).softmax(-1)[rows, ends[rows]]  # (n, V)   after the repeat
    copies[name] = ((at.argmax(-1) == first).double().mean(), at[n, first].mean())
    print(f"{name:16} top prediction = the segment's first token: {fmt(copies[name][0], 3)}, "
          f"its mean probability {fmt(copies[name][1], 3)}")

# %% tags=["remove-cell"]
(top_0, p_0), (top_1, p_1) = copies.values()
# 20 series seeds: at the end top choice 0.73-0.92, probability 0.37-0.51 (5 times before, at least)
assert top_1 > 0.5 and p_1 > 0.25 and p_1 > 3 * p_0 and top_1 > 2 * top_0

# %% [markdown]
# There the final model predicts what followed last time, the segment's first token (its top
# choice for most of these tokens), with far more probability than before the drop. The token is
# random, so it costs more at the end, by more than twice the other random tokens' rise.

# %% [markdown]
# ## 5 · Does the model need its attention?
#
# Under `attnlab.uniform_attention(model)` every head gives each earlier token the same weight;
# all else stays as trained.

# %%
with attnlab.uniform_attention(two.model, one.model):
    uniform = {"2 layers": evaluate(two.model, test), "1 layer": evaluate(one.model, test)}
for name in results:
    print(f"{name:9} loss on repeated tokens: {fmt(results[name]['repeated'], 2)} as trained, "
          f"{fmt(uniform[name]['repeated'], 2)} with uniform attention")

# %% tags=["remove-cell"]
assert uniform["2 layers"]["repeated"] > 3.0 and uniform["1 layer"]["repeated"] > 3.0

# %% [markdown]
# With uniform attention the two-layer model's loss on repeated tokens rises to more than 3
# nats: all of its copying is done by where its heads look.

# %% [markdown]
# ## 6 · What each head does: two scores
#
# A *previous-token head* puts its weight on the token just before the query. Its score: the
# mean weight query t puts on key t − 1 (for t ≥ 1), over the test sequences. The diagonal just
# below the main one holds them:

# %%
def previous_token_score(weights):
    """weights (B, H, T, T) -> (H,): the mean weight query t puts on key t - 1."""
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, -1))  # (H,)


maps = {"2 layers": attnlab.attention_maps(two.model, test.tokens),  # [(500, 2, 24, 24)] per layer
        "1 layer": attnlab.attention_maps(one.model, test.tokens)}
same = all(torch.equal(previous_token_score(w), measures.previous_token_score(w))
           for m in maps.values() for w in m)
print("equal to attnlab.core.measures.previous_token_score on every layer:", same)

# %% tags=["remove-cell"]
assert same

# %% [markdown]
# An *induction head* at query t looks for s, the last earlier position holding the same token
# as t, and reads key s + 1: the token that came after it last time, the one to copy. Its
# score: the mean weight on key s + 1 over the queries that have such an s.
#
# **Your turn:** write `my_induction_score(weights, tokens)`: weights (B, H, T, T), tokens
# (B, T), returning one score per head (H,).
#
# <details><summary>Hint 1</summary>
#
# Two steps: first, for every query t, the position s of the last earlier occurrence of its
# token (or "none"); then the weight each head puts on key s + 1, averaged over the queries that
# have an s.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Broadcast the tokens against themselves into a (B, T, T) table of "same token?", and keep
# only the pairs with s < t. The largest such s per query is the last occurrence (write −1
# where there is none, then take the maximum over s). Gather each head's weights at key s + 1,
# zero the queries without an s, and divide by how many have one.
# </details>

# %%
def my_induction_score(weights, tokens):
    ### BEGIN SOLUTION
    B, H, T, _ = weights.shape
    pos = torch.arange(T)  # (T,)
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & (pos < pos[:, None])  # (B, T, T)
    last = torch.where(earlier, pos, -1).amax(-1)  # (B, T)   s, or -1 if the token is new
    has = last >= 0  # (B, T)
    after = (last + 1).clamp(min=0)[:, None, :, None].expand(B, H, T, 1)  # key s + 1
    on_after = weights.gather(-1, after)[..., 0]  # (B, H, T)
    return (on_after * has[:, None]).sum((0, 2)) / has.sum()  # (H,)
    ### END SOLUTION


induction_score = ex10.induction_score(my_induction_score)  # yours if right, attnlab's if not

# %% [markdown]
# **Predict first.** In the two-layer model, which layer holds the induction heads: 1 or 2?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: an induction head must match "my token" against "the token before you was
# mine". Where can that second fact come from? Let them commit to layer 1 or 2 before the
# table.

# %%
guess_layer = ...  # your prediction: 1 or 2
### BEGIN SOLUTION
guess_layer = 2
### END SOLUTION

# %% [markdown]
# Both scores for every head, at the end and, for the two-layer model, before the drop. The last
# row: each score under uniform attention, a head without a preference.

# %%
def scores_of(model_maps):
    """[(previous-token scores (H,), induction scores (H,)) for each layer's maps]."""
    return [(previous_token_score(w), induction_score(w, test.tokens)) for w in model_maps]


scores = {name: scores_of(model_maps) for name, model_maps in maps.items()}
scores_before = scores_of(attnlab.attention_maps(before, test.tokens))
with attnlab.uniform_attention(one.model):
    (level,) = scores_of(attnlab.attention_maps(one.model, test.tokens))  # the same for every head


# %%
def col(value=None):
    return f"{'':>7}" if value is None else f"{fmt(value, 3):>7}"


print(f"{'':17} {'previous-token':^15}   {'induction':^15}")
print(f"{'':17} {'before':>7} {'end':>7}   {'before':>7} {'end':>7}")
for name, layers in scores.items():
    for layer, (prev, ind) in enumerate(layers):
        for head in range(len(prev)):
            old = scores_before[layer] if name == "2 layers" else (None, None)
            print(f"{name + f', L{layer + 1} h{head}':17} "
                  f"{col(old[0] if old[0] is None else old[0][head])} {col(prev[head])}   "
                  f"{col(old[1] if old[1] is None else old[1][head])} {col(ind[head])}")
print(f"{'uniform attention':17} {col()} {col(level[0][0])}   {col()} {col(level[1][0])}")
best = {layer + 1: ind.max() for layer, (_, ind) in enumerate(scores["2 layers"])}
print(f"\nbest induction score of the two-layer model: layer 1 {fmt(best[1], 3)}, "
      f"layer 2 {fmt(best[2], 3)}")

# %% tags=["remove-cell"]
(prev_1, ind_1), (prev_2, ind_2) = scores["2 layers"]
(prev_1_before, _), (_, ind_2_before) = scores_before
(prev_one, ind_one), = scores["1 layer"]
prev_head, ind_head = int(prev_1.argmax()), int(ind_2.argmax())
assert best[2] >= 0.5, "done when: the best layer-2 induction score is at least 0.5"
assert torch.allclose(ind_2, measures.induction_score(maps["2 layers"][1], test.tokens))
# 20 series seeds: the previous-token head at 4.3-5.6 times uniform, the other at 0.39-2.21
assert prev_1[prev_head] > 3 * level[0][0] and prev_1[1 - prev_head] < 3 * level[0][0]
assert (ind_2 > 5 * level[1][0]).all(), "both layer-2 heads are induction heads"
assert prev_1_before.max() < 2 * level[0][0] and ind_2_before.max() < 3 * level[1][0]
assert prev_one.max() < 2 * level[0][0] and ind_one.max() < 3 * level[1][0]
assert prev_2.max() < 2 * level[0][0] and ind_1.max() < 3 * level[1][0]

# %%
ex10.induction_layer(guess_layer, max(best, key=best.get))

# %% [markdown]
# One head of layer 1 reads the previous token, at more than three times the uniform level;
# both heads of layer 2 are induction heads, at more than five times uniform. Before the drop
# none was; the one-layer model has neither. When did they form? Each kind's best score at
# every checkpoint, as a multiple of uniform, beside the loss:

# %%
def best_scores(model):
    """(layer 1's best previous-token score, layer 2's best induction score) ÷ uniform."""
    (prev, _), (_, ind) = scores_of(attnlab.attention_maps(model, test.tokens))
    return float(prev.max() / level[0][0]), float(ind.max() / level[1][0])


over_time = {step: best_scores(two.at(step)) for step in sorted(two.checkpoints)}  # every 50
formed = min(step for step, (p, i) in over_time.items() if p > 3 and i > 5)
print(f"both heads above 3 and 5 times uniform from step {formed} on; the drop: steps {start} "
      f"to {end}")

# %% tags=["hide-input"]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
for ax in (left, right):
    ax.axvspan(start, end, color=ORANGE, alpha=0.3, label="drop")
    ax.set(xlabel="training step", xlim=(0, INDUCTION.steps))
left.plot(steps, smooth(two.repeated, window), color=BLUE, label="2 layers")
left.set(ylabel="loss on repeated tokens (nats)", title="the loss")
left.legend(loc="upper right")
right.plot(list(over_time), [p for p, _ in over_time.values()], "--", marker="o",
           label="previous-token, layer 1")
right.plot(list(over_time), [i for _, i in over_time.values()], "-", marker="s",
           label="induction, layer 2")
right.set(ylabel="best score ÷ uniform", title="the heads, every 50 steps")
right.legend(loc="upper left")
plt.tight_layout()
show_figure()

# %% tags=["remove-cell"]
assert start - 50 <= formed <= end + 50, "the heads form with the drop"
# (12 training seeds: formed 250-350, always within 50 steps of the drop; plateau at most 1.1, 2.0)
assert all(p < 2 and i < 3 for step, (p, i) in over_time.items() if step <= start - 50)
assert all(p > 3 and i > 5 for step, (p, i) in over_time.items() if step >= formed)

# %% [markdown]
# On the plateau both scores stay below two and three times uniform; both pass three and
# five times uniform within 50 steps of the drop: the heads form as the loss falls. How they
# work together:

# %% tags=["hide-input"]
diagrams.show("induction_circuit")

# %% [markdown]
# The two kinds of head on one test sequence (the first copy's positions in red):

# %% tags=["hide-input"]
prev_head = int(scores["2 layers"][0][0].argmax())  # layer 1's previous-token head
ind_head = int(scores["2 layers"][1][1].argmax())  # layer 2's best induction head
i = int((test.size >= 10).nonzero()[0])  # a test sequence with a long repeat
labels = [str(t) for t in test.tokens[i].tolist()]
first_copy = list(range(int(test.start[i]), int(test.start[i] + test.size[i])))
fig, axes = plt.subplots(1, 2, figsize=(10, 4.8))
for ax, (layer, head, what) in zip(axes, ((0, prev_head, "previous token"),
                                          (1, ind_head, "induction"))):
    attention_heatmap(maps["2 layers"][layer][i, head], labels, labels, ax=ax,
                      highlight=first_copy, title=f"layer {layer + 1}, head {head}: {what}")
plt.tight_layout()
show_figure()

# %% [markdown]
# Left, the previous-token head: a bright line just below the diagonal, fading in the last rows.
# Right, the induction head: in the second copy, a stripe parallel to the diagonal, the segment's
# length minus one to its left. Before the repeat it has nothing to copy and rests on the first
# token.
#
# Why does the line fade? By query position, over all 500 test sequences:

# %%
on_previous = maps["2 layers"][0][:, prev_head].diagonal(offset=-1, dim1=-2, dim2=-1)  # (500, 23)
last_first = LENGTH - REPEAT[0] - 1  # a first copy ends at position 17 at the latest
print(f"weight on t - 1, queries 1 to {last_first}: {fmt(on_previous[:, :last_first].mean(), 2)}"
      f"; queries {last_first + 1} to {LENGTH - 1}: {fmt(on_previous[:, last_first:].mean(), 2)}")

# %% tags=["remove-cell"]
early, late = on_previous[:, :last_first].mean(), on_previous[:, last_first:].mean()
assert early > 0.5 and late < 0.15 and early > 4 * late

# %% [markdown]
# The induction head reads what the previous-token head wrote at positions of the first copy,
# and a first copy never reaches past position 17 (a 6-token segment at the latest start). Past
# it, that work would never be read, and this model did not learn it.

# %% [markdown]
# ## 7 · Ablations: which heads does the copying need?
#
# Take away one head's job at a time and measure again: in layer 1, the previous-token head
# (highest previous-token score) or the other; in layer 2, the best induction head (highest
# induction score) or the other. Two ways: `attnlab.uniform_attention(layer.attn, heads=[h])`
# makes the head look at every earlier token alike; `interventions.zero_heads(layer.attn, [h])`
# removes its output.

# %% slideshow={"slide_type": "subslide"}
model = two.model
roles = {"L1 previous-token head": (0, [prev_head]), "L1 other head": (0, [1 - prev_head]),
         "L2 best induction head": (1, [ind_head]), "L2 other head": (1, [1 - ind_head]),
         "L2 both heads": (1, [0, 1])}  # what is ablated -> (layer, heads)
ablations = {}  # -> (repeated with uniform weights, repeated and random with the output zeroed)
for name, (layer, heads) in roles.items():
    attn = model.layers[layer].attn
    with attnlab.uniform_attention(attn, heads=heads):
        uniform_loss = evaluate(model, test)["repeated"]
    with interventions.zero_heads(attn, heads):
        zeroed = evaluate(model, test)
    ablations[name] = (uniform_loss, zeroed["repeated"], zeroed["random"])
print(f"{'loss (nats) on':28} {'repeated tokens':>17}  {'random tokens':>13}")
print(f"{'ablated':28} {'uniform':>8} {'zeroed':>8}  {'zeroed':>13}")
print(f"{'nothing':28} {fmt(results['2 layers']['repeated'], 2):>8} {'':>8}  "
      f"{fmt(results['2 layers']['random'], 2):>13}")
for name, (uniform_loss, zeroed_loss, zeroed_random) in ablations.items():
    label = name if "both" in name else f"{name} (h{roles[name][1][0]})"  # this run's index
    print(f"{label:28} {fmt(uniform_loss, 2):>8} {fmt(zeroed_loss, 2):>8}  "
          f"{fmt(zeroed_random, 2):>13}")

# %% tags=["remove-cell"]
intact = results["2 layers"]["repeated"]
assert min(ablations["L1 previous-token head"][:2]) > 2.5, "no previous-token head: no copying"
assert max(abs(v - intact) for v in ablations["L1 other head"][:2]) < 0.3, "copying stays"
assert ablations["L1 other head"][2] > results["2 layers"]["random"] + 0.01, "random tokens pay"
# (20 series seeds: by 0.04 to 0.51 nats)
one_gone = [v for name in ("L2 best induction head", "L2 other head")
            for v in ablations[name][:2]]
assert all(intact + 0.5 < v < 2.5 for v in one_gone), "each induction head carries part"
assert min(ablations["L2 both heads"][:2]) > 3.0

# %% [markdown]
# Without the previous-token head the copying is gone, either way (near 3 nats, as bad as the
# one-layer model), though both induction heads remain: they find the token to copy through what
# it wrote. Without the other layer-1 head, the loss on repeated tokens stays within 0.3 nats of
# the intact model's, but random tokens cost more (last column; by 0.04 to 0.51 nats over 20
# series seeds): it does a job the copying does not need. Each induction head carries part of the copying: without either one, the loss on
# repeated tokens rises by more than half a nat but stays below 2.5; without both, above 3.

# %% [markdown]
# ## What we learned
#
# - A two-layer attention-only model learns to copy from its context, abruptly: after a plateau
#   its loss on repeated tokens falls from 2.5 to 1.5 nats within a hundred steps, at another
#   step in each seed. One layer never gets below 2.5: it only bets on the tokens it has seen.
#   With the copies' distance fixed, one layer copies by position; hence the varying distance.
# - The model needs its attention (uniform: above 3 nats); during the drop its heads form, a
#   previous-token head in layer 1 and two induction heads in layer 2.
# - Ablations: without the previous-token head, no copying; without one induction head the loss
#   rises but stays below 2.5; the other layer-1 head is not needed for copying, but its absence
#   costs the random tokens.
# - Copying has a price where it is wrong: the random token right after a repeat costs more at
#   the end than before the drop, by more than other random tokens rise.

# %% [markdown]
# ## Going further
#
# Optional: nothing above needs it. An experiment of your own: the two-layer model learned to
# copy on repeats of 6 to 12 tokens. Does its copying carry over to shorter repeats, which it
# never saw?

# %% [markdown]
# ### Explore: shorter repeats
#
# For each length n in `LENGTHS` (2 to 12), make 500 test sequences whose repeat is exactly n
# tokens long, `repeat_task(N_TEST, seed=TEST_SEED, repeat=(n, n))`, and measure the two-layer
# model's loss on their repeated tokens (`evaluate`). Put the losses into `by_length`, a list in
# the order of `LENGTHS`. Before you run it: is a repeat of 3 tokens easier for the model to
# copy than one of 8, or harder?
#
# <details><summary>Hint 1</summary>
#
# A loop, or a list comprehension, over `LENGTHS`: one test batch and one measurement per length.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `evaluate(two.model, batch)` returns a dict with the loss on the repeated tokens and on the
# random ones; keep the first.
# </details>

# %%
LENGTHS = range(2, 13)  # the repeat's length in tokens: shorter than any trained on, then those
by_length = ...  # per length, the two-layer model's loss on the repeated tokens, in nats
### BEGIN SOLUTION
by_length = [evaluate(two.model, repeat_task(N_TEST, seed=TEST_SEED, repeat=(n, n)))["repeated"]
             for n in LENGTHS]
### END SOLUTION
by_length = ex10.shorter_repeat(by_length)

# %% [markdown]
# The same measurement (`evaluate_by_length`) for the other two seeds' two-layer models, and
# for the one-layer model as the level of no copying:

# %%
curves = {"2 layers, seed 0": by_length}
for name, model in (("2 layers, seed 1", two_1.model), ("2 layers, seed 2", two_2.model),
                    ("1 layer, seed 0", one.model)):
    curves[name] = [r["repeated"] for r in evaluate_by_length(model, LENGTHS)]
i2, i8 = LENGTHS.index(2), LENGTHS.index(8)
print(f"{'loss on repeated tokens':24} {'at 2 tokens':>11} {'8 to 12 tokens, highest':>24}")
for name, losses in curves.items():
    print(f"{name:24} {fmt(losses[i2], 2):>11} {fmt(max(losses[i8:]), 2):>24}")

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(9, 3.8))
ax.axvspan(REPEAT[0] - 0.5, REPEAT[1] + 0.5, color="0.9", label="lengths it was trained on")
for (name, losses), style in zip(curves.items(), ("-", "--", ":", "-."), strict=True):
    ax.plot(list(LENGTHS), losses, style, marker="o", label=name)
ax.set(xlabel="length of the repeat (tokens)", ylabel="loss on repeated tokens (nats)",
       title="copying on repeats shorter than any it was trained on", xticks=list(LENGTHS))
ax.legend(loc="lower left")
plt.tight_layout()
show_figure()

# %% tags=["remove-cell"]
for seed, (_, last, *_) in replicated.items():  # the models whose drop was complete
    losses = curves[f"2 layers, seed {seed}"]
    if last is not None:
        assert all(a > b for a, b in zip(losses[:i8], losses[1:i8 + 1])), "climbs below 8"
        assert max(losses[i8:]) < 1.0 and losses[i2] > 2.6, seed
        assert losses[i2] - losses[i8] > curves["1 layer, seed 0"][i2] - losses[i2], seed
        # (24 training seeds: length 2 at 2.93 to 3.28, lengths 8 to 12 at most 0.89)

# %% [markdown]
# On repeats of the lengths it was trained on, each two-layer model whose drop was complete
# (see the seeds' table above) copies: from 8 tokens up, its loss on the repeated tokens is
# below 1 nat. Shorter than that, the loss climbs with every token less, and at 2 tokens it is
# near 3 nats: closer to the one-layer model, which cannot copy, than to its own loss at 8. So
# these models did not learn the procedure "find the last occurrence, copy what followed" in
# general, which would copy a repeat of any length; they copy at the lengths they were shown.
# (Over 20 series seeds, every two-layer model whose drop was complete gave this shape.)
# Questions to try: where do the induction heads look on a repeat of 3 tokens
# (`attnlab.attention_maps`)? Does training on repeats of 3 to 6
# (`train_induction(n_layers=2, repeat=(3, 6))`, about 7 s) form the circuit at
# all? Does `n_layers=3` form the heads sooner?

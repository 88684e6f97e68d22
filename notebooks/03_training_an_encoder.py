# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Training an encoder, and reading its attention
#
# A small Transformer encoder learns to classify synthetic reviews whose label turns on **word
# order**: the sentiment word after "but" decides. Knowing that word, we can test whether the model
# needs its attention, score that attention against the truth, and test what its predictions depend
# on.

# %% [markdown]
# ## What you will learn
#
# - an encoder block's parts, written by you: attention, feed-forward layer, residuals, LayerNorm,
#   padding mask;
# - a training loop: minibatches, a loss, gradients, Adam;
# - the test before a heatmap is read: make every weight uniform; do predictions survive?
# - scoring heads against the uniform level and chance; finding the heads a model needs;
# - hiding a word from attention against zeroing its value;
# - optional (*Going further*): position or polarity; post-norm against pre-norm; what
#   $1/\sqrt{d_k}$ does while this model trains.
#
# Assumes: notebook 01 (multi-head attention) and basic PyTorch (tensors, `nn.Module`).

# %% slideshow={"slide_type": "skip"}
import copy
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

import attnlab
from attnlab.core import hooks, interventions
from attnlab.core.measures import target_scores
from attnlab.core.models import TinyTransformer, encoder_replaced
from attnlab.core.recipes import TINY
from attnlab.core.training import evaluate
from attnlab.exercises import ex03
from attnlab.lessons import scaling
from attnlab.lessons.classifier import fit_classifier, initial_model, train_classifier
from attnlab.lessons.data import LABELS, NEGATIVE, POSITIVE, Vocab, make_contrast_reviews
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.views import diagrams
from attnlab.views.plots import accuracy_curves, attention_heatmap, show_figure

attnlab.seed_everything(0)

# %% [markdown]
# ## The data: reviews that turn on "but"
#
# Each review: 5–15 words of neutral filler, with three words placed at random: a sentiment word,
# **but**, and one of the other polarity. The word after "but" decides ("the plot was dull but the
# acting superb" is positive); the label is its polarity (1 = positive, 0 = negative), its position
# recorded.

# %%
reviews = make_contrast_reviews(TINY.n_train + TINY.n_test, seed=0)
train, test = reviews.split(TINY.n_train)
print(f"{len(train)} training and {len(test)} test reviews; "
      f"{fmt(sum(train.labels) / len(train), 3)} of the training reviews are positive\n")
for words, label, pos in test[:5]:
    marked = " ".join(f"[{w}]" if i == pos else w for i, w in enumerate(words))
    print(f"{LABELS[label]:>8}  {marked}")

# %% [markdown]
# Which sentiment word follows "but" is a coin flip, so a review's *set* of words says nothing about
# its label: a model that only counts words (a bag of words) is at chance, 50 %. A model must relate
# words to their order; whether attention is the only way, we measure.
#
# The vocabulary maps words to ids: 0 is padding (`PAD`, to make a batch's rows equally long), 1 any
# unknown word.

# %%
vocab = Vocab.for_reviews()
example = test.sentences[0]
print(f"vocabulary: {len(vocab)} ids (PAD = {vocab.PAD}, UNK = {vocab.UNK})")
print("words:", example)
print("ids:  ", vocab.encode(example))

# %% [markdown]
# ## The model
#
# `TinyTransformer` gives a review one score per class:
#
# 1. **embedding**: a learned vector of d = 32 numbers per token id, plus a learned *position
#    vector* for its place;
# 2. one **encoder block**: notebook 01's multi-head self-attention (4 heads), then a **feed-forward
#    network** (FFN), two layers (32 → 64 → 32, ReLU) applied to each token alone;
# 3. **mean pooling** over the real tokens (not padding), then a linear layer to two scores
#    (*logits*; softmax makes them probabilities).

# %% [markdown]
# ### Inside the block
#
# Step 2, drawn:

# %% tags=["hide-input"]
diagrams.show("encoder_block")

# %% [markdown]
#
# Both parts are wrapped alike:
#
# $$x = \text{LayerNorm}(x + \text{MHA}(x)) \qquad\qquad x = \text{LayerNorm}(x + \text{FFN}(x))$$
#
# - **residual connection** `x + part(x)`: each token's own vector passes through; the part learns
#   only a change to it;
# - **LayerNorm**: rescales each token's vector to mean 0 and variance 1 over its 32 numbers (then a
#   learned scale and shift), keeping the numbers in a range where training is stable. Normalising
#   after the addition is **post-norm**; most models since GPT-2 normalise before each part
#   (**pre-norm**).
#
# The **padding mask** lets a query attend only to real tokens, not `PAD`.

# %% slideshow={"slide_type": "subslide"}
torch.manual_seed(attnlab.seed_of(0))  # the initial weights
model = TinyTransformer(len(vocab), TINY.d_model, TINY.n_heads, TINY.d_ff,
                        dtype=torch.float64)
initial_weights = copy.deepcopy(model.state_dict())  # where the training below starts from
block = model.blocks[0]
parts = {f"token embedding ({len(vocab)} × 32)": [model.embed.tokens],
         "position vectors (64 × 32)": [model.embed.pos], "attention: q, k, v, out": [block.attn],
         "feed-forward": [block.ff], "two LayerNorms": [block.norm1, block.norm2],
         "head (32 → 2)": [model.head]}
for name, modules in parts.items():
    print(f"{name:28} {sum(p.numel() for m in modules for p in m.parameters()):6,}")
print(f"{'total':28} {sum(p.numel() for p in model.parameters()):6,}")

# %% [markdown]
# ### Write the block
#
# From token ids `x` (B, T), compute the states (B, T, 32) after the block and the weights
# (B, 4, T, T) from `model.embed(x)` (token + position vector), `block.attn(h, mask)` (returns
# output and weights), `block.ff`, `block.norm1` and `block.norm2`.

# %% [markdown]
# <details><summary>Hint 1</summary>
#
# Five steps, in the order of the equations: the mask, the embedding, attention, then each
# residual with its LayerNorm.
# </details>
# <details><summary>Hint 2</summary>
#
# The mask must broadcast to the weights (B, H, T, T) and say, for every key, whether it is a
# real token: the key axis is the last one, so the (B, T) test `x != vocab.PAD` needs two new axes in
# the middle. Post-norm adds first and normalises the sum.
# </details>

# %%
def my_encode(model, x):
    """x (B, T) token ids -> states (B, T, d) and weights (B, H, T, T), one post-norm block."""
    block = model.blocks[0]
    ### BEGIN SOLUTION
    mask = (x != vocab.PAD)[:, None, None, :]  # (B, 1, 1, T)   no query reads PAD
    h = model.embed(x)  # (B, T, d)   token vector + position vector
    a, w = block.attn(h, mask)  # (B, T, d), (B, H, T, T)
    h = block.norm1(h + a)  # x = LayerNorm(x + MHA(x))
    h = block.norm2(h + block.ff(h))  # x = LayerNorm(x + FFN(x))
    return h, w
    ### END SOLUTION


encode = ex03.encode(my_encode, model)

# %% [markdown]
# ## Training
#
# On each **minibatch** of 64 training reviews: compute the **cross-entropy loss** (the batch mean
# of −log(probability of the right label)), get every parameter's gradient (`loss.backward()`), and
# step each parameter against it. The step rule, **Adam**, keeps running averages of each gradient
# and its square and scales each step to about the learning rate (0.003 here). After each **epoch**
# (a pass over the 1,600 training reviews) we measure accuracy on the 400 held-out test reviews.
# The model trains through **your block**: inside `encoder_replaced`, `model(x)` calls `encode`.

# %%
x_train, y_train, _ = train.tensors(vocab)  # (1600, T), (1600,)
x_test, y_test, pos_test = test.tensors(vocab)  # (400, T), (400,), (400,)
model.load_state_dict(initial_weights)  # run this cell again: the same training, not more of it
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=TINY.lr, fused=True)
batch_order = torch.Generator().manual_seed(attnlab.seed_of(0))  # which reviews go into which minibatch
test_acc = []
with encoder_replaced(model, encode):  # model(x) runs your block from here to the loop's end
    for _ in range(TINY.epochs):  # an epoch: every training review once
        for batch in torch.randperm(len(y_train), generator=batch_order).split(TINY.batch_size):
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])  # mean -log P(right)
            optimizer.zero_grad()  # forget the last step's gradients
            loss.backward()  # d loss / d parameter, for every parameter
            optimizer.step()  # Adam: a small step against each gradient
        test_acc.append(evaluate(model, x_test, y_test)[1])  # accuracy on the test reviews
model.eval()
print(f"{TINY.epochs} epochs of {len(y_train) // TINY.batch_size} steps; test accuracy "
      "by epoch:", " ".join(fmt(a, 2) for a in test_acc))

# %% tags=["remove-cell"]
# over 24 series seeds: the last epoch 0.988-1.000; the first two below 0.57, the third up to 0.62
assert test_acc[-1] >= 0.95 and max(test_acc[:2]) < 0.6

# %% [markdown]
# Two or three epochs near chance, then the test accuracy climbs to the last value above.
# `attnlab.lessons.classifier.train_classifier()` is this loop with the library's block; with no arguments it
# trains exactly this model, bit for bit.

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(7, 3.4))
ax.plot(range(1, len(test_acc) + 1), test_acc, "o-", label="test accuracy")
ax.axhline(0.5, color="gray", linestyle="--", label="chance")
ax.set(xlabel="epoch", ylabel="test accuracy", ylim=(0.4, 1.02),
       title="TinyTransformer on the contrast reviews")
ax.legend(loc="lower right")
ax.grid(alpha=0.3)
fig.tight_layout()
show_figure()

# %% tags=["remove-cell"]
trained = train_classifier()  # notebook 03's recipe in one call: the same weights, bit for bit
assert all(torch.equal(a, b) for a, b in zip(model.parameters(), trained.model.parameters()))
assert trained.history["test_acc"] == test_acc

# %% [markdown]
# ## Does it need its attention?
#
# A heatmap shows where the weights go, not whether the model uses them: a striking pattern may
# decide nothing. So first we take the weights away: every query gives every real token the same
# weight (1/T for T tokens); all else stays trained.
#
# ### Uniform attention, written by you
#
# At the **hook point** `model.blocks[0].attn.hook_scores`, a function may replace the scores
# (B, H, T, T), after the scale and before the padding mask. **Implement** `make_uniform(scores)`:
# scores that give every key a query may read the same weight.

# %%
def make_uniform(scores):
    """scores (B, H, T, T), before the mask -> the scores that flow on."""
    ...  # your code here
    ### BEGIN SOLUTION
    return torch.zeros_like(scores)  # (B, H, T, T)   equal scores: an equal softmax
    ### END SOLUTION


make_uniform = ex03.uniform_scores(make_uniform, model)

# %% [markdown]
# **Predict first.** What test accuracy does the trained model keep with uniform attention?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: the model is at 99 %; the attention weights are one part of
# many. Does it lose a little, a lot, or everything?

# %%
guess = ...  # your prediction: the test accuracy with uniform weights, between 0 and 1
### BEGIN SOLUTION
guess = 0.5
### END SOLUTION

# %%
accuracy = evaluate(model, x_test, y_test)[1]
with hooks.hooked((model.blocks[0].attn.hook_scores, make_uniform)):  # your uniform attention
    uniform_accuracy = evaluate(model, x_test, y_test)[1]
print(f"test accuracy: {fmt(accuracy, 3)} trained, {fmt(uniform_accuracy, 3)} with uniform "
      "attention")
ex03.uniform_accuracy(guess, uniform_accuracy)

# %% tags=["remove-cell"]
# 55 models of this recipe (training seeds 0-39, and 0-4 under ATTNLAB_SEED 13, 17 and 21):
# trained 0.965-1.000; uniform attention cost each 8.3 to 55 points, more than 40 in 42
assert accuracy >= 0.95 and uniform_accuracy < accuracy - 0.05
with attnlab.uniform_attention(model):  # the library's: the same edit, on every layer named
    assert evaluate(model, x_test, y_test)[1] == uniform_accuracy

# %% [markdown]
# Uniform weights cost this model accuracy, so its weights are worth reading. How much it loses
# varies from run to run (five models follow; over 55 models, 8 to 55 points). From here on,
# `attnlab.uniform_attention(model)` does this.
#
# That is a fact about this model, not the task: each token's position vector still reaches the mean
# through the residual path, so "this positive word stands late" could decide with no token reading
# another. Would a model without attention find that? The same recipe, uniform from the start:

# %%
without = train_classifier(uniform=True)  # the same data, recipe and first weights, uniform
#                                          attention from the first step to the last
print("trained with uniform attention throughout, test accuracy by epoch:",
      " ".join(fmt(a, 2) for a in without.history["test_acc"]))

# %% tags=["remove-cell"]
# over 24 series seeds: 0.93-0.99 at the end, below 0.57 for the first two epochs
assert without.test_accuracy > 0.9 and max(without.history["test_acc"][:2]) < 0.6

# %% [markdown]
# It learns too, more slowly, to above 0.9: word and position solve this task without attention.
# Notebook 04 removes the positions instead.

# %% [markdown]
# ## Where does it look?
#
# Two test reviews, one per label, in the two heads that read the sentiment words most (by the next
# section's scores). Rows are queries, columns keys; the decisive word's column label is red. We
# show weight × T for a review of T tokens: 1 is uniform.

# %% slideshow={"slide_type": "skip"}
(weights,) = attnlab.attention_maps(model, x_test)  # (400, H, T, T)
real = x_test != vocab.PAD  # (400, T)
lengths = real.sum(1)  # (400,)
picks = [y_test.tolist().index(1), y_test.tolist().index(0)]


def show_review(i, heads):
    n = int(lengths[i])
    p = float(model.predict_proba(x_test[i:i + 1])[0, 1])
    fig, axes = plt.subplots(1, len(heads), figsize=(10, 4.6))
    for ax, h in zip(axes, heads):
        attention_heatmap(weights[i, h, :n, :n] * n, test.sentences[i], test.sentences[i], ax=ax,
                          title=f"head {h}", vmax=4.0, highlight=int(pos_test[i]))
    fig.suptitle(f"{LABELS[int(y_test[i])]} review, P(positive) = {p:.3f}: weight × T")
    fig.tight_layout()
    show_figure()


sentiment_ids = torch.tensor([vocab.stoi[w] for w in (*POSITIVE, *NEGATIVE)])
first = torch.isin(x_test, sentiment_ids).int().argmax(1)  # (400,)   the word before "but"
but = (x_test == vocab.stoi["but"]).int().argmax(1)  # (400,)
scores = {name: target_scores(weights, real, where)
          for name, where in (("decisive word", pos_test), ("first word", first), ("but", but))}
sentiment_score = torch.maximum(scores["decisive word"]["times_uniform"],
                                scores["first word"]["times_uniform"])  # (H,)
shown = sorted(sentiment_score.argsort(descending=True)[:2].tolist())  # the two readers


# %% slideshow={"slide_type": "subslide"} tags=["hide-input"]
show_review(picks[0], shown)

# %% tags=["hide-input"]
show_review(picks[1], shown)

# %% [markdown]
# Here the sentiment words' rows are not uniform: in one head a sentiment word reads the *other*.
# Systematic? The 400 test reviews can say.

# %% [markdown]
# ## Scoring every head
#
# How much attention does a token *receive*? Its column of the weight matrix holds what every query
# gives it; write its average over the real queries:

# %% [markdown]
# <details><summary>Hint 1</summary>
#
# `weights[b, h, i, j]` is what query `i` gives key `j`: the weights a key receives run along
# one axis. Which?
# </details>
# <details><summary>Hint 2</summary>
#
# Multiply by a 0/1 mask of the real queries shaped so that it lines up with the query axis,
# sum over that axis, and divide by the number of real tokens.
# </details>

# %%
def my_attention_received(weights, real):
    """weights (B, H, T, T); real (B, T) bool, True for real tokens. Returns (B, H, T): for each
    key, the mean over the real queries of the weight it receives."""
    ### BEGIN SOLUTION
    queries = real[:, None, :, None].to(weights.dtype)  # (B, 1, T, 1)   1 = a real query
    return (weights * queries).sum(-2) / queries.sum(-2)  # (B, H, T)
    ### END SOLUTION


attention_received = ex03.attention_received(my_attention_received)

# %% [markdown]
# Each head scores three words per review: the decisive word (after "but"), the first sentiment word
# and "but". **× uniform**: the weight the word receives times the review's length (uniform gives
# 1.0). **Hit rate**: how often the word is its review's most-received token; a head picking a
# random real token would score the **base rate**, the mean of 1/length.

# %%
received = attention_received(weights, real)  # (400, H, T)
print(f"{'':14} {'× uniform, heads 0-3':>26}   {'hit rate, heads 0-3':>26}")
for name, s in scores.items():
    print(f"{name:14} " + " ".join(f"{fmt(v, 2):>6}" for v in s["times_uniform"]) + "   "
          + " ".join(f"{fmt(v, 3):>6}" for v in s["hit_rate"]))
print(f"base rate (a random real token): {fmt(scores['but']['base_rate'], 3)}")

# %% tags=["remove-cell"]
decisive, first_word = scores["decisive word"], scores["first word"]
assert torch.allclose(received, attnlab.core.measures.attention_received(weights, real))
assert sentiment_score.max() > 2.0, "some head reads a sentiment word at twice uniform"
assert (scores["but"]["times_uniform"] < 2.0).all()
assert decisive["hit_rate"].max() > 2 * decisive["base_rate"]

# %% [markdown]
# Some head reads a sentiment word at more than twice the uniform level; "but" gets less than twice
# uniform from every head. Which queries read? The sentiment words' rows:

# %%
rows = torch.arange(len(y_test))
readers = {"first word": first, "decisive word": pos_test}
print(f"{'query -> key':30} " + " ".join(f"{f'head {h}':>7}" for h in range(4)))
for q_name, q in readers.items():
    for k_name, k in readers.items():
        share = weights[rows, :, q, k].mean(0)  # (H,)   mean weight query q puts on key k
        print(f"{q_name + ' -> ' + k_name:30} " + " ".join(f"{fmt(v, 2):>7}" for v in share))

# %% tags=["remove-cell"]
share = {(a, b): weights[rows, :, readers[a], readers[b]].mean(0) for a in readers for b in readers}
level = (1 / lengths.double()).mean()  # the uniform weight on one key, averaged over reviews
# over 24 series seeds each at 1.97 times the uniform level or more
assert share[("decisive word", "first word")].max() > 1.5 * level  # the decisive word reads the first
assert share[("first word", "decisive word")].max() > 1.5 * level  # and the first reads the decisive

# %% [markdown]
# Each sentiment word reads the other, well above the uniform weight: the decisive word the first in
# some head, the first the decisive in some head. After the block each sentiment word's vector holds
# both words; its own position tells which came first.

# %% [markdown]
# ## One head at a time, in five models
#
# Making one head uniform (`attnlab.uniform_attention(module, heads=[h])`) says whether the model
# needs it. One model is one draw of first weights and batch order, so we ask five: ours (seed 0)
# and four by the same recipe (`train_classifier(seed=s)`, s = 1…4, each on its own reviews).

# %% slideshow={"slide_type": "subslide"}
def ablations(net, x, y):
    """Test accuracy of `net`: trained, every head uniform, and each head alone made uniform."""
    attn = net.blocks[0].attn
    row = {"trained": evaluate(net, x, y)[1]}
    with attnlab.uniform_attention(attn):
        row["all heads"] = evaluate(net, x, y)[1]
    for h in range(attn.n_heads):
        with attnlab.uniform_attention(attn, heads=[h]):
            row[f"head {h}"] = evaluate(net, x, y)[1]
    return row


def another_seed(seed):
    """Notebook 03's recipe with another seed: the model and its test reviews."""
    t = train_classifier(seed=seed)
    return t.model, *t.test.tensors(t.vocab)[:2]


# %%
# parallel_map trains the four side by side where a core is free: the same models, sooner
runs = {0: (model, x_test, y_test), **dict(zip(range(1, 5), parallel_map(another_seed, range(1, 5))))}
table = {s: ablations(*run) for s, run in runs.items()}
print("test accuracy; under a head's name: with only that head made uniform")
print(f"{'seed':<6}" + "".join(f"{k:>10}" for k in table[0]))
for s, row in table.items():
    print(f"{s:<6}" + "".join(f"{fmt(v, 3):>10}" for v in row.values()))
most_needed = {s: min(range(4), key=lambda h, r=row: r[f"head {h}"]) for s, row in table.items()}
print("the head whose uniform weights cost most, by seed:", most_needed)

# %% tags=["remove-cell"]
for row in table.values():
    one = [row[f"head {h}"] for h in range(4)]
    assert row["trained"] >= 0.95 and row["all heads"] < row["trained"] - 0.05, "all heads cost"
    assert max(one) > row["trained"] - 0.05, "some head can go at almost no cost"
assert sum(row["all heads"] < 0.7 for row in table.values()) >= 3, "most fall below 0.7"
weakest = [min(row[f"head {h}"] for h in range(4)) for row in table.values()]
assert max(weakest) - min(weakest) > 0.1, "one head matters more in some models than in others"

# %% [markdown] slideshow={"slide_type": "subslide"}
# All four heads uniform cost each of the five models accuracy and leave most below 0.7. In every
# model some head, made uniform alone, costs a few points at most; the most needed head's cost
# varies between models by more than ten points; which head it is, is printed above (under one of 24
# series seeds all five agreed). Name a head by what you measure in the model at hand, not its
# number; a heatmap of a head that can go at no cost looks as structured as any.

# %% [markdown]
# ## Hide a word, or zero what it gives
#
# Two ways to take a word out of attention:
#
# - **hide** it (`interventions.hide_key`): no query may attend to it; its score is masked before the
#   softmax like padding, so its weight goes to the other tokens;
# - **zero its column after the softmax**: every query's weight on it becomes 0, given to nobody
#   (rows sum to less than 1). This equals zeroing its value vector: what a word gives through
#   attention is its value.
#
# Either way its own vector still reaches the mean through the residual path. Write the column edit:

# %% [markdown]
# <details><summary>Hint 1</summary>
#
# Review b's word is key `pos[b]`: which slice of `weights` holds every query's weight on it?
# </details>
# <details><summary>Hint 2</summary>
#
# Build a (B, T) 0/1 tensor that is 0 only at each review's word, give it axes so it lines up
# with the key axis, and multiply. No renormalising.
# </details>

# %%
def my_zero_column(weights, pos):
    """weights (B, H, T, T); pos (B,) a word's index in each review. Returns a copy in which
    every query's weight on key pos[b] is 0, all other weights unchanged."""
    ### BEGIN SOLUTION
    other = torch.arange(weights.shape[-1]) != pos[:, None]  # (B, T)   False at the word
    return weights * other[:, None, None, :].to(weights.dtype)  # (B, H, T, T)
    ### END SOLUTION


zero_column = ex03.zero_column(my_zero_column)

# %% [markdown]
# `edited_logits` applies the edit between softmax and values:

# %% slideshow={"slide_type": "skip"}
def edited_logits(model, x, edit):
    """model(x) with `edit` applied to the block's attention weights (B, H, T, T) between the
    softmax and the values, at the attention's `hook_weights` point."""
    with hooks.hooked((model.blocks[0].attn.hook_weights, edit)):
        return model(x)  # (B, 2)


# %% [markdown]
# **Predict first.** Hiding the first sentiment word drops the accuracy to the value the next
# cell prints first. What accuracy is left when its column is zeroed after the softmax instead?

# %%
def hidden_accuracy(where):
    hidden = torch.zeros_like(x_test, dtype=torch.bool)  # (400, T)
    hidden[rows, where] = True  # no query may attend to this word
    with interventions.hide_key(model, keys=hidden):
        return (model.predict_proba(x_test).argmax(-1) == y_test).double().mean().item()


print(f"hide the first word: accuracy {fmt(hidden_accuracy(first), 3)}")

# %%
guess_zeroed = ...  # your prediction: the accuracy with the first word's column zeroed
### BEGIN SOLUTION
guess_zeroed = 0.6
### END SOLUTION

# %%
with torch.no_grad():
    zeroed = {name: (edited_logits(model, x_test, lambda w, p=where: zero_column(w, p))
                     .argmax(-1) == y_test).double().mean().item()
              for name, where in (("first word", first), ("decisive word", pos_test), ("but", but))}
hidden = {name: hidden_accuracy(where)
          for name, where in (("first word", first), ("decisive word", pos_test), ("but", but))}
print(f"{'':14} {'hidden':>8} {'zeroed':>8}   (test accuracy, {fmt(accuracy, 3)} untouched)")
for name in hidden:
    print(f"{name:14} {fmt(hidden[name], 3):>8} {fmt(zeroed[name], 3):>8}")
ex03.zeroed_accuracy(guess_zeroed, zeroed["first word"])

# %% tags=["remove-cell"]
with torch.no_grad():  # the by-hand block with no edit is the model itself
    assert torch.allclose(edited_logits(model, x_test, lambda w: w), model(x_test), atol=1e-12)
for name in hidden:
    assert abs(hidden[name] - zeroed[name]) < 0.15, name
# over 30 seeds' models "but" hidden cost 0.00-0.26, and always 0.12 or more less than the
# costlier sentiment word (it was "costs almost nothing" until seed 11 lost 0.06 and seed 13 0.26)
assert min(hidden["first word"], hidden["decisive word"]) < 0.9
assert hidden["but"] > min(hidden["first word"], hidden["decisive word"]) + 0.05

# %% [markdown]
# For each word the two interventions land within 0.15 of each other. Taking a sentiment word out of
# attention costs accuracy; hiding "but" costs less than hiding the costlier of the two (here "but"
# always stands between them, so their order alone could decide). How much a model still reads "but"
# varies from model to model:

# %% slideshow={"slide_type": "subslide"}
def but_hidden(net, x, y):
    """Test accuracy of `net` with "but", and with the costlier sentiment word, hidden as a key."""
    is_sentiment = torch.isin(x, sentiment_ids)  # (N, T)   the two sentiment words
    last = torch.where(is_sentiment, torch.arange(x.shape[1]), -1).amax(1)  # (N,)   decisive
    where = {"but": (x == vocab.stoi["but"]).int().argmax(1), "first": is_sentiment.int().argmax(1),
             "decisive": last}
    accuracy = {}
    for name, position in where.items():
        hidden = torch.zeros_like(x, dtype=torch.bool)  # (N, T)
        hidden[torch.arange(len(x)), position] = True
        with interventions.hide_key(net, keys=hidden):
            accuracy[name] = (net.predict_proba(x).argmax(-1) == y).double().mean().item()
    return accuracy["but"], min(accuracy["first"], accuracy["decisive"])


costs = {s: but_hidden(*run) for s, run in runs.items()}
print(f"{'seed':<6}{'trained':>9}{'but hidden':>12}{'costlier word hidden':>22}")
for s, (but_left, word_left) in costs.items():
    print(f"{s:<6}{fmt(table[s]['trained'], 3):>9}{fmt(but_left, 3):>12}{fmt(word_left, 3):>22}")
fewer = sum(but_left > word_left for but_left, word_left in costs.values())
print(f'"but" hidden costs less than the costlier sentiment word in {fewer} of {len(costs)} models')

# %% tags=["remove-cell"]
assert costs[0] == (hidden["but"], min(hidden["first word"], hidden["decisive word"]))
assert fewer >= 4, "in (nearly) every model 'but' matters less than the sentiment words"
assert min(table[s]["trained"] - costs[s][0] for s in costs) < 0.02, "some: almost nothing"

# %% [markdown]
# In most models hiding "but" costs less than hiding the costlier sentiment word, in some almost
# nothing.
#
# Hiding and zeroing roughly agree: these words give what they receive. Notebook 06 meets a token
# where they disagree, [CLS], which receives much weight and gives little.

# %% [markdown]
# ## What we learned
#
# - An encoder block is a few lines around notebook 01's attention: the padding mask,
#   `LayerNorm(x + MHA(x))`, `LayerNorm(x + FFN(x))`, mean pooling. Adam trains it on reviews a bag
#   of words cannot solve.
# - Before reading attention, take it away: uniform weights cost each of five models accuracy,
#   leaving most below 0.7. Yet the task needs no attention: the same recipe, uniform from the
#   start, passed 0.9.
# - Each sentiment word reads the other, in some head well above uniform. Which head matters most
#   changes with the seed: name heads by what they do, not by number.
# - Hiding a word and zeroing its value roughly agree for these words; hiding "but" costs less than
#   hiding the costlier sentiment word, by a model-dependent amount.
# - Notebook 04 asks what the position vectors contributed.

# %% [markdown]
# ## Going further
#
# Optional: nothing on the main line needs it. *By position, or by polarity?* asks whether the
# heads read a word for where it stands or for what it is, in the five models; *Post-norm or
# pre-norm* trains both blocks at a high learning rate, with and without a warm-up; *Why
# scale?* measures how spread this model's scores are, and trains it without the
# $1/\sqrt{d_k}$ of notebook 02.

# %% [markdown]
# ### By position, or by polarity?
#
# Do the heads read a word for *where* it stands, or for *what* it is? Split the × uniform
# score of "Scoring every head" by polarity: the positive word and the negative word of each
# review, whatever their order.

# %%
positive = torch.isin(x_test, torch.tensor([vocab.stoi[w] for w in POSITIVE])).int().argmax(1)
negative = torch.isin(x_test, torch.tensor([vocab.stoi[w] for w in NEGATIVE])).int().argmax(1)
polarity = {name: target_scores(weights, real, where)["times_uniform"]
            for name, where in (("positive word", positive), ("negative word", negative))}
print(f"{'× uniform':14} " + " ".join(f"{f'head {h}':>7}" for h in range(4)))
for name, values in {**{k: scores[k]["times_uniform"] for k in ("first word", "decisive word")},
                     **polarity}.items():
    print(f"{name:14} " + " ".join(f"{fmt(v, 2):>7}" for v in values))

# %% [markdown] slideshow={"slide_type": "subslide"}
# Two descriptions of the same weights. Which fits better in each of the five models of "One
# head at a time"? The best score over the four heads for each word (× uniform), with its head:

# %% tags=["hide-input"]
def best_reading(net, x, y):
    """{word: (best × uniform over the heads, that head)} for the four words of each review."""
    ids = {name: torch.tensor([vocab.stoi[w] for w in words])
           for name, words in (("positive", POSITIVE), ("negative", NEGATIVE))}
    (w,) = attnlab.attention_maps(net, x)  # (N, H, T, T)
    mask = x != vocab.PAD
    where = {"first word": torch.isin(x, torch.cat(list(ids.values()))).int().argmax(1),
             "decisive word": None,
             "positive word": torch.isin(x, ids["positive"]).int().argmax(1),
             "negative word": torch.isin(x, ids["negative"]).int().argmax(1)}
    where["decisive word"] = torch.where(y == 1, where["positive word"], where["negative word"])
    best = {}
    for name, at in where.items():
        score = target_scores(w, mask, at)["times_uniform"]  # (H,)
        best[name] = (score.max().item(), int(score.argmax()))
    return best


readings = {s: best_reading(*run) for s, run in runs.items()}
print(f"{'seed':<6}" + "".join(f"{name:>18}" for name in readings[0]))
for s, best in readings.items():
    print(f"{s:<6}" + "".join(f"{fmt(v, 2):>11} (h{h})" for v, h in best.values()))

# %% tags=["remove-cell"]
assert abs(readings[0]["decisive word"][0] - scores["decisive word"]["times_uniform"].max()) < 1e-12
for best in readings.values():
    assert max(v for v, _ in best.values()) > 1.4, "every model reads some sentiment word"
by_polarity = sum(max(best["positive word"][0], best["negative word"][0])
                  > max(best["first word"][0], best["decisive word"][0])
                  for best in readings.values())
assert by_polarity >= 3, "most models read by polarity more than by position"

# %% [markdown]
# In every model some head reads a sentiment word well above the uniform level. In
# most of the five the strongest reading is by polarity (a head that reads the positive word,
# or the negative one, wherever it stands), not by position, and again the heads' numbers
# change from model to model. What a head reads is a fact about one trained model; that the
# model needs its attention is a fact about all five.

# %% [markdown]
# ### Post-norm or pre-norm, and the warm-up
#
# Our block normalises after each residual addition (post-norm), as did the original
# Transformer, which also trained with a **warm-up**: a learning rate that starts small and
# rises over the first steps. Most later models normalise each part's input instead (pre-norm:
# `x + MHA(LayerNorm(x))`), which leaves the residual path free of normalisation. A measurement
# at a learning rate of 0.03 (ten times the recipe's), two blocks, 6 epochs, two seeds each:
# post-norm without and with a warm-up over the first 50 steps, and pre-norm without one.

# %% slideshow={"slide_type": "subslide"}
def six_epochs(norm, warmup, seed):
    """Test accuracy after each of 6 epochs of a 2-block model at learning rate 0.03."""
    torch.manual_seed(attnlab.seed_of(seed))
    net = TinyTransformer(len(vocab), n_layers=2, norm=norm, dtype=torch.float64)
    history = fit_classifier(net, x_train, y_train, x_test, y_test, epochs=6, lr=0.03,
                             seed=seed, warmup=warmup)
    return history["test_acc"]


variants = {("post", 0): "post-norm", ("post", 50): "post-norm + warm-up", ("pre", 0): "pre-norm"}
accuracies = iter(parallel_map(lambda run: six_epochs(*run),
                              [(*variant, seed) for variant in variants for seed in (0, 1)]))
curves = {name: [next(accuracies) for seed in (0, 1)] for name in variants.values()}


# %%
def steady(curve):
    """True if a run reached 0.75 and no later epoch lies more than 0.1 below its best so far."""
    if max(curve) < 0.75:
        return False
    first = next(i for i, a in enumerate(curve) if a >= 0.75)
    return max(max(curve[:i + 1]) - curve[i] for i in range(first, len(curve))) <= 0.1


def verdict(runs):
    """What the two runs of one block did, in words. At this learning rate the later epochs of
    a run change with the smallest change to its numbers, so the words are about both runs."""
    if max(max(curve) for curve in runs) < 0.6:
        return "at chance in both runs"
    if all(steady(curve) for curve in runs):
        return "learned in both runs, and kept it"
    if any(max(curve) >= 0.75 for curve in runs):
        return "learned, but not steadily in both runs"
    return "never reached 0.75"


said = {name: verdict(runs) for name, runs in curves.items()}
for name, words in said.items():
    print(f"{name:22} {words}")

# %% tags=["hide-input", "nbval-ignore-output"]
fig, ax = plt.subplots(figsize=(8, 3.8))
for (name, runs), style in zip(curves.items(), ("o-", "s--", "^-")):
    for seed, run in enumerate(runs):
        ax.plot(range(1, 7), run, style, color=f"C{list(curves).index(name)}", alpha=0.8,
                label=name if seed == 0 else None)
ax.axhline(0.5, color="gray", linestyle=":", label="chance")
ax.set(xlabel="epoch", ylabel="test accuracy", ylim=(0.4, 1.02),
       title="2 blocks, learning rate 0.03, seeds 0 and 1")
ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
ax.grid(alpha=0.3)
fig.tight_layout()
show_figure()

# %% tags=["remove-cell"]
# over 24 series seeds the best epoch of any run: post-norm 0.50-0.66, pre-norm 0.90-0.99,
# post-norm with the warm-up 0.67-0.98; whether a run keeps what it learned changes with the seed
best = {name: max(max(curve) for curve in runs) for name, runs in curves.items()}
assert best["post-norm"] < 0.75 and best["pre-norm"] > 0.85

# %% [markdown]
# At this learning rate the post-norm model without warm-up stays near chance with either seed,
# and pre-norm learns without any warm-up; the lines above say what each did here. Over 24
# series seeds the same held (post-norm's best epoch at most 0.66, pre-norm's at least 0.90),
# while the warm-up helped post-norm in most runs, not all. Two seeds
# of one small model are not a law, and we have not measured *why*; Xiong et al. (2020) give
# the analysis: a post-norm block's gradients are largest at the start of training, which is
# what a warm-up's small first steps protect against.

# %% [markdown]
# ### Why scale? The scores of this model
#
# Notebook 02 measured what the $1/\sqrt{d_k}$ does to queries and keys whose entries are
# draws from $\mathcal{N}(0, 1)$. This notebook's model is not like that: its token vectors
# are drawn small (entries of variance $1/d_{model}$, length about 1), its block is post-norm
# (no LayerNorm before attention), and its queries and keys are learned projections of learned
# token vectors. Its 4 heads have $d_{head} = 8$. How spread are the scores its softmax sees?
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


score_spread = ex03.score_spread(my_score_spread)  # yours if it is right, attnlab's otherwise

# %% [markdown]
# **Predict first.** Notebook 02's random queries and keys give scaled scores of spread 1. What
# is the spread of this model's at initialisation, before any training? Write it down, then run
# the measurement: your function on the 400 test reviews, at initialisation and after training.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: near 1, like notebook 02's? Larger? Smaller? By how much? Then: and after training?

# %%
spread_guess = ...  # your prediction: the spread of the scaled scores at initialisation
### BEGIN SOLUTION
spread_guess = 0.02  # entries of q and k near 0.14, d_head = 8: 0.14² × √8 / √8 ≈ 0.02
### END SOLUTION

# %%
untrained = initial_model(len(vocab))  # the model above before its first step
spreads, largest = {}, {}
for name, net in (("initialisation", untrained), ("trained", model)):
    with torch.no_grad():
        spreads[name] = float(score_spread(net.blocks[0].attn, net.embed(x_test), real))
    top = attnlab.attention_maps(net, x_test)[0].amax(-1)  # (400, H, T)   each query's largest
    largest[name] = top[real[:, None, :].expand_as(top)].mean().item()  # over real queries
first = untrained.blocks[0]
with torch.no_grad():  # a pre-norm block (GPT-2, Llama) gives attention LayerNorm(x) instead of x
    prenorm = float(score_spread(first.attn, first.norm1(untrained.embed(x_test)), real))
print(f"{'':<15} {'spread of the scores':>21} {'mean largest weight':>20}")
for name in spreads:
    print(f"{name:<15} {fmt(spreads[name], 3):>21} {fmt(largest[name], 3):>20}")
print(f"initialisation, its input through a LayerNorm first (pre-norm): spread {fmt(prenorm, 3)}")

# %% tags=["remove-cell"]
assert 0.01 < spreads["initialisation"] < 0.03, "about 0.02"
assert 0.5 < spreads["trained"] < 2 and largest["trained"] < 0.6, "about 1; far from one-hot"
assert largest["initialisation"] < 0.15, "almost uniform at the start"
assert abs(prenorm - 1 / 3) < 0.05, "pre-norm: about 1/3"

# %%
ex03.spread_at_init(spread_guess, spreads["initialisation"])

# %% [markdown]
# At initialisation the scores spread about 0.02, not 1: nn.Linear draws $W_Q$ and $W_K$ with
# entries of about $1/\sqrt{d_{model}}$ and the token vectors have length about 1, so the
# entries of $q$ and $k$ start small, and their products smaller still. The softmax starts
# almost uniform. That is this model's choice: a pre-norm block normalises each token vector to
# entries of variance 1 first, and the same untrained layer then spreads its scores about 1/3
# (nn.Linear's weights have variance $1/(3 d_{model})$, so $q$ and $k$ have entries of variance
# 1/3), larger but still below 1. After training this model's scores spread about 1, and a
# query's largest weight averages far below one-hot (1): the table shows it, and over 24 series
# seeds it stayed at about a half or below (0.50 at most). Its softmax does not
# saturate, before or after training: notebook 02's vanishing gradient never happens to it. So
# what does the scale do here?

# %% [markdown]
# ### Training without the scale
#
# With $d_{head} = 8$ the scale divides by $\sqrt 8 \approx 2.8$. We give the model one head of
# $d_{head} = 64$ instead ($d_{model} = 64$), where it divides by 8, and train it with this
# notebook's recipe for 5 epochs (passes over the 1,600 training reviews).
# `scaling.train_at_scale(scale, seed=..., epochs=...)` does it; `scale=None` is the usual
# $1/\sqrt{d_{head}}$. The cell trains three seeds of each variant, for a table further down;
# here, seed 0's test accuracy after each epoch:

# %%
EPOCHS = 5
SEEDS = (0, 1, 2)
VARIANTS = {"scaled": {}, "scale 1.0": {"scale": 1.0}, "folded": {"fold": True}}  # their arguments
jobs = [(name, seed) for name in ("scaled", "scale 1.0") for seed in SEEDS]
trained_at = iter(parallel_map(lambda job: scaling.train_at_scale(
    **VARIANTS[job[0]], seed=job[1], epochs=EPOCHS), jobs))  # side by side where a core is free
scale_runs = {name: [next(trained_at) for seed in SEEDS] for name in ("scaled", "scale 1.0")}
scaled_run = scale_runs["scaled"][0]  # softmax(q·k / 8), seed 0
print("scaled, seed 0:", " ".join(fmt(a, 3) for a in scaled_run.history["test_acc"]))

# %% [markdown]
# **Explore.** Train the same model with `scale=1.0` (no division) and seed 0. Notebook 02 says
# what to expect of unscaled scores at $d_k = 64$; the part above says how large this model's
# scores are. What is its test accuracy after 4 epochs? Compare its whole curve with the one above.
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
unscaled_accuracy = ...  # the test accuracy after 4 epochs with scale=1.0, seed 0
### BEGIN SOLUTION
unscaled_run = scaling.train_at_scale(1.0, seed=0, epochs=4)
unscaled_accuracy = unscaled_run.history["test_acc"][3]  # epoch 4
### END SOLUTION
unscaled_accuracy = ex03.accuracy_without_scale(
    unscaled_accuracy, {name: scale_runs[name][0].history["test_acc"]
                        for name in ("scale 1.0", "scaled")})

# %% [markdown]
# One run could be luck. Three seeds of each (each seed draws other reviews, other initial
# weights and another batch order), with the spread of each model's scores (your
# `score_spread`) at the start and after training:

# %%
def spread_of(model, run):
    """The spread of `model`'s scaled scores on the test reviews of `run`."""
    x, _, _ = run.test.tensors(run.vocab)  # (400, T)
    with torch.no_grad():
        return float(score_spread(model.blocks[0].attn, model.embed(x), x != run.vocab.PAD))


# %% tags=["hide-input"]
def spread_table(names):
    """Per run: test accuracy after epochs 4 and 5, spread of the scores at the start and after
    training; printed, and returned as {name: [row per seed]}."""
    print(f"{'':<10} {'seed':>4} {'after 4 epochs':>15} {'after 5':>8} {'spread: start':>14} "
          f"{'trained':>8}")
    rows = {}
    for name in names:
        rows[name] = [(run.history["test_acc"][3], run.history["test_acc"][4],
                       spread_of(scaling.initial_at_scale(**VARIANTS[name], seed=seed), run),
                       spread_of(run.model, run))
                      for seed, run in zip(SEEDS, scale_runs[name])]
        for seed, row in zip(SEEDS, rows[name]):
            print(f"{name:<10} {seed:>4} {fmt(row[0], 3):>15} {fmt(row[1], 3):>8} "
                  f"{fmt(row[2], 2):>14} {fmt(row[3], 2):>8}")
    return rows


spread_rows = spread_table(["scaled", "scale 1.0"])

# %% tags=["remove-cell"]
column = {name: np.array(list(zip(*spread_rows[name]))) for name in spread_rows}  # (4, 3) each
ahead = column["scale 1.0"][0] - column["scaled"][0]  # (3,)   after 4 epochs, seed by seed
# 24 series seeds (72 runs of each kind): ahead on average by 0.036-0.196, in 2 or 3 of 3 seeds;
# trained spread 1.86-43 times the scaled model's, the middle of each three at least 2.17
assert ahead.mean() > 0.02 and (ahead > 0).sum() >= 2, "ahead on average and in most seeds"
assert min(column["scaled"][1].min(), column["scale 1.0"][1].min()) > 0.7, "all above 0.7"
assert np.allclose(column["scale 1.0"][2], 8 * column["scaled"][2]), "8 times wider at the start"
assert column["scaled"][2].max() < 0.015, "about 0.01 at the start"
wider = column["scale 1.0"][3] / column["scaled"][3]  # (3,)   trained spread, seed by seed
assert (wider > 1.5).all() and np.sort(wider)[1] > 2, "wider in every seed, twice in most"

# %% tags=["hide-input"]
accuracy_curves({name: [r.history for r in group] for name, group in scale_runs.items()},
                chance=0.5, figsize=(8, 4), title="one head of d_head = 64, three seeds each")
show_figure()

# %% [markdown]
# Without the division the model does not stall. It learns *faster*: after 4 epochs it is ahead
# on average over the three seeds, and in most of them; after 5 epochs every run of either kind
# is above 0.7. Notebook 02's gradient shrank only for scores as spread as its random ones at
# $d_k \geq 128$; without the scale these start 8 times wider than with it, whose spread is about
# 0.01: the softmax is nowhere near saturation. What the missing division changes is how fast
# the scores grow: after training they are more spread than the scaled model's in every seed,
# and in most seeds more than twice as spread.

# %% [markdown]
# ### Folding the scale into W_Q
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
scale_runs["folded"] = parallel_map(lambda seed: scaling.train_at_scale(
    fold=True, seed=seed, epochs=EPOCHS), SEEDS)
spread_rows.update(spread_table(["folded"]))

# %% tags=["remove-cell"]
column = {name: np.array(list(zip(*spread_rows[name]))) for name in spread_rows}
assert np.allclose(column["folded"][2], column["scaled"][2]), "folded: the scaled model at step 0"
assert (column["folded"][3] > 1.5 * column["scaled"][3]).all(), "wider than scaled, every seed"

# %%
trained_spreads = {name: [row[3] for row in spread_rows[name]] for name in spread_rows}
ex03.folded_spread(folded_guess, trained_spreads)

# %% tags=["remove-cell"]
assert folded_guess == "unscaled", "the prose says: nearer the unscaled model's"

# %% tags=["hide-input"]
accuracy_curves({name: [r.history for r in group] for name, group in scale_runs.items()},
                chance=0.5, figsize=(8, 4),
                title="the scale folded into W_Q at initialisation, three seeds")
show_figure()

# %% [markdown]
# The folded model starts as the scaled one, yet in every seed its scores end up wider than the
# scaled model's of the same seed, on the whole nearer the unscaled model's. Why? Compare the
# two models' $W_Q$ and its gradient at step 0, on one batch:

# %%
x_batch, y_batch, _ = scaled_run.train.tensors(scaled_run.vocab)  # (1600, T), (1600,)
w_q, grads = {}, {}
for name in ("scaled", "folded"):
    net = scaling.initial_at_scale(**VARIANTS[name], seed=0)  # step 0, the same function
    F.cross_entropy(net(x_batch[:64]), y_batch[:64]).backward()  # one batch of 64
    w_q[name] = net.blocks[0].attn.q.weight.detach()  # (64, 64)
    grads[name] = net.blocks[0].attn.q.weight.grad  # (64, 64)   ∂L/∂W_Q
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

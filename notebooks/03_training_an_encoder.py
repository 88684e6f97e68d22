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
# Notebooks 01 and 02 built attention; here a small Transformer encoder learns with it. We train
# it on synthetic movie reviews in which **one word decides the label and we know which one**.
# That makes it possible to do what real data never allows: score the model's attention against
# the truth, and then test whether the attention weights really explain its predictions.

# %%
import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.data import LABELS, NEGATIVE, POSITIVE, Vocab, make_reviews
from attnlab.models import attention_hit_rate
from attnlab.plots import head_grid, training_curves
from attnlab.train import RECIPE, train_classifier

attnlab.seed_everything(0)

# %% [markdown]
# ## The data: reviews with one decisive word
#
# Each review is 5–15 words long: neutral filler with exactly one sentiment word at a random
# position. The label is that word's polarity (1 = positive, 0 = negative), and its position is
# recorded. Word order carries no information here — notebook 04 comes back to that.

# %%
reviews = make_reviews(RECIPE["n_train"] + RECIPE["n_test"], seed=0)
train, test = reviews.split(RECIPE["n_train"])
print(f"{len(POSITIVE)} positive and {len(NEGATIVE)} negative words, e.g. {POSITIVE[:3]}, {NEGATIVE[:3]}")
print(f"{len(train)} training and {len(test)} test reviews; "
      f"{sum(train.labels) / len(train):.3f} of the training reviews are positive\n")
for words, label, pos in list(zip(*test))[:5]:
    marked = " ".join(f"[{w}]" if i == pos else w for i, w in enumerate(words))
    print(f"{LABELS[label]:>8}  (decisive word at {pos:2d})  {marked}")

# %% [markdown]
# The model reads numbers, not words. The vocabulary maps each word to an id; id 0 is padding
# (`PAD`, used to make all rows of a batch equally long) and id 1 stands for any unknown word.

# %%
vocab = Vocab.for_reviews()
example = test.sentences[0]
print(f"vocabulary: {len(vocab)} ids (PAD = {vocab.PAD}, UNK = {vocab.UNK})")
print("words:", example)
print("ids:  ", vocab.encode(example))
print("unknown words:", vocab.encode("a marvelous film"), "->", vocab.decode(vocab.encode("a marvelous film")))

# %% [markdown]
# ## The model and the recipe
#
# `TinyTransformer`: token embedding + learned positions → one `EncoderBlock` (notebook 01's
# 4-head self-attention, then a feed-forward layer, each with a residual connection and
# LayerNorm) → the mean of the real tokens' vectors (padding left out) → a linear layer giving two
# scores. The lab's recipe trains it with Adam; one line is printed per epoch. The train numbers
# are averages over the epoch's minibatches, taken while the model was still learning; the test
# numbers are measured at the end of the epoch, so early on they can be the better ones.

# %%
print("recipe:", RECIPE)
trained = train_classifier(seed=0, verbose=True)  # same seed, same 1,600 / 400 reviews as above
model = trained.model
assert trained.train.sentences == train.sentences and trained.test.sentences == test.sentences
n_params = sum(p.numel() for p in model.parameters())
print(f"\n{n_params:,} parameters")
print(model)

# %%
training_curves(trained.history, title="TinyTransformer on the synthetic reviews")
plt.show()

# %%
print(f"test accuracy after {RECIPE['epochs']} epochs: {trained.test_accuracy:.3f}")
assert trained.test_accuracy >= 0.95, "the lab's recipe should reach 95 % test accuracy"

# %% [markdown]
# ## Where does it look?
#
# `get_attention_maps` returns each layer's weights, shape (batch, heads, query, key). Below are
# the first positive and the first negative test review, and the review after them, each as the
# four heads and their mean. Row = the token that asks, column = the token it reads from; the
# decisive word's column label is red. The colour scale ends at the largest weight in the picture.

# %%
x_test, y_test, pos_test = test.tensors(vocab)  # (400, T), (400,), (400,)
(maps,) = model.get_attention_maps(x_test)  # one layer: (400, H, T, T)
first_pos = y_test.tolist().index(1)
first_neg = y_test.tolist().index(0)
picks = [first_pos, first_neg, max(first_pos, first_neg) + 1]
for i in picks:
    words, n = test.sentences[i], len(test.sentences[i])
    p_positive = model.predict_proba(x_test[i:i + 1])[0, 1].item()
    head_grid(maps[i, :, :n, :n], words, highlight=pos_test[i].item(), vmax=None,
              title=f"{LABELS[y_test[i].item()]} review, P(positive) = {p_positive:.3f}")
    plt.show()

# %% [markdown]
# ## Scoring attention against the truth: the hit rate
#
# For each test review, average the attention every real token *receives* over all queries; the
# review is a **hit** for a head when its most-attended token is the decisive word. Picking a
# token at random would hit with probability 1 / length; its mean over the test set is the
# chance level printed first.

# %%
hits = attention_hit_rate(model, x_test, pos_test)
print(f"chance (random token): {hits['chance']:.3f}")
for h, rate in enumerate(hits["per_head"][0]):
    print(f"head {h}: hit rate {rate:.3f}")
print(f"mean of the heads' hit rates: {hits['per_head'][0].mean():.3f}")
print(f"hit rate of the heads' average map: {hits['head_mean'][0]:.3f}")

pred = model.predict_proba(x_test).argmax(-1)  # (400,)
by_class, class_acc = {}, {}
for label in (0, 1):
    rows = y_test == label
    by_class[label] = attention_hit_rate(model, x_test[rows], pos_test[rows])["head_mean"][0]
    class_acc[label] = (pred[rows] == label).float().mean().item()
    print(f"  {LABELS[label]} reviews: hit rate of the average map {by_class[label]:.3f}, "
          f"accuracy {class_acc[label]:.3f}")
assert hits["per_head"].max() > 2 * hits["chance"], "some head should find the decisive word far above chance"

# %%
hi, lo = (1, 0) if by_class[1] >= by_class[0] else (0, 1)
rate, chance = hits["head_mean"][0], hits["chance"]
per_class = f"{LABELS[0]} {by_class[0]:.0%}, {LABELS[1]} {by_class[1]:.0%}; chance {chance:.0%}"
if rate >= 0.9:
    print(f"The heads' average map points at the decisive word in {rate:.0%} of the reviews ({per_class}).")
elif by_class[hi] - by_class[lo] >= 0.5 and class_acc[lo] >= 0.9:
    print(f"The heads find the decisive word in {LABELS[hi]} reviews ({by_class[hi]:.0%}) but hardly ever "
          f"in {LABELS[lo]} ones ({by_class[lo]:.0%}), yet the model gets {class_acc[lo]:.0%} of the "
          f"{LABELS[lo]} reviews right. With two classes it only has to detect {LABELS[hi]} words: a "
          f"review without one is {LABELS[lo]}. The attention maps of {LABELS[lo]} reviews point at filler.")
elif rate >= 2 * chance:
    print(f"The heads' average map points at the decisive word in {rate:.0%} of the reviews ({per_class}): "
          "far more often than chance, but the most-attended token is often another one.")
else:
    print(f"The heads' average map points at the decisive word in {rate:.0%} of the reviews ({per_class}): "
          "hardly more often than chance.")

# %% [markdown]
# ## An intervention: hide the decisive word from attention
#
# A heatmap shows where the weights go, not what the prediction depends on. So we intervene.
# **Hide**: no query may attend to the decisive word (its column of weights is forced to 0), but
# the word stays in the sentence — its own vector still travels through the residual connection
# and the feed-forward layer into the mean. **Remove**: replace the word by padding, so it is
# gone from every path. If the word mattered only through attention, both should flip the same
# predictions.

# %%
rows = torch.arange(len(y_test))
attend = torch.ones_like(x_test, dtype=torch.bool)  # (400, T)
attend[rows, pos_test] = False  # nobody may attend to the decisive word
x_removed = x_test.clone()
x_removed[rows, pos_test] = vocab.PAD  # the decisive word is gone

base = model.predict_proba(x_test).argmax(-1)  # (400,)
hidden = model.predict_proba(x_test, attend).argmax(-1)
removed = model.predict_proba(x_removed).argmax(-1)
acc = {name: (p == y_test).float().mean().item() for name, p in
       (("as is", base), ("hidden from attention", hidden), ("removed", removed))}
flips = {}
print(f"{'':22} {'accuracy':>9}   flipped: {'negative':>8} {'positive':>8}")
for name, p in (("as is", base), ("hidden from attention", hidden), ("removed", removed)):
    flips[name] = {label: (p != base)[y_test == label].float().mean().item() for label in (0, 1)}
    print(f"{name:22} {acc[name]:9.3f}            {flips[name][0]:8.3f} {flips[name][1]:8.3f}")
assert abs(acc["removed"] - 0.5) < 0.1, "without the decisive word no model can beat chance"

# %%
for label in (0, 1):
    hid, rem = flips["hidden from attention"][label], flips["removed"][label]
    if rem < 0.25:
        print(f"{LABELS[label]} reviews: removing the decisive word flips only {rem:.0%} of them. With no "
              f"sentiment word left, the model still says {LABELS[label]} for the other {1 - rem:.0%}: that "
              f"is its default when it finds no word of the other class. Right for a reason no attention "
              f"weight points at.")
    elif hid >= 0.8 * rem:
        print(f"{LABELS[label]} reviews: hiding the word from attention flips {hid:.0%}, removing it "
              f"{rem:.0%}. The word's own vector still reaches the mean through the residual path, yet "
              f"hiding it from attention does {'nearly ' if hid < rem else ''}as much as removing it: here "
              f"the word acts mostly through attention.")
    else:
        print(f"{LABELS[label]} reviews: hiding the word from attention flips {hid:.0%}, removing it "
              f"{rem:.0%}. Much of the word's effect travels without attention, through the residual "
              f"path and the feed-forward layer at the word's own position.")

# %% [markdown]
# ## What we learned
#
# - A one-block Transformer learns the task by the lab's recipe, and its heads can be scored
#   against the known decisive word.
# - Where the weights point and what the prediction depends on are different questions. The hit
#   rate answers the first, the intervention the second; the numbers above show how far apart the
#   two answers are for this model. A heatmap shows the first for one sentence and cannot answer
#   the second.
# - Notebook 04 asks what the positional encodings contributed to all this.

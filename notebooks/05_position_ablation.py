# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · What positional encodings are for
#
# Notebook 03's model added a learned position vector to every token. Did it need to? We remove
# positions on a task where word order does not matter and on one that needs it, then compare
# learned, sinusoidal and rotary positions.

# %% [markdown]
# ## What you will learn
#
# - what self-attention without positions does with a shuffled sentence;
# - to run an ablation on tasks that do and do not need word order, and to test whether a trained
#   model needs its attention;
# - how long sinusoidal position vectors are beside token vectors, and why the original Transformer
#   multiplies token vectors by √d_model;
# - how rotary positions make scores depend only on token distance, and to write the turn yourself.
#
# Assumes: notebook 03 (the TinyTransformer and its recipe, the contrast reviews,
# `attnlab.uniform_attention(model)`).

# %% slideshow={"slide_type": "skip"}
import math

import matplotlib.pyplot as plt
import torch
from IPython.display import display

import attnlab
from attnlab.core.attention import MultiHeadAttention
from attnlab.core.blocks import sinusoidal_table
from attnlab.core.models import LEARNED_POSITION_STD, TinyTransformer, draw_float64
from attnlab.core.recipes import TINY
from attnlab.core.training import evaluate
from attnlab.exercises import ex05
from attnlab.lessons.classifier import fit_classifier, initial_model, task_reviews, train_classifier
from attnlab.lessons.data import (
    LABELS,
    MAX_LEN,
    NEGATIVE,
    POSITIVE,
    Vocab,
    make_contrast_reviews,
    make_reviews,
)
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.views.plots import accuracy_curves, show_figure
from attnlab.views.widgets import PredictionComparison

attnlab.seed_everything(0)
vocab = Vocab.for_reviews()
d = TINY.d_model  # 32
ENCODINGS = ("learned", "sinusoidal", "rotary", "none")

# %% [markdown]
# ## A shuffled sentence, without positions
#
# Self-attention compares tokens by content alone: shuffle the input and each token meets the same
# partners with the same scores, so its output only moves to its new place. This is **permutation
# equivariance**; mean pooling on top makes the prediction permutation *invariant*. The argument
# does not depend on the weights: untrained models suffice.

# %%
words = "the plot was dull but the cast was superb".split()
x = torch.tensor([vocab.encode(words)])  # (1, T)
perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(attnlab.seed_of(0)))
print("original:", " ".join(words))
print("shuffled:", " ".join(words[i] for i in perm.tolist()))

# %%
change = {}
for positions in ("none", "sinusoidal"):
    torch.manual_seed(attnlab.seed_of(0))
    model = TinyTransformer(len(vocab), positions=positions, dtype=torch.float64).eval()
    with torch.no_grad():
        states = model.encode(x)  # (1, T, d)
        shuffled = model.encode(x[:, perm])  # (1, T, d)
        change[positions] = {"states": (shuffled - states[:, perm]).abs().max().item(),
                             "mean": (shuffled.mean(1) - states.mean(1)).abs().max().item(),
                             "logits": (model(x[:, perm]) - model(x)).abs().max().item()}
    c = change[positions]
    print(f"positions={positions!r:12} largest change of a token state {fmt(c['states'], 3)}, "
          f"of their mean {fmt(c['mean'], 3)}, of a logit {fmt(c['logits'], 3)}")

# %% tags=["remove-cell"]
assert max(change["none"].values()) < 1e-12, "without positions, shuffling only moves the states"
c = change["sinusoidal"]
assert c["states"] > 1 > 10 * c["mean"] and c["logits"] < c["mean"], "the mean moves little"

# %% [markdown]
# Without positions the shuffle only moves the token states; their mean and the logits do not change
# at all. With positions the states change by more than 1, yet their mean moves more than ten times
# less: the same position vectors go to other tokens, and the mean still holds each token and each
# position once.

# %% [markdown]
# ## Two tasks
#
# - **bag**: one sentiment word among filler decides the label, wherever it stands.
# - **contrast** (notebook 03's task): a sentiment word, "but", and a word of the other polarity;
#   the word after "but" decides. Swap the two sentiment words and you get the **twin**: the same
#   words, the opposite label.

# %%
for words, label, _ in make_reviews(2, seed=1):
    print(f"bag       {LABELS[label]:>8}: {' '.join(words)}")
print()
sentiment_words = set(POSITIVE + NEGATIVE)
for words, label, second in make_contrast_reviews(2, seed=1):
    first = next(i for i, w in enumerate(words) if w in sentiment_words)
    twin = list(words)
    twin[first], twin[second] = words[second], words[first]
    print(f"contrast  {LABELS[label]:>8}: {' '.join(words)}")
    print(f"   twin   {LABELS[1 - label]:>8}: {' '.join(twin)}")

# %% [markdown]
# **Predict first.** The same TinyTransformer without positions is trained on the contrast task
# for as long as notebook 03's model. What test accuracy will it reach?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: the model without positions sees each review as a bag of words.
# In the contrast task a review and its twin have the same bag and opposite labels. What test
# accuracy does it reach?

# %%
guess = ...  # your prediction: the contrast task's test accuracy without positions (0 to 1)
### BEGIN SOLUTION
guess = 0.5
### END SOLUTION

# %% [markdown]
# ## The ablation
#
# Notebook 03's TinyTransformer and recipe (float64), with and without learned positions, on both
# tasks. A seed sets the data, initial weights and batch order; runs that comparisons rest on have
# two seeds, the others one. Contrast runs train for the recipe's 12 epochs (learned, seed 0:
# notebook 03's model), bag runs for 3.
#
# Beside each test accuracy: the accuracy under `attnlab.uniform_attention(model)`, where every
# query gives every key the same weight. Does the model need its attention at all?

# %% slideshow={"slide_type": "skip"}
EPOCHS = {"bag": 3, "contrast": TINY.epochs}
runs = {}  # (task, positions) -> one Trained per seed


def train_runs(plan):
    """plan: {(task, positions): seeds}. Train the recipe's TinyTransformer once per seed and
    keep the runs. parallel_map trains them side by side where a core is free (the same
    models as a loop would train, sooner)."""
    jobs = [(task, positions, s) for (task, positions), seeds in plan.items() for s in seeds]
    trained = iter(parallel_map(
        lambda job: train_classifier(job[0], job[1], seed=job[2], epochs=EPOCHS[job[0]]), jobs))
    for key, seeds in plan.items():
        runs[key] = [next(trained) for _ in seeds]


def under_uniform(run):
    """Test accuracy of a trained model when every attention weight is uniform."""
    x, y, _ = run.test.tensors(vocab)  # (400, T), (400,)
    with attnlab.uniform_attention(run.model):
        return evaluate(run.model, x, y)[1]


def show_table(keys):
    """One line per (task, positions): the test accuracy of each seed, and under uniform
    attention; returns {(task, positions): (accuracies, accuracies under uniform attention)}."""
    table = {}
    print(f"{'task':9} {'positions':11} {'test accuracy, per seed':>23}   under uniform attention")
    for key in keys:
        acc = [r.test_accuracy for r in runs[key]]
        uniform = [under_uniform(r) for r in runs[key]]
        table[key] = acc, uniform
        print(f"{key[0]:9} {key[1]:11} {'  '.join(fmt(a, 3) for a in acc):>23}   "
              + "  ".join(fmt(u, 3) for u in uniform))
    return table


# %%
train_runs({("bag", "learned"): (0,), ("bag", "none"): (0, 1),
            ("contrast", "learned"): (0, 1), ("contrast", "none"): (0,)})
table = show_table(runs)

# %% tags=["remove-cell"]
acc = {key: a for key, (a, _) in table.items()}
uniform = {key: u for key, (_, u) in table.items()}
assert min(acc["bag", "learned"] + acc["bag", "none"]) >= 0.98, "both solve the bag task"
assert min(uniform["bag", "learned"] + uniform["bag", "none"]) >= 0.98, "without attention too"
lost = {key: [round(400 * (a - u)) for a, u in zip(acc[key], uniform[key])] for key in acc}
assert max(lost["bag", "learned"] + lost["bag", "none"]) <= 1, "at most one test review of 400"
assert EPOCHS["contrast"] == TINY.epochs, "seed 0's learned run is notebook 03's model"
assert min(acc["contrast", "learned"]) >= 0.97, "learned positions solve the contrast task"
assert abs(acc["contrast", "none"][0] - 0.5) < 0.075, "no positions: chance (3 s.e. of 400)"
# 55 models of this recipe (notebook 03's; training seeds 0-39, and 0-4 under ATTNLAB_SEED 13,
# 17 and 21): uniform attention cost each 8.3 to 55 points, more than 40 in 42 of them
assert min(a - u for a, u in zip(acc["contrast", "learned"], uniform["contrast", "learned"])) > 0.05

# %%
ex05.contrast_without_positions(guess, table["contrast", "none"][0][0])

# %% [markdown]
# Both models solve the bag task, with uniform attention too: there, removing positions "changes
# nothing". On the contrast task learned positions come close to 1 in both seeds and lose much of it
# under uniform attention in each (chance: 0.5): the model needs both. Over 55 models of this recipe
# every one lost at least 8 points, most more than 40. Without positions the model stays near
# chance: it is a *bag-of-words* model, to which "dull but superb" and "superb but dull" are the
# same input, and a review and its twin are equally likely (one seed: the twins below show that no
# seed and no amount of training could do better).
#
# Are the learned runs still learning after 12 epochs?

# %%
def first_epoch_at(history, level=0.9):
    """The first epoch (1, 2, ...) with a test accuracy of at least `level` (None: never)."""
    return next((e for e, a in zip(history["epoch"], history["test_acc"]) if a >= level), None)


plateau = [min(r.history["test_acc"][-5:]) for r in runs["contrast", "learned"]]
print("learned positions, contrast task: first epoch with a test accuracy of at least 0.9:",
      ", ".join(str(first_epoch_at(r.history)) for r in runs["contrast", "learned"]),
      "| lowest test accuracy of the last 5 epochs:", ", ".join(fmt(p, 3) for p in plateau))

# %% tags=["remove-cell"]
assert all(4 <= first_epoch_at(r.history) <= 8 for r in runs["contrast", "learned"]), "mid-way"
# 20 series seeds: the lowest of the last 5 epochs 0.938 to 1.000
assert min(plateau) >= 0.9, "the learned runs are on their plateau for the last 5 epochs"

# %% [markdown]
# Both learned runs pass 0.9 around the middle of the 12 epochs and stay at 0.9 or above for the
# last five: on their plateau.
#
# Why exactly chance without positions? Pair each test review with its twin: a bag-of-words model
# gives both the same answer, so it is right on exactly one of each pair:

# %% slideshow={"slide_type": "skip"}
SENTIMENT = torch.tensor([vocab.stoi[w] for w in POSITIVE + NEGATIVE])


def with_twins(reviews):
    """x (2N, T) and y (2N,): the contrast reviews, then each with its two sentiment words
    swapped (its twin, with the opposite label)."""
    x, y, second = reviews.tensors(vocab)  # (N, T), (N,), (N,)   second = the word after "but"
    rows = torch.arange(len(y))
    before = torch.isin(x, SENTIMENT)  # (N, T)
    before[rows, second] = False
    first = before.int().argmax(1)  # (N,)   the sentiment word before "but"
    twins = x.clone()
    twins[rows, first], twins[rows, second] = x[rows, second], x[rows, first]
    return torch.cat([x, twins]), torch.cat([y, 1 - y])


# %%
on_twins = {}
for positions in ("learned", "none"):
    on_twins[positions] = []
    for r in runs["contrast", positions]:
        x_both, y_both = with_twins(r.test)  # (800, T), (800,)
        on_twins[positions].append(evaluate(r.model, x_both, y_both)[1])
    print(f"{positions:8} accuracy on the {len(y_both)} test reviews and their twins: "
          + "  ".join(fmt(a, 3) for a in on_twins[positions]))

# %% tags=["remove-cell"]
assert on_twins["none"] == [0.5], "a bag-of-words model is right on one twin of each pair"
assert min(on_twins["learned"]) > 0.97

# %% [markdown]
# ## Try it: both models side by side
#
# The seed-0 contrast models. Words outside the vocabulary are marked `?` and read as "unknown". A
# review and its twin:

# %%
compare = PredictionComparison({"learned positions": runs["contrast", "learned"][0].model,
                                "no positions": runs["contrast", "none"][0].model}, vocab,
                               task="contrast")
pair = ["the plot was dull but the cast was superb", "the plot was superb but the cast was dull"]
views = [compare.view(s) for s in pair]
for v in views:
    print(compare.text(v))

# %% tags=["remove-cell"]
p_none = [v["predictions"]["no positions"]["p_positive"] for v in views]
labels = [v["predictions"]["learned positions"]["label"] for v in views]
assert abs(p_none[0] - p_none[1]) < 1e-12, "without positions both orders get the same prediction"
assert labels == ["positive", "negative"], "with positions the word after 'but' decides"

# %% [markdown]
# With positions the twins get opposite answers; without, the same probability. Type your own:
# trained only on "… but …" reviews, outside that form these models answer *not sure*, and say why.

# %%
compare.input.value = pair[0]
display(compare)

# %% [markdown]
# ## The sinusoidal table, and its size
#
# The original Transformer adds a fixed vector to the token at position p:
#
# $$PE[p, 2i] = \sin(p\,\omega_i), \qquad PE[p, 2i+1] = \cos(p\,\omega_i), \qquad
#   \omega_i = 10000^{-2i/d}$$
#
# Each pair of dimensions (2i, 2i + 1) is a point on a circle turning $\omega_i$ radians per
# position: fast in the first pair (1 radian), slowly in the last.

# %% slideshow={"slide_type": "subslide"} tags=["hide-input"]
table = sinusoidal_table(MAX_LEN, d)  # (15, 32)   positions 0..14
fig, ax = plt.subplots(figsize=(8, 3.2))
image = ax.imshow(table.T, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
ax.set_xlabel("position p")
ax.set_ylabel("dimension")
ax.set_title("sinusoidal PE[p, :] for d = 32, one column per position")
fig.colorbar(image, ax=ax, fraction=0.03)
show_figure()

# %% [markdown]
# **Predict first.** How long (its L2 norm) is one of these position vectors, for d = 32? Does it
# depend on the position?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: each column of the picture is one position's vector of 32
# numbers between -1 and 1. How long is it, and is it the same length for every position?

# %%
guess_norm = ...  # your prediction: the norm of one sinusoidal position vector
### BEGIN SOLUTION
guess_norm = 4.0
### END SOLUTION

# %%
norms = table.norm(dim=-1)  # (15,)   one per position
print(f"norms of PE[0] .. PE[{MAX_LEN - 1}]: from {fmt(norms.min(), 3)} to {fmt(norms.max(), 3)}")
ex05.sinusoidal_norm(guess_norm, norms.mean().item())

# %% tags=["remove-cell"]
assert torch.allclose(norms, torch.full_like(norms, 4.0))

# %% [markdown]
# And the vectors they are added to? `TinyTransformer` draws token vectors with standard deviation
# $d^{-1/2}$, learned position vectors with 0.02. Their lengths at the start:

# %%
fresh = {kind: initial_model(len(vocab), kind, seed=0) for kind in ("learned", "sinusoidal")}
vectors = {"token": fresh["learned"].embed.tokens.weight[2:].detach(),  # the words (not PAD, UNK)
           "learned position": fresh["learned"].embed.pos.table[:MAX_LEN].detach(),
           "sinusoidal position": fresh["sinusoidal"].embed.pos.table[:MAX_LEN]}
length = {name: v.norm(dim=-1).mean().item() for name, v in vectors.items()}
for name, v in vectors.items():
    print(f"{name:20} entries: std {fmt(v.std(), 3)}   mean length {fmt(length[name], 2)}")
print(f"{'token × √d':20} mean length {fmt(length['token'] * math.sqrt(d), 2)}")

# %% tags=["remove-cell"]
assert abs(vectors["token"].std() - d ** -0.5) < 0.02
assert abs(vectors["learned position"].std() - LEARNED_POSITION_STD) < 0.005
assert 3 < length["sinusoidal position"] / length["token"] < 5, "about four times as long"
assert 5 < length["token"] / length["learned position"] < 15, "about ten times shorter"

# %% [markdown]
# Sinusoidal vectors are about four times as long as the token vectors; learned ones start about ten
# times shorter. The original Transformer multiplied its small token vectors by $\sqrt{d_{model}}$
# before adding the table; here that makes them longer than the position vectors (last line). First,
# sinusoidal positions on both tasks:

# %%
train_runs({(task, "sinusoidal"): (0, 1) for task in ("bag", "contrast")})
table = show_table([(task, "sinusoidal") for task in ("bag", "contrast")])
reach = {p: [first_epoch_at(r.history) for r in runs["contrast", p]]
         for p in ("learned", "sinusoidal")}
print("contrast task, first epoch with a test accuracy of at least 0.9:",
      "; ".join(f"{p} {', '.join(map(str, e))}" for p, e in reach.items()))

# %% tags=["remove-cell"]
acc = {key: a for key, (a, _) in table.items()}
uniform = {key: u for key, (_, u) in table.items()}
assert min(acc["bag", "sinusoidal"] + acc["contrast", "sinusoidal"]) >= 0.95
lost = {key: [round(400 * (a - u)) for a, u in zip(acc[key], uniform[key])] for key in acc}
assert max(lost["bag", "sinusoidal"]) >= 3, "a sinusoidal bag model loses test reviews"
assert max(uniform["contrast", "sinusoidal"]) < 0.8, "every contrast model needs attention"
# 20 series seeds: sinusoidal 3-5 epochs, learned 5-8; in total 3 to 7 epochs sooner
assert sum(reach["sinusoidal"]) < sum(reach["learned"]), "sinusoidal reach 0.9 sooner"

# %% [markdown]
# Sinusoidal positions solve both tasks (above 0.95), and on the contrast task they reach 0.9
# sooner than learned positions (here both seeds before either learned run; over 20 series seeds,
# on average in each). But on the bag task, where one word decides, these models lose test
# reviews under uniform attention (how many varies from run to run, and a run may lose none);
# learned or no positions lost at most one of 400. Uniform attention tests a trained model, not its
# task: beside position vectors four times their size the words are faint, and these models came to
# rely on attention.
#
# Does that size also slow the bag task, and does multiplying the token vectors by √d before
# training help? Test accuracy per epoch:

# %% slideshow={"slide_type": "subslide"}
def train_rescaled(task, positions, seed, tokens=1.0):
    """train_classifier's run with every token vector multiplied by `tokens` before training;
    returns the history."""
    train, test = task_reviews(task, seed)
    model = initial_model(len(vocab), positions, seed)
    with torch.no_grad():
        model.embed.tokens.weight.mul_(tokens)  # (vocab, d)   each token vector `tokens` x longer
    x_train, y_train, _ = train.tensors(vocab)
    x_test, y_test, _ = test.tensors(vocab)
    return fit_classifier(model, x_train, y_train, x_test, y_test, epochs=EPOCHS[task], seed=seed)


scaled = parallel_map(lambda seed: train_rescaled("bag", "sinusoidal", seed, tokens=math.sqrt(d)),
                      (0, 1))
bag_curves = {"no positions": [r.history for r in runs["bag", "none"]],
              "sinusoidal": [r.history for r in runs["bag", "sinusoidal"]],
              "sinusoidal, tokens × √d": scaled}
for name, histories in bag_curves.items():
    print(f"bag task, {name:24} test accuracy after epochs 1, 2, 3: "
          + " | ".join("  ".join(fmt(a, 3) for a in h["test_acc"]) for h in histories))

# %% tags=["remove-cell"]
after = {name: list(zip(*(h["test_acc"] for h in hs))) for name, hs in bag_curves.items()}
# per seed and epoch 1 or 2: the same data, initial weights (but the scale) and batches; 20
# series seeds: ahead in 75 of 80, behind by at most 0.085, ahead by 0.04 or more on average
ahead = [a - b for epoch in (0, 1) for a, b in zip(after["sinusoidal, tokens × √d"][epoch],
                                                   after["sinusoidal"][epoch])]
assert min(ahead) > -0.15 and sum(ahead) > 0, "rescaled: ahead on average, never far behind"
assert min(after["no positions"][1]) >= 0.98 > max(after["sinusoidal"][1])
assert all(a > b for a, b in zip(after["no positions"][1], after["sinusoidal, tokens × √d"][1]))
assert min(h["test_acc"][2] for hs in bag_curves.values() for h in hs) >= 0.9  # 20 seeds: 0.945+

# %% tags=["hide-input"]
accuracy_curves(bag_curves, chance=0.5, title="bag task: does the size of the words matter?")
show_figure()

# %% [markdown]
# Without positions both seeds are at 0.98 or above after two epochs; with sinusoidal positions
# neither is. Token vectors √d times longer put each seed ahead of its unscaled run (same data,
# weights and batches) after epochs 1 and 2 here (over 20 series seeds, in 75 of 80 such
# comparisons), though still behind the runs without positions after two; after three, every run is at 0.9 or above. This fits the usual explanation (the paper gives
# none): the multiplication keeps the words from being buried under position vectors several times
# their size. Two seeds, one task; try the contrast task with `train_rescaled`.

# %% [markdown]
# ### Explore: learned positions at the size of the words
#
# Learned position vectors start about ten times shorter and must grow before the model can read
# order from them. Does that explain why they reach 0.9 later than sinusoidal ones? Before training,
# scale the learned table to the token vectors' standard deviation, $d^{-1/2}$; train the contrast
# task with seed 0 and find the first epoch at 0.9 or above.

# %% [markdown]
# <details><summary>Hint 1</summary>
#
# `train_rescaled` above scales the token table before training. Do the same to the position
# table, `model.embed.pos.table`, by the factor that turns a standard deviation of
# `LEARNED_POSITION_STD` into $d^{-1/2}$.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Build the untrained model as `train_classifier` would for the contrast task with seed 0, scale
# its position table in place (without recording gradients), train it for a few epochs on the
# same reviews with the same seed (`fit_classifier(..., stop_at=0.9)` stops at the first epoch
# at 0.9), and find the first epoch at 0.9 in the history it returns. The epochs count from 1.
# </details>

# %%
reach_rescaled = ...  # the first epoch (1, 2, ...) with a test accuracy of at least 0.9
### BEGIN SOLUTION
reviews = task_reviews("contrast", seed=0)  # (train, test)
net = initial_model(len(vocab), "learned", seed=0)
net.embed.pos.table.data *= d ** -0.5 / LEARNED_POSITION_STD  # std 0.02 -> d^-1/2
(x_tr, y_tr, _), (x_te, y_te, _) = (part.tensors(vocab) for part in reviews)
curve = fit_classifier(net, x_tr, y_tr, x_te, y_te, seed=0, stop_at=0.9)  # stops at 0.9
reach_rescaled = first_epoch_at(curve)
### END SOLUTION
reach_rescaled = ex05.rescaled_reach(reach_rescaled, reach["learned"][0])

# %% [markdown]
# Compare your epoch with the learned and sinusoidal runs: how much of the gap between them does the
# table's size explain?

# %% [markdown]
# ## Rotary positions: turn the query and the key
#
# Sinusoidal pairs turn by a fixed angle per place, but are *added* to the token vector, and the
# query and key projections mix the two. Rotary position embedding (RoPE) adds nothing; it turns the
# query and key themselves, inside attention: pair i of a query or key at position m turns by the
# angle $m\,\theta_i$, with $\theta_i = 10000^{-2i/d}$.
#
# Write the turn of one pair: the point $(x_1, x_2)$ turned by $a = m\,\theta$ is
# $(x_1 \cos a - x_2 \sin a,\; x_1 \sin a + x_2 \cos a)$.

# %% [markdown]
# <details><summary>Hint 1</summary>
#
# Each row of `pair` sits at its own position, so each row has its own angle: a tensor of angles,
# one per position, not one number.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Compute the angles `m * theta`, their `torch.cos` and `torch.sin`; take `x1 = pair[..., 0]`
# and `x2 = pair[..., 1]`; combine them as in the formula above and `torch.stack` the two new
# numbers on the last dimension.
# </details>

# %%
def my_rotate_pair(pair, m, theta):
    """pair (..., T, 2): the two numbers (x1, x2) of one pair of dimensions of the vectors at
    positions m (T,) (integers); theta: the pair's angle per position. Returns (..., T, 2):
    each pair turned by the angle m * theta."""
    ### BEGIN SOLUTION
    angle = m * theta  # (T,)   one angle per position
    cos, sin = torch.cos(angle), torch.sin(angle)
    x1, x2 = pair[..., 0], pair[..., 1]  # (..., T) each
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., T, 2)
    ### END SOLUTION


rotate_pair = ex05.rotate_pair(my_rotate_pair)

# %% [markdown]
# Turning each pair of a vector with its own $\theta_i$ gives `attnlab.rotary`; a turn changes no
# length:

# %%
T, d_head = 12, 8
v = torch.randn(T, d_head, dtype=torch.float64, generator=torch.Generator().manual_seed(attnlab.seed_of(0)))
thetas = 10000.0 ** -(torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (4,)
by_pairs = torch.cat([rotate_pair(v[:, 2 * i:2 * i + 2], torch.arange(T), thetas[i])
                      for i in range(d_head // 2)], dim=-1)  # (T, d_head)
turned = attnlab.rotary(v)  # (T, d_head)   positions 0..T-1
same = torch.allclose(by_pairs, turned, atol=1e-12)
length_change = (turned.norm(dim=-1) - v.norm(dim=-1)).abs().max().item()
print("pair by pair = attnlab.rotary:", same)
print("every length unchanged (to 1e-12):", length_change < 1e-12)

# %% tags=["remove-cell"]
assert same and length_change < 1e-12

# %% [markdown]
# Why turn q and k? Then the score sees only the distance: turning q by $m\theta$ and k by $n\theta$
# changes their dot product as turning q alone by $(m - n)\theta$ would,
# $(R_m q) \cdot (R_n k) = q \cdot R_{n-m} k$. In an untrained layer, word a asks from position m,
# word b answers from n; if the score depends only on m − n, moving both on by the same number of
# places changes nothing. The same layer without rotary, the sinusoidal table added to the words
# instead:

# %%
n_pos = 16
torch.manual_seed(attnlab.seed_of(0))
a, b = torch.randn(2, 1, 1, d, dtype=torch.float64)  # two token vectors, (1, 1, d) each
layers = {"rotary": draw_float64(MultiHeadAttention(d, 1, rotary=True)),
          "sinusoidal, added": draw_float64(MultiHeadAttention(d, 1))}
pe = sinusoidal_table(n_pos, d).double()  # (16, d)
inputs = {"rotary": (a.expand(1, n_pos, d), b.expand(1, n_pos, d)),  # the words at every position
          "sinusoidal, added": (a + pe, b + pe)}  # (1, 16, d) each
scores, shift_change = {}, {}
with torch.no_grad():
    for name, layer in layers.items():
        q, _, _ = layer.project(inputs[name][0])  # (1, 1, 16, d)   a asking from every position m
        _, k, _ = layer.project(inputs[name][1])  # (1, 1, 16, d)   b answering from every n
        s = (q @ k.transpose(-2, -1))[0, 0] / math.sqrt(d)  # (16, 16)   score of (m, n)
        scores[name] = s
        shift_change[name] = max((s[j:, j:] - s[:-j, :-j]).abs().max().item() / s.std().item()
                                 for j in range(1, n_pos))  # move m and n on by j places
print("largest change of a score when both words move on by the same number of places,")
print(f"  in standard deviations of the scores: rotary below 1e-12: "
      f"{shift_change['rotary'] < 1e-12}; sinusoidal, added: "
      f"{fmt(shift_change['sinusoidal, added'], 2)}")

# %% tags=["remove-cell"]
assert shift_change["rotary"] < 1e-12, "rotary scores depend on m - n only (float precision)"
assert shift_change["sinusoidal, added"] > 2, "added sinusoidal scores depend on m and n"

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, (name, s) in zip(axes, scores.items()):
    ax.imshow(s, cmap="viridis")
    ax.set_title(name)
    ax.set_xlabel("key position n")
    ax.set_ylabel("query position m")
fig.suptitle("score of word a at m against word b at n (untrained layer)")
fig.tight_layout()
show_figure()

# %% [markdown]
# With rotary positions every diagonal of the score matrix holds one value: the score depends on
# m − n alone, to float precision. With the sinusoidal table added, moving both words on changes a
# score by up to several times the scores' standard deviation: the score depends on where each word
# is. Training may or may not learn around that (not measured here); rotary builds it in.
#
# Rotary positions on the contrast task (one run, seed 0: the first learned run's data and batch
# order):

# %%
train_runs({("contrast", "rotary"): (0,)})
table = show_table([("contrast", "rotary")])
reach["rotary"] = [first_epoch_at(r.history) for r in runs["contrast", "rotary"]]
print("first epoch with a test accuracy of at least 0.9:", reach["rotary"][0])

# %% tags=["remove-cell"]
assert table["contrast", "rotary"][0][0] >= 0.99, "rotary solves the contrast task"
assert table["contrast", "rotary"][1][0] < 0.8, "and needs attention to"
assert reach["rotary"][0] > max(reach["learned"]), "later than learned, in this run"

# %% [markdown]
# Rotary positions solve the contrast task too, and need attention to: they act only through it. In
# this one run they reach 0.9 later than either learned run; one run cannot say whether that holds
# in general. All runs:

# %% tags=["hide-input"]
accuracy_curves({p: [r.history for r in runs["contrast", p]]
                 for p in ("learned", "sinusoidal", "rotary", "none")},
                chance=0.5, title="contrast task: test accuracy per epoch")
show_figure()

# %%
table = show_table(sorted(runs, key=lambda key: (key[0], ENCODINGS.index(key[1]))))

# %% tags=["remove-cell"]
# over training seeds 0-23: with positions 0.968-1.000, and under uniform attention 0.448-0.777
# (learned; the smallest loss 0.22), 0.460-0.552 (sinusoidal, rotary); without positions
# 0.438-0.545 both ways, 0.015 apart at most
for p, least in (("learned", 0.05), ("sinusoidal", 0.35), ("rotary", 0.35)):  # "loses more than"
    assert all(a - u > least for a, u in zip(*table["contrast", p])), p
assert all(a < 0.6 and abs(a - u) < 0.05 for a, u in zip(*table["contrast", "none"]))

# %% [markdown]
# ## What we learned
#
# - Without positions, self-attention is permutation-equivariant and, with mean pooling, reads a
#   set: at chance on the contrast task (right on exactly one of each twin pair). On the bag task
#   positions add nothing measurable: test an ablation on a task that needs what was removed.
# - Uniform attention tells whether a trained model needs attention: bag models with learned or no
#   positions do not; every contrast model with positions does (losing over 5 points; sinusoidal and
#   rotary, over 35). Sinusoidal bag models may, in part: a model can rely on attention its task
#   does not need.
# - Sinusoidal position vectors are four times the token vectors' length here; scaling token vectors
#   by √d_model, as the original Transformer does, sped up the bag task in both seeds. On the
#   contrast task sinusoidal positions reached 0.9 before learned ones (both seeds), rotary later
#   (one run).
# - Rotary positions turn q and k: lengths stay, and the score depends only on m − n, to float
#   precision; with an added sinusoidal table it does not.

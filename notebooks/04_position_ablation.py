# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · What positional encodings are for
#
# Notebook 03's model added a learned position vector to every token. Did it need to? Here we
# take the positions away: first we show what self-attention without positions cannot see, then
# we measure it — on notebook 03's task, and on a task built so that only word order decides.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

import attnlab
from attnlab.data import LABELS, MAX_LEN, NEGATIVE, POSITIVE, Vocab, make_order_reviews
from attnlab.models import TinyTransformer
from attnlab.plots import accuracy_curves, mean_spread_bars
from attnlab.train import RECIPE, train_classifier
from attnlab.widgets import PredictionComparison

attnlab.seed_everything(0)

# %% [markdown]
# ## Without positions, attention sees a set
#
# Self-attention compares every token with every other token by content alone. Shuffle the input
# and each token still meets the same partners with the same scores: its output is the same,
# only at its new place. This is **permutation equivariance**, and the mean pooling on top then
# makes the prediction permutation *invariant*. We check it on a random model — the argument does
# not depend on the weights.

# %%
vocab = Vocab.for_reviews()
words = "the acting was great and the ending was awful".split()
x = torch.tensor([vocab.encode(words)])  # (1, T)
perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(0))
print("original:", " ".join(words))
print("shuffled:", " ".join(words[i] for i in perm.tolist()))

diffs = {}
for positions in ("none", "sinusoidal"):
    torch.manual_seed(0)
    model = TinyTransformer(len(vocab), positions=positions).eval()
    with torch.no_grad():
        states, _ = model.encode(x)  # (1, T, d)
        shuffled, _ = model.encode(x[:, perm])  # (1, T, d)
        diffs[positions] = (shuffled - states[:, perm]).abs().max().item()
        logit_diff = (model(x[:, perm]) - model(x)).abs().max().item()
    print(f"positions={positions!r:12}  max |states(shuffled) - shuffled states| = {diffs[positions]:.5f}, "
          f"max |logit change| = {logit_diff:.5f}")
assert diffs["none"] < 1e-5, "without positions, shuffling the input must only shuffle the outputs"
assert diffs["sinusoidal"] > 1e-2, "with positions, shuffling the input must change the outputs"

# %% [markdown]
# So a model without positions is a *bag-of-words* model: it cannot tell "great, not awful"
# from "awful, not great" when the words are the same. Whether that matters depends on the task.
#
# ## Two tasks
#
# - **bag**: notebook 03's reviews — one sentiment word decides; its position is irrelevant.
# - **order**: each review has one positive and one negative word; the label is the polarity of
#   the one that comes **first**. Swapping the two words keeps the bag and flips the label, and
#   both orders are equally likely, so no bag-of-words model can beat 50 %.

# %%
order = make_order_reviews(3, seed=1)
for words, label, pos in zip(*order):
    second = next(i for i, w in enumerate(words) if i > pos and w in POSITIVE + NEGATIVE)
    swapped = list(words)
    swapped[pos], swapped[second] = words[second], words[pos]
    print(f"{LABELS[label]:>8}: {' '.join(words)}")
    print(f"{LABELS[1 - label]:>8}: {' '.join(swapped)}   (same words, swapped)\n")

# %% [markdown]
# ## The ablation
#
# The same TinyTransformer (notebook 03's recipe) with learned positions, sinusoidal positions or
# none, each trained with 3 seeds (data, initial weights and batch order all change with the
# seed). To save time the bag task gets only 4 epochs (the accuracies below show whether that is
# enough); the order task gets the recipe's full 12.

# %%
SEEDS = (0, 1, 2)
VARIANTS = ("learned", "sinusoidal", "none")
EPOCHS = {"bag": 4, "order": RECIPE["epochs"]}
runs = {task: {v: [] for v in VARIANTS} for task in EPOCHS}
for task, epochs in EPOCHS.items():
    for variant in VARIANTS:
        for seed in SEEDS:
            runs[task][variant].append(train_classifier("reviews" if task == "bag" else "order", variant,
                                                        seed=seed, epochs=epochs))
accuracy = {task: {v: [r.test_accuracy for r in runs[task][v]] for v in VARIANTS} for task in runs}

print(f"{'task':6} {'positions':11} {'per seed':>22}   mean ± std")
for task in accuracy:
    for v in VARIANTS:
        a = np.array(accuracy[task][v])
        print(f"{task:6} {v:11} {'  '.join(f'{x:.3f}' for x in a):>22}   {a.mean():.3f} ± {a.std(ddof=1):.3f}")

# %%
mean_spread_bars(accuracy, ylabel="test accuracy (3 seeds)", chance=0.5,
                 title="TinyTransformer with and without positions")
plt.show()

# %% [markdown]
# Bars are means over the seeds, whiskers the lowest and highest run, dots the single runs.

# %%
mean = {task: {v: float(np.mean(accuracy[task][v])) for v in VARIANTS} for task in accuracy}
bag_gap = max(mean["bag"].values()) - min(mean["bag"].values())
if bag_gap < 0.02:
    print(f"bag task: the three variants' mean accuracies lie within {bag_gap:.3f} of each other "
          f"(lowest {min(mean['bag'].values()):.3f}): no real difference. One word decides, wherever it stands, so "
          f"positions have nothing to add — which is why removing them from notebook 03's task changes nothing.")
else:
    print(f"bag task: the variants differ by {bag_gap:.3f} in mean accuracy, although the label does "
          f"not depend on word order.")

none_order = mean["order"]["none"]
with_pos = max(mean["order"]["learned"], mean["order"]["sinusoidal"])
if abs(none_order - 0.5) < 0.05:  # 0.05: about 3.5 standard errors of a coin on 1,200 reviews
    print(f"order task: without positions the model stays at chance ({none_order:.3f}), as the bag "
          f"argument predicts; with positions it reaches {with_pos:.3f}. Here positions are the whole story.")
else:
    n_test = len(SEEDS) * RECIPE["n_test"]
    print(f"order task: without positions the model scores {none_order:.3f}; a coin on {n_test} test "
          f"reviews has a standard error of {0.5 / np.sqrt(n_test):.3f} around 0.5. With positions it "
          f"reaches {with_pos:.3f}.")
assert bag_gap < 0.02, "positions should not matter on the bag task"
assert abs(none_order - 0.5) < 0.05, "without positions the order task is at chance"
assert min(mean["order"]["learned"], mean["order"]["sinusoidal"]) > 0.85, "with positions the order task is learned"

# %% [markdown]
# ## Learned against sinusoidal positions
#
# Both kinds solve the order task. Do they learn it equally fast? The test accuracy after each
# epoch, mean of the 3 seeds with the range shaded:

# %%
accuracy_curves({v: [r.history for r in runs["order"][v]] for v in VARIANTS}, chance=0.5,
                title="order task: test accuracy per epoch")
plt.show()


# %%
def first_epoch_at(histories, level=0.9):
    """First epoch at which the mean test accuracy over the seeds reaches `level` (None: never)."""
    curve = np.mean([h["test_acc"] for h in histories], axis=0)
    return next((e + 1 for e, a in enumerate(curve) if a >= level), None)


reach = {v: first_epoch_at([r.history for r in runs["order"][v]]) for v in ("learned", "sinusoidal")}
for v, e in reach.items():
    print(f"{v:10}: final mean accuracy {mean['order'][v]:.3f}, "
          + (f"mean reaches 0.9 at epoch {e}" if e else "mean never reaches 0.9"))
# the faster one first: earlier epoch to 0.9, then higher final accuracy
faster, slower = sorted(reach, key=lambda v: (reach[v] or math.inf, -mean["order"][v]))
gap = mean["order"][faster] - mean["order"][slower]
if reach[faster] != reach[slower]:
    print(f"{faster} positions learn the order task faster here: the mean reaches 0.9 at epoch "
          f"{reach[faster]} against {reach[slower] or 'never'}; final accuracy {mean['order'][faster]:.3f} "
          f"against {mean['order'][slower]:.3f}.")
elif gap >= 0.02:
    print(f"Both reach 0.9 at the same epoch, but {faster} positions end higher: "
          f"{mean['order'][faster]:.3f} against {mean['order'][slower]:.3f}.")
else:
    print(f"Learned and sinusoidal positions do equally well here (final gap {gap:.3f}, same epoch to 0.9).")

# %% [markdown]
# Why might one kind be faster? A first clue is the size of what each adds to the token vectors
# when training starts (mean vector norm over the positions a review uses):

# %%
torch.manual_seed(0)
fresh = {kind: TinyTransformer(len(vocab), positions=kind) for kind in ("learned", "sinusoidal")}
norm = {"token": fresh["learned"].embed.weight[2:].norm(dim=-1).mean().item()}  # the words (not PAD, UNK)
norm.update({kind: m.pos.table[:MAX_LEN].norm(dim=-1).mean().item() for kind, m in fresh.items()})
print(f"at initialisation: token vector {norm['token']:.2f}, learned position {norm['learned']:.2f}, "
      f"sinusoidal position {norm['sinusoidal']:.2f}")
if reach[faster] == reach[slower]:
    print("Both reach 0.9 at the same epoch: whatever the sizes, here they learn order about equally fast.")
elif faster == "sinusoidal" and norm["learned"] < norm["token"] <= norm["sinusoidal"]:
    print(f"A plausible reason: from the first step the sinusoidal vectors are "
          f"{norm['sinusoidal'] / norm['token']:.1f}× the size of the token vectors, while learned positions "
          f"start at {norm['learned'] / norm['token']:.2f}× and must grow before the model can read order "
          "from them.")
elif faster == "learned":
    smaller = " although they start smaller" if norm["learned"] < norm["sinusoidal"] else ""
    print(f"Learned positions are faster{smaller}: a possible reason, not measured here, is that they are "
          "shaped by this very task, while the fixed table must be decoded by the attention projections.")
else:
    print("The sizes do not explain the difference: sinusoidal positions are faster without starting larger.")

# %% [markdown]
# ## Try it: both models side by side
#
# The seed-0 models of the order task, with learned positions and without. Words outside the
# vocabulary are marked with `?` and read as "unknown". First a fixed pair of sentences with the
# same words in the two orders:

# %%
compare = PredictionComparison({"learned positions": runs["order"]["learned"][0].model,
                                "no positions": runs["order"]["none"][0].model}, vocab)
pair = ["the acting was great and the ending was awful", "the acting was awful and the ending was great"]
views = [compare.view(s) for s in pair]
for v in views:
    print(compare.text(v), "\n")
p_none = [v["predictions"]["no positions"]["p_positive"] for v in views]
p_pos = [v["predictions"]["learned positions"]["p_positive"] for v in views]
assert abs(p_none[0] - p_none[1]) < 1e-5, "without positions both orders must get the same prediction"
print(f"|change of P(positive)| when the order flips: learned positions {abs(p_pos[0] - p_pos[1]):.3f}, "
      f"no positions {abs(p_none[0] - p_none[1]):.3f}")

# %% [markdown]
# Now type your own (any text works; only the vocabulary's words carry meaning):

# %%
compare.input.value = pair[0]
display(compare)

# %% [markdown]
# ## What we learned
#
# - Self-attention without positions is permutation-equivariant; with mean pooling the model is a
#   bag-of-words model.
# - On a task a bag of words can solve, positions add nothing measurable; on a task decided by
#   order they are the difference between chance and a solved task.
# - So "removing positions made no difference" is a statement about the task, not about the
#   model: always test an ablation on a task that needs the removed part.

# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · A pre-trained CNN, and attention over what it sees
#
# MobileNetV2, a convolutional network (CNN) trained to classify ImageNet photographs, turns
# each image into 1,280 numbers, an *embedding*. **Without training it**, we search with its
# embeddings, read the search as attention, then let a small Transformer find the odd image in a
# **set** of them.

# %% [markdown]
# ## What you will learn
#
# - how a frozen pre-trained CNN's embeddings compare with raw pixels for search, on centred and
#   moved images;
# - that a soft nearest-neighbour vote, softmax(cos / τ), *is* attention, and what τ does;
# - to train a Transformer encoder without positions to find the odd image in a set, and check
#   that it treats its input as a set;
# - to test whether it needs its attention before reading the weights, and what its heads do
#   with the odd image;
# - optional ("Going further"): random weights, five results per search, other set sizes.
#
# Assumes: notebooks 01-04 and the cosine of two vectors.

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

import attnlab
from attnlab.core.measures import target_roles
from attnlab.exercises import ex06
from attnlab.lessons import retrieval, sets
from attnlab.lessons.retrieval import CLASS_NAMES
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.pretrained.embeddings import mobilenet_v2, pixel_features, preprocess
from attnlab.views.plots import BLUE, VERMILION, attention_heatmap, show_figure

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The data
#
# `attnlab.load_fashion_mnist()` returns Fashion-MNIST (Zalando Research, MIT licence) as
# `keras.datasets.fashion_mnist.load_data()` does: 28×28 grey photos of ten kinds of clothing,
# shoes and bags. We use the first 4,000 training and 1,000 test images.

# %%
(x_train, y_train), (x_test, y_test) = attnlab.load_fashion_mnist()
x_train, y_train = x_train[:4000], y_train[:4000]   # (4000, 28, 28) uint8, (4000,)
x_test, y_test = x_test[:1000], y_test[:1000]       # (1000, 28, 28) uint8, (1000,)
print(f"training {x_train.shape}, test {x_test.shape}, grey levels 0-255")
print("classes:", ", ".join(CLASS_NAMES))
print("test images per class:", np.bincount(y_test).tolist())

# %% tags=["remove-cell"]
assert set(np.unique(y_train)) == set(np.unique(y_test)) == set(range(10))

# %% [markdown]
# ## 2 · What a pre-trained CNN gives: an embedding
#
# MobileNetV2 at width α = 0.35 (about 35 % of the original channels in every layer but the
# last), from `keras.applications` with its ImageNet weights, without its classifier: its last
# feature map is averaged over positions into 1,280 numbers. ImageNet has garment and shoe
# classes, but the network **never saw Fashion-MNIST's 28×28 grey product shots**.
#
# Each image is resized to 96×96 to save CPU time (the network was trained at 224×224), copied
# into three colour channels and scaled from [0, 255] to [−1, 1], like its training images.

# %% slideshow={"slide_type": "subslide"} tags=["hide-input"]
network = mobilenet_v2(0.35)
print(f"MobileNetV2 alpha=0.35: {network.count_params():,} weights, "
      f"input {network.input_shape[1:]}, embedding {network.output_shape[1:]}")
moved = retrieval.shift(x_test[:1], 3, seed=4)[0]                       # (28, 28)
fig, axes = plt.subplots(1, 3, figsize=(8, 3))
for ax, image, title in ((axes[0], x_test[0], f"28×28 original ({CLASS_NAMES[y_test[0]]})"),
                         (axes[1], preprocess(x_test[:1])[0, 0].numpy(), "what the CNN reads"),
                         (axes[2], moved, "moved 3 pixels")):
    ax.imshow(image, cmap="gray")
    ax.set_title(title, fontsize=11)
    ax.axis("off")
plt.tight_layout()
show_figure()

# %% [markdown]
# The rival is **raw pixels**: each image as the vector of its 784 grey levels.

# %%
train_emb = attnlab.embed_images(x_train)                           # (4000, 1280)
test_emb = attnlab.embed_images(x_test)                             # (1000, 1280)
train_pix, test_pix = pixel_features(x_train), pixel_features(x_test)  # (4000, 784), (1000, 784)
print(f"MobileNetV2 embeddings: training {train_emb.shape}, test {test_emb.shape}")
print(f"raw pixels:             training {train_pix.shape}, test {test_pix.shape}")

# %% [markdown]
# ## 3 · Retrieval by cosine
#
# For a query $q$ and a database item $d$,
# $\cos(q, d) = \frac{q \cdot d}{\lVert q\rVert\,\lVert d\rVert}$; the nearest neighbour is the
# item with the largest cosine. The **database** is the first 1,000 training images, the
# **queries** the 1,000 test images. **Top-1** is the share of queries whose nearest neighbour
# has their label; chance, what a random database image scores,
# $\sum_c P_{\text{query}}(c)\,P_{\text{database}}(c)$.

# %%
db_emb, db_pix, db_y = train_emb[:1000], train_pix[:1000], y_train[:1000]
nearest_cnn = retrieval.nearest_neighbours(test_emb, db_emb)[:, 0]   # (1000,) database indices
nearest_pix = retrieval.nearest_neighbours(test_pix, db_pix)[:, 0]
hit_cnn, hit_pix = db_y[nearest_cnn] == y_test, db_y[nearest_pix] == y_test   # (1000,) right?
chance = retrieval.chance_top1(y_test, db_y)
print(f"top-1: MobileNetV2 {fmt(hit_cnn.mean(), 3)}, raw pixels {fmt(hit_pix.mean(), 3)}, "
      f"chance {fmt(chance, 3)}")

# %% [markdown]
# Is the difference more than luck? Only queries where exactly one search is right decide it;
# were the two equally good, each would fall like a coin, giving a standard error of
# $\sqrt{n_{\text{only CNN}} + n_{\text{only pixels}}}\,/\,1000$.

# %%
def paired(right_a, right_b):
    """(difference in accuracy a − b, its standard error) of two classifiers on the same items,
    each item scored 1 (right), 0 (wrong) or 0.5 (a near-tie, `retrieval.top1_scores`)."""
    d = np.asarray(right_a, dtype=float) - np.asarray(right_b, dtype=float)  # (N,)
    return d.sum() / len(d), np.sqrt((d ** 2).sum()) / len(d)


diff, se = paired(hit_cnn, hit_pix)
print(f"top-1 difference (MobileNetV2 − pixels): {fmt(diff, 3, sign=True)} ± {fmt(se, 3)}")

# %% tags=["remove-cell"]
assert min(hit_cnn.mean(), hit_pix.mean()) > 5 * chance
assert abs(diff) < 2 * se, "the prose says: level"

# %% [markdown]
# Less than two standard errors: on centred images the two are **level**. Real images are rarely
# centred: move each query 3 pixels up, down, left or right (a random direction each; the
# database stays) and search again.

# %%
x_moved = retrieval.shift(x_test, 3, seed=1)                  # (1000, 28, 28)
moved_emb, moved_pix = attnlab.embed_images(x_moved), pixel_features(x_moved)
moved_cnn = db_y[retrieval.nearest_neighbours(moved_emb, db_emb)[:, 0]] == y_test   # (1000,)
moved_pix_hit = db_y[retrieval.nearest_neighbours(moved_pix, db_pix)[:, 0]] == y_test
print(f"top-1, queries moved 3 pixels: MobileNetV2 {fmt(moved_cnn.mean(), 3)} "
      f"(centred {fmt(hit_cnn.mean(), 3)}), raw pixels {fmt(moved_pix_hit.mean(), 3)} "
      f"(centred {fmt(hit_pix.mean(), 3)})")

# %% tags=["remove-cell"]
assert hit_cnn.mean() - moved_cnn.mean() < 0.06, "MobileNetV2 keeps most of its right answers"
assert hit_pix.mean() - moved_pix_hit.mean() > hit_pix.mean() / 4, "more than a quarter"
assert paired(moved_cnn, moved_pix_hit)[0] > 4 * paired(moved_cnn, moved_pix_hit)[1]

# %% [markdown]
# The move costs the embedding a few right answers and the pixel search more than a quarter:
# pixel cosine compares grey levels place by place, and a moved shoe has other grey levels in
# most places.

# %% [markdown]
# ## 4 · Retrieval is attention
#
# Let the whole database vote, each item weighted by its similarity to the query:
#
# $$w_{i} = \text{softmax}_i\!\left(\frac{\cos(q, d_i)}{\tau}\right), \qquad
#   p(c \mid q) = \sum_i w_i \,[\text{label}_i = c].$$
#
# This is attention: the **query** is the test image's embedding, the **keys** the database
# embeddings, the **values** the labels as *one-hot* vectors (10 numbers, a 1 at the label's
# class), the output a probability per class. With unit-length embeddings, q·k *is* the cosine.
# It is Nadaraya–Watson kernel regression (1964); with softmax weights, a *soft*
# k-nearest-neighbour classifier.
#
# The **temperature** τ divides the scores, like √d_k in notebook 02: a small τ makes the
# softmax pick the top item, a large τ flattens it.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Implement it** with `attnlab.scaled_dot_product_attention` and `scale=1 / tau`: normalise the
# rows of queries and database, turn the labels into one-hot values, attend.
#
# <details><summary>Hint 1</summary>
#
# Three tensors go in: which one holds the labels, and what shape must it have so that the
# output is one probability per class?
# </details>
# <details><summary>Hint 2</summary>
#
# `F.normalize(x, dim=1)` scales each row to length 1; `F.one_hot(labels, 10)` gives an `(N, 10)`
# integer table: convert it with `.to(q.dtype)`. Return the `(output, weights)` pair that
# `scaled_dot_product_attention` returns.
# </details>

# %%
def my_soft_knn(queries, database, labels, tau):
    """queries (N_q, D), database (N_d, D) float, labels (N_d,) int, tau > 0 ->
    (class probabilities (N_q, 10), weights (N_q, N_d))"""
    ### BEGIN SOLUTION
    q = F.normalize(queries, dim=1)        # (N_q, D) unit rows: q·k is the cosine
    k = F.normalize(database, dim=1)       # (N_d, D) keys
    v = F.one_hot(labels, 10).to(q.dtype)  # (N_d, 10) values: one-hot labels
    return attnlab.scaled_dot_product_attention(q, k, v, scale=1 / tau)  # (N_q, 10), (N_q, N_d)
    ### END SOLUTION


soft_knn = ex06.soft_knn(my_soft_knn)

# %% [markdown]
# The two limits on the embeddings: τ = 10⁻⁶, and τ = 10, where all cosines divide down to
# nearly the same score.

# %%
Q, K = torch.from_numpy(test_emb).double(), torch.from_numpy(db_emb).double()  # (1000, 1280) each
labels = torch.from_numpy(db_y).long()                                        # (1000,)
one_nn = labels[torch.from_numpy(nearest_cnn)]                                # (1000,) 1-NN's answers
cold, cold_w = soft_knn(Q, K, labels, 1e-6)     # (1000, 10), (1000, 1000)
hot, hot_w = soft_knn(Q, K, labels, 10.0)
common = int(np.bincount(db_y).argmax())        # the database's most common class
print(f"τ = 1e-6: largest weight per query {fmt(cold_w.max(1).values.mean(), 2)} on average; "
      f"answers equal to 1-NN's: {int((cold.argmax(1) == one_nn).sum())} of 1000")
print(f"τ = 10:   largest weight ≤ {fmt(hot_w.max() * len(db_y), 2)} × uniform (1/1000); answer "
      f"{CLASS_NAMES[common]!r} (most common in the database) for "
      f"{int((hot.argmax(1) == common).sum())} of 1000")

# %% tags=["remove-cell"]
assert torch.equal(cold.argmax(1), one_nn), "τ → 0 is 1-NN"
assert (hot.argmax(1) == common).all(), "τ → ∞ answers the most common class"

# %% [markdown]
# As τ → 0 the soft vote gives 1-NN's answer for every query; as τ grows the weights turn
# nearly uniform and every query gets the database's most common class: uniform weights give
# the *mean* of the values, the class frequencies. The default 1/√d_k would be τ = √1280 ≈ 36,
# made for dot products of unit-variance entries (02), not cosines in [−1, 1].

# %% [markdown] slideshow={"slide_type": "subslide"}
# Top-1 and the peak weight across τ, for both search spaces:

# %%
taus = np.geomspace(1e-3, 10, 9)
P, PK = torch.from_numpy(test_pix).double(), torch.from_numpy(db_pix).double()  # (1000, 784) each
curve = {"MobileNetV2": [], "raw pixels": []}   # per τ: (top-1, mean largest weight)
for tau in taus:
    for name, (queries, keys) in (("MobileNetV2", (Q, K)), ("raw pixels", (P, PK))):
        probs, weights = soft_knn(queries, keys, labels, tau)
        curve[name].append(((probs.argmax(1).numpy() == y_test).mean(),
                            weights.max(1).values.mean().item()))
print(f"{'τ':>7} {'MobileNetV2':>12} {'raw pixels':>11}   top-1 of the soft vote")
for i, tau in enumerate(taus):
    print(f"{tau:>7.3g} " + " ".join(fmt(curve[name][i][0], 3).rjust(w)
                                     for name, w in (("MobileNetV2", 12), ("raw pixels", 11))))

# %% tags=["remove-cell"]
for name, one in (("MobileNetV2", hit_cnn), ("raw pixels", hit_pix)):
    assert abs(curve[name][0][0] - one.mean()) <= 0.002, "τ = 0.001 is nearly 1-NN"
    assert curve[name][-1][0] == (y_test == common).mean()
    assert max(acc for acc, _ in curve[name]) > one.mean(), "a soft vote beats 1-NN somewhere"

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for (name, points), (colour, mark, guide) in zip(curve.items(), ((BLUE, "o-", ":"),
                                                                  (VERMILION, "s--", "-."))):
    axes[0].plot(taus, [a for a, _ in points], mark, color=colour, label=f"{name}: soft vote")
    axes[0].axhline(points[0][0], color=colour, ls=guide, lw=1.5, label=f"{name}: 1-NN")
    axes[1].plot(taus, [w for _, w in points], mark, color=colour, label=name)
axes[0].axhline(chance, color="gray", ls="--", lw=1, label="chance")
axes[0].set(xscale="log", xlabel="temperature τ", ylabel="top-1", ylim=(0, 1),
            title="softmax(cos / τ) · labels")
axes[0].legend(fontsize=10, loc="lower left")
axes[1].axhline(1 / len(db_y), color="gray", ls="--", lw=1, label="uniform (1/1000)")
axes[1].set(xscale="log", yscale="log", xlabel="temperature τ", ylabel="mean largest weight",
            title="how peaked is the softmax?")
axes[1].legend(fontsize=10)
plt.tight_layout()
show_figure()

# %% [markdown]
# Both curves start at 1-NN's top-1, rise a little above it where a handful of close neighbours
# share the weight, and fall to the most common class's share as the weights turn uniform. The
# best τ is read off the test queries, so its gain is flattered: an honest choice uses held-out
# queries.

# %% [markdown]
# ## 5 · Attention over a set: the odd one out
#
# Without positions, attention sees a set (notebook 05); we use that on purpose, as the UvA
# deep-learning course does with a ResNet. Which image of a **set** of 10, nine of one class and
# one of another in random order, does not belong? Chance is 1 in 10. Training sets are drawn
# from the training images, test sets from the test images.

# %%
train_sets, train_odd = sets.odd_one_out(y_train, 30000, seed=1)  # (30000, 10), (30000,)
test_sets, test_odd = sets.odd_one_out(y_test, 1000, seed=2)      # (1000, 10) indices, (1000,)
print(f"training sets {tuple(train_sets.shape)}, test sets {tuple(test_sets.shape)}; "
      f"the odd image of the first test set is at position {int(test_odd[0])}")

# %% tags=["hide-input"]
def show_sets(rows, images, members, odd):
    fig, axes = plt.subplots(len(rows), 10, figsize=(10, 1.45 * len(rows)), squeeze=False,
                             gridspec_kw=dict(wspace=0.06, hspace=0.35))
    for r, i in enumerate(rows):
        majority = y_test[members[i, (int(odd[i]) + 1) % 10]]
        for j in range(10):
            ax = axes[r, j]
            ax.imshow(images[members[i, j]], cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
            if j == int(odd[i]):  # a red frame, and a word: not colour alone
                for spine in ax.spines.values():
                    spine.set_edgecolor("red")
                    spine.set_linewidth(3)
                ax.set_xlabel("odd", fontsize=11)
        axes[r, 0].set_ylabel(f"set {i}", fontsize=11)
        axes[r, 9].set_title(f"9 × {CLASS_NAMES[majority]}, odd: "
                             f"{CLASS_NAMES[y_test[members[i, int(odd[i])]]]}",
                             fontsize=11, loc="right")
    fig.subplots_adjust(left=0.04, right=0.99, top=0.9, bottom=0.02)
    show_figure()


show_sets([0, 1, 2], x_test, test_sets, test_odd)

# %% [markdown]
# **The model** (`attnlab.core.models.OddOneOut`): a LayerNorm without parameters puts each image's
# features on one scale (pixels reach 255, embeddings 6); a fixed projection onto their 64
# **main directions** (the training images' principal components) and a linear layer bring them
# to 32 numbers; then **one `EncoderBlock`** (4 heads, no positional encoding; every image
# attends to all of its set, itself included), and a linear layer scores each image.

# %% [markdown] slideshow={"slide_type": "subslide"}
# The loss treats the 10 positions as 10 classes:
#
# ```python
# scores = model(features[members[batch]])     # (64, 10): a score per image
# loss = F.cross_entropy(scores, odd[batch])   # the odd image's position is the class
# ```
#
# `sets.train_odd_one_out` trains with Adam (learning rate 10⁻³, batches of 64), once over
# 30,000 training sets. The seed sets the first weights and the batch order: we train **three**
# (seeds 0, 1 and 2) and believe only what all three show.

# %%
SEEDS = (0, 1, 2)
# parallel_map trains them side by side where a core is free: the same models, sooner
*models, pixel_model = parallel_map(  # the last: the same recipe on raw pixels, seed 0
    lambda run: sets.train_odd_one_out(run[0], train_sets, train_odd, seed=run[1]),
    [(train_emb, s) for s in SEEDS] + [(train_pix, 0)])
model = models[0]  # seed 0's model: the pictures and the exercises below use it
per_seed = [(sets.predict(m, test_emb, test_sets) == test_odd).double().mean().item()
            for m in models]
right = {"cnn": sets.predict(model, test_emb, test_sets) == test_odd,                # (1000,)
         "pixels": sets.predict(pixel_model, test_pix, test_sets) == test_odd,
         "mean": sets.farthest_from_mean(test_emb, test_sets) == test_odd}
accuracy = {name: r.double().mean().item() for name, r in right.items()}
print(f"{sum(p.numel() for p in model.parameters()):,} weights; test accuracy on 1,000 sets:")
print("  set model, MobileNetV2 features   "
      + ", ".join(f"{fmt(a, 3)} (seed {s})" for s, a in zip(SEEDS, per_seed)))
print(f"  set model, raw pixels             {fmt(accuracy['pixels'], 3)} (seed 0)")
print(f"  no attention (farthest from mean) {fmt(accuracy['mean'], 3)}")
print(f"  chance (1 in 10)                  {fmt(0.1, 3)}")

# %% tags=["remove-cell"]
assert min(per_seed) >= 0.8, "more than 8 in 10 sets, every seed"
assert max(per_seed) - min(per_seed) < 0.05, "within a few points of each other"
assert accuracy["mean"] < min(per_seed) - 0.15 and accuracy["mean"] > 3 * 0.1

# %% [markdown]
# The no-attention rule picks the image whose MobileNetV2 embedding has the lowest cosine to its
# set's mean. All three set models beat it by far and lie within a few points of each other.
# Does the pre-trained embedding matter? Seed 0's two models, centred and moved 3 pixels:

# %%
diff, se = paired(right["cnn"].numpy(), right["pixels"].numpy())
moved_acc = {"cnn": (sets.predict(model, moved_emb, test_sets) == test_odd).double().mean(),
             "pixels": (sets.predict(pixel_model, moved_pix, test_sets) == test_odd).double().mean()}
print(f"centred images: MobileNetV2 − pixels {fmt(diff, 3, sign=True)} ± {fmt(se, 3)}")
print(f"images moved 3 pixels: MobileNetV2 {fmt(moved_acc['cnn'], 3)}, "
      f"raw pixels {fmt(moved_acc['pixels'], 3)}")

# %% tags=["remove-cell"]
assert abs(diff) < 0.05, "within a few points on centred images"
assert accuracy["cnn"] - moved_acc["cnn"] < 0.1 and accuracy["pixels"] - moved_acc["pixels"] > 0.3

# %% [markdown]
# Centred, the two are within a few points; moved, the pixel model drops by more than 0.3, the
# embedding model by less than 0.1, as in retrieval.
#
# **It treats its input as a set.** Without positional encoding, permuting a set's images must
# permute its scores and change nothing else (notebook 05). On every test set:

# %%
x = torch.from_numpy(test_emb).double()[test_sets]               # (1000, 10, 1280)
order = torch.randperm(10, generator=torch.Generator().manual_seed(attnlab.seed_of(0)))
with torch.no_grad():
    scores, permuted = model(x), model(x[:, order])               # (1000, 10) each
gap = (permuted - scores[:, order]).abs().max().item()
print(f"order {order.tolist()}: scores of the permuted sets = the scores permuted, "
      f"to 12 decimals: {gap < 1e-12}")

# %% tags=["remove-cell"]
assert gap < 1e-12 and not torch.equal(order, torch.arange(10))

# %% [markdown]
# ### Does it need its attention?
#
# Before reading the weights we take them away, as in notebook 03: under
# `attnlab.uniform_attention(model)` every image gives each image of its set the weight 1/10.
#
# **Predict first.** What test accuracy does the MobileNetV2 set model keep with uniform
# attention?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: in notebook 03 uniform weights cost the model much of its accuracy. Here?
# Remind them what the weights become: 1/10 each, so every image receives the same vector.

# %%
guess = ...  # your prediction: the test accuracy with uniform weights, between 0 and 1
### BEGIN SOLUTION
guess = 0.7
### END SOLUTION

# %%
with attnlab.uniform_attention(model):
    right["uniform"] = sets.predict(model, test_emb, test_sets) == test_odd
accuracy["uniform"] = right["uniform"].double().mean().item()
diff, se = paired(right["cnn"].numpy(), right["uniform"].numpy())
print(f"seed 0: test accuracy {fmt(accuracy['cnn'], 3)} with its weights, "
      f"{fmt(accuracy['uniform'], 3)} with uniform weights (difference {fmt(diff, 3)} ± {fmt(se, 3)})")
ex06.uniform_accuracy(guess, accuracy["uniform"])

# %% [markdown]
# The same test on all three models, and with **one head at a time** made uniform
# (`attnlab.uniform_attention(attn, heads=[h])`, the other three untouched):

# %%
def right_of(m, heads=()):
    """Which test sets model m gets right (1000,), with `heads` of its attention made uniform
    (None: all of them; (): none)."""
    with attnlab.uniform_attention(m.block.attn, heads=heads):
        return sets.predict(m, test_emb, test_sets) == test_odd


rights = {s: {"trained": right_of(m), "uniform": right_of(m, None),
              **{h: right_of(m, [h]) for h in range(4)}} for s, m in zip(SEEDS, models)}
ablation = {s: {k: r.double().mean().item() for k, r in row.items()} for s, row in rights.items()}
print(f"{'seed':<6}{'trained':>9}{'uniform':>9}" + "".join(f"{'head ' + str(h):>9}" for h in range(4))
      + "   (accuracy with that head alone made uniform)")
for s, row in ablation.items():
    print(f"{s:<6}" + "".join(f"{fmt(v, 3):>9}" for v in row.values()))

# %% tags=["remove-cell"]
assert accuracy["uniform"] > 0.5 and diff > 2 * se, "far above chance, below trained"
spread = [max(row["trained"] - row[h] for h in range(4)) < (row["trained"] - row["uniform"]) / 2
          for row in ablation.values()]  # any one head costs less than half of what all four do
assert min(row["uniform"] for row in ablation.values()) > 0.5
assert sum(spread) >= 2, "in most models no single head carries it"
for row in rights.values():
    cost, cost_se = paired(row["trained"].numpy(), row["uniform"].numpy())
    assert cost > 2 * cost_se, "every seed needs its attention"

# %% [markdown]
# Far above chance, yet below the trained model in every seed, by more than two standard
# errors of the paired difference; by how much varies from seed to seed. Uniform weights are
# not "no attention": each image still receives its set's **mean** (nine of a kind, one other),
# which already points at the odd one; the learned weights add the rest. In all three models
# here no single head does the job: any one head made uniform costs less than half of what all
# four cost.

# %% [markdown]
# ### Where does the attention go?
#
# The first two test sets, each of the 4 heads: row = query, column = key, weight × 10
# (1 = uniform); the odd image's position is red.

# %% slideshow={"slide_type": "subslide"} tags=["hide-input"]
(weights,) = attnlab.attention_maps(model, x)                     # (1000, 4, 10, 10)
for i in (0, 1):
    fig, axes = plt.subplots(1, 4, figsize=(10, 2.7))
    for h, ax in enumerate(axes):
        attention_heatmap(weights[i, h] * 10, range(10), range(10), ax=ax, vmax=5,
                          title=f"set {i}, head {h}", highlight=int(test_odd[i]))
        ax.get_yticklabels()[int(test_odd[i])].set_color("red")
        ax.tick_params(labelsize=10, labelrotation=0)
    plt.tight_layout()
    show_figure()

# %% [markdown]
# Over the 1,000 test sets, two scores per head for the odd image, both × 10: **from the
# others**, the mean weight the other 9 images give it (its column, without its own entry), and
# **on itself**, its weight on itself (one entry of its row). Write them:
#
# <details><summary>Hint 1</summary>
#
# `weights[b, h, i, j]` is what query `i` gives key `j`. What the odd image receives runs along
# one axis, what it gives along the other; its weight on itself is where they cross.
# </details>
# <details><summary>Hint 2</summary>
#
# Index with `rows = torch.arange(B)` and `odd` together: `weights[rows, :, :, odd]` is (B, H, 10).
# Subtract the diagonal entry, divide by 9, multiply by 10, average over the sets.
# </details>

# %%
def my_target_roles(weights, odd):
    """weights (B, H, T, T), odd (B,) -> (from_others (H,), on_itself (H,)), both × T."""
    ### BEGIN SOLUTION
    B, H, T, _ = weights.shape
    rows = torch.arange(B)
    column = weights[rows, :, :, odd]                  # (B, H, T) what each image gives it
    own = weights[rows, :, odd, odd]                   # (B, H) what it gives itself
    from_others = (column.sum(-1) - own) / (T - 1)     # (B, H) mean over the other T - 1
    return (from_others * T).mean(0), (own * T).mean(0)
    ### END SOLUTION


roles = ex06.target_roles(my_target_roles)

# %% [markdown]
# `attnlab.core.measures.target_roles` adds the **hit rate**, how often the odd image is the one the
# others attend to most (a head picking at random scores the base rate, 1 in 10), and, for
# comparison, the majority images' weight on *themselves*.

# %%
from_others, on_itself = roles(weights, test_odd)
scores = target_roles(weights, test_odd)
print(f"seed 0 {'head':<29}" + "".join(f"{h:>7}" for h in range(4)))
for label, values in (("odd image: from the others × 10", from_others),
                      ("  hit rate (base rate 0.100)", scores["hit_rate"]),
                      ("odd image: on itself × 10", on_itself),
                      ("majority images: on themselves × 10", scores["others_on_themselves"])):
    print(f"{label:<36}" + "".join(f"{fmt(v, 3):>7}" for v in values))

# %% tags=["remove-cell"]
assert torch.allclose(from_others, scores["from_others"]) and torch.allclose(on_itself,
                                                                             scores["on_itself"])

# %% [markdown]
# A fact about the task, or about seed 0's model? All three models, each head named by what it
# does: the highest **hit rate**, and the most weight the odd image keeps **on itself**, beside
# what the majority images keep on themselves there.

# %%
roles_by_seed = {}
for s, m in zip(SEEDS, models):
    (w,) = attnlab.attention_maps(m, x)                            # (1000, 4, 10, 10)
    r = target_roles(w, test_odd)
    read, keeps = int(r["hit_rate"].argmax()), int(r["on_itself"].argmax())
    roles_by_seed[s] = (read, keeps, r)
    print(f"seed {s}: most read = head {read} (hit rate {fmt(r['hit_rate'][read], 3)}); "
          f"keeps most on itself = head {keeps} ({fmt(r['on_itself'][keeps], 3)} × 10, the "
          f"majority {fmt(r['others_on_themselves'][keeps], 3)})")

# %% tags=["remove-cell"]
for _, keeps, r in roles_by_seed.values():
    assert r["on_itself"][keeps] > 1.2 * r["others_on_themselves"][keeps], "keeps it, every seed"

# %% [markdown]
# In every model some head has the odd image keep more than 1.2 times the weight on itself that
# a majority image keeps on itself (how much more varies by model): a difference the score can
# read. The hit rate, and which head does what, vary from model to model, so we name heads by
# what they do.

# %% tags=["remove-cell"]
quoted = {"1-NN": (hit_cnn.mean(), 0.764), "1-NN pixels": (hit_pix.mean(), 0.771),
          "chance": (chance, 0.100)}  # the same images whatever the seed
assert all(fmt(value, 3) == f"{shown:.3f}" for value, shown in quoted.values()), quoted

# %% [markdown]
# ## What we learned
#
# - A frozen ImageNet network puts Fashion-MNIST images of a kind together: 1-NN top-1 0.764
#   (chance 0.100), level with raw pixels (0.771) on centred images; with queries moved 3 pixels,
#   it kept most of its right answers, pixels lost more than a quarter.
# - Retrieval is attention: softmax(cos / τ) over one-hot labels gave 1-NN's answer at
#   τ = 10⁻⁶ and the most common class at τ = 10 (nearly uniform weights), for all 1,000
#   queries.
# - Without positions, one encoder block found the odd image in more than 8 of 10 test sets with
#   each of three seeds, well above the no-attention rule; permuting a set permuted its scores,
#   to float precision. A raw-pixel model came within a few points centred, but lost more than
#   0.3 moved 3 pixels, the embedding model less than 0.1.
# - Uniform attention cost every seed accuracy but left far more than chance: the set's mean
#   carries much of it. In all three here any one head made uniform cost less than half of that;
#   which head does what changes with training.

# %% [markdown]
# ## Going further
#
# Optional: nothing on the main line needs it. The same network with random weights asks where
# the tolerance of moves comes from; five results per search score retrieval another way; and
# an explore exercise runs the set model on sets of other sizes.

# %% [markdown]
# ### Random weights: the pre-training, or the architecture?
#
# In section 3, moving the queries 3 pixels cost MobileNetV2's search a few right answers and
# the pixel search more than a quarter of its own. Is that tolerance of moves the
# **pre-training's**, or the **architecture's**? A CNN slides each filter over every position
# and averages its last feature map over positions, whatever its weights. The control: the same
# MobileNetV2, built by Keras with **random weights** (`weights=None`, Keras's own initialisers:
# `attnlab.embed_images(x, seed=s)`), three draws, in the same search. A random network
# embeds as slowly as the trained one, so every row below uses the first 500 database images and
# the first 300 queries, centred and moved as in section 3. (A query whose best match of its kind
# and best of another kind are a near-tie counts half: the last bits of a random network's
# features, which differ between CPUs, would decide it.)

# %%
q300, db500 = slice(300), slice(500)
control = {"ImageNet weights": retrieval.top1_centred_and_moved(
    test_emb[q300], moved_emb[q300], db_emb[db500], y_test[q300], db_y[db500])}
random_weights = retrieval.random_weights_control(
    x_test[q300], x_moved[q300], x_train[db500], y_test[q300], db_y[db500], seeds=(0, 1, 2))
control.update({f"random weights, seed {s}": r for s, r in random_weights.items()})
control["raw pixels"] = retrieval.top1_centred_and_moved(
    test_pix[q300], moved_pix[q300], db_pix[db500], y_test[q300], db_y[db500])
print(f"{'top-1 (300 queries)':<27}{'centred':>8}{'moved':>7}{'lost':>6}")
for name, r in control.items():
    lost = (r["centred"].sum() - r["moved"].sum()) / len(r["moved"])  # sums of 0, 0.5 and 1: exact
    print(f"{name:<27}{fmt(r['centred'].mean(), 2):>8}{fmt(r['moved'].mean(), 2):>7}"
          f"{fmt(lost, 2):>6}")

# %% tags=["remove-cell"]
trained = control["ImageNet weights"]
for r in random_weights.values():
    assert r["centred"].mean() > 3 * chance, "random weights: far above chance on centred images"
    assert r["centred"].mean() - r["moved"].mean() > 0.05, "every draw loses"  # 60 draws: 0.095+
    gain, gain_se = paired(trained["moved"], r["moved"])
    assert gain > 4 * gain_se, "moved queries: ImageNet weights beat every random draw"
assert trained["centred"].mean() - trained["moved"].mean() < 0.1, "less than a tenth"

# %% [markdown]
# Random weights already put images of a kind close on centred queries, far above chance. But
# moved 3 pixels, every random draw loses more than 0.05 of top-1, where the ImageNet weights
# lose less than a tenth, and on moved queries the pre-trained network beats every draw by more
# than four standard errors. One draw, though, loses about half of what pixels lose (0.15
# against 0.29). So in these three draws the pre-trained weights tolerate moves far better than
# random ones, and one random draw better than pixels. Three draws of an untrained network
# (random weights, BatchNorm statistics never trained) do not say how much of a trained
# network's tolerance comes from convolutions and pooling alone.

# %% [markdown]
# ### Five results instead of one
#
# A search engine shows several results. Two ways to score the first five: **precision@5**, the
# share of all five results with the query's label, and **hit@5**, the share of queries with at
# least one right result among the five (metric-learning papers call it Recall@5).

# %%
print(f"{'search space':<14} {'top-1':>6} {'precision@5':>12} {'hit@5':>6}")
five = {}
for name, queries, database in (("MobileNetV2", test_emb, db_emb),
                                ("raw pixels", test_pix, db_pix)):
    nn5 = retrieval.nearest_neighbours(queries, database, k=5)       # (1000, 5)
    rates = retrieval.same_class_rates(y_test, db_y, nn5)            # "top5" is precision@5
    five[name] = (rates["top1"], rates["top5"], retrieval.hit_at_k(y_test, db_y[nn5]).item())
    print(f"{name:<14} " + " ".join(fmt(v, 3).rjust(w) for v, w in zip(five[name], (6, 12, 6))))

# %% tags=["remove-cell"]
assert all(p5 < top1 < h5 for top1, p5, h5 in five.values())

# %% [markdown]
# For both, precision@5 < top-1 < hit@5: the 2nd to 5th neighbours are less similar to the query
# than the first, and hit@5 forgives four wrong results if one is right. Which number matters
# depends on the user: one who looks at the first result only, at all five, or until one is
# right.

# %% [markdown]
# ### Explore: sets of another size
#
# The model saw only sets of 10. Without positions it accepts a set of any size: `model(x)` runs
# on features of shape (B, S, 1280) for any S (a learned position table could not even read a
# longer input, 05). Build test sets of other sizes with
# `sets.odd_one_out(y_test, 1000, set_size=S, seed=3)`, measure the model's accuracy on them,
# and find **the smallest set size, from 2 to 12, from which on the model finds the odd image in
# at least 80 % of sets**.
#
# <details><summary>Hint 1</summary>
#
# A loop over the sizes; for each, `sets.predict(model, test_emb, members) == odd` says which
# sets the model gets right.
# </details>
# <details><summary>Hint 2</summary>
#
# Keep the accuracy per size in a dict; the answer is the first size whose accuracy, and the
# accuracy of every larger size up to 12, is at least 0.8. What is special about a set of 2?
# </details>

# %%
my_size = ...  # the smallest set size, an int from 2 to 12
### BEGIN SOLUTION
found = {}
for size in range(2, 13):
    members, odd = sets.odd_one_out(y_test, 1000, set_size=size, seed=3)
    found[size] = (sets.predict(model, test_emb, members) == odd).double().mean().item()
my_size = min(s for s in found if all(found[t] >= 0.8 for t in found if t >= s))
### END SOLUTION
my_size = ex06.smallest_set(my_size, model, test_emb, y_test)

# %% tags=["remove-cell"]
assert my_size <= 5

# %% [markdown]
# It runs on sets of any size, and from a handful of images on it found the odd one in at
# least 80 % of sets; a set of 2 has no odd image.

# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · A pre-trained CNN for image retrieval, and retrieval as attention
#
# So far every network in this series was trained by us, on our own data. Real work mostly starts
# from a network someone else trained on a large data set. Here we use one **without training it
# at all**: MobileNetV2, a convolutional network trained to classify ImageNet photographs, turns
# each image into 1,280 numbers, an *embedding*. If the embedding captures what an object is,
# images of the same kind of object should lie close together, and a search by similarity should
# find them.
#
# That search is attention again: a query scored against every key, a softmax, a weighted
# average of values.

# %% [markdown]
# ## What you will learn
#
# - to use a frozen pre-trained network as a feature extractor, and to check that a faster
#   implementation computes the same function;
# - to measure retrieval honestly: top-1, precision@5 and hit@5, against raw pixels and chance,
#   with a standard error;
# - that a soft nearest-neighbour vote, softmax(cos / τ) over the database with the labels as
#   values, *is* attention, and that its temperature τ slides it from 1-nearest-neighbour to
#   "always the most common class";
# - what a pre-trained embedding is and is not invariant to (shift, inversion, noise).
#
# Assumes: notebook 01 (attention as a soft lookup), notebook 02 (dividing the scores changes how
# peaked the softmax is), the cosine of two vectors.

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

import attnlab
from attnlab import retrieval
from attnlab.exercises import ex05
from attnlab.report import fmt
from attnlab.retrieval import CLASS_NAMES

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The data
#
# `attnlab.load_fashion_mnist()` returns Fashion-MNIST (Zalando Research, MIT licence): 28×28
# grey product photos of ten kinds of clothing and shoes, as
# `keras.datasets.fashion_mnist.load_data()` returns them, but from local files whose sha256 is
# checked first. The **database** is the first 1,000 images of the **training** split, the
# **queries** are the first 200 images of the **test** split, so no query is in the database.

# %%
(x_train, y_train), (x_test, y_test) = attnlab.load_fashion_mnist()
db_x, db_y = x_train[:1000], y_train[:1000]   # database: training split
q_x, q_y = x_test[:200], y_test[:200]         # queries: test split
print(f"database {db_x.shape}, queries {q_x.shape}, {db_x.dtype} grey levels 0-255")
per_class = [f"{c} {n}" for c, n in zip(CLASS_NAMES, np.bincount(q_y))]
print("queries per class:", ", ".join(per_class[:5]) + ",")
print(" " * 18, ", ".join(per_class[5:]))
assert db_x.shape == (1000, 28, 28) and q_x.shape == (200, 28, 28)
assert set(np.unique(db_y)) == set(np.unique(q_y)) == set(range(10)), "every class in both sets"

# %% [markdown]
# ## 2 · The model, and what it sees
#
# MobileNetV2 at width α = 0.35 (a width multiplier: about 35% of the original channels in every
# layer but the last), built by Keras (`keras.applications`, running on PyTorch) with its ImageNet
# weights and without its ImageNet classifier; its last feature map is averaged into one vector,
# the embedding. ImageNet has garment and shoe classes (jersey, cardigan, sandal, running
# shoe...), but the network **never saw Fashion-MNIST's 28×28 grey product shots**.
#
# The weights are the network's 224×224-pixel training, applied here to 96×96 inputs: a smaller
# input keeps the CPU time low. Each image is resized to 96×96, copied into the three colour
# channels and scaled from [0, 255] to [−1, 1], as the network's training images were.

# %% tags=["hide-input"]
model = retrieval.mobilenet_v2(0.35)
print(f"MobileNetV2 alpha=0.35: {model.count_params():,} weights, "
      f"input {model.input_shape[1:]}, embedding {model.output_shape[1:]}")

seen = retrieval.preprocess(q_x[:1])[0, 0].numpy()  # (96, 96), one of the three equal channels
fig, axes = plt.subplots(1, 2, figsize=(5.5, 2.8))
axes[0].imshow(q_x[0], cmap="gray")
axes[0].set_title(f"28×28 original ({CLASS_NAMES[q_y[0]]})")
axes[1].imshow(seen, cmap="gray", vmin=-1, vmax=1)
axes[1].set_title("96×96, scaled to [−1, 1]")
for ax in axes:
    ax.axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# **BatchNorm folding.** After each convolution MobileNetV2 has a *BatchNorm* layer; once
# training is over it is a fixed scale and shift per channel, γ(x − μ)/√(σ² + ε) + β. A scale and
# shift after a convolution can be multiplied into the convolution's weights and bias, so each
# pair becomes one convolution: *folding*. `attnlab.embed_images` runs the Keras weights folded
# this way, to save CPU time. That must not change the function, so we compare it with Keras's
# own `predict` on a few images.

# %%
db_emb = attnlab.embed_images(db_x)   # (1000, 1280)
q_emb = attnlab.embed_images(q_x)     # (200, 1280)
reference = retrieval.embed_images_keras(q_x[:16])   # plain Keras: model.predict
cosine = F.cosine_similarity(torch.from_numpy(reference), torch.from_numpy(q_emb[:16]))  # (16,)
print(f"database {db_emb.shape}, queries {q_emb.shape}; cosine to Keras predict, 16 images: "
      f"min {fmt(cosine.min(), 4)}")
assert cosine.min() > 0.9999, "embed_images must give the Keras model's embeddings"

# %% [markdown]
# ## 3 · Retrieval: the nearest neighbour by cosine
#
# For a query $q$ and a database item $d$,
# $\cos(q, d) = \frac{q \cdot d}{\lVert q\rVert\,\lVert d\rVert}$; the nearest neighbour is the
# item with the largest cosine. **Top-1** is the share of queries whose nearest neighbour has the
# query's label. Chance is what a random database image scores,
# $\sum_c P_{\text{query}}(c)\,P_{\text{database}}(c)$. The rival is **raw pixels**: each image as
# a vector of its 784 grey levels, compared by the same cosine.

# %%
db_pix = retrieval.pixel_features(db_x)                      # (1000, 784)
q_pix = retrieval.pixel_features(q_x)                        # (200, 784)
nn_cnn = retrieval.nearest_neighbours(q_emb, db_emb, k=5)    # (200, 5) indices, nearest first
nn_pix = retrieval.nearest_neighbours(q_pix, db_pix, k=5)
hit_cnn = db_y[nn_cnn[:, 0]] == q_y   # (200,) is the nearest neighbour right?
hit_pix = db_y[nn_pix[:, 0]] == q_y
chance = retrieval.chance_top1(q_y, db_y)
print(f"top-1: MobileNetV2 {fmt(hit_cnn.mean(), 3)}, raw pixels {fmt(hit_pix.mean(), 3)}, "
      f"chance {fmt(chance, 3)}")
assert min(hit_cnn.mean(), hit_pix.mean()) > 3 * chance, "both searches beat chance by far"

# %% [markdown]
# Who wins? With 200 queries a small difference can be luck. The queries that decide it are the
# ones where exactly one search is right; if the two were equally good, each such query would go
# either way like a coin, so the difference in top-1 has a standard error of
# $\sqrt{n_{\text{only CNN}} + n_{\text{only pixels}}}\,/\,200$.

# %%
only_cnn, only_pix = int((hit_cnn & ~hit_pix).sum()), int((hit_pix & ~hit_cnn).sum())
diff = (only_cnn - only_pix) / len(q_y)     # top-1 of MobileNetV2 minus top-1 of pixels
se = np.sqrt(only_cnn + only_pix) / len(q_y)
print(f"both right {int((hit_cnn & hit_pix).sum())}, only MobileNetV2 {only_cnn}, "
      f"only pixels {only_pix}, both wrong {int((~hit_cnn & ~hit_pix).sum())}")
print(f"top-1 difference (MobileNetV2 − pixels): {fmt(diff, 3, sign=True)} ± {fmt(se, 3)} "
      "(one standard error)")
assert abs(diff) < 2 * se, "the prose below says: level"

# %% [markdown]
# The difference is smaller than two standard errors: on these clean, centred images the frozen
# network and plain pixel distance are **level**; neither is measurably better.

# %% [markdown]
# ## 4 · Five neighbours: precision@5 and hit@5
#
# A search engine shows several results. Two ways to score the first five:
#
# - **precision@5**: the share of all five results that have the query's label;
# - **hit@5**: the share of queries with *at least one* right result among the five
#   (metric-learning papers call it Recall@5).
#
# Top-1 is both of them for one result.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: given MobileNetV2's top-1 (about 0.77), will precision@5 be above
# or below it? And hit@5? Write both numbers down.

# %% [markdown]
# **Predict first.** Look at MobileNetV2's top-1 above. Write your guess for its precision@5 and its
# hit@5 before running the cells below.

# %%
guess = ...  # your prediction: [precision@5, hit@5], e.g. [0.8, 0.8]
### BEGIN SOLUTION
guess = [0.72, 0.92]
### END SOLUTION

# %% [markdown]
# **Implement hit@k.** `query_labels` is `(N,)`, `neighbour_labels` is `(N, k)`: the labels of
# each query's k results. Return the share of rows that contain the query's label at least once,
# as a float tensor.
#
# <details><summary>Hint</summary>
#
# `neighbour_labels == query_labels[:, None]` is an `(N, k)` table of right/wrong results;
# `.any(dim=1)` asks "at least one?" per row; `.float().mean()` turns the answers into a share.
# </details>

# %%
def my_hit_at_k(query_labels, neighbour_labels):
    ### BEGIN SOLUTION
    right = neighbour_labels == query_labels[:, None]   # (N, k) is result j of query i right?
    return right.any(dim=1).float().mean()              # () share of queries with a right one
    ### END SOLUTION


hit_at_k = ex05.hit_at_k(my_hit_at_k)   # your function if it is right, attnlab's otherwise

# %%
print(f"{'search space':<14} {'top-1':>6} {'precision@5':>12} {'hit@5':>6}")
scores = {}
for name, nn in (("MobileNetV2", nn_cnn), ("raw pixels", nn_pix)):
    rates = retrieval.same_class_rates(q_y, db_y, nn)   # "top5" is precision@5
    hit5 = hit_at_k(torch.from_numpy(q_y), torch.from_numpy(db_y[nn])).item()
    scores[name] = (rates["top1"], rates["top5"], hit5)
    shown = [fmt(x, 3, guard=False).rjust(w) for x, w in zip(scores[name], (6, 12, 6))]
    print(f"{name:<14} " + " ".join(shown))
assert all(p5 < top1 < h5 for top1, p5, h5 in scores.values()), "the order the prose explains"
guess = ex05.five_neighbours(guess, scores["MobileNetV2"][1:])

# %% [markdown]
# For both searches precision@5 < top-1 < hit@5. Precision@5 counts the 2nd to 5th neighbours,
# which are less similar to the query than the first; hit@5 forgives four wrong results if one is
# right. Which number matters depends on the user: one who looks at the first result only, all
# five, or until one is right.

# %% [markdown]
# ## 5 · Retrieval is attention
#
# Instead of taking only the nearest neighbour, let the whole database vote, each item with a
# weight that grows with its similarity to the query:
#
# $$w_{i} = \text{softmax}_i\!\left(\frac{\cos(q, d_i)}{\tau}\right), \qquad
#   p(c \mid q) = \sum_i w_i \,[\text{label}_i = c].$$
#
# This is attention, term for term: the **query** is the test image's embedding, the **keys**
# are the database embeddings, the **values** are the database labels written as *one-hot*
# vectors (10 numbers, a 1 at the label's class), and the output is a probability for each class.
# With embeddings scaled to length 1, q·k *is* the cosine. Statisticians know it as
# Nadaraya–Watson kernel regression (1964), a weighted average of the training answers, each
# weighted by how close its input is; with the weights made by a softmax it is a *soft*
# k-nearest-neighbour classifier.
#
# The **temperature** τ divides the scores, as √d_k does in notebook 02: a small τ spreads the
# scores apart and the softmax picks the top item, as stretching the query did in 01's soft
# lookup; a large τ flattens it.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Implement it** with `attnlab.scaled_dot_product_attention` and `scale=1 / tau`: normalise the
# rows of queries and database, turn the labels into one-hot values, attend.
#
# <details><summary>Hint</summary>
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
    q = F.normalize(queries, dim=1)       # (N_q, D) unit rows: q·k is the cosine
    k = F.normalize(database, dim=1)      # (N_d, D) keys
    v = F.one_hot(labels, 10).to(q.dtype)  # (N_d, 10) values: one-hot labels
    return attnlab.scaled_dot_product_attention(q, k, v, scale=1 / tau)  # (N_q, 10), (N_q, N_d)
    ### END SOLUTION


soft_knn = ex05.soft_knn(my_soft_knn)

# %% [markdown]
# The two limits, on the MobileNetV2 embeddings. At τ = 0.001 the nearest item's score is far
# above the others' after division, so it takes almost all the weight; at τ = 10 all cosines
# (which lie between −1 and 1) divide down to nearly the same score.

# %%
Q, K = torch.from_numpy(q_emb).double(), torch.from_numpy(db_emb).double()  # (200, 1280), (1000, …)
labels = torch.from_numpy(db_y).long()                                       # (1000,)
one_nn = torch.from_numpy(db_y[nn_cnn[:, 0]]).long()                         # (200,) 1-NN's answers
cold, cold_w = soft_knn(Q, K, labels, 0.001)    # (200, 10), (200, 1000)
hot, hot_w = soft_knn(Q, K, labels, 10.0)
common = int(np.bincount(db_y).argmax())         # the database's most common class
print(f"τ = 0.001: largest weight per query {fmt(cold_w.max(1).values.mean(), 2)} on average; "
      f"answers equal to 1-NN's: {int((cold.argmax(1) == one_nn).sum())} of 200")
print(f"τ = 10:    largest weight ≤ {fmt(hot_w.max() * len(db_y), 2)} × uniform (1/1000); answer "
      f"{CLASS_NAMES[common]!r} (most common in the database) for "
      f"{int((hot.argmax(1) == common).sum())} of 200")
assert torch.equal(cold.argmax(1), one_nn), "τ → 0 is 1-NN"
assert (hot.argmax(1) == common).all(), "τ → ∞ answers the most common class"

# %% [markdown]
# As τ → 0 the soft vote gives 1-NN's answer for every query; as τ grows every item weighs
# nearly the same, and every query gets the database's most common class. Note that the default
# scale 1/√d_k would be τ = √1280 ≈ 36 here: √d_k is the right divisor for dot products of
# vectors with unit-variance entries (02), not for cosines, which never leave [−1, 1].

# %% [markdown] slideshow={"slide_type": "subslide"}
# In between, a few close neighbours vote. Accuracy and the peak weight across τ, for both
# search spaces:

# %%
taus = np.geomspace(1e-3, 10, 17)
P, PK = torch.from_numpy(q_pix).double(), torch.from_numpy(db_pix).double()  # (200, 784), (1000, …)
curve = {"MobileNetV2": [], "raw pixels": []}   # per τ: (each query right? (200,), mean top weight)
for tau in taus:
    for name, (queries, keys) in (("MobileNetV2", (Q, K)), ("raw pixels", (P, PK))):
        probs, weights = soft_knn(queries, keys, labels, tau)
        curve[name].append((probs.argmax(1).numpy() == q_y, weights.max(1).values.mean().item()))
print(f"{'τ':>7} {'MobileNetV2':>12} {'raw pixels':>11}   top-1 of the soft vote")
for i in (0, 4, 6, 8, 10, 12, 16):
    acc = [fmt(curve[name][i][0].mean(), 3, guard=False) for name in curve]
    print(f"{taus[i]:>7.3g} {acc[0]:>12} {acc[1]:>11}")

# %%
for name, one in (("MobileNetV2", hit_cnn), ("raw pixels", hit_pix)):
    right = max((r for r, _ in curve[name]), key=lambda r: r.sum())   # the best τ's answers
    i = next(i for i, (r, _) in enumerate(curve[name]) if r is right)
    gained, lost = int((right & ~one).sum()), int((one & ~right).sum())
    print(f"best for {name}: {fmt(right.mean(), 3, guard=False)} at τ = {taus[i]:.3g} (1-NN "
          f"{fmt(one.mean(), 3, guard=False)}): {gained} queries gained, {lost} lost")
    assert gained > lost, "a soft vote beats 1-NN"
    assert (curve[name][0][0] == one).all() and (curve[name][-1][0] == (q_y == common)).all()

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for (name, points), colour in zip(curve.items(), ("C0", "C1")):
    axes[0].plot(taus, [r.mean() for r, _ in points], "o-", color=colour, ms=3,
                 label=f"{name}: soft vote")
    axes[0].axhline(points[0][0].mean(), color=colour, ls=":", lw=1, label=f"{name}: 1-NN")
    axes[1].plot(taus, [w for _, w in points], "o-", color=colour, ms=3, label=name)
axes[0].axhline(chance, color="gray", ls="--", lw=1, label="chance")
axes[0].set(xscale="log", xlabel="temperature τ", ylabel="top-1", ylim=(0, 1),
            title="accuracy of softmax(cos / τ) · labels")
axes[0].legend(fontsize=7, loc="lower left")
axes[1].axhline(1 / len(db_y), color="gray", ls="--", lw=1, label="uniform (1/1000)")
axes[1].set(xscale="log", yscale="log", xlabel="temperature τ", ylabel="mean largest weight",
            title="how peaked is the softmax?")
axes[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# Both curves start at 1-NN's top-1 for small τ, rise a little above it where a handful of close
# neighbours share the weight, and fall to the most common class's share of the queries as the
# weights turn uniform. At its best τ the soft vote gains a few queries over 1-NN and loses fewer.
# The right panel is notebook 02's picture: the temperature decides how peaked the softmax is.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class: which τ would you pick for MobileNetV2, from the curve? Would you trust that
# choice on new queries, given that the same 200 queries chose it?

# %% [markdown]
# **Explore.** Find a temperature at which the soft vote on the MobileNetV2 embeddings is right
# on more queries than 1-NN.

# %%
my_tau = ...  # your τ, a number > 0
### BEGIN SOLUTION
my_tau = 0.02
### END SOLUTION
my_tau = ex05.beat_one_nn(my_tau, q_emb, db_emb, db_y, q_y)

# %% [markdown]
# We chose τ by looking at the test queries' accuracy, so the gain is flattered: an honest choice
# of τ uses other queries kept apart for the purpose (a validation set), and then measures once on
# the test queries.

# %% [markdown]
# ## 6 · A gallery
#
# One query per row (left), with its three nearest neighbours by MobileNetV2, then by raw pixels;
# ✓ (green) means the neighbour has the query's label, ✗ (red) not. The rows are: only MobileNetV2
# right, only pixels right, both right, both wrong.

# %% tags=["hide-input"]
groups = [("only CNN right", hit_cnn & ~hit_pix), ("only pixels right", hit_pix & ~hit_cnn),
          ("both right", hit_cnn & hit_pix), ("both wrong", ~hit_cnn & ~hit_pix)]
rows = [(label, int(np.flatnonzero(mask)[0])) for label, mask in groups]
fig, axes = plt.subplots(len(rows), 7, figsize=(9, 1.05 * len(rows)), squeeze=False)
for r, (label, i) in enumerate(rows):
    axes[r, 0].imshow(q_x[i], cmap="gray")
    axes[r, 0].set_title(f"query: {CLASS_NAMES[q_y[i]]}", fontsize=7)
    axes[r, 0].set_ylabel(label, fontsize=7)
    for j, (space, nn) in enumerate((("CNN", nn_cnn), ("pixels", nn_pix))):
        for k in range(3):
            ax, d = axes[r, 1 + 3 * j + k], nn[i, k]
            colour = "green" if db_y[d] == q_y[i] else "red"
            ax.imshow(db_x[d], cmap="gray")
            mark = "✓" if colour == "green" else "✗"
            ax.set_title(f"{mark} {space} {k + 1}: {CLASS_NAMES[db_y[d]]}", fontsize=6,
                         color=colour)
            for spine in ax.spines.values():
                spine.set_edgecolor(colour)
                spine.set_linewidth(2.5)
for ax in axes.flat:
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7 · Per class
#
# A single top-1 number hides which kinds of item each search finds easy.

# %% tags=["hide-input"]
per_cnn = retrieval.per_class_top1(q_y, db_y, nn_cnn)   # (10,)
per_pix = retrieval.per_class_top1(q_y, db_y, nn_pix)
fig, ax = plt.subplots(figsize=(8, 3.2))
xs = np.arange(10)
ax.bar(xs - 0.2, per_cnn, 0.4, label="MobileNetV2")
ax.bar(xs + 0.2, per_pix, 0.4, label="raw pixels")
ax.axhline(chance, color="gray", ls="--", lw=1, label="chance")
ax.set_xticks(xs, CLASS_NAMES, rotation=30, ha="right")
ax.set_ylabel("top-1 same class")
ax.set_ylim(0, 1.05)
ax.legend(fontsize=8, ncol=3)
plt.tight_layout()
plt.show()

# %%
gap = per_cnn - per_pix
counts = np.bincount(q_y, minlength=10)                                   # queries per class
right = {"cnn": np.rint(per_cnn * counts).astype(int), "pix": np.rint(per_pix * counts).astype(int)}
hard_cnn, hard_pix = int(np.argmin(per_cnn)), int(np.argmin(per_pix))   # each one's hardest class
lead_cnn, lead_pix = int(np.argmax(gap)), int(np.argmin(gap))            # each one's largest lead
print(f"hardest class: for MobileNetV2 {CLASS_NAMES[hard_cnn]} ({right['cnn'][hard_cnn]} of "
      f"{counts[hard_cnn]} right), for pixels {CLASS_NAMES[hard_pix]} ({right['pix'][hard_pix]} of "
      f"{counts[hard_pix]})")
print(f"largest lead of MobileNetV2: {CLASS_NAMES[lead_cnn]} ({right['cnn'][lead_cnn]} against "
      f"{right['pix'][lead_cnn]} of {counts[lead_cnn]}); of pixels: {CLASS_NAMES[lead_pix]} "
      f"({right['pix'][lead_pix]} against {right['cnn'][lead_pix]} of {counts[lead_pix]})")
print(f"MobileNetV2 ahead on {int((gap > 0).sum())} classes, pixels on {int((gap < 0).sum())}")
assert abs((per_cnn * counts).sum() / counts.sum() - hit_cnn.mean()) < 1e-9, "they average to top-1"
assert np.argmin(per_cnn) != np.argmin(per_pix) and (gap > 0).sum() >= 3 and (gap < 0).sum() >= 3

# %% [markdown]
# Level on average, the two searches are not level per class: each leads on several classes,
# and their hardest classes differ.

# %% [markdown]
# ## 8 · What is the embedding invariant to?
#
# Clean, centred images flatter raw pixels. We now damage the **queries** (the database stays
# clean) by increasing amounts and measure top-1 again for both spaces:
#
# - **shift**: move the item 1–8 pixels up, down, left or right (a random direction per image);
# - **noise**: add Gaussian noise with a standard deviation of 8–128 grey levels (clipped to 0–255);
# - **invert**: blend towards the negative image, $(1-a)\,x + a\,(255-x)$. At $a = 0.5$ every
#   image is flat grey, with no information left; at $a = 1$ all the information is back, with
#   black and white swapped.

# %% tags=["hide-input"]
amounts = {"shift": [0, 1, 2, 3, 4, 6, 8], "noise": [0, 8, 16, 32, 64, 128],
           "invert": [0, 0.25, 0.5, 0.75, 1.0]}
fig, axes = plt.subplots(3, 7, figsize=(8, 3.6))
for r, (kind, levels) in enumerate(amounts.items()):
    for c in range(7):
        ax = axes[r, c]
        ax.axis("off")
        if c < len(levels):
            example = retrieval.perturb(q_x[:1], kind, levels[c], seed=1)[0]   # (28, 28)
            ax.imshow(example, cmap="gray", vmin=0, vmax=255)
            ax.set_title(f"{kind} {levels[c]:g}", fontsize=8)
plt.tight_layout()
plt.show()

# %%
hits = {}   # (kind, space) -> right answers out of 200, one per amount
for kind, levels in amounts.items():
    for amount in levels:
        damaged = retrieval.perturb(q_x, kind, amount, seed=1)    # (200, 28, 28)
        embedded = q_emb if amount == 0 else attnlab.embed_images(damaged)   # (200, 1280)
        for space, queries, database in (("cnn", embedded, db_emb),
                                         ("pixels", retrieval.pixel_features(damaged), db_pix)):
            nn = retrieval.nearest_neighbours(queries, database)
            hits.setdefault((kind, space), []).append(int((db_y[nn[:, 0]] == q_y).sum()))
    print(f"{kind:<7} amount: " + " ".join(f"{a:>6g}" for a in levels))
    for space, label in (("cnn", "CNN:   "), ("pixels", "pixels:")):
        print(f"{'':<7} {label} " + " ".join(fmt(h / len(q_y), 3, guard=False).rjust(6)
                                             for h in hits[kind, space]))

for kind in amounts:  # amount 0 is the clean experiment above
    assert hits[kind, "cnn"][0] == hit_cnn.sum() and hits[kind, "pixels"][0] == hit_pix.sum()
# flat grey (invert 0.5): every query is the same image, so all get the same neighbour and top-1
# is exactly the share of queries in that neighbour's class
assert {hits["invert", s][2] for s in ("cnn", "pixels")} <= set(np.bincount(q_y))

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 3, figsize=(9, 3.2), sharey=True)
units = {"shift": "pixels moved", "noise": "noise std (grey levels)",
         "invert": "blend a towards the negative"}
for ax, (kind, levels) in zip(axes, amounts.items()):
    ax.plot(levels, np.array(hits[kind, "cnn"]) / len(q_y), "o-", label="MobileNetV2")
    ax.plot(levels, np.array(hits[kind, "pixels"]) / len(q_y), "s-", label="raw pixels")
    ax.axhline(chance, color="gray", ls="--", lw=1, label="chance")
    ax.set_title(kind)
    ax.set_xlabel(units[kind])
    ax.set_ylim(0, 1)
axes[0].set_ylabel("top-1 same class")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Read off the numbers: how many of its clean right answers each search keeps at the strongest
# damage.

# %%
kept = {}
for kind, levels in amounts.items():
    kept[kind] = {s: hits[kind, s][-1] / hits[kind, s][0] for s in ("cnn", "pixels")}
    print(f"{kind} {levels[-1]:g}: MobileNetV2 keeps {hits[kind, 'cnn'][-1]} of its "
          f"{hits[kind, 'cnn'][0]} right answers ({kept[kind]['cnn']:.0%}), raw pixels "
          f"{hits[kind, 'pixels'][-1]} of {hits[kind, 'pixels'][0]} ({kept[kind]['pixels']:.0%})")
assert kept["shift"]["cnn"] > kept["shift"]["pixels"] + 0.3, "CNN sturdier under shift"
assert kept["invert"]["cnn"] > kept["invert"]["pixels"] + 0.3, "CNN sturdier under inversion"
assert kept["noise"]["pixels"] > kept["noise"]["cnn"] + 0.3, "pixels sturdier under noise"

# %% [markdown]
# - **Shift**: MobileNetV2 is the sturdier search. Convolutions look for the same patterns
#   everywhere and the average over the last feature map forgets where they were, while one
#   pixel's move changes many pixel values.
# - **Invert**: MobileNetV2 again: edges and shapes survive a swap of black and white; pixel
#   cosine compares grey levels, which the swap changes everywhere.
# - **Noise**: raw pixels are the sturdier search; the embedding is not invariant to it. Speckle
#   enlarged to 96×96 looks like texture, which ImageNet networks are known to rely on (Geirhos
#   et al., 2019); noise drawn independently for each pixel is nearly uncorrelated with every
#   database image, so it lowers all the pixel cosines by a similar factor and the nearest one
#   tends to stay the nearest.
#
# What a pre-trained embedding is invariant to comes from what its training images varied in.

# %% [markdown]
# ## 9 · A wider network: α = 0.5
#
# The same search with MobileNetV2 at width α = 0.5 (more channels in every layer but the last;
# again the 224-pixel ImageNet training applied at 96 pixels).

# %%
q_wide, db_wide = attnlab.embed_images(q_x, alpha=0.5), attnlab.embed_images(db_x, alpha=0.5)
hit_wide = db_y[retrieval.nearest_neighbours(q_wide, db_wide)[:, 0]] == q_y   # (200,)
d_wide = (int((hit_wide & ~hit_cnn).sum()) - int((hit_cnn & ~hit_wide).sum())) / len(q_y)
se_wide = np.sqrt(int((hit_wide != hit_cnn).sum())) / len(q_y)
print(f"MobileNetV2 alpha=0.5: {retrieval.mobilenet_v2(0.5).count_params():,} weights "
      f"(alpha=0.35: {model.count_params():,}); top-1 {fmt(hit_wide.mean(), 3)} "
      f"(alpha=0.35: {fmt(hit_cnn.mean(), 3)})")
print(f"difference {fmt(d_wide, 3, sign=True)} ± {fmt(se_wide, 3)} (one standard error)")
assert abs(d_wide) < 2 * se_wide, "the prose below says: no measurable gain"

# %% [markdown]
# The difference is within two standard errors: no measurable gain from the wider network here.

# %% [markdown]
# The headline numbers, in one place:

# %%
top1, p5, h5 = scores["MobileNetV2"]
print(f"top-1: MobileNetV2 {fmt(top1, 3, guard=False)}, raw pixels "
      f"{fmt(scores['raw pixels'][0], 3, guard=False)}, chance {fmt(chance, 3)}")
print(f"MobileNetV2: precision@5 {fmt(p5, 3, guard=False)} < top-1 {fmt(top1, 3, guard=False)} "
      f"< hit@5 {fmt(h5, 3, guard=False)}")
best = [fmt(max(r.mean() for r, _ in curve[name]), 3, guard=False) for name in curve]
same, most = int((cold.argmax(1) == one_nn).sum()), int((hot.argmax(1) == common).sum())
print(f"soft vote: τ = 0.001 gives 1-NN's answer for {same} of 200 queries, τ = 10 gives "
      f"{CLASS_NAMES[common]!r} for {most}; best top-1: MobileNetV2 {best[0]}, pixels {best[1]}")

# %% [markdown]
# ## What we learned
#
# - A frozen ImageNet network, never trained on Fashion-MNIST's grey product shots, puts
#   same-class images next to each other: top-1 0.770 where chance is 0.100. On clean, centred
#   images raw pixels are level with it (0.785; the difference is within two standard errors).
# - The score depends on the question asked: for the same search, precision@5 0.739 < top-1
#   0.770 < hit@5 0.945.
# - Retrieval is attention: softmax(cos / τ) over the database, with one-hot labels as values, is
#   a soft k-nearest-neighbour vote. At τ = 0.001 it gave 1-NN's answer for all 200 queries, at
#   τ = 10 the database's most common class for all of them; in between, its best τ beat 1-NN by
#   a few queries (0.800 and 0.820 against 0.770 and 0.785), with τ chosen on the test queries.
# - Damage separates the two searches: MobileNetV2 kept most of its right answers under shift and
#   inversion, raw pixels under noise; the wider network (α = 0.5) gave no measurable gain.

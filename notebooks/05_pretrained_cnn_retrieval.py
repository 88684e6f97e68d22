# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 · A pre-trained CNN for image retrieval
#
# So far every network in this series was trained by us, on our own data. Real work mostly starts
# from a network someone else trained on a large data set. Here we use one **without training it
# at all**: MobileNetV2, a convolutional network trained to classify ImageNet photographs, turns
# each image into 1,280 numbers, an *embedding*. If the embedding captures what an object is, then
# images of the same kind of object should lie close together.
#
# The experiment (the lab's experiment 11): take 200 query images, find each one's nearest
# neighbour among 1,000 database images by cosine similarity, and count how often the neighbour
# has the same label. We compare three ways of searching:
#
# - **MobileNetV2 embeddings** (ImageNet weights, frozen);
# - **raw pixels** (each 28×28 image as a vector of 784 grey levels);
# - **chance** (a random database image).
#
# Fashion-MNIST is an easy case for raw pixels: every item is centred, upright, on black. Either
# could win; we measure.

# %%
import matplotlib.pyplot as plt
import numpy as np

import attnlab
from attnlab import retrieval
from attnlab.retrieval import CLASS_NAMES

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The data
#
# `attnlab.load_fashion_mnist()` returns Fashion-MNIST (Zalando Research, MIT licence) as
# `keras.datasets.fashion_mnist.load_data()` does, but from local files whose sha256 is checked
# first (`python -m attnlab doctor` shows where they were found). The **database** is the first
# 1,000 images of the **training** split, the **queries** are the first 200 images of the **test**
# split, so no query is in the database.

# %%
(x_train, y_train), (x_test, y_test) = attnlab.load_fashion_mnist()
print(f"training split {x_train.shape} {x_train.dtype}, test split {x_test.shape} {x_test.dtype}")

db_x, db_y = x_train[:1000], y_train[:1000]   # database: training split
q_x, q_y = x_test[:200], y_test[:200]         # queries: test split
print(f"{'class':<12} {'database':>8} {'queries':>8}")
for c, name in enumerate(CLASS_NAMES):
    print(f"{name:<12} {(db_y == c).sum():>8} {(q_y == c).sum():>8}")
assert db_x.shape == (1000, 28, 28) and q_x.shape == (200, 28, 28)
assert set(np.unique(db_y)) == set(np.unique(q_y)) == set(range(10)), "every class in both sets"

# %% [markdown]
# ## 2 · The model, and what it sees
#
# MobileNetV2 at width α = 0.35 (a width multiplier: about 35% of the original channels in every
# layer but the last, which keeps its full width), built by Keras (`keras.applications`, running
# on PyTorch) with its ImageNet weights and without its ImageNet classifier; its last feature map
# is averaged into one vector, the embedding.
#
# **These weights are the network's 224×224-pixel ImageNet training, applied here to 96×96
# inputs** — a smaller input keeps the CPU time low; the weights do not depend on the input size,
# but the network never saw objects this small during training. Each 28×28 grey image is resized
# to 96×96 (bilinear), copied into the three colour channels and scaled from [0, 255] to [−1, 1],
# as the network's training images were.

# %%
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
# `attnlab.embed_images` runs the Keras model's weights with each BatchNorm folded into the
# convolution before it, to save CPU time (`benchmarks/embed_images.py` measures how much). That
# must not change the model, so we compare with Keras's own `predict` on a few images.

# %%
db_emb = attnlab.embed_images(db_x)   # (1000, 1280)
q_emb = attnlab.embed_images(q_x)     # (200, 1280)
print("database embeddings", db_emb.shape, " query embeddings", q_emb.shape)

reference = retrieval.embed_images_keras(q_x[:16])   # plain Keras: model.predict
ours = q_emb[:16]
cosine = (reference * ours).sum(1) / (np.linalg.norm(reference, axis=1) * np.linalg.norm(ours, axis=1))
print(f"cosine between our embeddings and Keras predict's, 16 images: min {cosine.min():.4f}")
assert cosine.min() > 0.99, "embed_images must give the Keras model's embeddings"

# %% [markdown]
# ## 3 · Retrieval: nearest neighbour by cosine
#
# For a query $q$ and a database item $d$, $\cos(q, d) = \frac{q \cdot d}{\lVert q\rVert\,\lVert d\rVert}$;
# the nearest neighbour is the item with the largest cosine. **Top-1** is the share of queries whose
# nearest neighbour has the query's label; **top-5** is the share of the five nearest neighbours
# that have it. Chance is what a random database image scores:
# $\sum_c P_{\text{query}}(c)\,P_{\text{database}}(c)$.

# %%
db_pix, q_pix = retrieval.pixel_features(db_x), retrieval.pixel_features(q_x)  # (1000, 784), (200, 784)
nn_cnn = retrieval.nearest_neighbours(q_emb, db_emb, k=5)    # (200, 5) database indices
nn_pix = retrieval.nearest_neighbours(q_pix, db_pix, k=5)
cnn = retrieval.same_class_rates(q_y, db_y, nn_cnn)
pix = retrieval.same_class_rates(q_y, db_y, nn_pix)
chance = retrieval.chance_top1(q_y, db_y)

print(f"{'search space':<22} {'top-1':>6} {'top-5':>6}")
print(f"{'MobileNetV2 (α=0.35)':<22} {cnn['top1']:6.3f} {cnn['top5']:6.3f}")
print(f"{'raw pixels':<22} {pix['top1']:6.3f} {pix['top5']:6.3f}")
print(f"{'chance':<22} {chance:6.3f} {chance:6.3f}")
assert cnn["top1"] > 3 * chance and pix["top1"] > 3 * chance, "both searches should beat chance by far"

# %% [markdown]
# Who wins? With 200 queries a small difference can be luck. The queries that decide it are the
# ones where exactly one method is right; if the two were equally good each such query would go
# either way like a coin, so the difference in top-1 has a standard error of
# $\sqrt{n_{\text{only CNN}} + n_{\text{only pixels}}}\,/\,200$. We call a difference real when it
# is more than two standard errors.

# %%
hit_cnn = db_y[nn_cnn[:, 0]] == q_y   # (200,) is the nearest neighbour right?
hit_pix = db_y[nn_pix[:, 0]] == q_y
only_cnn, only_pix = int((hit_cnn & ~hit_pix).sum()), int((hit_pix & ~hit_cnn).sum())
diff = cnn["top1"] - pix["top1"]
se = np.sqrt(only_cnn + only_pix) / len(q_y)
print(f"both right {int((hit_cnn & hit_pix).sum())}, only MobileNetV2 right {only_cnn}, "
      f"only pixels right {only_pix}, both wrong {int((~hit_cnn & ~hit_pix).sum())}")
print(f"top-1 difference (MobileNetV2 − pixels): {diff:+.3f} ± {se:.3f} (one standard error)")
if abs(diff) <= 2 * se:
    print(f"Conclusion: on clean images the two are level — the difference of {diff:+.3f} is within "
          f"two standard errors ({2 * se:.3f}). A network trained on photographs, never on clothes, "
          "is level with pixel distance here: neither is measurably better.")
elif diff > 0:
    print(f"Conclusion: MobileNetV2 embeddings retrieve better than raw pixels by {diff:.3f} "
          f"(more than two standard errors, {2 * se:.3f}), although the network never saw Fashion-MNIST.")
else:
    print(f"Conclusion: raw pixels retrieve better than MobileNetV2 embeddings by {-diff:.3f} "
          f"(more than two standard errors, {2 * se:.3f}): on centred, upright grey images, pixel "
          "distance is hard to beat for a network trained on photographs.")
assert abs(diff - (only_cnn - only_pix) / len(q_y)) < 1e-9

# %% [markdown]
# ## 4 · A gallery
#
# Each row is one query (left) with its three nearest neighbours by MobileNetV2, then by raw
# pixels. A neighbour marked ✗ (red frame and title) has a different label from the query; ✓
# (green) means the same label. The rows are picked by outcome: queries where only MobileNetV2 is
# right, where only pixels are right, where both are right and where both are wrong.

# %%
groups = [("only MobileNetV2 right", hit_cnn & ~hit_pix), ("only pixels right", hit_pix & ~hit_cnn),
          ("both right", hit_cnn & hit_pix), ("both wrong", ~hit_cnn & ~hit_pix)]
rows = [(label, i) for label, mask in groups for i in np.flatnonzero(mask)[:2]]
fig, axes = plt.subplots(len(rows), 7, figsize=(9, 1.45 * len(rows)), squeeze=False)
for r, (label, i) in enumerate(rows):
    axes[r, 0].imshow(q_x[i], cmap="gray")
    axes[r, 0].set_title(f"query: {CLASS_NAMES[q_y[i]]}", fontsize=8)
    axes[r, 0].set_ylabel(label, fontsize=7)
    for j, (space, nn) in enumerate((("CNN", nn_cnn), ("pixels", nn_pix))):
        for k in range(3):
            ax, d = axes[r, 1 + 3 * j + k], nn[i, k]
            right = db_y[d] == q_y[i]
            ax.imshow(db_x[d], cmap="gray")
            ax.set_title(f"{'✓' if right else '✗'} {space} {k + 1}: {CLASS_NAMES[db_y[d]]}", fontsize=7,
                         color="green" if right else "red")
            for spine in ax.spines.values():
                spine.set_edgecolor("green" if right else "red")
                spine.set_linewidth(2.5)
for ax in axes.flat:
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()
plt.show()
print("rows:", ", ".join(f"{label} (query {i})" for label, i in rows))

# %% [markdown]
# ## 5 · Per class
#
# A single top-1 number hides which kinds of item each search finds easy.

# %%
per_cnn = retrieval.per_class_top1(q_y, db_y, nn_cnn)   # (10,)
per_pix = retrieval.per_class_top1(q_y, db_y, nn_pix)
print(f"{'class':<12} {'queries':>7} {'CNN':>6} {'pixels':>6}")
for c, name in enumerate(CLASS_NAMES):
    print(f"{name:<12} {(q_y == c).sum():>7} {per_cnn[c]:6.3f} {per_pix[c]:6.3f}")
counts = np.bincount(q_y, minlength=10)
assert abs((per_cnn * counts).sum() / counts.sum() - cnn["top1"]) < 1e-9, "per-class rates average to top-1"

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
best_cnn, best_pix = int(np.argmax(gap)), int(np.argmin(gap))
print(f"hardest class for MobileNetV2: {CLASS_NAMES[np.argmin(per_cnn)]} ({per_cnn.min():.3f}); "
      f"for pixels: {CLASS_NAMES[np.argmin(per_pix)]} ({per_pix.min():.3f})")
print(f"largest lead of MobileNetV2: {CLASS_NAMES[best_cnn]} "
      f"({per_cnn[best_cnn]:.3f} vs {per_pix[best_cnn]:.3f}); "
      f"largest lead of pixels: {CLASS_NAMES[best_pix]} ({per_pix[best_pix]:.3f} vs {per_cnn[best_pix]:.3f})")
print(f"MobileNetV2 is ahead on {int((gap > 0).sum())} classes, pixels on {int((gap < 0).sum())}, "
      f"level on {int((gap == 0).sum())}.")

# %% [markdown]
# ## 6 · Beyond the lab: what is the embedding invariant to?
#
# Clean, centred images flatter raw pixels. We now damage the **queries** (the database stays
# clean) by increasing amounts and measure top-1 again for both spaces:
#
# - **shift**: move the item 1–8 pixels up, down, left or right (a random direction per image);
# - **noise**: add Gaussian noise with a standard deviation of 8–128 grey levels (clipped to 0–255);
# - **invert**: blend towards the negative image, $(1-a)\,x + a\,(255-x)$. At $a = 0.5$ every
#   image is flat grey, with no information left; at $a = 1$ all the information is back, with
#   black and white swapped.

# %%
amounts = {"shift": [0, 1, 2, 3, 4, 6, 8], "noise": [0, 8, 16, 32, 64, 128],
           "invert": [0, 0.25, 0.5, 0.75, 1.0]}
fig, axes = plt.subplots(3, 7, figsize=(9, 4.2))
for r, (kind, levels) in enumerate(amounts.items()):
    for c in range(7):
        ax = axes[r, c]
        ax.axis("off")
        if c < len(levels):
            ax.imshow(retrieval.perturb(q_x[:1], kind, levels[c], seed=1)[0], cmap="gray", vmin=0, vmax=255)
            ax.set_title(f"{kind} {levels[c]:g}", fontsize=8)
plt.tight_layout()
plt.show()

# %%
curves = {}
for kind, levels in amounts.items():
    curves[kind] = {"cnn": [], "pixels": []}
    for amount in levels:
        damaged = retrieval.perturb(q_x, kind, amount, seed=1)    # (200, 28, 28)
        for space, queries, database in (("cnn", attnlab.embed_images(damaged), db_emb),
                                         ("pixels", retrieval.pixel_features(damaged), db_pix)):
            nn = retrieval.nearest_neighbours(queries, database)
            curves[kind][space].append(retrieval.same_class_rates(q_y, db_y, nn)["top1"])
    print(f"{kind:<7} amount: " + " ".join(f"{a:>6g}" for a in levels))
    print(f"{'':<7} CNN:    " + " ".join(f"{v:6.3f}" for v in curves[kind]["cnn"]))
    print(f"{'':<7} pixels: " + " ".join(f"{v:6.3f}" for v in curves[kind]["pixels"]))

for kind in amounts:  # amount 0 is the clean experiment above
    assert curves[kind]["cnn"][0] == cnn["top1"] and curves[kind]["pixels"][0] == pix["top1"]
# flat grey (invert 0.5): every query is the same image, so all get the same neighbour and top-1
# is exactly the share of queries in that neighbour's class
shares = set(np.bincount(q_y) / len(q_y))
assert curves["invert"]["cnn"][2] in shares and curves["invert"]["pixels"][2] in shares

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), sharey=True)
units = {"shift": "pixels moved", "noise": "noise std (grey levels)",
         "invert": "blend a towards the negative"}
for ax, (kind, levels) in zip(axes, amounts.items()):
    ax.plot(levels, curves[kind]["cnn"], "o-", label="MobileNetV2")
    ax.plot(levels, curves[kind]["pixels"], "s-", label="raw pixels")
    ax.axhline(chance, color="gray", ls="--", lw=1, label="chance")
    ax.set_title(kind)
    ax.set_xlabel(units[kind])
    ax.set_ylim(0, 1)
axes[0].set_ylabel("top-1 same class")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# What the curves say, read off the numbers: how much of its clean top-1 each search keeps at the
# strongest damage, and up to which amount it stays within 20 queries (0.1) of its clean result.

# %%
clean = {"cnn": hit_cnn.sum(), "pixels": hit_pix.sum()}   # clean hits out of 200
sturdier = {"MobileNetV2": [], "raw pixels": []}
for kind, levels in amounts.items():
    keep = {s: curves[kind][s][-1] * len(q_y) / clean[s] for s in clean}
    holds = {}  # the largest amount before the first one that loses more than 20 of the clean hits
    for s in clean:
        lost = [clean[s] - round(v * len(q_y)) > 20 for v in curves[kind][s]]
        holds[s] = levels[lost.index(True) - 1] if True in lost else levels[-1]
    print(f"{kind} {levels[-1]:g}: MobileNetV2 keeps {keep['cnn']:.0%} of its clean top-1, raw pixels "
          f"{keep['pixels']:.0%}; within 0.1 of clean up to {kind} {holds['cnn']:g} (MobileNetV2) "
          f"and {kind} {holds['pixels']:g} (pixels)")
    if abs(keep["cnn"] - keep["pixels"]) > 0.1:
        sturdier["MobileNetV2" if keep["cnn"] > keep["pixels"] else "raw pixels"].append(kind)

for name, kinds in sturdier.items():
    print(f"{name} is the sturdier search under: {', '.join(kinds) if kinds else 'none of the three'}")
if "shift" in sturdier["MobileNetV2"]:
    print("- Shift: convolutions look for the same patterns everywhere and the average over the last "
          "feature map forgets where they were, while one pixel's move changes many pixel values.")
if "invert" in sturdier["MobileNetV2"]:
    print("- Invert: the embedding still finds the item in the negative, edges and shape survive a swap "
          "of black and white; pixel cosine compares grey levels, which the swap changes everywhere.")
if "noise" in sturdier["raw pixels"]:
    print("- Noise: the embedding is not invariant to it. Speckle enlarged to 96x96 looks like texture, "
          "which ImageNet networks are known to rely on (Geirhos et al., 2019); pixel cosine weighs all "
          "784 grey levels at once, and noise drawn independently for each pixel is nearly uncorrelated "
          "with every database image: it lowers all their cosines by a similar factor, so the nearest "
          "one tends to stay the nearest.")
assert sum(map(len, sturdier.values())) >= 1, "at least one damage should separate the two searches"

# %% [markdown]
# ## 7 · A wider network: α = 0.5
#
# The same experiment with MobileNetV2 at width α = 0.5 (more channels in every layer but the last;
# again the 224-pixel ImageNet training applied at 96 pixels).

# %%
print(f"MobileNetV2 alpha=0.5: {retrieval.mobilenet_v2(0.5).count_params():,} weights "
      f"(alpha=0.35: {model.count_params():,})")
q_wide, db_wide = attnlab.embed_images(q_x, alpha=0.5), attnlab.embed_images(db_x, alpha=0.5)
nn_wide = retrieval.nearest_neighbours(q_wide, db_wide, k=5)
wide = retrieval.same_class_rates(q_y, db_y, nn_wide)
print(f"{'search space':<22} {'top-1':>6} {'top-5':>6}")
for name, rates in (("MobileNetV2 α=0.35", cnn), ("MobileNetV2 α=0.5", wide), ("raw pixels", pix)):
    print(f"{name:<22} {rates['top1']:6.3f} {rates['top5']:6.3f}")
hit_wide = db_y[nn_wide[:, 0]] == q_y
se_wide = np.sqrt(int((hit_wide != hit_cnn).sum())) / len(q_y)
d_wide = wide["top1"] - cnn["top1"]
if abs(d_wide) <= 2 * se_wide:
    print(f"The wider network changes top-1 by {d_wide:+.3f}, within two standard errors "
          f"({2 * se_wide:.3f}): no measurable gain from width here.")
else:
    print(f"The wider network changes top-1 by {d_wide:+.3f}, more than two standard errors "
          f"({2 * se_wide:.3f}): width {'helps' if d_wide > 0 else 'hurts'} here.")
assert wide["top1"] > 3 * chance

# %% [markdown]
# ## Summary
#
# - A frozen ImageNet network turns Fashion-MNIST images into embeddings in which same-class items
#   are neighbours far more often than chance, with no training at all.
# - On clean, centred images raw pixel distance is the rival to beat; section 3 measured which is
#   ahead and whether the gap is larger than luck.
# - Damage separates the two: section 6 measured, for shifts, noise and inversion, which search
#   keeps its accuracy. What a pre-trained embedding is invariant to comes from what its training
#   images varied in — and what it is not invariant to shows up as a falling curve.
# - All of this used the 224-pixel training at 96 pixels; the numbers are for that setting.

# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Building and training an encoder
#
# A small Transformer encoder learns to classify synthetic reviews whose label turns on **word
# order**: the sentiment word after "but" decides. You write its block, train the model through
# your block, and test whether it needs its attention. Notebook 04 reads that attention.

# %% [markdown]
# ## What you will learn
#
# - an encoder block's parts, written by you: attention, feed-forward layer, residuals, LayerNorm,
#   padding mask;
# - a training loop: minibatches, a loss, gradients, Adam;
# - the test before a heatmap is read: make every weight uniform; do predictions survive?
# - optional (*Going further*): post-norm against pre-norm, and a warm-up.
#
# Assumes: notebook 01 (multi-head attention) and basic PyTorch (tensors, `nn.Module`).

# %% slideshow={"slide_type": "skip"}
import copy

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import attnlab
from attnlab.core import hooks
from attnlab.core.models import TinyTransformer, encoder_replaced
from attnlab.core.recipes import TINY
from attnlab.core.training import evaluate
from attnlab.exercises import ex03
from attnlab.lessons.classifier import fit_classifier, train_classifier
from attnlab.lessons.data import LABELS, Vocab, make_contrast_reviews
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.views import diagrams
from attnlab.views.plots import show_figure

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
# Which sentiment word follows "but" is a coin flip: the label turns on word order. A model must
# relate words to their order; whether attention is the only way, we measure.
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
# varies from run to run (notebook 04 trains five; over 55 models, 8 to 55 points). From here on,
# `attnlab.uniform_attention(model)` does this.
#
# That is a fact about this model, not the task: each token's position vector still reaches the mean
# through the *residual path* (the `x +` of each block, around attention), so "this positive word stands late" could decide with no token reading
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
# Notebook 04 reads the weights of this model, which does use them; notebook 05 removes the
# positions instead.

# %% [markdown]
# ## What we learned
#
# - An encoder block is a few lines around notebook 01's attention: the padding mask,
#   `LayerNorm(x + MHA(x))`, `LayerNorm(x + FFN(x))`, mean pooling. Adam trains it, through your
#   block, on reviews whose label turns on word order.
# - Before reading attention, take it away: uniform weights cost this model accuracy (over 55
#   models, 8 to 55 points). Yet the task needs no attention: the same recipe, uniform from the
#   start, passed 0.9.
# - Notebook 04 reads this model's attention; notebook 05 asks what the position vectors
#   contributed.

# %% [markdown]
# ## Going further
#
# Optional: nothing on the main line needs it. *Post-norm or pre-norm* trains both blocks at a
# high learning rate, with and without a warm-up.

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

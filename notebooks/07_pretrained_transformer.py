# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · A pre-trained transformer, inside our own attention code
#
# Real models are the machinery of notebooks 01–05, bigger and trained on far more text. Here we
# load a published one, **all-MiniLM-L6-v2** (a 6-layer BERT-style sentence encoder by the
# sentence-transformers project, Apache-2.0), into our `MultiHeadAttention` (notebook 01) and
# `EncoderBlock` (notebook 03): no `transformers` library, only the weight file, the vocabulary
# and our code.

# %% [markdown]
# ## What you will learn
#
# - a published transformer's weights load into attnlab's `EncoderBlock` and reproduce its
#   published numbers to 4 decimals;
# - test whether a model needs its attention before reading its heads, and read them over many
#   sentences;
# - the weight a token receives need not be information it gives; two interventions test
#   which;
# - optional (*Going further*): what pre-training buys on unseen words, a reliability diagram,
#   the sentiment app.
#
# Assumes: notebooks 01 (multi-head attention), 03 and 04 (the encoder block, hiding a word
# from attention), 05 (the one-word "bag" reviews) and 06 (the cosine of two vectors).

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.core.recipes import HEAD
from attnlab.core.training import evaluate
from attnlab.exercises import ex07
from attnlab.lessons import data
from attnlab.lessons.classifier import initial_model, task_reviews, train_classifier
from attnlab.lessons.sentiment import (
    attention_patterns,
    encode_without_key,
    fit_head,
    pooling_reviews,
    token_states,
)
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.pretrained.minilm import model_files
from attnlab.views.app import EXAMPLE_REVIEW, TINY_RECIPE, SentimentApp
from attnlab.views.plots import BLUE, ORANGE, attention_heatmap, layer_head_grid, show_figure

attnlab.seed_everything(0)

# %% [markdown]
# ## The published weights in our blocks
#
# `load_minilm()` reads the config, builds the embeddings and six `attnlab.EncoderBlock`s
# (post-norm as in notebook 03, with **GELU**, a smoothed ReLU, in the feed-forward layer) and
# renames each weight of the file onto our modules (`attention.self.query` → `attn.q`, ...).
# Where the 22.6 M parameters sit:

# %% slideshow={"slide_type": "subslide"}
minilm = attnlab.load_minilm()
n_params = sum(p.numel() for p in minilm.parameters())
block = minilm.blocks[0]


def count(*modules):
    return sum(p.numel() for m in modules for p in m.parameters())


print(f"files: {', '.join(sorted(model_files()))}")
print(f"vocabulary: {minilm.config['vocab_size']:,} word pieces")
print(f"embeddings (word, position, token type, LayerNorm): "
      f"{count(minilm.word, minilm.position, minilm.token_type, minilm.embed_norm):>10,}")
print(f"one block: attention (q, k, v, out)               {count(block.attn):>10,}")
print(f"           feed-forward 384 → 1536 → 384         {count(block.ff):>10,}")
print(f"           two LayerNorms                        {count(block.norm1, block.norm2):>10,}")
print(f"{minilm.n_layers} blocks x {minilm.n_heads} heads (d_head {block.attn.d_head}), "
      f"total {n_params:,} parameters")

# %% tags=["remove-cell"]
assert all(type(b) is attnlab.EncoderBlock and type(b.attn) is attnlab.MultiHeadAttention
           for b in minilm.blocks)
assert count(minilm) == n_params == count(minilm.word, minilm.position, minilm.token_type,
                                          minilm.embed_norm) + minilm.n_layers * count(block)

# %% [markdown]
# Most parameters are the word embeddings: a 384-number row for each of the 30,522 **word pieces**
# of the vocabulary. Common words are one piece; rarer ones are split, `##` marking a piece that
# continues a word. Every input is wrapped in two special tokens: **[CLS]** ("classification")
# first, and **[SEP]** ("separator") at the end of each sentence.

# %%
for text in ("The plot was dismal.", "Attention is all you need"):
    print(minilm.tokenize([text]).tokens[0])

# %% [markdown]
# ## Is it really all-MiniLM-L6-v2?
#
# A sentence vector, as in notebook 03, is the mean of the last layer's token vectors over the real
# tokens, here scaled to length 1 so the cosine of two is their dot product;
# `minilm.encode(sentences)` computes it. The sentence-transformers documentation (Quickstart)
# prints the similarities of three sentences under this model. Any error would break the 4th
# decimal.

# %%
quickstart = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
published = [["1.0000", "0.6660", "0.1046"],
             ["0.6660", "1.0000", "0.1411"],
             ["0.1046", "0.1411", "1.0000"]]
e = minilm.encode(quickstart)  # (3, 384)   unit-length sentence vectors
ours = [[fmt(v, 4) for v in row] for row in (e @ e.T).tolist()]
for text, row, ref in zip(quickstart, ours, published):
    print(f"{text:30s} ours {'  '.join(row)}   published {'  '.join(ref)}")
agree = sum(a == b for row, ref in zip(ours, published) for a, b in zip(row, ref))
print(f"numbers that agree to 4 decimals: {agree} of 9")

# %% tags=["remove-cell"]
assert ours == published, "all 9 numbers agree to 4 decimals"

# %% [markdown]
# ## Sentence similarity
#
# Six sentences, three topics, each said twice in different words. Similar meaning should give a
# high cosine even when a pair shares almost no word.

# %% tags=["hide-input"]
sentences = ["A man is playing a guitar.", "Someone is strumming an instrument.",
             "The stock market fell sharply today.", "Share prices dropped at the close.",
             "My cat sleeps all afternoon.", "The kitten naps in the sun."]
vectors = minilm.encode(sentences)  # (6, 384)
similarity = vectors @ vectors.T    # (6, 6)   cosines
fig, ax = plt.subplots(figsize=(9, 5))
image = ax.imshow(similarity, cmap="RdBu_r", vmin=-1, vmax=1)
for (i, j), value in zip(torch.cartesian_prod(torch.arange(6), torch.arange(6)).tolist(),
                         similarity.flatten().tolist()):
    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=11,
            color="white" if abs(value) > 0.6 else "black")
short = [s[:20] for s in sentences]
ax.set_xticks(range(6), short, rotation=30, ha="right", fontsize=11)
ax.set_yticks(range(6), short, fontsize=11)
ax.set_title("cosine similarity of MiniLM sentence vectors (−1 to 1)", fontsize=12)
colorbar = plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
colorbar.ax.tick_params(labelsize=11)
plt.tight_layout()
show_figure()

# %%
others = similarity - 2 * torch.eye(len(sentences))  # rule out each sentence itself
nearest = others.argmax(dim=1)
for i, j in enumerate(nearest.tolist()):
    print(f"{sentences[i]:37s} -> {sentences[j]:37s} cosine {fmt(similarity[i, j], 3)}")
across = max(similarity[i, j].item() for i in range(6) for j in range(6) if i // 2 != j // 2)
print(f"highest cosine across topics: {fmt(across, 3)}")

# %% tags=["remove-cell"]
assert nearest.tolist() == [1, 0, 3, 2, 5, 4], "every sentence's nearest is its paraphrase"
assert across < similarity[nearest, torch.arange(6)].min()

# %% [markdown]
# Every sentence's nearest neighbour is its paraphrase, and every paraphrase pair is more similar
# than any two sentences on different topics.

# %% [markdown]
# ## A sentiment classifier on the frozen encoder
#
# On the frozen encoder's sentence vectors we train only a linear layer `384 → 2` (`fit_head`) on
# notebook 05's **bag** task: one positive or negative word among neutral filler. It gets the
# first 400 training reviews. We train three heads, seeds 0, 1 and 2, and believe only what all
# three show.

# %%
train, test = task_reviews("bag")  # the reviews train_classifier(task="bag") uses
head_train = train[: HEAD.n_train]
x_train, x_test = minilm.encode(head_train.texts()), minilm.encode(test.texts())  # (N, 384)
y_train, y_test = torch.tensor(head_train.labels), torch.tensor(test.labels)  # (N,)
SEEDS = (0, 1, 2)
heads = [fit_head(x_train, y_train, x_test, y_test, seed=s)[0] for s in SEEDS]
head = heads[0]  # seed 0's head: the interventions and the app below use it
head_accs = [evaluate(h, x_test, y_test)[1] for h in heads]
head_acc = head_accs[0]
print(f"MiniLM + head: trained on {len(head_train)} reviews ({count(head):,} weights trained, "
      f"{n_params:,} frozen)")
print(f"test accuracy on {len(test)}: "
      + ", ".join(f"{fmt(a, 3)} (seed {s})" for s, a in zip(SEEDS, head_accs)))

# %% tags=["remove-cell"]
assert min(head_accs) >= 0.95

# %% [markdown]
# ## Does MiniLM need its attention?
#
# Before reading any head, notebook 03's test: under `attnlab.uniform_attention(model)` each
# query gives every key the same weight: MiniLM keeps everything but what its 72 heads learned
# about where to look. We encode ten probe sentences (the six above, the Quickstart's three and
# one more) and the 400 test reviews both ways and compare each sentence vector with its normal
# one.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: with every attention weight uniform, how similar (cosine) will a
# sentence vector stay to its normal one: 0.99? 0.9? 0.5? And will the sentiment head still work?

# %% [markdown]
# **Predict first.** What will the mean cosine between the uniform-attention and the normal
# sentence vectors of the ten probe sentences be (1 = unchanged)?

# %%
guess = ...  # your prediction: a cosine between -1 and 1
### BEGIN SOLUTION
guess = 0.5
### END SOLUTION

# %%
probe = sentences + quickstart + ["The cat sat on the mat because it was tired."]
probe_vectors = minilm.encode(probe)  # (10, 384)
with attnlab.uniform_attention(minilm):
    probe_uniform = minilm.encode(probe)  # (10, 384)
    test_uniform = minilm.encode(test.texts())  # (400, 384)
probe_cos = (probe_uniform * probe_vectors).sum(1)  # (10,)
test_cos = (test_uniform * x_test).sum(1)  # (400,)
pairs_cos = probe_vectors @ probe_vectors.T  # (10, 10)
unrelated = (pairs_cos.sum() - pairs_cos.trace()) / (len(probe) * (len(probe) - 1))
uniform_accs = [evaluate(h, test_uniform, y_test)[1] for h in heads]
print("cosine to the normal sentence vector under uniform attention: mean (lowest, highest)")
print(f"  10 probe sentences: {fmt(probe_cos.mean(), 2)} ({fmt(probe_cos.min(), 2)}, "
      f"{fmt(probe_cos.max(), 2)})")
print(f"  400 test reviews:   {fmt(test_cos.mean(), 2)} ({fmt(test_cos.min(), 2)}, "
      f"{fmt(test_cos.max(), 2)})")
print(f"  for scale, two different probe sentences: {fmt(unrelated, 2)}")
print("sentiment heads' test accuracy, normal -> uniform attention: "
      + ", ".join(f"{fmt(a, 3)} -> {fmt(u, 3)}" for a, u in zip(head_accs, uniform_accs)))
ex07.uniform_cosine(guess, probe_cos.mean().item())

# %% tags=["remove-cell"]
assert probe_cos.mean() < 0.6 and test_cos.mean() < 0.7 and unrelated < 0.25
assert all(0.8 < u < a - 0.02 for a, u in zip(head_accs, uniform_accs))
# over ATTNLAB_SEED 0-21 (three heads each) the drop was 0.040-0.142 and the lowest uniform 0.858
assert all(0.03 < a - u < 0.17 for a, u in zip(head_accs, uniform_accs)), "4 to 14 points"

# %% [markdown]
# Without its learned attention, the probe sentences' vectors keep a cosine of about 0.44 with
# their normal selves, between "the same" (1) and "another sentence" (0.12). The sentiment heads
# lose less: each stays above 0.8, and over the heads of 22 seeds each lost 4 to 14 points. A
# one-word review needs little attention: its sentiment word reaches the mean through the residual
# path (notebook 03).

# %% [markdown]
# ## What its attention does
#
# `attention_maps(sentence)` returns the word pieces and, per layer, the weights `(1, 12, T, T)`.
# Below, all 72 heads for one sentence: rows are queries, columns keys.

# %% tags=["hide-input"]
tokens, maps = minilm.attention_maps(probe[-1])
print(tokens)
fig = layer_head_grid(maps, title=f"all-MiniLM-L6-v2, every layer and head: {probe[-1]!r}")
fig.set_size_inches(10, 5.4)
for ax in fig.axes:  # head and layer labels readable on a slide
    ax.title.set_fontsize(11)
    ax.yaxis.label.set_fontsize(11)
fig.tight_layout()
show_figure()

# %% [markdown]
# A bright first column in many squares: much weight on `[CLS]`. One sentence shows little, so
# we measure all ten probe sentences. Per layer, averaged over heads and queries: the share of
# attention (1.0: all of it) `[CLS]` and `[SEP]` receive, and the largest share any other token
# (word or punctuation) receives in any sentence.

# %% slideshow={"slide_type": "subslide"}
received, patterns = [], []
for s in probe:
    tokens_s, maps_s = minilm.attention_maps(s)
    received.append(torch.stack([m[0].mean(dim=(0, 1)) for m in maps_s]))  # (6, T) per token
    patterns.append(attention_patterns(tokens_s, maps_s))  # name -> (6, 12)
cls_share = torch.stack([r[:, 0] for r in received])  # (10, 6)   sentences x layers
top_other = torch.stack([r[:, 1:].max(dim=1).values for r in received])  # (10, 6)
even = torch.tensor([1 / r.shape[1] for r in received])  # (10,)   each token's uniform share
sep_share = torch.stack([r[:, -1] for r in received])  # (10, 6)
print(f"{'layer':>5} {'[CLS]: mean (lowest–highest)':>29} {'[SEP]: mean':>12} "
      f"{'largest other':>14}")
for layer in range(minilm.n_layers):
    c = cls_share[:, layer]  # (10,)
    print(f"{layer:5d} {fmt(c.mean(), 3):>13} ({fmt(c.min(), 3)}–{fmt(c.max(), 3)}) "
          f"{fmt(sep_share[:, layer].mean(), 2):>12} {fmt(top_other[:, layer].max(), 3):>14}")
ratio = cls_share / top_other  # (10, 6)
print(f"an even spread gives each token {fmt(even.min(), 2)} to {fmt(even.max(), 2)}; [CLS] "
      f"receives {fmt(ratio.min(), 1)} to {fmt(ratio.max(), 0)} times the largest share of any "
      f"other token, in every layer of every probe sentence")

# %% tags=["remove-cell"]
assert (cls_share > 2 * even[:, None]).all(), "[CLS] gets over twice the even share everywhere"
assert (ratio > 1.2).all() and top_other.max() < 0.25
assert (ratio[:, 1:5] > 4).all() and cls_share[:, 1:5].min() > 0.5

# %% [markdown]
# In every layer of every probe sentence `[CLS]` receives more than any other token: in layers
# 1–4 over half of all attention and at least 4 times the largest share of any word, in layers
# 0 and 5 less (down to 1.4 times). No word receives a quarter of a layer's attention anywhere.
# A common reading (Clark et al., 2019, "What does BERT look at?", said it of `[SEP]`; later work
# calls such tokens *attention sinks*): a head with nothing specific to look for parks its weight
# on a special token, a **no-op**. That is a hypothesis about *information*; the table measures
# *weight*.

# %% [markdown]
# ## Weight or information? Two interventions
#
# Notebook 04 took a word out of attention two ways. **Hide it as a key**: mask it before the
# softmax, like padding, so its weight is shared out over the other keys. **Zero it after the
# softmax**: its weight is thrown away. Zeroing the token's **value** vector does the second in
# every head at once: each output is Σ_j w_ij v_j, so a zero v_j is a zero column j of weights.
# Write both for one attention: `q (B, H, T, D)`, `k` and `v (B, H, S, D)`, `key (B,)` the index
# of the key to take out in each batch row, `how` "mask" or "value". Return the output.
#
# <details><summary>Hint 1</summary>
#
# A key is a column of the weights: the last dimension of a mask. In a mask, True means "may
# attend".
# </details>
#
# <details><summary>Hint 2</summary>
#
# Mark the key of each batch row in a `(B, S)` bool tensor (compare `torch.arange(S)` with
# `key`). For "mask", give its opposite to `attnlab.scaled_dot_product_attention`, shaped to
# broadcast over heads and queries. For "value", set those rows of `v` to zero (shaped to
# broadcast over heads and the last dimension) and attend without a mask.
# </details>

# %%
def my_without_key(q, k, v, key, how):
    ### BEGIN SOLUTION
    out_key = torch.arange(k.shape[-2]) == key[:, None]  # (B, S)   True at the key taken out
    if how == "mask":  # no query may attend to it: the softmax shares its weight out
        return attnlab.scaled_dot_product_attention(q, k, v, ~out_key[:, None, None, :])[0]
    v_zeroed = v.masked_fill(out_key[:, None, :, None], 0.0)  # (B, H, S, D)   reads nothing
    return attnlab.scaled_dot_product_attention(q, k, v_zeroed)[0]
    ### END SOLUTION


without_key = ex07.without_key(my_without_key)

# %% [markdown]
# `encode_without_key(minilm, sentences, ...)` does it in every layer and head, for `[CLS]` or a
# word (all its word pieces). The token stays in the sentence and in the mean: only its role as a
# key changes. On the first 100 test reviews we take out `[CLS]`, the sentiment word or a filler
# word (the first word, or the second where the first is the sentiment word), and measure the cosine
# to the normal vectors and accuracy.

# %%
reviews = test[:100]
texts, y_some, x_some = reviews.texts(), y_test[:100], x_test[:100]
filler = [1 if p == 0 else 0 for p in reviews.positions]
tokens_out = {"[CLS]": {"position": 0}, "the sentiment word": {"word_index": reviews.positions},
              "a filler word": {"word_index": filler}}
_, base_acc = evaluate(head, x_some, y_some)
print(f"{'':18}   hidden as a key       value zeroed      (accuracy as is: {fmt(base_acc, 3)})")
print(f"{'':18}  cosine  accuracy    cosine  accuracy")
moved = {}
for name, which in tokens_out.items():
    for how in ("mask", "value"):
        v = encode_without_key(minilm, texts, how=how, **which)  # (100, 384)
        moved[name, how] = ((v * x_some).sum(1).mean().item(), evaluate(head, v, y_some)[1])
    print(f"{name:18}" + "".join(f"   {fmt(moved[name, how][0], 3)}     "
                                 f"{fmt(moved[name, how][1], 3)}" for how in ("mask", "value")))

# %% tags=["remove-cell"]
for name in ("the sentiment word", "a filler word"):
    assert abs(moved[name, "mask"][0] - moved[name, "value"][0]) < 0.02, name
# over 20 series seeds: the sentiment word costs 3 to 26 points, [CLS]'s value at most one review
assert all(moved["the sentiment word", how][1] < base_acc for how in ("mask", "value"))
assert moved["[CLS]", "value"][0] > 0.99 and abs(moved["[CLS]", "value"][1] - base_acc) < 0.015
assert moved["[CLS]", "mask"][0] < 0.7
assert all(0.9 < moved["the sentiment word", how][0] < moved["a filler word", how][0]
           for how in ("mask", "value")), "a filler word moves the vectors less"
assert moved["[CLS]", "mask"][0] < moved["the sentiment word", "mask"][0] - 0.2

# %% [markdown]
# - The sentiment word: hiding it as a key and zeroing its value move the sentence vectors about
#   equally (cosines within 0.02 of each other) and both cost the head accuracy; a filler word
#   moves them a little, both ways alike.
# - `[CLS]` differs: much weight, little content. Zero its value and nothing moves
#   (cosine above 0.99, the accuracy as it was, or one review of 100 off with other seeds):
#   heads read almost nothing from it, as the sink reading says. Hide it as a key and the
#   vectors move further than for any word (cosine below 0.7): its large weight goes to the
#   words, read far more than the heads were trained to.
#
# **Weight on `[CLS]` was not information from it.** For these three tokens, where the two
# interventions agreed, the token carried information; where only masking mattered, the weight
# looks parked. Three tokens suggest a test, not a law.

# %% [markdown]
# ## Heads with a job, and what "it" reads
#
# Some heads have one clear job: the head that looks most at the previous token, averaged over
# the ten probe sentences:

# %%
previous = torch.stack([p["previous"] for p in patterns])  # (10, 6, 12)
prev_layer, prev_head = divmod(int(previous.mean(0).argmax()), minilm.n_heads)
prev_share = previous[:, prev_layer, prev_head]  # (10,)
print(f"previous-token head: layer {prev_layer}, head {prev_head}: {fmt(prev_share.mean(), 2)} of "
      f"its attention on the previous token (lowest sentence {fmt(prev_share.min(), 2)}; a "
      f"uniform head: {fmt(even.mean(), 2)})")

# %% tags=["remove-cell"]
assert prev_share.min() > 0.85

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(6, 5))
attention_heatmap(maps[prev_layer][0, prev_head], tokens, tokens, ax=ax, annotate=False,
                  title=f"layer {prev_layer}, head {prev_head}: the previous token")
fig.tight_layout()
show_figure()

# %% [markdown]
# A harder question: does some head link *it* to what it refers to? In "The cat sat on the mat
# because it was tired", *it* is the cat; in "… because it was soft", the mat. A head that
# resolves *it* should then move its weight from `cat` to `mat`. One sentence cannot show this
# (a head may look from `it` to `cat` because every token looks at `cat`); a **minimal pair**,
# two sentences that differ in one word, can.
#
# **Explore.** Write your own minimal pair, whose changed word changes what *it* refers to, and
# its two candidates (one word piece each; `minilm.tokenize([s]).tokens` shows the pieces).
# Choose a (layer, head) and report the weight `it` puts on each candidate in each sentence:
# `[[on candidate 1, on candidate 2] in sentence 1, [the same] in sentence 2]`. The check
# recomputes it from your sentences. Try several heads: does any move the way the meaning
# does?
#
# <details><summary>Hint 1</summary>
#
# The weight `it` puts on a word is in the row of `it` (the query) and the column of the word (the
# key) of the head's `(T, T)` map.
# </details>
#
# <details><summary>Hint 2</summary>
#
# For each sentence, `minilm.attention_maps(sentence)` gives the word pieces and the maps; the
# head's matrix is `maps[layer][0, head]`; `tokens.index(...)` finds a row or a column.
# </details>

# %% slideshow={"slide_type": "subslide"}
my_pair = ..., ...           # two sentences that differ in one word, "it" in both
my_candidates = ..., ...     # the two words "it" could refer to
my_layer, my_head = ..., ...
my_weights = ...             # [[w1, w2] in sentence 1, [w1, w2] in sentence 2]
### BEGIN SOLUTION
my_pair = ("The boy kicked the ball because it was bored.",
           "The boy kicked the ball because it was round.")
my_candidates = ("boy", "ball")
my_layer, my_head = 3, 7
my_weights = []
for one in my_pair:
    pieces, one_maps = minilm.attention_maps(one)
    row = one_maps[my_layer][0, my_head, pieces.index("it")]  # (T,)   what "it" gives each key
    my_weights.append([row[pieces.index(c)].item() for c in my_candidates])
### END SOLUTION
my_weights = ex07.minimal_pair(my_weights, my_pair, my_candidates, (my_layer, my_head),
                               minilm.attention_maps)

# %% [markdown]
# Now seven minimal pairs, every head, and seven **control pairs**: in a minimal pair the changed
# word moves *it* from the first candidate to the second; a control pair changes the same word to
# one that leaves *it* where it was ("tired" → "sleepy": still the cat). A head's **move**: how much
# more weight `it` puts on the first candidate than on the second in the first sentence, minus the
# same in the second. A head that follows the meaning moves positively in the minimal pairs and near
# 0 in the controls; one that only reacts to a changed word moves in both.

# %% tags=["hide-input"]
# template, the word that makes "it" the first candidate, the word that makes it the second, a
# word that keeps it the first, the two candidates
pairs = [("The trophy did not fit in the suitcase because it was too {}.", "big", "small",
          "large", "trophy", "suitcase"),
         ("The table did not fit through the door because it was too {}.", "wide", "narrow",
          "big", "table", "door"),
         ("The cat sat on the mat because it was {}.", "tired", "soft", "sleepy", "cat", "mat"),
         ("The bird ate the worm because it was {}.", "hungry", "tasty", "starving", "bird",
          "worm"),
         ("The rock broke the window because it was {}.", "heavy", "fragile", "solid", "rock",
          "window"),
         ("The fish ignored the bait because it was {}.", "full", "rotten", "wary", "fish",
          "bait"),
         ("The dog chased the ball because it was {}.", "excited", "rolling", "bored", "dog",
          "ball")]


def preference(sentence, first, second):
    """(6, 12): the weight "it" puts on `first` minus the weight it puts on `second`, per head."""
    tokens_s, maps_s = minilm.attention_maps(sentence)
    w = torch.stack([m[0, :, tokens_s.index("it")] for m in maps_s])  # (6, 12, T)
    return w[..., tokens_s.index(first)] - w[..., tokens_s.index(second)]


moves = {"minimal": [], "control": []}
for template, word_1, word_2, same, first, second in pairs:
    before = preference(template.format(word_1), first, second)  # (6, 12)   "it" is `first`
    moves["minimal"].append(before - preference(template.format(word_2), first, second))
    moves["control"].append(before - preference(template.format(same), first, second))
moves = {kind: torch.stack(m) for kind, m in moves.items()}  # kind -> (7, 6, 12)
print(f"{'pair':<16} {'largest move: minimal':>22} {'control':>8}   (largest over the 72 heads)")
for i, (*_, first, second) in enumerate(pairs):
    print(f"{first + '/' + second:<16} {fmt(moves['minimal'][i].abs().max(), 2):>22} "
          f"{fmt(moves['control'][i].abs().max(), 2):>8}")
size = {kind: m.abs().mean() for kind, m in moves.items()}  # mean |move| over pairs and heads
moving = {kind: int((m.abs() > 0.1).any(0).sum()) for kind, m in moves.items()}
print(f"mean size of a move over all heads and pairs: minimal {fmt(size['minimal'], 3)}, "
      f"control {fmt(size['control'], 3)}")
print(f"heads that move by more than 0.1 in some pair: minimal {moving['minimal']} of 72, "
      f"control {moving['control']} of 72")
top_layer, top_head = divmod(int(moves["minimal"].mean(0).argmax()), minilm.n_heads)
top = {kind: m[:, top_layer, top_head] for kind, m in moves.items()}  # kind -> (7,)
print(f"the head with the largest mean move in the minimal pairs, layer {top_layer}, head "
      f"{top_head}: largest move with the meaning {fmt(top['minimal'].max(), 2)}; largest in a "
      f"control pair {fmt(top['control'].abs().max(), 2)}")
print(f"heads that move with the meaning in every minimal pair: "
      f"{int((moves['minimal'].min(0).values > 0).sum())} of 72")

# %% tags=["remove-cell"]
every = torch.cat([m.flatten() for m in moves.values()]).abs()
assert ((every - 0.1).abs() > 5e-4).all(), "no move so close to 0.1 that another CPU counts it"
assert size["minimal"] < 1.5 * size["control"], "minimal pairs move about as much as controls"
assert top["control"].abs().max() > 0.75 * top["minimal"].max()
assert int((moves["minimal"].min(0).values > 0).sum()) == 0
assert [fmt(size[k], 3) for k in moves] == ["0.014", "0.011"] and moving == {"minimal": 7,
                                                                            "control": 2}
assert fmt(top["minimal"].max(), 2) == "0.41" and fmt(top["control"].abs().max(), 2) == "0.37"
second = moves["minimal"].mean(0).flatten().topk(2).values
assert second[0] - second[1] > 1e-3, "the top head is not a near tie another CPU could swap"

# %% [markdown]
# Changing what *it* refers to moves the weights of `it` only a little more than a control change:
# the mean size of a move is 0.014 against 0.011, and more heads move by more than 0.1 (7 of 72
# against 2). But the head that moves most with the meaning (0.41) moves almost as far (0.37) in a
# control pair, and no head moves towards the new referent in every minimal pair. The weights show
# heads reacting to a changed word, not resolving pronouns; the model may still resolve *it* in its
# vectors.

# %% [markdown]
# ## What we learned
#
# - all-MiniLM-L6-v2's weights in our `EncoderBlock` and `MultiHeadAttention` reproduce the
#   published similarities to 4 decimals; its sentence vectors find each sentence's paraphrase.
# - MiniLM needs its attention: under uniform weights the probe sentences' vectors keep a cosine
#   of only about 0.44 with their normal selves, and each sentiment head loses 4 to 14 points
#   (22 seeds).
# - `[CLS]` receives the most attention in every layer of ten probe sentences, yet zeroing its
#   value changes almost nothing while hiding it as a key moves the vectors far; for the
#   sentiment word both do about the same: weight on `[CLS]` was not information from it.
# - In seven minimal pairs the weights of *it* move only a little more than in seven control
#   pairs, and no head follows the referent in every pair.

# %% [markdown]
# ## Going further
#
# Optional: nothing on the main line needs it. *Why one-word reviews?* measures what a
# mean-pooled sentence vector keeps of notebook 03's contrast reviews, and a head that pools by
# attention instead; *Words neither model was trained on* sets MiniLM + head against a
# TinyTransformer trained from scratch, on unseen synonyms and in a reliability diagram; *The
# sentiment app* lets MiniLM with the attention-pooling head and the TinyTransformer answer a
# review you type.

# %% [markdown]
# ### Why one-word reviews?
#
# Why does the head not read notebook 03's contrast reviews ("… dull … but … superb …", the word
# after "but" decides)? A sentence vector is a mean over tokens. Swap the two sentiment words of
# a contrast review and its label flips; how far does its sentence vector move?

# %%
contrast = data.make_contrast_reviews(200, seed=0)
swapped = data.swapped(contrast).texts()  # the two sentiment words exchanged: the label flips
x_contrast, x_swapped = minilm.encode(contrast.texts()), minilm.encode(swapped)  # (200, 384)
swap_cos = (x_contrast * x_swapped).sum(1)  # (200,)
print(f"{contrast.texts()[1]!r} -> {swapped[1]!r}")
print(f"cosine of a contrast review and its swap, over {len(contrast)} reviews: mean "
      f"{fmt(swap_cos.mean(), 3)}, lowest {fmt(swap_cos.min(), 3)}")

# %% tags=["remove-cell"]
assert swap_cos.mean() > 0.95 and swap_cos.min() > 0.7

# %% [markdown]
# Two reviews with opposite labels get nearly the same vector. Nearly, not exactly: can a linear
# layer still tell them apart? Train one by the head's recipe on 150 reviews and their swaps (300
# vectors: every bag of words once with each label) and test it on the other 50 pairs, three
# seeds.

# %%
y_contrast = torch.tensor(contrast.labels)  # (200,)   its swap has the other label
probe_x = torch.cat([x_contrast, x_swapped])  # (400, 384)
probe_y = torch.cat([y_contrast, 1 - y_contrast])  # (400,)
fit_side = torch.arange(len(probe_y)) % len(contrast) < 150  # (400,)   a pair on one side
probe_accs = []  # (accuracy on its 300 training vectors, on the 100 held out) per seed
for s in SEEDS:
    swap_probe, _ = fit_head(probe_x[fit_side], probe_y[fit_side], probe_x[~fit_side],
                        probe_y[~fit_side], seed=s)
    probe_accs.append([evaluate(swap_probe, probe_x[side], probe_y[side])[1]
                       for side in (fit_side, ~fit_side)])
print("a linear layer on contrast reviews and their swaps, accuracy (chance: 0.5)")
for s, (on_fit, held_out) in zip(SEEDS, probe_accs):
    print(f"  seed {s}: {fmt(on_fit, 3)} on its training vectors, {fmt(held_out, 3)} held out")

# %% tags=["remove-cell"]
assert all(0.55 < held_out < 0.85 and on_fit < 0.9 for on_fit, held_out in probe_accs)
assert max(held_out for _, held_out in probe_accs) < min(head_accs) - 0.1

# %% [markdown]
# It separates them a little: better than chance on pairs it never saw, but far from what the
# head does on one-word reviews, and below 0.9 even on its own training vectors. The mean
# keeps which words occur and only a faint trace of which one comes after "but": a contrast
# review and its swap, with opposite labels, keep a cosine above 0.95 on average.

# %% [markdown]
# ### A head that pools by attention
#
# So do not average. Give the head one learned query that attends over MiniLM's token states
# (before the mean): softmax(states · q) weights the tokens, and a linear layer reads their
# weighted sum (`sentiment.AttentionPooling`, the pooling of [CLS] and of the Set Transformer).
# Each token's state already carries its neighbours, so the query can pick the word after
# "but". Train it, three seeds, on the series' reviews (`pooling_reviews`: one-word reviews,
# contrasts with "but" or "yet" in both orders, "not" before a sentiment word) and test it on the
# 200 contrast reviews above and their swaps, which it never saw.

# %%
pool_train = pooling_reviews()
x_pool = token_states(minilm, pool_train.texts())  # (1400, T, 384)   zeros: no token
x_pairs = token_states(minilm, contrast.texts() + swapped)  # (400, T, 384)
y_pool, y_pairs = torch.tensor(pool_train.labels), torch.cat([y_contrast, 1 - y_contrast])
# parallel_map trains the three side by side where a core is free: the same heads, sooner
pooling_heads = parallel_map(lambda s: fit_head(x_pool, y_pool, x_pairs, y_pairs, seed=s)[0],
                             SEEDS)
pool_accs = [evaluate(h, x_pairs, y_pairs)[1] for h in pooling_heads]
# A few of the 400 sit at P(positive) = 0.5, where another CPU's last bits flip them: the line
# says what holds for every seed, and holds with a few to spare.
print("on the 200 contrast reviews and their swaps, accuracy (chance: 0.5)")
print(f"  linear head on the mean, trained on 150 of the pairs: "
      f"{', '.join(fmt(held, 3) for _, held in probe_accs)} (on the other 50)")
print(f"  attention pooling, never trained on them:             "
      f"{'above' if min(pool_accs) > 0.95 else 'NOT above'} 0.95 with each seed")

# %% tags=["remove-cell"]
assert min(pool_accs) > 0.95 and min(pool_accs) > max(held for _, held in probe_accs) + 0.1

# %% [markdown]
# Pooling by attention reads the order the mean lost: above 0.95 on pairs it never saw, with
# all three seeds, where the linear head on the mean stayed near 0.65. Over seven series seeds
# (`ATTNLAB_SEED`) its lowest was 0.965. The sentiment app below uses it.

# %% [markdown]
# ### Words neither model was trained on
#
# Now the TinyTransformer of notebooks 03–05, trained from scratch on the same one-word reviews
# (`train_classifier(task="bag")`, all its weights learned), against MiniLM + head. Both solve
# these reviews. Then reviews built the same way but with sentiment words that never appeared in
# training: synonyms such as *terrific* or *atrocious*. The tiny model's vocabulary does not
# contain them: it reads each as `<unk>`, the token for unknown words.

# %% slideshow={"slide_type": "subslide"}
# parallel_map trains it side by side with the model that "Can its confidence be trusted?"
# needs below (undecided=400), where a core is free: the same models, sooner
tiny, careful = parallel_map(lambda undecided: train_classifier(task="bag", undecided=undecided),
                             (0, 400))
unseen = data.make_reviews(400, seed=1, positive=data.UNSEEN_POSITIVE,
                           negative=data.UNSEEN_NEGATIVE)
for words, label, _ in unseen[:3]:
    print(f"{data.LABELS[label]:8s}  {' '.join(words)}")
unknown = [w for w in data.UNSEEN_POSITIVE + data.UNSEEN_NEGATIVE if w in tiny.vocab.stoi]
print(f"synonyms in the TinyTransformer's vocabulary: {unknown or 'none'}")
y = torch.tensor(unseen.labels)
x_tiny = tiny.vocab.encode_batch(unseen.texts(), max_len=tiny.model.max_len)  # (400, T) ids
x_minilm = minilm.encode(unseen.texts())                                      # (400, 384)
_, tiny_acc = evaluate(tiny.model, x_tiny, y)
unseen_accs = [evaluate(h, x_minilm, y)[1] for h in heads]
minilm_acc = unseen_accs[0]
chance = max(sum(unseen.labels), len(y) - sum(unseen.labels)) / len(y)  # always the majority
print(f"{'':16} {'seen words':>10} {'unseen synonyms':>16}   "
      f"(the majority label: {fmt(chance, 3)})")
print(f"{'TinyTransformer':16} {fmt(tiny.test_accuracy, 3):>10} {fmt(tiny_acc, 3):>16}")
print(f"{'MiniLM + head':16} {fmt(head_acc, 3):>10} {fmt(minilm_acc, 3):>16}   (seed 0)")
print(f"the heads of seeds 1 and 2 on the unseen synonyms: "
      f"{', '.join(fmt(a, 3) for a in unseen_accs[1:])}")

# %% tags=["remove-cell"]
assert not unknown and tiny.test_accuracy >= 0.95
assert min(unseen_accs) > 0.9 and min(unseen_accs) - tiny_acc > 0.3 and abs(tiny_acc - 0.5) < 0.1

# %% [markdown]
# On words it never saw the TinyTransformer is near chance; MiniLM + head stays accurate, above
# 0.9 with each of the three heads.

# %% [markdown]
# #### Can its confidence be trusted?
#
# A model's **confidence** is the probability it gives its own answer. A model whose confidence
# can be trusted is right about as often as it is confident: of the answers it gives with
# confidence 0.9, about 9 in 10 are right. A **reliability diagram** checks this: cut the range
# of confidence, [0.5, 1] for two classes, into equal bins, and in each bin compare the mean
# confidence with the accuracy. **Implement** the bins: `confidence (N,)` in [0.5, 1], `correct
# (N,)` bool; return per bin `(count (int64), mean confidence, accuracy)`, an empty bin giving
# NaN (nothing to average).
#
# <details><summary>Hint 1</summary>
#
# A confidence's bin is how many bin widths (0.5 / n_bins) it lies above 0.5, rounded down. A
# confidence of exactly 1.0 must land in the last bin.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Turn every confidence into a whole bin number at once, capped at n_bins − 1. Count per bin
# (`torch.bincount` with `minlength`); sum the confidences and the right answers per bin
# (`index_add`, or a loop over the bins) and divide by the counts: 0 / 0 gives NaN.
# </details>

# %%
def my_reliability(confidence, correct, n_bins):
    ### BEGIN SOLUTION
    bin_of = ((confidence - 0.5) / 0.5 * n_bins).long().clamp(max=n_bins - 1)  # (N,)
    in_bin = torch.bincount(bin_of, minlength=n_bins)  # (n_bins,)
    empty = torch.zeros(n_bins, dtype=confidence.dtype)
    conf_sum = empty.index_add(0, bin_of, confidence)  # (n_bins,)
    right_sum = empty.index_add(0, bin_of, correct.to(confidence.dtype))  # (n_bins,)
    return in_bin, conf_sum / in_bin, right_sum / in_bin
    ### END SOLUTION


bins = ex07.reliability(my_reliability)

# %%


def calibration_gap(n, conf, acc):
    """The mean |accuracy - confidence| over all answers: each bin weighted by its answers."""
    return (n / n.sum() * (acc - conf).abs()).nansum()


with torch.no_grad():
    p = {"TinyTransformer": tiny.model.predict_proba(x_tiny),  # (400, 2)
         "MiniLM + head": torch.softmax(head(x_minilm), dim=-1)}  # (400, 2)
    other_heads = [torch.softmax(h(x_minilm), dim=-1) for h in heads[1:]]  # (400, 2) each
diagram = {}
for name, probs in p.items():
    confidence, answer = probs.max(dim=1)  # (400,) each
    diagram[name] = bins(confidence.double(), answer == y, 5)
    n, conf, acc = diagram[name]
    print(f"{name}: mean confidence {fmt(confidence.mean(), 2)}, accuracy "
          f"{fmt((answer == y).double().mean(), 3)}, "
          f"mean gap {fmt(calibration_gap(*diagram[name]), 2)}")
    print("  " + "   ".join(f"{int(k)} at {fmt(c, 2)}: {fmt(a, 2)}" for k, c, a in zip(n, conf, acc)
                            if k))
gaps = [calibration_gap(*diagram["MiniLM + head"])]
for probs in other_heads:
    confidence, answer = probs.max(dim=1)  # (400,) each
    gaps.append(calibration_gap(*bins(confidence.double(), answer == y, 5)))
print("MiniLM + head, mean gap of the heads of seeds 0, 1, 2: "
      + ", ".join(fmt(g, 2) for g in gaps))

# %% tags=["remove-cell"]
n, conf, acc = diagram["TinyTransformer"]
assert (acc[n >= 20] < 0.7).all() and conf[-1] > 0.95 and n[-1] == n.max()
assert calibration_gap(n, conf, acc) > 0.2
n, conf, acc = diagram["MiniLM + head"]
assert acc[0] < 0.8 and n[-1] > n.sum() / 2 and acc[-1] > 0.98  # 20 seeds: 0.73, 0.993 at worst
assert max(gaps) < 0.1

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
centres = 0.55 + 0.1 * torch.arange(5)
for ax, (name, (n, conf, acc)) in zip(axes, diagram.items()):
    ax.bar(centres, acc.nan_to_num(0), width=0.09, color=BLUE, label="accuracy in the bin")
    ax.plot([0.5, 1], [0.5, 1], "k--", label="accuracy = confidence")
    ax.plot(conf, acc, "o", color=ORANGE, markersize=8, label="(mean confidence, accuracy)")
    for x, k in zip(centres.tolist(), n.tolist()):
        ax.text(x, 0.03, str(k), ha="center", fontsize=11, color="white")
    ax.set_xlim(0.5, 1)
    ax.set_ylim(0, 1.05)
    ax.set_title(name, fontsize=12)
    ax.set_xlabel("confidence (5 bins; count in each bar)", fontsize=11)
    ax.tick_params(labelsize=11)
axes[0].set_ylabel("accuracy", fontsize=11)
axes[0].legend(loc="upper left", fontsize=10)
fig.suptitle("reliability on 400 reviews with unseen synonyms", fontsize=12)
fig.tight_layout()
show_figure()

# %% [markdown]
# The TinyTransformer's confidence tells little: its accuracy stays below 0.7 in every bin of 20
# answers or more, also in the last one, which holds more of its answers than any other, at a
# mean confidence above 0.95. MiniLM + head's accuracy rises with its confidence (not always
# smoothly: the lower bins hold few answers), from 0.59 in the lowest bin to 1.00 in the highest,
# which holds most of its answers (over 20 series seeds: 0.19 to 0.73 in the lowest, above 0.99
# in the highest). The mean gap between accuracy and confidence,
# weighted by the answers in each bin, is below 0.1 for each of the three heads and above 0.2
# for the TinyTransformer: only MiniLM + head's confidence can be trusted here. Why is the tiny
# model so sure? The `<unk>` token never occurs in its training reviews, so its embedding never
# received a gradient and is still the random vector it started with. At test time the decisive
# word becomes that vector, and the network's answer is wherever that random direction pushes.

# %%
x_tiny_train, _, _ = tiny.train.tensors(tiny.vocab)      # (1600, T) ids
start = initial_model(len(tiny.vocab))                   # what train_classifier started from
unk, word = tiny.vocab.UNK, tiny.vocab.stoi[data.POSITIVE[0]]
print(f"<unk> in the {len(tiny.train):,} training reviews: {int((x_tiny_train == unk).sum())} "
      f"times")
unchanged = [torch.equal(start.embed.tokens.weight[i], tiny.model.embed.tokens.weight[i])
             for i in (unk, word)]
print(f"embedding row equal to its random start: <unk> {unchanged[0]}, {data.POSITIVE[0]!r} "
      f"{unchanged[1]}")

# %% tags=["remove-cell"]
assert int((x_tiny_train == unk).sum()) == 0 and unchanged == [True, False]

# %% [markdown]
# So give `<unk>` a gradient, and a target. `train_classifier(task="bag", undecided=400)` adds
# 400 reviews with no sentiment word, filler with a random share of `<unk>`, each once labelled
# negative and once positive. On such a pair the loss is least at p = 0.5: the model is taught to
# say that it cannot tell. Same model, same one-word reviews, same 400 unseen synonyms:

# %%
# careful: train_classifier(task="bag", undecided=400), trained above beside tiny
with torch.no_grad():
    p_careful = careful.model.predict_proba(x_tiny)  # (400, 2)
confidence, answer = p_careful.max(dim=1)  # (400,) each
careful_bins = bins(confidence.double(), answer == y, 5)
print(f"seen words: accuracy {fmt(careful.test_accuracy, 3)}")
print(f"unseen synonyms: accuracy {fmt((answer == y).double().mean(), 3)}, confidence "
      f"{fmt(confidence.min(), 3)} to {fmt(confidence.max(), 3)}, "
      f"mean gap {fmt(calibration_gap(*careful_bins), 2)}")

# %% tags=["remove-cell"]
assert {"task": "bag", "undecided": 400}.items() <= TINY_RECIPE.items()
assert careful.test_accuracy >= 0.95 and confidence.max() < 0.7  # 0.62 at most, 20 seeds
assert calibration_gap(*careful_bins) < 0.2  # the plain model's is above 0.2; 0.12 at most

# %% [markdown]
# It still reads every taught word, and it is no better on the synonyms: nothing can teach it a
# word it never saw. But it now says so, with a confidence near 0.5 on every one of them, so its
# confidence can be trusted here too. Over 20 series seeds its largest confidence on them was
# 0.52 to 0.62 and its mean gap at most 0.12. The sentiment app below uses this model.

# %% [markdown]
# Where does MiniLM put the new words? For each synonym, the closest (by cosine) of the sentiment
# words the head was trained on:

# %%
taught = data.POSITIVE + data.NEGATIVE
synonyms = data.UNSEEN_POSITIVE + data.UNSEEN_NEGATIVE
cosines = minilm.encode(synonyms) @ minilm.encode(taught).T  # (synonyms, taught words)
closest = cosines.argmax(dim=1).tolist()
same_side = [(i < len(data.UNSEEN_POSITIVE)) == (j < len(data.POSITIVE))
             for i, j in enumerate(closest)]
print(", ".join(f"{synonyms[i]} → {taught[j]}" for i, j in enumerate(closest[:6])))
print(", ".join(f"{synonyms[i]} → {taught[j]}" for i, j in enumerate(closest) if i >= 6))
print(f"{sum(same_side)} of {len(synonyms)} synonyms are closest to a taught word of the same "
      "sentiment")

# %% tags=["remove-cell"]
assert sum(same_side) == len(synonyms)

# %% [markdown]
# Pre-training on a vast amount of text put every synonym closest to a taught word of the same
# sentiment, so the head, trained on 400 reviews, only had to find the direction that separates
# positive from negative; the TinyTransformer, trained on 1,600, cannot read a word it never
# saw.

# %% [markdown]
# ### The sentiment app
#
# Type a review and two models answer: MiniLM with the attention-pooling head (seed 0) and the
# TinyTransformer that can say it cannot tell. Each answers positive, negative or *not sure* (a
# probability within 0.15 of 0.5, or no sentiment word it knows), and gives each token a number,
# shown beside it and as its shade: for MiniLM the weight the head's query gives it, what the
# decision read; for the TinyTransformer the attention it receives in its last layer. Words the
# TinyTransformer never saw are struck through. Any text works: empty, very long (you are told what
# was cut), emoji, other scripts, even HTML, which is shown as text. First the static view (the same
# `analyze` the widget calls), then the widget (it needs a live kernel). `attnlab.SentimentApp()`
# with no arguments builds these same two models by itself.

# %%
app = SentimentApp(careful, minilm, pooling_heads[0])
example = app.analyze(EXAMPLE_REVIEW)
print(app.text(example))

# %% tags=["remove-cell"]
assert example["label"] == "positive" and example["probability"] > 0.9
assert {"terrific", "outstanding"} <= set(example["models"]["tiny"]["unknown"])
assert example["models"]["tiny"]["label"] == "not sure"
assert abs(example["models"]["tiny"]["p_positive"] - 0.5) < 0.15  # 0.40 to 0.51, 20 seeds

# %% [markdown]
# The reliability lesson in one review: MiniLM + head answers positive. The TinyTransformer never
# saw *terrific* or *outstanding*: it reads both as `<unk>`, and, trained for that case, its
# probability stays near 0.5, so the app calls it *not sure*. Now the contrast review of notebook
# 05 and its swap:

# %%
for review in ("the plot was dull but the cast was superb",
               "the cast was superb but the plot was dull"):
    print(app.text(app.analyze(review)))

# %% tags=["remove-cell"]
swap_answers = [app.analyze(r) for r in ("the plot was dull but the cast was superb",
                                         "the cast was superb but the plot was dull")]
assert [a["label"] for a in swap_answers] == ["positive", "negative"]
assert not {"positive", "negative"} <= {a["models"]["tiny"]["label"] for a in swap_answers}
assert all(a["weights"].argmax() == a["tokens"].index(w)
           for a, w in zip(swap_answers, ("superb", "dull")))

# %% [markdown]
# MiniLM's head gets both right and puts most of its weight on the word after "but"; the
# TinyTransformer, trained on one-word reviews, gives both the same answer. Over 20 series seeds
# it never gave the two orders opposite answers (in three, one of the two was *not sure*).

# %%
print(app.text(app.analyze("<b>bold?</b> 🙂")))

# %%
app.widget


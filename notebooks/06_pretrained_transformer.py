# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · A pre-trained transformer, inside our own attention code
#
# Notebooks 01–04 built attention and trained a tiny encoder on a few dozen words. Real models are
# the same machinery, only bigger and trained on far more text. Here we take a published one,
# **all-MiniLM-L6-v2** (a 6-layer BERT-style sentence encoder by the sentence-transformers
# project, Apache-2.0), and load its weights into the very `MultiHeadAttention` class of notebook
# 01, inside the `EncoderBlock` of notebook 03. No `transformers` library is involved: only the
# weight file, the vocabulary and our code.
#
# Then we use it: sentence similarity, what its attention heads do (measured, not guessed), and a
# sentiment classifier on top of the frozen encoder, against notebook 03's TinyTransformer, on
# sentiment words that neither of them was trained on.

# %% [markdown]
# ## What you will learn
#
# - that a published transformer is the attention code you wrote: its weights load into
#   `EncoderBlock` and reproduce the published numbers to 4 decimals;
# - how a sentence becomes one vector (mean pooling) and what cosine similarity between such
#   vectors captures;
# - to test a claim about attention by intervening: hide a token as a key and measure how much
#   the outputs move;
# - what pre-training buys on words never seen in training, and why a confident answer is not a
#   correct one (calibration).
#
# Assumes: notebooks 01 (multi-head attention) and 03 (the encoder block, the TinyTransformer
# and its synthetic reviews), and the cosine of two vectors (05).

# %% slideshow={"slide_type": "skip"}
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

import attnlab
from attnlab import data
from attnlab.exercises import ex06
from attnlab.minilm import model_files
from attnlab.plots import attention_heatmap, layer_head_grid
from attnlab.report import fmt
from attnlab.sentiment import (
    HEAD_RECIPE,
    SentimentApp,
    attention_patterns,
    encode_without_key,
    train_head,
)
from attnlab.train import evaluate, initial_model, train_classifier

attnlab.seed_everything(0)

# %% [markdown]
# ## The published weights in our blocks
#
# `load_minilm()` finds the three files (`model.safetensors`, `vocab.txt`, `config.json`), checks
# their sha256, reads the config and builds: word + position + token-type embeddings, a
# LayerNorm, and six `attnlab.EncoderBlock`s (12 heads, width 384, GELU, post-norm, as defined in
# notebook 03). Each weight in the file is renamed onto our modules: `attention.self.query` →
# `attn.q`, and so on. Where the 22.6 M parameters sit:

# %%
minilm = attnlab.load_minilm()
n_params = sum(p.numel() for p in minilm.parameters())
block = minilm.blocks[0]


def count(*modules):
    return sum(p.numel() for m in modules for p in m.parameters())


print(f"files: {', '.join(sorted(model_files()))} (sha256 verified)")
print(f"embeddings (word, position, token type, LayerNorm): "
      f"{count(minilm.word, minilm.position, minilm.token_type, minilm.embed_norm):>10,}")
print(f"one block: attention (q, k, v, out)               {count(block.attn):>10,}")
print(f"           feed-forward 384 → 1536 → 384         {count(block.ff):>10,}")
print(f"           two LayerNorms                        {count(block.norm1, block.norm2):>10,}")
print(f"{minilm.n_layers} blocks x {minilm.n_heads} heads (d_head {block.attn.d_head}), "
      f"total {n_params:,} parameters")
assert all(type(b) is attnlab.EncoderBlock and type(b.attn) is attnlab.MultiHeadAttention
           for b in minilm.blocks)
assert count(minilm) == n_params == count(minilm.word, minilm.position, minilm.token_type,
                                          minilm.embed_norm) + minilm.n_layers * count(block)

# %% [markdown]
# Most parameters are the word embeddings: one 384-number row for each of the 30,522 **word
# pieces** of the vocabulary. A BERT-style model does not read whole words: common words are one
# piece, rarer ones are split into pieces it knows, a `##` marking a piece that continues a word.
# Every input is wrapped in two special tokens it was trained with: **[CLS]** ("classification")
# first, whose final vector BERT's pre-training used for sentence-level tasks, and **[SEP]**
# ("separator") at the end of each sentence.

# %%
for text in ("The plot was dismal.", "Attention is all you need"):
    print(minilm.tokenize([text]).tokens[0])

# %% [markdown]
# ## Is it really all-MiniLM-L6-v2?
#
# A sentence vector is the mean of the last layer's token vectors over the real tokens (a batch
# pads shorter sentences; padding must not count), scaled to length 1; the cosine of two such
# vectors is then their dot product. **Implement it**: `hidden` is `(B, T, d)`, `keep` is
# `(B, T)`, True for a real token.
#
# <details><summary>Hint</summary>
#
# `k = keep.unsqueeze(-1).float()` is `(B, T, 1)`; `(hidden * k).sum(1) / k.sum(1)` is the mean
# over the real tokens; `F.normalize(v, dim=1)` scales each row to length 1.
# </details>

# %%
def my_pool(hidden, keep):
    ### BEGIN SOLUTION
    k = keep.unsqueeze(-1).to(hidden.dtype)   # (B, T, 1)   1 = real token, 0 = padding
    mean = (hidden * k).sum(1) / k.sum(1)     # (B, d)      Σ_t h_t / n_real
    return F.normalize(mean, dim=1)           # (B, d)      v / ||v||
    ### END SOLUTION


pool = ex06.mean_pool(my_pool)

# %% [markdown]
# The sentence-transformers documentation (Quickstart) prints the similarities of three sentences
# under this model. If any weight, the tokenizer, GELU, a LayerNorm or the pooling were wrong,
# the 4th decimal would not survive.

# %%
quickstart = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
published = [["1.0000", "0.6660", "0.1046"],
             ["0.6660", "1.0000", "0.1411"],
             ["0.1046", "0.1411", "1.0000"]]
batch = minilm.tokenize(quickstart)                 # padded word-piece ids, keep mask (3, T)
with torch.no_grad():
    hidden, _ = minilm(batch.ids, batch.keep)       # (3, T, 384)   last layer's token vectors
e = pool(hidden, batch.keep)                        # (3, 384)      sentence vectors
ours = [[fmt(v, 4) for v in row] for row in (e @ e.T).tolist()]
for text, row, ref in zip(quickstart, ours, published):
    print(f"{text:30s} ours {'  '.join(row)}   published {'  '.join(ref)}")
assert ours == published, "all 9 numbers agree to 4 decimals"

# %% [markdown]
# All nine numbers agree to 4 decimals. From here on `minilm.encode(sentences)` does the same in
# one call.

# %% [markdown]
# ## Sentence similarity
#
# Six sentences, three topics, each said twice with different words. Similar meaning should give
# a high cosine even when the pair shares almost no word. Cosines run from −1 to 1, so the map
# below is diverging: white is 0, red positive, blue negative.

# %% tags=["hide-input"]
sentences = ["A man is playing a guitar.", "Someone is strumming an instrument.",
             "The stock market fell sharply today.", "Share prices dropped at the close.",
             "My cat sleeps all afternoon.", "The kitten naps in the sun."]
vectors = minilm.encode(sentences)  # (6, 384)
similarity = vectors @ vectors.T    # (6, 6)   cosines
fig, ax = plt.subplots(figsize=(8, 4))
image = ax.imshow(similarity, cmap="RdBu_r", vmin=-1, vmax=1)
for (i, j), value in zip(torch.cartesian_prod(torch.arange(6), torch.arange(6)).tolist(),
                         similarity.flatten().tolist()):
    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
            color="white" if abs(value) > 0.6 else "black")
ax.set_xticks(range(6), [s[:22] for s in sentences], rotation=30, ha="right", fontsize=8)
ax.set_yticks(range(6), [s[:22] for s in sentences], fontsize=8)
ax.set_title("cosine similarity of MiniLM sentence vectors (−1 to 1)")
plt.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
plt.tight_layout()
plt.show()

# %%
others = similarity - 2 * torch.eye(len(sentences))  # rule out each sentence itself
nearest = others.argmax(dim=1)
for i, j in enumerate(nearest.tolist()):
    print(f"{sentences[i]:37s} -> {sentences[j]:37s} cosine {fmt(similarity[i, j], 3)}")
across = max(similarity[i, j].item() for i in range(6) for j in range(6) if i // 2 != j // 2)
print(f"highest cosine across topics: {fmt(across, 3)}")
assert nearest.tolist() == [1, 0, 3, 2, 5, 4], "every sentence's nearest is its paraphrase"
assert across < similarity[nearest, torch.arange(6)].min()

# %% [markdown]
# Every sentence's nearest neighbour is its paraphrase, and every paraphrase pair is more similar
# than any two sentences on different topics.

# %% [markdown]
# ## What its attention does
#
# `attention_maps(sentence)` returns the word pieces and, for each of the 6 layers, the weights
# `(1, 12, T, T)`: the layout bertviz uses. Below: all 72 heads for one sentence; in each small
# square rows are queries and columns keys.

# %% tags=["hide-input"]
sentence = "The cat sat on the mat because it was tired."
tokens, maps = minilm.attention_maps(sentence)
print(tokens)
assert all(torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5) for w in maps)
fig = layer_head_grid(maps, title=f"all-MiniLM-L6-v2, every layer and head: {sentence!r}")
fig.set_size_inches(9, 4.6)
fig.tight_layout()
plt.show()

# %% [markdown]
# Rather than guess from the pictures, measure. For each head: what share of its attention goes
# to `[CLS]`, to `[SEP]`, to the token itself, to the previous token, to the next one (averaged
# over queries; 1.0 would be all of it). Per layer, the mean over its 12 heads:

# %%
patterns = attention_patterns(tokens, maps)  # name -> (6, 12)
print("layer " + "".join(f"{name:>10s}" for name in patterns))
for layer in range(minilm.n_layers):
    print(f"{layer:5d} " + "".join(f"{fmt(p[layer].mean(), 3):>10s}" for p in patterns.values()))
uniform = 1 / len(tokens)  # what each token would get if attention were spread evenly
cls_share = patterns["[CLS]"].mean(dim=1)  # (6,)
print(f"[CLS] receives {fmt(cls_share.min(), 2)} to {fmt(cls_share.max(), 2)} of all attention "
      f"per layer; an even spread would give each token {fmt(uniform, 2)}")
assert (cls_share > 3 * uniform).all(), "in every layer [CLS] gets more than 3x the even share"

# %% [markdown]
# In every layer the `[CLS]` token alone receives several times its even share, far more than
# any word. A common reading (Clark et al., 2019, "What does BERT look at?", said it of `[SEP]`;
# later work calls such tokens *attention sinks*): a head with nothing specific to look for parks
# its weight on a special token, a **no-op**. That is a hypothesis, and it cuts against notebook
# 03's lesson that attention weight is not importance: here the token with the most weight would
# matter least. Test it: take `[CLS]` away as a key in every head of every layer and see how far
# the sentence vectors move.

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: [CLS] gets about half of all attention. If no head may attend to
# it, how similar (cosine) will the sentence vectors stay to the originals: 0.99? 0.9? 0.5?

# %% [markdown]
# **Predict first.** `encode_without_key(minilm, sentences, 0)` hides position 0, `[CLS]`, as a
# key: a mask like a padding mask, so the weight it received is shared out over the other
# tokens. What will the mean cosine between the new and the original sentence vectors be (1 =
# unchanged)?

# %%
guess = ...  # your prediction: a cosine between -1 and 1, e.g. 0.95
### BEGIN SOLUTION
guess = 0.7
### END SOLUTION

# %% [markdown]
# We measure it on ten sentences, for three interventions: hide `[CLS]` as a key; keep its weights
# but zero its *value* vector in every layer (`how="value"`: attending to it then reads nothing);
# and, for comparison, hide `[SEP]`, and hide the first word.

# %%
probe = sentences + quickstart + [sentence]       # 10 sentences
original = minilm.encode(probe)                   # (10, 384)
moves = {name: (encode_without_key(minilm, probe, pos, how=how) * original).sum(1)  # (10,) cosines
         for name, pos, how in (("[CLS] hidden as a key", 0, "mask"),
                                ("[CLS] value zeroed", 0, "value"),
                                ("[SEP] hidden as a key", -1, "mask"),
                                ("first word hidden as a key", 1, "mask"))}
print(f"{'intervention':<27} cosine to the original sentence vectors: mean (lowest)")
for name, cos in moves.items():
    print(f"{name:<27} {fmt(cos.mean(), 3)} ({fmt(cos.min(), 3)})")
assert moves["[CLS] value zeroed"].min() > 0.98, "reading [CLS] contributes almost nothing"
assert moves["[SEP] hidden as a key"].min() > 0.98
assert moves["[CLS] hidden as a key"].mean() < moves["first word hidden as a key"].mean() - 0.2
guess = ex06.mask_cls(guess, moves["[CLS] hidden as a key"].mean().item())

# %% [markdown]
# Two findings, and they pull apart:
#
# - What heads *read* from `[CLS]` is almost nothing: zero its value vector and the sentence
#   vectors barely move. In that sense attending to it is a no-op, as the hypothesis says.
# - The *weight* it receives is not idle: hide it as a key and the softmax must put that weight
#   on the words, and the vectors move further than when a word itself is hidden. Parking weight
#   on `[CLS]` is how a head reads *less* from the words: a softmax cannot give all keys a
#   small weight.
#
# So the weight on a token tells neither what it contributes nor what removing it does; the
# intervention does. Notebook 03's lesson holds, from the other side.

# %% [markdown]
# ## Heads with a job
#
# Some heads have one clear job. The head that looks most at the previous token:

# %%
prev_layer, prev_head = divmod(int(patterns["previous"].argmax()), minilm.n_heads)
prev_share = patterns["previous"][prev_layer, prev_head]
print(f"previous-token head: layer {prev_layer}, head {prev_head}, {fmt(prev_share, 3)} of its "
      f"attention on the previous token (a uniform head: {fmt(uniform, 3)})")
assert prev_share > 0.9

# %% [markdown]
# **Explore.** In "the cat sat on the mat because it was tired", *it* means the cat. Find the
# (layer, head) in which the query `it` puts the largest weight on the key `cat`.
# `maps[layer][0, head]` is that head's `(T, T)` matrix, rows queries, columns keys;
# `tokens.index("it")` finds a row.

# %%
my_layer, my_head = ..., ...  # your answer: two whole numbers
### BEGIN SOLUTION
it_to_cat = torch.stack([m[0, :, tokens.index("it"), tokens.index("cat")] for m in maps])  # (6, 12)
my_layer, my_head = divmod(int(it_to_cat.argmax()), minilm.n_heads)
### END SOLUTION
cat_layer, cat_head = ex06.it_to_cat((my_layer, my_head), tokens, maps)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, (lay, h, what) in zip(axes, ((prev_layer, prev_head, "previous token"),
                                     (cat_layer, cat_head, "'it' → 'cat'"))):
    attention_heatmap(maps[lay][0, h], tokens, tokens, ax=ax, annotate=False,
                      title=f"layer {lay}, head {h}: {what}")
fig.tight_layout()
plt.show()

# %% [markdown]
# The right map deserves a second look: is that head about *it* at all? Every query's weight on
# `cat` in that head:

# %%
on_cat = maps[cat_layer][0, cat_head, :, tokens.index("cat")]  # (T,) each query's weight on "cat"
print(f"layer {cat_layer}, head {cat_head}: 'it' puts {fmt(on_cat[tokens.index('it')], 2)} on 'cat'; "
      f"all {len(tokens)} queries put {fmt(on_cat.min(), 2)} to {fmt(on_cat.max(), 2)} "
      f"(mean {fmt(on_cat.mean(), 2)})")
assert on_cat.min() > 0.3 and abs(on_cat[tokens.index("it")] - on_cat.mean()) < 0.15

# %% [markdown]
# In that head every token looks at `cat`, and `it` no more than the average token: the head
# singles out the cat for everyone; it does not resolve what *it* refers to. A large weight from
# one token to another is not, by itself, evidence of what the model understands.

# %% [markdown]
# ## Sentiment on top of a pre-trained encoder
#
# Two classifiers, trained on the same synthetic reviews of notebook 03 (one positive or negative
# word among neutral filler):
#
# - **TinyTransformer**: notebook 03's model, `train_classifier()`, learned from scratch;
# - **MiniLM + head**: the encoder stays frozen; only a linear layer `384 → 2` on its sentence
#   vectors is trained (`train_head`, with the same training loop `attnlab.train.fit`). A linear
#   layer on 384 numbers needs few examples, so it gets only the first few hundred training
#   reviews (the count is printed below): running them through MiniLM is the slow part.

# %%
tiny = train_classifier()
head, head_history = train_head(minilm, tiny.train, tiny.test)
head_acc = head_history["test_acc"][-1]
print(f"sentiment words in training: {len(data.POSITIVE)} positive, {len(data.NEGATIVE)} negative; "
      f"the TinyTransformer's vocabulary: {len(tiny.vocab)} tokens")
print(f"TinyTransformer: trained on {len(tiny.train)} reviews, test accuracy "
      f"{fmt(tiny.test_accuracy, 3, guard=False)} ({count(tiny.model):,} weights, all trained)")
print(f"MiniLM + head:   trained on {HEAD_RECIPE['n_train']} of them, test accuracy "
      f"{fmt(head_acc, 3, guard=False)} ({count(head):,} weights trained, {n_params:,} frozen)")
assert tiny.test_accuracy >= 0.95 and head_acc >= 0.95

# %% [markdown]
# Both solve the task they were taught. Now reviews built the same way, but with sentiment words
# that never appeared in training: synonyms such as *terrific* or *atrocious*. The tiny model's
# vocabulary does not contain them: it reads each as `<unk>`, the token for unknown words.

# %%
unseen = data.make_reviews(400, seed=1, positive=data.UNSEEN_POSITIVE,
                           negative=data.UNSEEN_NEGATIVE)
for words, label, _ in unseen[:3]:
    print(f"{data.LABELS[label]:8s}  {' '.join(words)}")
unknown = [w for w in data.UNSEEN_POSITIVE + data.UNSEEN_NEGATIVE if w in tiny.vocab.stoi]
print(f"synonyms in the TinyTransformer's vocabulary: {unknown or 'none'}")
assert not unknown

# %%
y = torch.tensor(unseen.labels)
x_tiny = tiny.vocab.encode_batch(unseen.texts(), max_len=tiny.model.max_len)  # (400, T) ids
x_minilm = minilm.encode(unseen.texts())                                      # (400, 384)
_, tiny_acc = evaluate(tiny.model, x_tiny, y)
_, minilm_acc = evaluate(head, x_minilm, y)
chance = max(y.float().mean().item(), 1 - y.float().mean().item())
print(f"accuracy on {len(y)} reviews with unseen synonyms (always the majority label: "
      f"{fmt(chance, 3, guard=False)})")
print(f"  TinyTransformer: {fmt(tiny_acc, 3, guard=False)}")
print(f"  MiniLM + head:   {fmt(minilm_acc, 3, guard=False)}")
assert minilm_acc - tiny_acc > 0.3 and abs(tiny_acc - 0.5) < 0.1

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.barh(["TinyTransformer", "MiniLM + head"], [tiny_acc, minilm_acc], color=["#b42318", "#1a7f37"])
ax.axvline(chance, color="gray", linestyle="--", label="majority guess")
ax.set_xlim(0, 1)
ax.set_xlabel("accuracy on unseen sentiment synonyms")
ax.legend(loc="lower right")
plt.tight_layout()
plt.show()

# %% [markdown]
# The TinyTransformer is at chance. Is it at least unsure? A model's **confidence** is the
# probability it gives its own answer. A *calibrated* model is right about as often as it is
# confident: of the answers it gives with confidence 0.9, about 9 in 10 are right.

# %%
with torch.no_grad():
    p_tiny = tiny.model.predict_proba(x_tiny)           # (400, 2)
    p_minilm = torch.softmax(head(x_minilm), dim=-1)    # (400, 2)
print(f"{'':16} {'says positive':>13} {'confidence':>10} {'over 0.99':>9} {'accuracy':>8}")
for name, p, acc in (("TinyTransformer", p_tiny, tiny_acc),
                     ("MiniLM + head", p_minilm, minilm_acc)):
    sure = p.max(dim=1).values                          # (400,) confidence of each answer
    print(f"{name:16} {int((p.argmax(1) == 1).sum()):>13} {fmt(sure.mean(), 2):>10} "
          f"{int((sure > 0.99).sum()):>9} {fmt(acc, 3, guard=False):>8}")
confidence = {"tiny": p_tiny.max(dim=1).values, "minilm": p_minilm.max(dim=1).values}  # (400,) each
assert confidence["tiny"].mean() - tiny_acc > 0.3, "the tiny model is far more confident than right"
assert (p_tiny.argmax(1) == 1).sum() > 300 and (confidence["tiny"] > 0.99).sum() >= 100
assert abs(confidence["minilm"].mean() - minilm_acc) < 0.1, "MiniLM + head: about as sure as right"

# %% [markdown]
# On words it never saw, the TinyTransformer is **confident and wrong**: it calls most reviews
# positive, over a hundred of them with confidence above 0.99, and is right half the time. Why:
# the `<unk>` token never occurs in its training reviews, so its embedding never received a
# gradient and is still the random vector it started with. At test time the decisive word
# becomes that vector, and the network's answer to it is wherever that random direction pushes.

# %%
x_train, _, _ = tiny.train.tensors(tiny.vocab)          # (1600, T) ids
start = initial_model(len(tiny.vocab))                  # what train_classifier() started from
unk, word = tiny.vocab.UNK, tiny.vocab.stoi[data.POSITIVE[0]]
print(f"<unk> in the training reviews: {int((x_train == unk).sum())} times")
unchanged = [torch.equal(start.embed.weight[i], tiny.model.embed.weight[i]) for i in (unk, word)]
print(f"embedding row equal to its random start: <unk> {unchanged[0]}, {data.POSITIVE[0]!r} "
      f"{unchanged[1]}")
assert int((x_train == unk).sum()) == 0 and unchanged == [True, False]

# %% [markdown]
# Notebook 03 measured this model's default from the other side: with the decisive word removed
# as padding, it answered *positive* for most test reviews. Here the word is replaced by an
# untrained vector instead, and the answer is again mostly *positive*, now with high confidence.
# Its confidence says nothing about whether it knows. MiniLM + head, whose confidence is close to its accuracy,
# is the calibrated one here.

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
assert sum(same_side) == len(synonyms)

# %% [markdown]
# Pre-training on a vast amount of text put every synonym closest to a taught word of the same
# sentiment, so the head, trained on 400 reviews, only had to find the direction that separates
# positive from negative; the TinyTransformer, trained on 1,600, cannot read a word it never
# saw.

# %% [markdown]
# ## The sentiment app
#
# Type a review and both models answer, with their probability and where they looked: each
# token's background is as dark as the attention it receives (last layer, mean over heads and
# queries). Words the TinyTransformer never saw are struck through. Any text works: empty, very
# long (you are told what was cut), emoji, other scripts, even HTML, which is shown as text.
# First the static view (the same `analyze` the widget calls), then the widget (it needs a live
# kernel). `attnlab.SentimentApp()` with no arguments builds these same models by itself.

# %%
app = SentimentApp(tiny, minilm, head)
dismal = app.analyze("The plot was dismal and the acting pathetic.")
print(app.text(dismal))
tiny_says = dismal["models"]["tiny"]
assert dismal["label"] == "negative" and tiny_says["label"] == "positive"
assert tiny_says["probability"] > 0.95

# %% [markdown]
# The calibration lesson in one review: two words the TinyTransformer never saw, and it answers
# positive with a probability above 0.95.

# %%
print(app.text(app.analyze("<b>bold?</b> 🙂")))

# %%
app.widget

# %% [markdown]
# The headline numbers, in one place:

# %%
print(f"MiniLM in our EncoderBlock: 9 of 9 published similarities to 4 decimals; "
      f"{n_params:,} parameters, a head of {count(head)} trained on top")
hidden_cls, zeroed_cls = (moves[k].mean() for k in ("[CLS] hidden as a key", "[CLS] value zeroed"))
print(f"[CLS]: {fmt(cls_share.min(), 2)} to {fmt(cls_share.max(), 2)} of the attention per "
      f"layer; sentence-vector cosine when hidden as a key {fmt(hidden_cls, 3)}, when its value "
      f"is zeroed {fmt(zeroed_cls, 3)}")
print(f"'it' → 'cat' head: layer {cat_layer}, head {cat_head}; 'it' puts {fmt(on_cat[tokens.index('it')], 2)} "
      f"on 'cat', the average query {fmt(on_cat.mean(), 2)}")
print(f"unseen synonyms: MiniLM + head {fmt(minilm_acc, 3, guard=False)}, TinyTransformer "
      f"{fmt(tiny_acc, 3, guard=False)} with mean confidence {fmt(confidence['tiny'].mean(), 2)}")

# %% [markdown]
# ## What we learned
#
# - A published transformer is the attention we wrote: all-MiniLM-L6-v2's weights, loaded into
#   `EncoderBlock` and `MultiHeadAttention`, reproduce the published similarities to 4 decimals.
# - Mean-pooled sentence vectors put each of six sentences next to its paraphrase, in all three
#   topics.
# - `[CLS]` receives 0.25 to 0.62 of the attention in every layer. Zeroing what it contributes
#   leaves the sentence vectors where they were (cosine 0.995), but hiding it as a key moves them
#   far (0.609), further than hiding a word: attention weight is neither contribution nor
#   importance; an intervention tells them apart.
# - The head in which `it` looks most at `cat` (layer 5, head 11) has every token look at `cat`
#   (0.64 on average, `it` 0.71): a large weight between two tokens is not a reading of meaning.
# - On sentiment words it never saw, the frozen pre-trained encoder with a 770-weight head stays
#   accurate (0.955), while the TinyTransformer drops to chance (0.510) with a mean confidence of
#   0.95: its `<unk>` vector never trained. Confidence is not accuracy.

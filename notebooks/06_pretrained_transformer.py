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
# Notebooks 01–04 built attention and trained a tiny encoder on a few dozen words. Real models are the same
# machinery, only bigger and trained on far more text. Here we take a published one,
# **all-MiniLM-L6-v2** (a 6-layer BERT-style sentence encoder by the sentence-transformers project,
# Apache-2.0), and load its weights into the very `MultiHeadAttention` class of notebook 01,
# inside the `EncoderBlock` of notebook 03. No `transformers` library is involved: only the weight
# file, the vocabulary and our code.
#
# Then we use it: sentence similarity, a look at what its attention heads do, and the lab's
# experiment 12 made real — a sentiment classifier on top of the frozen encoder, against
# notebook 03's TinyTransformer, on sentiment words that neither of them was trained on.

# %%
import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab import data
from attnlab.app import EXAMPLE_REVIEW, SentimentApp
from attnlab.plots import attention_heatmap, layer_head_grid
from attnlab.pretrained import HEAD_RECIPE, attention_patterns, model_files, train_head
from attnlab.train import evaluate, train_classifier

attnlab.seed_everything(0)

# %% [markdown]
# ## The published weights in our blocks
#
# `load_minilm()` finds the three files (`model.safetensors`, `vocab.txt`, `config.json`),
# checks their sha256, reads the config and builds: word + position + token-type embeddings,
# a LayerNorm, and six `attnlab.EncoderBlock`s (12 heads, width 384, GELU, post-norm). Each
# weight in the file is renamed onto our modules: `attention.self.query` → `attn.q`, and so on.

# %%
minilm = attnlab.load_minilm()
n_params = sum(p.numel() for p in minilm.parameters())
block = minilm.blocks[0]
print(f"files: {', '.join(sorted(model_files()))} (sha256 verified)")
print(f"{minilm.n_layers} layers x {minilm.n_heads} heads, d_model = {block.attn.d_model}, "
      f"d_head = {block.attn.d_head}, d_ff = {block.ff[0].out_features}, {n_params / 1e6:.1f} M parameters")
print(f"vocabulary: {minilm.tokenizer.get_vocab_size()} word pieces; inputs cut at {minilm.max_length}")
print(block)
assert all(type(b) is attnlab.EncoderBlock and type(b.attn) is attnlab.MultiHeadAttention for b in minilm.blocks)

# %% [markdown]
# ## Is it really all-MiniLM-L6-v2?
#
# A sentence vector is the mean of the last layer's token vectors, scaled to length 1; the
# cosine of two such vectors is their dot product. The sentence-transformers documentation
# (Quickstart) prints these similarities for three sentences under this model. If any weight,
# the tokenizer, GELU or a LayerNorm were wrong, the 4th decimal would not survive.

# %%
quickstart = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
published = [["1.0000", "0.6660", "0.1046"],
             ["0.6660", "1.0000", "0.1411"],
             ["0.1046", "0.1411", "1.0000"]]
e = minilm.encode(quickstart)  # (3, 384)
ours = [[f"{v:.4f}" for v in row] for row in (e @ e.T).tolist()]
for text, row, ref in zip(quickstart, ours, published):
    print(f"{text:30s} ours {'  '.join(row)}   published {'  '.join(ref)}")
assert ours == published
print("all 9 numbers agree to 4 decimals")

# %% [markdown]
# ## Sentence similarity
#
# Six sentences, three topics, each said twice with different words. Similar meaning should give
# a high cosine even when the pair shares almost no word.

# %%
sentences = ["A man is playing a guitar.", "Someone is strumming an instrument.",
             "The stock market fell sharply today.", "Share prices dropped at the close.",
             "My cat sleeps all afternoon.", "The kitten naps in the sun."]
vectors = minilm.encode(sentences)  # (6, 384)
similarity = vectors @ vectors.T  # (6, 6)   cosines
ax = attention_heatmap(similarity, sentences, sentences, vmax=1.0, annotate=True,
                       title="cosine similarity of MiniLM sentence vectors")
ax.set_xlabel("")
ax.set_ylabel("")
plt.show()

# %%
others = similarity - 2 * torch.eye(len(sentences))  # rule out each sentence itself
nearest = others.argmax(dim=1)
for i, j in enumerate(nearest.tolist()):
    print(f"{sentences[i]:38s} -> {sentences[j]:38s} cosine {similarity[i, j]:.3f}")
partner = [1, 0, 3, 2, 5, 4]
assert nearest.tolist() == partner
print(f"every sentence's nearest neighbour is its paraphrase; the highest cosine across topics is "
      f"{max(similarity[i, j].item() for i in range(6) for j in range(6) if i // 2 != j // 2):.3f}")

# %% [markdown]
# ## What its attention does
#
# `attention_maps(sentence)` returns the word pieces and, for each of the 6 layers, the weights
# `(1, 12, T, T)` — the layout bertviz uses. Below: all 72 heads for one sentence. Rows of each
# small square are queries, columns keys, in the order
# `[CLS] the cat sat on the mat because it was tired . [SEP]`.

# %%
sentence = "The cat sat on the mat because it was tired."
tokens, maps = minilm.attention_maps(sentence)
print(tokens)
assert all(torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5) for w in maps)
layer_head_grid(maps, title=f"all-MiniLM-L6-v2, every layer and head: {sentence!r}")
plt.show()

# %% [markdown]
# Rather than guess from the pictures, measure. For each head: what share of its attention goes
# to `[CLS]`, to `[SEP]`, to the token itself, to the previous token, to the next one
# (averaged over queries; 1.0 would be all of it). Per layer, the mean over its 12 heads:

# %%
patterns = attention_patterns(tokens, maps)  # name -> (6, 12)
print("layer " + "".join(f"{name:>10s}" for name in patterns))
for layer in range(minilm.n_layers):
    print(f"{layer:5d} " + "".join(f"{p[layer].mean().item():10.3f}" for p in patterns.values()))
uniform = 1 / len(tokens)  # what each token would get if attention were spread evenly
per_layer = {name: patterns[name].mean(dim=1) for name in ("[CLS]", "[SEP]")}  # (6,) each
busy = [layer for layer in range(minilm.n_layers)
        if max(per_layer["[CLS]"][layer], per_layer["[SEP]"][layer]) > 3 * uniform]
if busy:
    top = max(per_layer, key=lambda name: per_layer[name][busy].mean().item())
    shares = per_layer[top][busy]
    where = "In every layer" if len(busy) == minilm.n_layers else f"In layers {', '.join(map(str, busy))}"
    print(f"{where} the {top} token alone receives {shares.min():.0%} to "
          f"{shares.max():.0%} of all attention, where an even spread would give it {uniform:.0%}. "
          "Many heads park their attention on a special token when they have nothing specific to "
          "look for (a 'no-op'), as Clark et al. (2019) saw BERT do with [SEP].")
else:
    print(f"No layer gives [CLS] or [SEP] more than 3x the even share of {uniform:.0%}: "
          "in this sentence the special tokens are not where the heads park their attention.")

# %% [markdown]
# Some heads have one clear job. The head that most reliably looks at the previous token, and the
# one that most looks at the next token:

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
for ax, name in zip(axes, ("previous", "next")):
    layer, head = divmod(int(patterns[name].argmax()), minilm.n_heads)
    share = patterns[name][layer, head].item()
    attention_heatmap(maps[layer][0, head], tokens, tokens, ax=ax, annotate=False,
                      title=f"layer {layer}, head {head}: {share:.0%} on the {name} token")
    print(f"'{name}-token' head: layer {layer}, head {head}, {share:.3f} of its attention "
          f"(a uniform head would give {1 / len(tokens):.3f})")
    assert share > 2 / len(tokens)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Experiment 12, for real: sentiment on top of a pre-trained encoder
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
print(f"sentiment words in training: {len(data.POSITIVE)} positive, {len(data.NEGATIVE)} negative; "
      f"the TinyTransformer's whole vocabulary: {len(tiny.vocab)} tokens")
print(f"TinyTransformer : trained on {len(tiny.train)} reviews, test accuracy {tiny.test_accuracy:.3f} "
      f"on {len(tiny.test)} ({sum(p.numel() for p in tiny.model.parameters()):,} weights, all trained)")
print(f"MiniLM + head   : trained on {HEAD_RECIPE['n_train']} of them, test accuracy "
      f"{head_history['test_acc'][-1]:.3f} on {len(tiny.test)} ({sum(p.numel() for p in head.parameters()):,} "
      f"weights trained, {n_params:,} frozen)")
assert tiny.test_accuracy >= 0.95 and head_history["test_acc"][-1] >= 0.95

# %% [markdown]
# Both solve the task they were taught. Now the real question: reviews built the same way, but
# with sentiment words that never appeared in training — synonyms such as *terrific* or
# *atrocious*. The tiny model's vocabulary does not contain them at all.

# %%
unseen = data.make_reviews(400, seed=1, positive=data.UNSEEN_POSITIVE, negative=data.UNSEEN_NEGATIVE)
for words, label, _ in list(zip(*unseen))[:3]:
    print(f"{data.LABELS[label]:8s}  {' '.join(words)}")
unknown = [w for w in data.UNSEEN_POSITIVE + data.UNSEEN_NEGATIVE if w in tiny.vocab.stoi]
print(f"synonyms in the TinyTransformer's vocabulary: {unknown or 'none'}")
assert not unknown

# %%
y = torch.tensor(unseen.labels)
_, tiny_acc = evaluate(tiny.model, tiny.vocab.encode_batch(unseen.texts(), max_len=tiny.model.max_len), y)
_, minilm_acc = evaluate(head, minilm.encode(unseen.texts()), y)
chance = max(y.float().mean().item(), 1 - y.float().mean().item())
print(f"accuracy on {len(y)} reviews with unseen synonyms (always guessing the majority label: {chance:.3f})")
print(f"  TinyTransformer : {tiny_acc:.3f}")
print(f"  MiniLM + head   : {minilm_acc:.3f}")

fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(["TinyTransformer", "MiniLM + head"], [tiny_acc, minilm_acc], color=["#b42318", "#1a7f37"])
ax.axvline(chance, color="gray", linestyle="--", label="majority guess")
ax.set_xlim(0, 1)
ax.set_xlabel("accuracy on unseen sentiment synonyms")
ax.legend(loc="lower right")
plt.show()

# %% [markdown]
# Where does MiniLM put the new words? For each synonym, the closest (by cosine) of the sentiment
# words the head was trained on:

# %%
taught = data.POSITIVE + data.NEGATIVE
synonyms = data.UNSEEN_POSITIVE + data.UNSEEN_NEGATIVE
cosines = minilm.encode(synonyms) @ minilm.encode(taught).T  # (synonyms, taught words)
closest = cosines.argmax(dim=1).tolist()
same_side = [(i < len(data.UNSEEN_POSITIVE)) == (j < len(data.POSITIVE)) for i, j in enumerate(closest)]
for i, j in enumerate(closest):
    print(f"{synonyms[i]:12s} -> {taught[j]:14s} cosine {cosines[i, j]:.3f}"
          f"{'' if same_side[i] else '   (opposite sentiment)'}")
agree = sum(same_side)
print(f"{agree} of {len(synonyms)} synonyms are closest to a taught word of the same sentiment")

# %%
if minilm_acc - tiny_acc > 0.1 and tiny_acc < chance + 0.1:
    print(f"Pre-training pays: trained on {HEAD_RECIPE['n_train']} of the same reviews, the head on MiniLM "
          f"reaches {minilm_acc:.1%} on words it never saw, while the TinyTransformer ({len(tiny.train)} "
          f"reviews), for which those words are just <unk>, is at {tiny_acc:.1%}, where always guessing "
          f"the majority label gives {chance:.1%}.")
    if agree > len(synonyms) / 2:
        print(f"Pre-training on a vast amount of text put {agree} of the {len(synonyms)} synonyms closest "
              "to a taught word of the same sentiment; the head only had to find the direction that "
              "separates positive from negative.")
    else:
        print(f"Yet only {agree} of the {len(synonyms)} synonyms lie closest to a taught word of the same "
              "sentiment, so the head's success is not explained by the single words' nearest neighbours.")
elif minilm_acc - tiny_acc > 0.1:
    print(f"MiniLM + head ({minilm_acc:.1%}) beats the TinyTransformer ({tiny_acc:.1%}) on unseen "
          f"words, though the tiny model is more than 10 points above the majority guess ({chance:.1%}).")
else:
    print(f"On unseen words MiniLM + head ({minilm_acc:.1%}) is not more than 10 points ahead of the "
          f"TinyTransformer ({tiny_acc:.1%}): here pre-training did not buy generalisation.")

# %% [markdown]
# ## The sentiment app
#
# Type a review and both models answer, with their probability and where they looked: each
# token's background is as dark as the attention it receives (last layer, mean over heads and
# queries). Words the TinyTransformer never saw are struck through. Any text works: empty,
# very long (you are told what was cut), emoji, other scripts, even HTML, which is shown as text.
#
# First the static view (the same `analyze` the widget calls), then the widget (it needs a live
# kernel). `attnlab.SentimentApp()` with no arguments builds these same models by itself.

# %%
app = SentimentApp(tiny, minilm, head)
for review in (EXAMPLE_REVIEW, "The plot was dismal and the acting pathetic.", "<b>bold?</b> 🙂"):
    result = app.analyze(review)
    print(app.text(result))
    print()
assert app.analyze("The plot was dismal and the acting pathetic.")["label"] == "negative"

# %%
app.widget

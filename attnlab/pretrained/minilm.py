"""all-MiniLM-L6-v2, the pre-trained sentence encoder, rebuilt from attnlab's own attention code.

The checkpoint is a 6-layer BERT: word + position + token-type embeddings, a LayerNorm, then six
post-norm encoder blocks (12 heads, hidden 384, feed-forward 1536, exact-erf GELU, LayerNorm eps
1e-12). Those blocks are exactly `attnlab.core.blocks.EncoderBlock` (the block notebook 03 trains,
around notebook 01's MultiHeadAttention), so loading the published weights into them proves the
students' attention is the real thing.
A sentence vector is the mean of the last layer's token vectors over the real (non-padding)
tokens, scaled to length 1 — what sentence-transformers computes for this model.

Only `safetensors` (weights) and `tokenizers` (BERT WordPiece from vocab.txt) are used; neither
`transformers` nor `sentence-transformers` is needed.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file
from tokenizers import BertWordPieceTokenizer
from torch import nn
from torch.nn import functional as F

from ..core.blocks import EncoderBlock
from ..core.hooks import attention_maps
from ..plumbing import assets
from ..plumbing.checks import check_int, check_str
from ..plumbing.parallel import parallel_map
from ..plumbing.repro import nudge

#: the three files of the model, as `attnlab.plumbing.assets` names them
ASSET_NAMES = ("minilm/model.safetensors", "minilm/vocab.txt", "minilm/config.json")

#: sentence-transformers truncates this model's input at 256 word pieces
#: (sentence_bert_config.json); the position table allows at most 512.
DEFAULT_MAX_LENGTH = 256

# checkpoint name (BERT layout) -> name in MiniLM below, per layer
_LAYER_NAMES = {
    "attention.self.query": "attn.q",
    "attention.self.key": "attn.k",
    "attention.self.value": "attn.v",
    "attention.output.dense": "attn.out",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "ff.0",
    "output.dense": "ff.2",
    "output.LayerNorm": "norm2",
}
_EMBEDDING_NAMES = {
    "embeddings.word_embeddings": "word",
    "embeddings.position_embeddings": "position",
    "embeddings.token_type_embeddings": "token_type",
    "embeddings.LayerNorm": "embed_norm",
}
# in the checkpoint but not used for sentence embeddings (the pooler feeds BERT's NSP head)
_UNUSED = ("pooler.", "embeddings.position_ids")


@dataclass
class Tokenized:
    """A padded batch of word-piece ids.

    `ids` (B, T) and `keep` (B, T, True = a real token, False = padding); `tokens` the word
    pieces of each text (without padding); `lengths` how many word pieces each text had before
    truncation (with [CLS] and [SEP]); `truncated` whether that exceeded `max_length`;
    `word_ids` for each word piece the index of the word it belongs to (words split at spaces
    and punctuation, counted from 0), None for [CLS] and [SEP]: how a word maps to its pieces.
    """

    ids: torch.Tensor
    keep: torch.Tensor
    tokens: list[list[str]]
    lengths: list[int]
    truncated: list[bool]
    word_ids: list[list[int | None]] = field(default_factory=list)


class MiniLM(nn.Module):
    """The all-MiniLM-L6-v2 encoder. Build it with `load_minilm()`."""

    def __init__(self, config: dict, vocab_file: str | os.PathLike,
                 max_length: int = DEFAULT_MAX_LENGTH):
        super().__init__()
        d = config["hidden_size"]
        self.config = dict(config)

        def table(rows):  # an embedding table left uninitialised: load_minilm fills it
            return nn.Embedding(rows, d, _weight=torch.empty(rows, d))

        self.word = table(config["vocab_size"])
        self.position = table(config["max_position_embeddings"])  # learned positions, as in BERT
        self.token_type = table(config["type_vocab_size"])
        self.embed_norm = nn.LayerNorm(d, eps=config["layer_norm_eps"])
        with torch.device("meta"):  # shapes only, no random init: the checkpoint replaces them
            self.blocks = nn.ModuleList(
                EncoderBlock(d, config["num_attention_heads"], config["intermediate_size"],
                             activation="gelu", norm_eps=config["layer_norm_eps"])
                for _ in range(config["num_hidden_layers"])
            )
        self.tokenizer = _bert_tokenizer(vocab_file)
        self.max_length = max_length

    # -- settings ---------------------------------------------------------------------------
    @property
    def max_length(self) -> int:
        """Longest input in word pieces, [CLS] and [SEP] included; longer texts are cut at the
        end (like sentence-transformers). 256 by default, at most 512 (the position table)."""
        return self._max_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        # word pieces, [CLS] and [SEP] included; the position table has max_position_embeddings
        self._max_length = check_int("max_length", value, minimum=2,
                                     maximum=self.config["max_position_embeddings"])

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def n_heads(self) -> int:
        return self.blocks[0].attn.n_heads

    # -- text -> ids ------------------------------------------------------------------------
    def tokenize(self, sentences) -> Tokenized:
        """Lower-cased BERT word pieces of each text, [CLS] ... [SEP], cut to `max_length` and
        padded to the longest text of the batch. Any string is accepted: control characters are
        dropped, characters outside the vocabulary become [UNK], an empty text is [CLS] [SEP]
        (a lone surrogate such as '\\ud800', which UTF-8 cannot hold, is read as U+FFFD)."""
        sentences = _as_sentence_list(sentences)
        return self._pad(self.tokenizer.encode_batch(sentences) if sentences else [])

    def _pad(self, encodings) -> Tokenized:
        """Cut each `tokenizers.Encoding` to max_length and pad them into one batch."""
        rows, tokens, lengths, words = [], [], [], []
        for enc in encodings:
            ids, toks, word_ids = enc.ids, enc.tokens, enc.word_ids
            lengths.append(len(ids))
            if len(ids) > self.max_length:  # keep [CLS] + the first pieces, close with [SEP]
                ids = ids[: self.max_length - 1] + ids[-1:]
                toks = toks[: self.max_length - 1] + toks[-1:]
                word_ids = word_ids[: self.max_length - 1] + word_ids[-1:]
            rows.append(ids)
            tokens.append(toks)
            words.append(word_ids)
        T = max((len(r) for r in rows), default=0)
        ids = torch.tensor([r + [0] * (T - len(r)) for r in rows], dtype=torch.long)  # (B, T) 0=PAD
        ids = ids.reshape(len(rows), T)
        n_kept = torch.tensor([len(r) for r in rows], dtype=torch.long)  # (B,)
        keep = torch.arange(T) < n_kept[:, None]  # (B, T)
        return Tokenized(ids, keep, tokens, lengths, [n > self.max_length for n in lengths],
                         words)

    # -- the network ------------------------------------------------------------------------
    def forward(self, ids: torch.Tensor, keep: torch.Tensor):
        """ids (B, T) word-piece ids, keep (B, T) bool (False = padding).
        Returns the last layer's token vectors (B, T, d). (Its weights:
        `attnlab.attention_maps(minilm, ids, keep)`.)"""
        T = ids.shape[1]
        x = self.word(ids) + self.position.weight[:T] + self.token_type.weight[0]  # (B, T, d)
        x = self.embed_norm(x)  # (B, T, d)
        # (B, 1, 1, T): every query may attend to every real token; no padding, no mask needed
        mask = None if bool(keep.all()) else keep[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask)  # (B, T, d)
        return x

    @torch.no_grad()
    def run_batches(self, batches, finish) -> list[torch.Tensor]:
        """`finish(states (b, T, d), keep (b, T))` of the last layer's states for each (ids,
        keep) batch, in order. Several batches run side by side on the free cores
        (`parallel_map`: each in a forked process on one torch thread, so the numbers are those
        of one batch after another), which halves a notebook's wait for hundreds of reviews on
        a 2-core laptop; one batch, or a process on several threads, runs here."""
        def one(batch):
            ids, keep = batch
            with torch.no_grad():  # also in a forked child
                return finish(self(ids, keep), keep)
        return parallel_map(one, batches) if len(batches) > 1 else [one(b) for b in batches]

    @staticmethod
    def pool(hidden: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Mean of the real tokens' vectors, scaled to unit length: (B, T, d) -> (B, d)."""
        k = keep.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
        mean = (hidden * k).sum(1) / k.sum(1).clamp(min=1e-9)  # (B, d)   Σ_t h_t / n_real
        return F.normalize(mean, p=2, dim=1)  # (B, d)   v / ||v||

    @torch.no_grad()  # plain tensors out (usable in training), no autograd records
    def encode(self, sentences, batch_size: int = 32) -> torch.Tensor:
        """Sentence embeddings (N, 384), unit length, for a list of strings (a single string
        gives (1, 384)). Texts are batched by similar length so little time goes to padding;
        the order of the output follows the input."""
        sentences = _as_sentence_list(sentences)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        d = self.config["hidden_size"]
        out = torch.empty(len(sentences), d)  # (N, d)
        if not sentences:
            return out
        encodings = self.tokenizer.encode_batch(sentences)
        order = sorted(range(len(sentences)), key=lambda i: len(encodings[i].ids))
        chunks = [order[start: start + batch_size] for start in range(0, len(order), batch_size)]
        batches = [self._pad([encodings[i] for i in idx]) for idx in chunks]
        pooled = self.run_batches([(b.ids, b.keep) for b in batches], self.pool)  # (b, d) each
        for idx, vectors in zip(chunks, pooled):
            out[idx] = vectors
        return nudge(out)  # as computed, unless make test-portable moves it by one ulp

    def attention_maps(self, sentence: str):
        """The word pieces of one sentence beside every layer's attention weights, read by
        `attnlab.attention_maps`: (tokens, [ (1, heads, T, T) for each layer ]), the layout
        bertviz uses. Row i of a head's (T, T) matrix is how token i spreads its attention; it
        sums to 1."""
        batch = self.tokenize([check_str("sentence", sentence)])
        return batch.tokens[0], attention_maps(self, batch.ids, batch.keep)

    def extra_repr(self) -> str:
        c = self.config
        return (f"layers={c['num_hidden_layers']}, heads={c['num_attention_heads']}, "
                f"d_model={c['hidden_size']}, d_ff={c['intermediate_size']}, "
                f"max_length={self.max_length}")


def _as_sentence_list(sentences) -> list[str]:
    if isinstance(sentences, str):
        sentences = [sentences]
    if not isinstance(sentences, (list, tuple)):
        raise TypeError(f"sentences must be a str or a list of str, got {type(sentences).__name__}")
    for i, s in enumerate(sentences):
        check_str(f"sentences[{i}]", s)
    return [_well_formed(s) for s in sentences]


def _well_formed(text: str) -> str:
    """`text` as valid Unicode: a Python str may hold lone surrogates ('\\ud800', e.g. from a
    JSON escape), which the tokenizer refuses; each becomes U+FFFD (a valid pair, its character)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _bert_tokenizer(vocab_file):
    """BERT's uncased WordPiece tokenizer from vocab.txt: clean text (drop control characters),
    split punctuation and CJK characters, lower-case, strip accents, then greedy longest-match
    word pieces ("##" continues a word); [CLS] ... [SEP] around each text."""
    return BertWordPieceTokenizer(str(vocab_file), lowercase=True, clean_text=True,
                                  handle_chinese_chars=True, strip_accents=None)


def _read_config(file: Path) -> dict:
    try:
        config = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{file} is not a readable JSON model config: {e}") from None
    expected = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, value in expected.items():
        if config.get(key, value) != value:
            raise ValueError(f"{file}: {key} must be {value!r} for this loader, "
                             f"got {config.get(key)!r}")
    needed = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps")
    missing = [k for k in needed if k not in config]
    if missing:
        raise ValueError(f"{file} lacks the BERT config keys {missing}")
    return config


def _state_dict(weights: dict[str, torch.Tensor], n_layers: int) -> dict[str, torch.Tensor]:
    """Rename the checkpoint's BERT names to MiniLM's (and so EncoderBlock's) names."""
    state = {}
    for name, tensor in weights.items():
        if name.startswith(_UNUSED):
            continue
        base, _, leaf = name.rpartition(".")  # leaf: weight / bias
        if base in _EMBEDDING_NAMES:
            state[f"{_EMBEDDING_NAMES[base]}.{leaf}"] = tensor
            continue
        parts = base.split(".")  # encoder.layer.<i>.<rest>
        if parts[:2] == ["encoder", "layer"] and ".".join(parts[3:]) in _LAYER_NAMES:
            i = int(parts[2])
            if i >= n_layers:
                raise ValueError(f"checkpoint has layer {i} but the config says {n_layers} layers")
            state[f"blocks.{i}.{_LAYER_NAMES['.'.join(parts[3:])]}.{leaf}"] = tensor
            continue
        raise ValueError(f"unexpected tensor {name!r} in the checkpoint: not a BERT encoder weight")
    return state


def model_files(path=None) -> dict[str, Path]:
    """The three model files by file name, each checked.

    path=None: wherever `attnlab.plumbing.assets` finds a verified copy ($ATTNLAB_MINILM, then the
    carrier package). A folder: its model.safetensors, vocab.txt and config.json; the weights and
    the vocabulary must match the published sha256 (config.json may be re-formatted, it is validated
    by reading it)."""
    if path is None:
        return {name.split("/")[1]: assets.require(name) for name in ASSET_NAMES}
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path (str or os.PathLike) or None, "
                        f"got {type(path).__name__}")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ValueError(f"path must be a folder holding model.safetensors, vocab.txt and "
                         f"config.json, got {str(folder)!r}, which is not a folder")
    files = {}
    for name in ASSET_NAMES:
        asset = assets.ASSETS[name]
        file = folder / asset.filename
        problem = None
        if not file.is_file():
            problem = "absent"
        elif name != "minilm/config.json":
            status = assets.check_file(name, file)  # hashed once per process, like require()
            if status != "ok":
                problem = f"{status} (not the published file)"
        if problem:
            raise assets.AssetError(
                f"load_minilm(path={str(folder)!r}): {file.name} is {problem}.\n"
                f"The folder must hold the all-MiniLM-L6-v2 files model.safetensors, vocab.txt and "
                f"config.json. Fix: {asset.fix}, then call load_minilm() without a path.", name)
        files[asset.filename] = file
    return files


def load_minilm(path=None, max_length: int = DEFAULT_MAX_LENGTH) -> MiniLM:
    """The pre-trained all-MiniLM-L6-v2 encoder, in eval mode, built from attnlab's own
    EncoderBlock and MultiHeadAttention.

    path: None (find the files via `attnlab.plumbing.assets`: $ATTNLAB_MINILM, then the carrier
    package) or a folder holding model.safetensors, vocab.txt and config.json; the weights and the
    vocabulary are sha256-checked either way. max_length: the longest input in word pieces (2..512).
    """
    files = model_files(path)
    config = _read_config(files["config.json"])
    model = MiniLM(config, files["vocab.txt"], max_length=max_length)
    state = _state_dict(load_file(files["model.safetensors"]), config["num_hidden_layers"])
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise ValueError(f"{files['model.safetensors']} does not fit the config: "
                         f"missing {missing}, unexpected {unexpected}")
    return model.eval().requires_grad_(False)


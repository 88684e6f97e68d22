"""Sentiment on top of the pre-trained encoder (notebook 07): a linear head on the frozen
all-MiniLM-L6-v2 (`attnlab.pretrained.minilm`) and an attention-pooling head on its token states
(`core.models.AttentionPooling`), what the encoder's heads attend to, two interventions on one
token's role as a key, and the reliability diagram that compares a classifier's confidence with its
accuracy. The sentiment app (`attnlab.views.app`) uses the pooling head.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..core.interventions import hide_key
from ..core.models import AttentionPooling
from ..core.recipes import HEAD, POOLING
from ..core.training import seeded
from ..plumbing.checks import check_choice, check_int, check_tensor
from ..pretrained.minilm import MiniLM
from . import data
from .classifier import fit_classifier
from .data import Reviews


def check_encoder(encoder) -> MiniLM:
    if not isinstance(encoder, MiniLM):
        raise TypeError(f"encoder must be the MiniLM from load_minilm(), "
                        f"got {type(encoder).__name__}")
    return encoder


@torch.no_grad()
def token_states(encoder: MiniLM, sentences, batch_size: int = 64) -> torch.Tensor:
    """The encoder's last-layer states of each text's word pieces, (N, T, 384), zero where there
    is no word piece of the text: padding, [CLS] and [SEP] (what `AttentionPooling` reads)."""
    check_encoder(encoder)
    batch = encoder.tokenize(sentences)
    n, length = batch.ids.shape
    out = torch.zeros(n, length, encoder.config["hidden_size"])  # (N, T, 384)
    rows = [slice(start, start + batch_size) for start in range(0, n, batch_size)]
    used = [int(batch.keep[r].sum(1).max()) for r in rows]  # each batch's longest text
    batches = [(batch.ids[r, :u], batch.keep[r, :u]) for r, u in zip(rows, used)]
    for r, u, states in zip(rows, used, encoder.run_batches(batches, _words_only)):
        out[r, :u] = states  # (b, used, 384)
    return out


def _words_only(hidden: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The states of a batch's word pieces, zero at [CLS], [SEP] and padding: (b, T, d)."""
    words = keep.clone()  # (b, T)
    words[:, 0] = False  # [CLS]
    words[torch.arange(len(words)), keep.sum(1) - 1] = False  # [SEP]
    return hidden * words.unsqueeze(-1)


def fit_head(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
             y_test: torch.Tensor, *, seed: int = 0, verbose: bool = False, **overrides):
    """Train a sentiment head on inputs that are already computed: the encoder stays frozen, so
    each review is encoded once. Sentence vectors (N, d) train a linear head, nn.Linear(d, 2)
    (2·d + 2 weights), by `recipes.HEAD`; token states (N, T, d) from `token_states` train an
    `AttentionPooling` head (3·d + 2 weights) by `recipes.POOLING`. Training is
    `attnlab.lessons.classifier.fit_classifier` (seeded Adam, the loop that trains the
    TinyTransformer); `overrides` replace the recipe's values. Returns (head in eval mode,
    history)."""
    check_tensor("x_train", x_train, floating=True)
    if x_train.dim() not in (2, 3):
        raise ValueError(f"x_train must be sentence vectors (N, d) or token states (N, T, d), "
                         f"got shape {tuple(x_train.shape)}")
    check_tensor("x_test", x_test, floating=True)
    if x_test.dim() != x_train.dim() or x_test.shape[-1] != x_train.shape[-1]:
        raise ValueError(f"x_test must be like x_train, (N, {x_train.shape[-1]})"
                         f"{' with tokens' if x_train.dim() == 3 else ''}, "
                         f"got shape {tuple(x_test.shape)}")
    d = x_train.shape[-1]
    pooling = x_train.dim() == 3
    r = (POOLING if pooling else HEAD).but(**overrides)
    head = seeded(lambda: AttentionPooling(d) if pooling else nn.Linear(d, 2), seed)  # W v + b
    history = fit_classifier(head.to(x_train.device), x_train, y_train, x_test, y_test,
                             recipe=r, seed=seed, verbose=verbose)
    return head.eval(), history


def train_head(encoder: MiniLM, train, test, *, seed: int = 0, verbose: bool = False,
               **overrides):
    """Encode reviews with the frozen encoder and train a linear sentiment head on them
    (`fit_head`).

    `train` and `test` are `attnlab.lessons.data.Reviews`; the first HEAD.n_train training
    reviews are used, since a linear layer on 384 numbers needs few examples and embedding them
    is the slow part. Returns (head in eval mode, history).
    """
    check_encoder(encoder)
    for name, reviews in (("train", train), ("test", test)):
        if not isinstance(reviews, Reviews):
            raise TypeError(f"{name} must be attnlab.lessons.data.Reviews (e.g. "
                            f"train_classifier().{name}), got {type(reviews).__name__}")
    r = HEAD.but(**overrides)
    train = train[: r.n_train]
    x_train, x_test = encoder.encode(train.texts()), encoder.encode(test.texts())  # (N, 384) each
    y_train, y_test = torch.tensor(train.labels), torch.tensor(test.labels)  # (N,)
    return fit_head(x_train, y_train, x_test, y_test, seed=seed, verbose=verbose, **overrides)


def pooling_reviews(seed: int = 0, n: int = POOLING.n_train) -> Reviews:
    """What the pooling head learns from, all made by `attnlab.lessons.data`: n one-word reviews, n
    contrast reviews (half with "but", half with "yet") and the same reviews with their two
    sentiment words swapped (so a bag of words alone says nothing), and n/2 one-word reviews
    negated ("not dull": positive)."""
    n = check_int("n", n, minimum=2)
    contrast = [data.make_contrast_reviews(n // 2, seed=seed + 1 + i, contrast=word)
                for i, word in enumerate(("but", "yet"))]
    return (data.make_reviews(n, seed=seed) + contrast[0] + contrast[1]
            + data.swapped(contrast[0]) + data.swapped(contrast[1])
            + data.negated(data.make_reviews(n // 2, seed=seed + 3)))


def held_out_contrasts(seed: int = 1000, n: int = 200) -> Reviews:
    """n contrast reviews (half "but", half "yet") and their swaps, from seeds no training uses."""
    contrast = [data.make_contrast_reviews(n // 2, seed=seed + i, contrast=word)
                for i, word in enumerate(("but", "yet"))]
    return contrast[0] + contrast[1] + data.swapped(contrast[0]) + data.swapped(contrast[1])


def train_pooling_head(encoder: MiniLM, *, seed: int = 0, verbose: bool = False,
                       **overrides):
    """Encode `pooling_reviews()` and `held_out_contrasts()` with the frozen encoder
    (`token_states`) and train an `AttentionPooling` head on them (`fit_head`; `seed` seeds its
    weights and batches). Returns (head in eval mode, history)."""
    check_encoder(encoder)
    r = POOLING.but(**overrides)
    train, test = pooling_reviews(n=r.n_train), held_out_contrasts()
    x_train, x_test = token_states(encoder, train.texts()), token_states(encoder, test.texts())
    y_train, y_test = torch.tensor(train.labels), torch.tensor(test.labels)  # (N,)
    return fit_head(x_train, y_train, x_test, y_test, seed=seed, verbose=verbose, **overrides)


def attention_patterns(tokens: list[str], maps) -> dict[str, torch.Tensor]:
    """What each head does, measured: for every layer and head (an (L, H) tensor per pattern), the
    share of its attention (averaged over queries; each row sums to 1, so 1.0 = all of it) that
    goes to "[CLS]", to "[SEP]", to the query's own token ("self"), to the token before it
    ("previous") and to the token after it ("next")."""
    if len(tokens) < 3 or tokens[0] != "[CLS]" or tokens[-1] != "[SEP]":
        raise ValueError("tokens must be the word pieces of attention_maps(), [CLS] ... [SEP], "
                         f"with at least one word between; got {tokens!r}")
    w = torch.stack([m[0] for m in maps])  # (L, H, T, T)
    if w.shape[-1] != len(tokens):
        raise ValueError(f"maps are over {w.shape[-1]} tokens but {len(tokens)} tokens were given")
    return {
        "[CLS]": w[..., :, 0].mean(-1),  # (L, H)   mean_i w[i, 0]
        "[SEP]": w[..., :, -1].mean(-1),  # (L, H)   mean_i w[i, T-1]
        "self": w.diagonal(dim1=-2, dim2=-1).mean(-1),  # (L, H)   mean_i w[i, i]
        "previous": w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1),  # mean_{i>=1} w[i, i-1]
        "next": w.diagonal(offset=1, dim1=-2, dim2=-1).mean(-1),  # mean_{i<T-1} w[i, i+1]
    }


def _hidden_keys(batch, position: int | None, word_index) -> torch.Tensor:
    """(N, T) bool: the word pieces to take out as keys, True where hidden."""
    hide = torch.zeros_like(batch.keep)  # (N, T)
    if word_index is not None:
        if isinstance(word_index, torch.Tensor):
            word_index = word_index.tolist()
        if isinstance(word_index, (str, bytes)) or not isinstance(word_index, Sequence):
            raise TypeError(f"word_index must be a sequence of ints, one per sentence, "
                            f"got {type(word_index).__name__}")
        if len(word_index) != len(batch.tokens):
            raise ValueError(f"word_index must have one entry per sentence ({len(batch.tokens)}),"
                             f" got {len(word_index)}")
        for i, (words, w) in enumerate(zip(batch.word_ids, word_index)):
            w = check_int(f"word_index[{i}]", w)
            pieces = [j for j, word in enumerate(words) if word == w]
            if not pieces:
                raise ValueError(f"word_index[{i}] must be the index of a word of sentence {i} "
                                 f"(0 to {max(x for x in words if x is not None)}), got {w}")
            hide[i, pieces] = True
        return hide
    lengths = batch.keep.sum(1)  # (N,)   real tokens per sentence, [CLS] and [SEP] included
    shortest = int(lengths.min()) if len(lengths) else 0
    if len(lengths) and not -shortest <= position < shortest:
        raise ValueError(f"position must be in [-{shortest}, {shortest - 1}] (the shortest "
                         f"sentence has {shortest} word pieces), got {position}")
    rows = torch.arange(len(lengths))  # (N,)
    cols = lengths + position if position < 0 else torch.full_like(lengths, position)  # (N,)
    hide[rows, cols] = True
    return hide


@torch.no_grad()
def encode_without_key(encoder: MiniLM, sentences, position: int | None = None, *,
                       word_index=None, how: str = "mask") -> torch.Tensor:
    """Sentence vectors (N, 384) with one token taken out of every head's attention as a key, in
    every layer: a test of what the attention that token receives does (notebook 07). Compare
    them with `encoder.encode(sentences)`.

    Which token: `position`, a word-piece index, the same in every sentence (0 is [CLS], -1 the
    last real token, [SEP]; the default is 0), or `word_index`, one word index per sentence
    (words split at spaces and punctuation, from 0, as `Reviews.positions` counts them): all the
    word pieces of that word. how="mask": no query may attend to the token, so the weight it
    received is shared out over the others (as a padding mask does); how="value": the weights
    stay, but the token's value vector is zero, so what a head takes from it is nothing (the
    same output as zeroing its column of weights after the softmax). The token itself stays a
    query and is still pooled: only its role as a key changes.
    """
    check_encoder(encoder)
    if position is not None and word_index is not None:
        raise TypeError("give position or word_index, not both")
    position = 0 if position is None else check_int("position", position)
    check_choice("how", how, ("mask", "value"))
    batch = encoder.tokenize(sentences)
    hide = _hidden_keys(batch, position, word_index)  # (N, T)   True = taken out as a key
    with hide_key(encoder, keys=hide, how=how):
        hidden = encoder(batch.ids, batch.keep)  # (N, T, 384)
    return encoder.pool(hidden, batch.keep)  # (N, 384)   pooled over the same real tokens


def reliability(confidence: torch.Tensor, correct: torch.Tensor,
                n_bins: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The numbers of a reliability diagram for a two-class classifier: are its answers given
    with confidence 0.9 right 9 times in 10?

    confidence (N,): the probability the model gave its own answer, in [0.5, 1]; correct (N,):
    whether that answer was right (bool or 0/1). The range [0.5, 1] is cut into `n_bins` equal
    bins (bin b holds 0.5 + b·w <= c < 0.5 + (b+1)·w with w = 0.5 / n_bins, the last bin also
    holds 1.0). Returns, per bin, (count (n_bins,) int64, mean confidence, accuracy): the last
    two in confidence's dtype, NaN for an empty bin (nothing to average). A calibrated model has
    accuracy ≈ mean confidence in every bin.
    """
    check_tensor("confidence", confidence, floating=True)
    check_tensor("correct", correct)
    if confidence.dim() != 1 or correct.shape != confidence.shape:
        raise ValueError(f"confidence and correct must be 1-D of the same length, got shapes "
                         f"{tuple(confidence.shape)} and {tuple(correct.shape)}")
    if len(confidence) and not bool(((confidence >= 0.5) & (confidence <= 1)).all()):
        raise ValueError("confidence must be in [0.5, 1] (the probability of the answer a "
                         "two-class model gives), got values outside it")
    n_bins = check_int("n_bins", n_bins, minimum=1)
    bins = ((confidence - 0.5) / 0.5 * n_bins).long().clamp(max=n_bins - 1)  # (N,) bin index
    count = torch.bincount(bins, minlength=n_bins)  # (n_bins,)
    zeros = torch.zeros(n_bins, dtype=confidence.dtype, device=confidence.device)  # (n_bins,)
    summed_confidence = zeros.index_add(0, bins, confidence)  # (n_bins,)
    summed_right = zeros.index_add(0, bins, correct.to(confidence.dtype))  # (n_bins,)
    return count, summed_confidence / count, summed_right / count  # 0 / 0 = NaN: empty bin

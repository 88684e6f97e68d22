"""Sentiment on top of the pre-trained encoder (notebook 06): a linear head on the frozen
all-MiniLM-L6-v2 (`attnlab.minilm`), what the encoder's heads attend to, two interventions on one
token's role as a key, and the reliability diagram that compares a classifier's confidence with
its accuracy. The sentiment app (`attnlab.app`) uses the head.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .checks import check_choice, check_int, check_tensor
from .data import Reviews
from .minilm import MiniLM
from .probes import hide_key
from .recipes import HEAD
from .train import fit_classifier, seeded


def check_encoder(encoder) -> MiniLM:
    if not isinstance(encoder, MiniLM):
        raise TypeError(f"encoder must be the MiniLM from load_minilm(), "
                        f"got {type(encoder).__name__}")
    return encoder


def fit_head(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
             y_test: torch.Tensor, *, seed: int = 0, verbose: bool = False, **overrides):
    """Train a linear sentiment head, nn.Linear(d, 2), on sentence vectors (N, d) that are
    already computed: the encoder stays frozen, so each review is encoded once, and only
    2·d + 2 weights learn. Training is `attnlab.train.fit_classifier` (seeded Adam, the loop that
    trains the TinyTransformer) by `recipes.HEAD` (`overrides` replace its values). Returns
    (head in eval mode, history)."""
    for name, x in (("x_train", x_train), ("x_test", x_test)):
        check_tensor(name, x, floating=True)
        if x.dim() != 2 or x.shape[1] != x_train.shape[-1]:
            raise ValueError(f"{name} must be sentence vectors (N, {x_train.shape[-1]}), "
                             f"got shape {tuple(x.shape)}")
    r = HEAD.but(**overrides)
    head = seeded(lambda: nn.Linear(x_train.shape[1], 2).to(x_train.device), seed)  # W v + b
    history = fit_classifier(head, x_train, y_train, x_test, y_test, recipe=r, seed=seed,
                             verbose=verbose)
    return head.eval(), history


def train_head(encoder: MiniLM, train, test, *, seed: int = 0, verbose: bool = False,
               **overrides):
    """Encode reviews with the frozen encoder and train a linear sentiment head on them
    (`fit_head`).

    `train` and `test` are `attnlab.data.Reviews`; the first HEAD.n_train training
    reviews are used, since a linear layer on 384 numbers needs few examples and embedding them
    is the slow part. Returns (head in eval mode, history).
    """
    check_encoder(encoder)
    for name, reviews in (("train", train), ("test", test)):
        if not isinstance(reviews, Reviews):
            raise TypeError(f"{name} must be attnlab.data.Reviews (e.g. "
                            f"train_classifier().{name}), got {type(reviews).__name__}")
    r = HEAD.but(**overrides)
    train = train[: r.n_train]
    x_train, x_test = encoder.encode(train.texts()), encoder.encode(test.texts())  # (N, 384) each
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
    every layer: a test of what the attention that token receives does (notebook 06). Compare
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
        hidden, _ = encoder(batch.ids, batch.keep)  # (N, T, 384)
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

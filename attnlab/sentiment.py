"""Sentiment on top of the pre-trained encoder (notebook 06): a linear head on the frozen
all-MiniLM-L6-v2 (`attnlab.minilm`), what the encoder's heads attend to, and an intervention on
one token's role as a key. The sentiment app (`attnlab.app`) uses the head.
"""
from __future__ import annotations

import torch
from torch import nn

from .checks import check_choice, check_int
from .data import Reviews
from .minilm import MiniLM
from .train import fit_classifier, recipe

#: how the sentiment head on the frozen encoder is trained (notebook 06 and the sentiment app)
HEAD_RECIPE = {"n_train": 400, "epochs": 30, "lr": 3e-2, "batch_size": 64}


def check_encoder(encoder) -> MiniLM:
    if not isinstance(encoder, MiniLM):
        raise TypeError(f"encoder must be the MiniLM from load_minilm(), "
                        f"got {type(encoder).__name__}")
    return encoder


def train_head(encoder: MiniLM, train, test, *, seed: int = 0, verbose: bool = False,
               **overrides):
    """Train a linear sentiment head, nn.Linear(384, 2), on the frozen encoder's sentence vectors.

    `train` and `test` are `attnlab.data.Reviews`; the first HEAD_RECIPE["n_train"] training
    reviews are used, since a linear layer on 384 numbers needs few examples and embedding them
    is the slow part. Training is `attnlab.train.fit_classifier` (seeded Adam), the loop that
    trains the TinyTransformer. Returns (head in eval mode, history).
    """
    check_encoder(encoder)
    for name, reviews in (("train", train), ("test", test)):
        if not isinstance(reviews, Reviews):
            raise TypeError(f"{name} must be attnlab.data.Reviews (e.g. "
                            f"train_classifier().{name}), got {type(reviews).__name__}")
    check_int("seed", seed)
    r = recipe(HEAD_RECIPE, overrides)
    train = train[: r["n_train"]]
    x_train, x_test = encoder.encode(train.texts()), encoder.encode(test.texts())  # (N, 384) each
    y_train, y_test = torch.tensor(train.labels), torch.tensor(test.labels)  # (N,)
    torch.manual_seed(seed)
    head = nn.Linear(x_train.shape[1], 2)  # logits = W v + b for the two labels
    history = fit_classifier(head, x_train, y_train, x_test, y_test, epochs=r["epochs"],
                             lr=r["lr"], batch_size=r["batch_size"], seed=seed, verbose=verbose)
    return head.eval(), history


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


@torch.no_grad()
def encode_without_key(encoder: MiniLM, sentences, position: int = 0, *,
                       how: str = "mask") -> torch.Tensor:
    """Sentence vectors (N, 384) with one token taken out of every head's attention as a key: a
    test of what the attention that token receives does (notebook 06). Compare them with
    `encoder.encode(sentences)`.

    `position` 0 is [CLS], -1 the last real token, [SEP]. how="mask": no query may attend to the
    token, so its weight is shared out over the others (as a padding mask does); how="value": the
    weights stay, but the token's value vector is zero in every layer, so what a head takes from
    it is nothing. The token itself stays a query and is still pooled: only its role as a key
    changes.
    """
    check_encoder(encoder)
    position = check_int("position", position)
    check_choice("how", how, ("mask", "value"))
    batch = encoder.tokenize(sentences)
    lengths = batch.keep.sum(1)  # (N,)   real tokens per sentence, [CLS] and [SEP] included
    if len(lengths) and not -int(lengths.min()) <= position < int(lengths.min()):
        raise ValueError(f"position must be in [-{int(lengths.min())}, {int(lengths.min()) - 1}] "
                         f"(the shortest sentence has {int(lengths.min())} word pieces), "
                         f"got {position}")
    rows = torch.arange(len(lengths))  # (N,)
    cols = lengths + position if position < 0 else torch.full_like(lengths, position)  # (N,)
    if how == "mask":
        keep = batch.keep.clone()
        keep[rows, cols] = False  # (N, T)   no query may attend to this key
        hidden, _ = encoder(batch.ids, keep)  # (N, T, 384)
    else:
        def zero_value(module, inputs, v):  # v (N, T, 384): every head's values, before the split
            return v.index_put((rows, cols), torch.zeros((), dtype=v.dtype))

        hooks = [block.attn.v.register_forward_hook(zero_value) for block in encoder.blocks]
        try:
            hidden, _ = encoder(batch.ids, batch.keep)  # (N, T, 384)
        finally:
            for hook in hooks:
                hook.remove()
    return encoder.pool(hidden, batch.keep)  # (N, 384)   pooled over the same real tokens

"""Attention over a set of images: find the one that does not belong (notebook 06).

A set is `set_size` images, all but one of one class and one of another class, in random order.
`OddOneOut` (`core.models`) reads the set's image features (MobileNetV2 embeddings, or raw pixels),
keeps their main directions, lets every image attend to every other through one `EncoderBlock`
without positional encodings, and gives each image a score; the odd image should get the highest.
Trained with cross-entropy over the set's positions, as if each position were a class.

Without positions, self-attention is permutation-equivariant (notebook 05): permuting a set
permutes its scores, so the model reads its input as a set, of any size. Under
`attnlab.uniform_attention(model)` every image receives the plain mean of the set; the no-attention
rule `farthest_from_mean` picks the image least like that mean.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..core.models import OddOneOut, eval_mode
from ..core.recipes import SETS
from ..core.training import seeded, train
from ..plumbing.checks import check_int, check_tensor
from ..plumbing.repro import seed_of


def odd_one_out(labels, n_sets: int, set_size: int = 10, seed: int = 0):
    """Sets of images for the odd-one-out task, as indices into `labels`.

    Each set draws a class and `set_size - 1` distinct images of it, one image of another
    class, and shuffles them. Returns (members (n_sets, set_size) int64 indices into `labels`,
    odd (n_sets,) int64: the position of the odd image in its set). With set_size 2 there is no
    majority, so no odd image to find: a model can only guess.
    """
    labels = np.asarray(labels.numpy(force=True) if isinstance(labels, torch.Tensor) else labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"labels must be a 1-D array of integer classes, got dtype {labels.dtype} "
                        f"and shape {labels.shape}")
    n_sets = check_int("n_sets", n_sets, minimum=1)
    set_size = check_int("set_size", set_size, minimum=2)
    rng = np.random.default_rng(seed_of(check_int("seed", seed, minimum=0)))
    classes, counts = np.unique(labels, return_counts=True)
    usable = classes[counts >= set_size - 1]  # classes with enough images for a majority
    if len(classes) < 2 or len(usable) == 0:
        raise ValueError(f"set_size {set_size} needs a class with at least {set_size - 1} images "
                         f"and a second class; the labels have {len(classes)} classes, the "
                         f"largest with {counts.max(initial=0)} images")
    majority = rng.choice(usable, n_sets)                                   # (N,) a class each
    other = classes[(np.searchsorted(classes, majority)                     # (N,) any other one
                     + rng.integers(1, len(classes), n_sets)) % len(classes)]
    members = np.empty((n_sets, set_size), np.int64)
    for c in usable:                      # set_size - 1 distinct images of class c per set
        rows, pool = np.flatnonzero(majority == c), np.flatnonzero(labels == c)
        pick = np.argpartition(rng.random((len(rows), len(pool))), set_size - 2, axis=1)
        members[rows, :-1] = pool[pick[:, :set_size - 1]]
    for c in classes:                     # the odd image: one image of the other class
        rows, pool = np.flatnonzero(other == c), np.flatnonzero(labels == c)
        members[rows, -1] = pool[rng.integers(0, len(pool), len(rows))]
    order = np.argsort(rng.random((n_sets, set_size)), axis=1)             # shuffle each set
    members = np.take_along_axis(members, order, axis=1)
    odd = np.argmax(order == set_size - 1, axis=1)                          # where the odd went
    return torch.from_numpy(members), torch.from_numpy(odd)


def _features(features) -> torch.Tensor:
    x = torch.as_tensor(features.numpy(force=True) if isinstance(features, torch.Tensor)
                        else np.asarray(features))
    if x.dim() != 2 or not x.is_floating_point():
        raise TypeError(f"features must be a float array (N, D), one row per image, got "
                        f"{x.dtype} of shape {tuple(x.shape)}")
    return x.double()  # (N, D) float64, exact for float32 features


def _check_sets(members, odd, n_images: int) -> None:
    check_tensor("members", members)
    check_tensor("odd", odd)
    if members.dim() != 2 or odd.shape != members.shape[:1]:
        raise ValueError(f"members must be (N, S) and odd (N,), got {tuple(members.shape)} and "
                         f"{tuple(odd.shape)}")
    if members.numel() and not 0 <= int(members.min()) <= int(members.max()) < n_images:
        raise ValueError(f"members must index the {n_images} rows of features, got indices "
                         f"{int(members.min())}..{int(members.max())}")


def train_odd_one_out(features, members: torch.Tensor, odd: torch.Tensor, *, seed: int = 0,
                      **overrides) -> OddOneOut:
    """Train an `OddOneOut` on sets of `features` rows with `attnlab.core.training.train`, by `SETS`
    (keyword overrides replace its entries); returns the model in eval mode.

    The loss is cross-entropy over each set's positions: softmax over the S scores, and the
    odd image's position as the right class. `seed` draws the weights and the batch order.
    """
    x = _features(features)                                  # (N, D)
    _check_sets(members, odd, len(x))
    seed = check_int("seed", seed, minimum=0)
    r = SETS.but(**overrides)
    model = seeded(lambda: OddOneOut(x.shape[1], r.d_model, r.n_heads, r.d_ff, r.directions),
                   seed)
    model.fit_directions(x)
    reduced = model.reduce(x)                                # (N, k) once, not once per step

    def loss_fn(model, batch):
        sets, odd_b = batch                                  # (b, S) image indices, (b,)
        scores = model.attend(reduced[sets])                 # (b, S) one score per image
        return F.cross_entropy(scores, odd_b)                # the odd one's position is the class

    return train(r, model, loss_fn, (members, odd), seed=seed)[0]


@torch.no_grad()
def predict(model: nn.Module, features, members: torch.Tensor) -> torch.Tensor:
    """The position of the highest-scoring image of each set (N,), the model in eval mode.
    `model` maps sets of features (B, S, D) to scores (B, S), as `OddOneOut` does."""
    x = _features(features)
    _check_sets(members, members[:, 0], len(x))
    with eval_mode(model):
        if isinstance(model, OddOneOut):
            return model.score_sets(x, members).argmax(-1)                       # (N,)
        return torch.cat([model(x[m]).argmax(-1) for m in members.split(1000)])  # (N,)


def farthest_from_mean(features, members: torch.Tensor) -> torch.Tensor:
    """The no-attention rule: in each set, the image whose features have the lowest cosine to the
    set's mean feature vector. Returns its position (N,)."""
    x = _features(features)
    _check_sets(members, members[:, 0], len(x))
    sets = x[members]                                                     # (N, S, D)
    return F.cosine_similarity(sets, sets.mean(1, keepdim=True), dim=-1).argmin(-1)  # (N,)

"""Attention over a set of images: find the one that does not belong (notebook 05).

A set is `set_size` images, all but one of one class and one of another class, in random
order. `OddOneOut` reads the set's image features (MobileNetV2 embeddings, or raw pixels),
keeps their main directions, lets every image attend to every other through one `EncoderBlock`
without positional encodings, and gives each image a score; the odd image should get the
highest. Trained with cross-entropy over the set's positions, as if each position were a class.

Without positions, self-attention is permutation-equivariant (notebook 04): permuting a set
permutes its scores, so the model reads its input as a set, of any size. Under
`attnlab.uniform_attention(model)` every image receives the plain mean of the set; the no-attention
rule `farthest_from_mean` picks the image least like that mean.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .blocks import EncoderBlock
from .checks import check_choice, check_int, check_tensor
from .models import draw_float64, eval_mode
from .recipes import SETS
from .repro import seed_of
from .train import seeded, train


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


class OddOneOut(nn.Module):
    """A score for each image of a set: a LayerNorm, the `directions` main directions of the
    training images' (normalised) features and a linear layer bring each image to d_model, one
    encoder block (GELU) lets the images attend to each other (no positional encoding: the set
    has no order), and a linear layer scores each image.

    The LayerNorm has no parameters: it only puts every image's features on one scale (pixels
    range to 255, embeddings to 6). The directions are fixed, not learned: `fit_directions`
    sets them from the training features (principal components), and keeping 64 of 1280 makes
    training several times faster. `dtype=torch.float64` draws the weights in float64
    (`draw_float64`), so training gives the same model on any CPU.
    """

    def __init__(self, d_in: int, d_model: int = SETS.d_model,
                 n_heads: int = SETS.n_heads, d_ff: int = SETS.d_ff,
                 directions: int = SETS.directions, dtype: torch.dtype = torch.float64):
        super().__init__()
        self.d_in = check_int("d_in", d_in, minimum=1)
        k = min(check_int("directions", directions, minimum=1), self.d_in)
        check_choice("dtype", dtype, (torch.float32, torch.float64))
        self.norm = nn.LayerNorm(d_in, elementwise_affine=False)
        self.register_buffer("centre", torch.zeros(d_in, dtype=dtype))          # (d_in,)
        self.register_buffer("basis", torch.eye(d_in, k, dtype=dtype))          # (d_in, k)
        self.embed = nn.Linear(k, d_model)
        self.block = EncoderBlock(d_model, n_heads, d_ff, activation="gelu")
        self.score = nn.Linear(d_model, 1)
        if dtype == torch.float64:
            draw_float64(self)

    @torch.no_grad()
    def fit_directions(self, features: torch.Tensor) -> None:
        """Keep the main directions of `features` (N, d_in), normalised: their centre and the
        eigenvectors of their covariance with the largest eigenvalues, each signed so that its
        largest entry is positive (an eigenvector's sign is arbitrary, and another LAPACK could
        pick the other one)."""
        x = self.norm(features.to(self.basis.dtype))                  # (N, d_in)
        self.centre = x.mean(0)                                       # (d_in,)
        _, vectors = torch.linalg.eigh((x - self.centre).T @ (x - self.centre))  # ascending
        top = vectors[:, -self.basis.shape[1]:].flip(1)               # (d_in, k) largest first
        rows = top.abs().argmax(0)                                    # (k,)
        self.basis = top * top[rows, torch.arange(top.shape[1])].sign()

    @torch.no_grad()
    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """features (..., d_in) -> (..., k): normalised, on the kept directions (nothing here
        is learned, so training computes it once for all images)."""
        return (self.norm(x.to(self.basis.dtype)) - self.centre) @ self.basis

    def attend(self, r: torch.Tensor) -> torch.Tensor:
        """reduced features (B, S, k) -> scores (B, S)."""
        return self.score(self.block(self.embed(r))).squeeze(-1)  # (B, S)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, S, d_in) -> one score per image (B, S); the odd image should score highest."""
        check_tensor("x", x)
        if x.dim() != 3 or x.shape[-1] != self.d_in:
            raise ValueError(f"x must be a batch of sets of features (B, S, {self.d_in}), "
                             f"got shape {tuple(x.shape)}")
        return self.attend(self.reduce(x))

    def score_sets(self, features: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """The scores of sets given as rows of one feature table: features (N, d_in), members
        (B, S) indices -> (B, S). The same as `self(features[members])`, with each image
        reduced once instead of once per set it is in."""
        return self.attend(self.reduce(features)[members])  # (B, S)


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
    """Train an `OddOneOut` on sets of `features` rows with `attnlab.train.train`, by `SETS`
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

"""Every training recipe of the series, in one place: one frozen dataclass per model kind, and
the one recipe each lesson trains by.

A recipe is what `attnlab.core.training.train` needs besides the model, the data and the loss: the
model's size, Adam's learning rate, the minibatch size, and how long to train, as `epochs`
(passes over a fixed training set, each in a new random order) or `steps` (each on new data).
`recipe.but(epochs=20)` is the same recipe with some values changed, each checked; a name the
recipe does not have is a TypeError, so `epoch=3` cannot pass unnoticed. Printed, a recipe
shows its values as a dict (what notebooks 08 and 10 print). The recipes sit in the core
beside the models they size (`models.AttentionOnly` and `OddOneOut` take their defaults from
here) and the loop that checks them: they hold numbers, never a lesson's task.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ..plumbing.checks import check_int, check_number


class Recipe:
    """What every recipe does: check its values, change some (`but`), print as its values."""

    warmup = 0  # steps over which the learning rate rises to lr (a field where a lesson varies it)
    decay = False  # whether the learning rate then falls linearly to 0 at the last step

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("float", float):
                check_number(f.name, value, minimum=0.0, exclusive_minimum=True)
            else:
                check_int(f.name, value, minimum=0 if f.name == "warmup" else 1)

    def but(self, **changes):
        """This recipe with the values in `changes` instead, each checked."""
        names = [f.name for f in fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"unknown recipe keys {unknown}; expected some of {sorted(names)}")
        return replace(self, **changes)

    def __str__(self) -> str:
        return str(asdict(self))


@dataclass(frozen=True)
class ClassifierRecipe(Recipe):
    """Notebook 03's TinyTransformer on reviews: size, Adam, passes over the reviews, how many."""
    d_model: int
    n_heads: int
    d_ff: int
    lr: float
    batch_size: int
    epochs: int
    n_train: int
    n_test: int
    warmup: int = 0


@dataclass(frozen=True)
class HeadRecipe(Recipe):
    """A linear head on frozen sentence vectors (notebook 07): how many reviews, and Adam's."""
    n_train: int
    epochs: int
    lr: float
    batch_size: int


@dataclass(frozen=True)
class SetRecipe(Recipe):
    """Notebook 06's odd-one-out model: directions kept of the image features, size, Adam."""
    directions: int
    d_model: int
    n_heads: int
    d_ff: int
    lr: float
    batch_size: int
    epochs: int


@dataclass(frozen=True)
class SequenceRecipe(Recipe):
    """Notebook 08's decoders: size, Adam, steps on new sequences, the learning rate decaying."""
    d_model: int
    n_heads: int
    d_ff: int
    lr: float
    batch_size: int
    steps: int
    decay = True  # the last steps settle instead of jumping about


@dataclass(frozen=True)
class InductionRecipe(Recipe):
    """Notebook 10's attention-only models: size, Adam, steps, the embeddings' initial std."""
    d_model: int
    n_heads: int
    lr: float
    batch_size: int
    steps: int
    embed_std: float


#: notebook 03's model, which notebooks 05 and 07, the scale study and the sentiment app reuse
TINY = ClassifierRecipe(d_model=32, n_heads=4, d_ff=64, lr=3e-3, batch_size=64, epochs=12,
                        n_train=1600, n_test=400)
#: notebook 07's sentiment head on MiniLM (and the sentiment app's)
HEAD = HeadRecipe(n_train=400, epochs=30, lr=3e-2, batch_size=64)
#: notebook 07's attention-pooling head on MiniLM's token states (the sentiment app's): n_train is
#: the one-word reviews; as many contrast reviews come with their swaps, and half as many negated
POOLING = HeadRecipe(n_train=400, epochs=40, lr=3e-3, batch_size=64)
# Notebook 05: 30,000 sets of 10, each seen once, in about 2 s on one thread. Chosen so that
# training is not chaotic: with ReLU, or d_model 64 on all 1280 features at lr 1e-3, moving
# every input feature by one float32 ulp gave another model (weights 5-15 % apart, accuracies
# 0.003-0.02 apart: what another CPU's last bits do); with GELU, 64 directions, d_model 32 and
# lr 1e-3 the weights moved by 1e-8 to 1e-7 and every prediction stayed (seeds 0-2).
# tests/test_sets.py keeps that.
SETS = SetRecipe(directions=64, d_model=32, n_heads=4, d_ff=64, lr=1e-3, batch_size=64, epochs=1)
#: notebook 08's sorter (a decoder) and reverser (an encoder-decoder)
SORTER = SequenceRecipe(d_model=32, n_heads=2, d_ff=64, lr=1e-2, batch_size=64, steps=300)
REVERSER = SequenceRecipe(d_model=32, n_heads=1, d_ff=64, lr=1e-2, batch_size=64, steps=200)
#: notebook 10's induction models
INDUCTION = InductionRecipe(d_model=32, n_heads=2, lr=1e-2, batch_size=64, steps=500,
                            embed_std=0.5)

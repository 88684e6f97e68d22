"""Notebook 03's classifier: a TinyTransformer trained on synthetic reviews.

`fit_classifier` trains a classifier with `core.training.train` and evaluates it after each
epoch (one printed line per epoch with rounded numbers when verbose: deterministic, so strict
nbval can compare it); it trains by `recipes.TINY` unless told otherwise. `train_classifier`
builds data, vocabulary and model and trains them by `recipes.TINY`: notebook 03's model, which
notebooks 05 and 07 and the sentiment app reuse. The review task lives here, not beside the
training loop, so that whatever trains or loads a model (SmolLM2 included) never imports it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from ..core.interventions import uniform_attention
from ..core.models import TinyTransformer
from ..core.recipes import TINY, ClassifierRecipe, Recipe
from ..core.training import evaluate, seeded, train
from ..plumbing.checks import check_bool, check_choice, check_int, check_number
from .data import Reviews, Vocab, make_contrast_reviews, make_reviews, make_undecided_reviews

# "contrast": notebook 03's task (the word after "but" decides); "bag": one sentiment word.
TASKS = {"contrast": make_contrast_reviews, "bag": make_reviews}


def fit_classifier(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor,
                   x_test: torch.Tensor, y_test: torch.Tensor, *, recipe: Recipe = TINY,
                   seed: int = 0, verbose: bool = False, stop_at: float | None = None,
                   **overrides) -> dict:
    """Train a classifier with `train` by `recipe` (keyword overrides replace its values, e.g.
    epochs=6) on shuffled minibatches of (x_train, y_train), and evaluate on the test set after
    every epoch. With `stop_at`, training stops after the first epoch whose test accuracy is at
    least `stop_at` (the epochs up to it are those of the full run: the batch order is the same).

    Returns the history: a dict of equal-length lists `epoch`, `train_loss` (the mean loss of the
    epoch's steps, taken while the model was still learning), `test_loss` and `test_acc`.
    """
    recipe = recipe.but(**overrides)
    seed, verbose = check_int("seed", seed), check_bool("verbose", verbose)
    if stop_at is not None:
        stop_at = check_number("stop_at", stop_at)
    if len(x_train) != len(y_train) or len(x_test) != len(y_test):
        raise ValueError(f"x and y must have the same length, got train "
                         f"{len(x_train)}/{len(y_train)}, test {len(x_test)}/{len(y_test)}")
    per_epoch = -(-len(y_train) // recipe.batch_size)  # steps per epoch (the last may be short)
    history = {"epoch": [], "train_loss": [], "test_loss": [], "test_acc": []}
    sizes, summed = [], []  # each step's batch size, and its loss times that size
    reached = []  # not empty once an epoch's test accuracy reached stop_at

    def after_step(step: int, loss: float) -> None:
        summed.append(loss * sizes[-1])
        if (step + 1) % per_epoch:
            return
        epoch = (step + 1) // per_epoch
        train_loss = sum(summed[-per_epoch:]) / len(y_train)
        test_loss, test_acc = evaluate(model, x_test, y_test)
        for key, value in zip(history, (epoch, train_loss, test_loss, test_acc)):
            history[key].append(value)
        if stop_at is not None and test_acc >= stop_at:
            reached.append(epoch)
        if verbose:
            print(f"epoch {epoch:2d}/{recipe.epochs}  train loss {history['train_loss'][-1]:.3f}"
                  f"  |  test loss {test_loss:.3f}  acc {test_acc:.3f}", flush=True)

    def loss_fn(model, batch):
        x, y = batch  # (b, T), (b,)
        sizes.append(len(y))
        return nn.functional.cross_entropy(model(x), y)

    train(recipe, model, loss_fn, (x_train, y_train), seed=seed, after_step=after_step,
          until=lambda: bool(reached))
    return history


@dataclass
class Trained:
    """What `train_classifier` returns: the trained model (in eval mode), its vocabulary, the
    history from `fit_classifier`, and the train/test reviews it used."""

    model: TinyTransformer
    vocab: Vocab
    history: dict
    train: Reviews
    test: Reviews

    @property
    def test_accuracy(self) -> float:
        return self.history["test_acc"][-1]


def task_reviews(task: str = "contrast", seed: int = 0, n_train: int = TINY.n_train,
                 n_test: int = TINY.n_test, undecided: int = 0) -> tuple[Reviews, Reviews]:
    """(train, test): the reviews `train_classifier` trains and tests on. They are generated
    from the seed, never stored, so a model loaded from a file gets its reviews back from here.
    `undecided` adds that many reviews without a sentiment word, each under both labels
    (`make_undecided_reviews`), to the training set only: the test set stays the task's."""
    check_choice("task", task, TASKS)
    undecided = check_int("undecided", undecided, minimum=0)
    train, test = TASKS[task](n_train + n_test, seed=seed).split(n_train)
    return (train + make_undecided_reviews(undecided, seed) if undecided else train), test


def _tiny(vocab_size: int, positions: str, dtype: torch.dtype, r: ClassifierRecipe):
    return lambda: TinyTransformer(vocab_size, r.d_model, r.n_heads, r.d_ff,
                                   positions=positions, dtype=dtype)


def initial_model(vocab_size: int, positions: str = "learned", seed: int = 0,
                  dtype: torch.dtype = torch.float64, **overrides) -> TinyTransformer:
    """The untrained TinyTransformer that `train_classifier` starts from with these arguments:
    its weights drawn from `seed`, the caller's random state left as it was."""
    return seeded(_tiny(vocab_size, positions, dtype, TINY.but(**overrides)), seed)


def train_classifier(task: str = "contrast", positions: str = "learned", seed: int = 0,
                     verbose: bool = False, dtype: torch.dtype = torch.float64,
                     uniform: bool = False, undecided: int = 0, **overrides) -> Trained:
    """Generate a task's reviews, build `Vocab.for_reviews()` and a TinyTransformer, train it.

    With no arguments this is notebook 03's model: contrast reviews ("... good ... but ...
    dull ..."), learned positions, seed 0, float64, `recipes.TINY`; a few seconds on one CPU
    thread. task: "contrast" or "bag" (one sentiment word decides). positions: "learned",
    "sinusoidal", "rotary" or "none". `seed` seeds the data, the initial weights and the batch
    order (the global RNG state is left as it was). Keyword overrides replace values of
    `recipes.TINY` (e.g. epochs=20). float64 makes the result the same on any CPU.
    uniform=True trains (and tests) with uniform attention throughout (`uniform_attention`):
    notebook 03's control, can the task be learned without attention at all?
    undecided=n adds n reviews without a sentiment word, each labelled both ways, to the
    training set (`task_reviews`): a model that reads no word it knows then says p = 0.5 instead
    of guessing with certainty (the sentiment app's TinyTransformer; notebook 07).
    """
    check_choice("task", task, TASKS)
    check_bool("uniform", uniform)
    seed = check_int("seed", seed)
    r = TINY.but(**overrides)
    train, test = task_reviews(task, seed, r.n_train, r.n_test, undecided)
    vocab = Vocab.for_reviews()
    x_train, y_train, _ = train.tensors(vocab)
    x_test, y_test, _ = test.tensors(vocab)
    model = seeded(_tiny(len(vocab), positions, dtype, r), seed)
    with uniform_attention(model) if uniform else contextlib.nullcontext():
        history = fit_classifier(model, x_train, y_train, x_test, y_test, recipe=r, seed=seed,
                                 verbose=verbose)
    return Trained(model, vocab, history, train, test)

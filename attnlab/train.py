"""Training: the one loop every model in the series is trained with, and notebook 03's recipe.

`fit` is plain Adam over a sequence of batches, optionally with a warm-up and a linear decay of
the learning rate; it returns the loss of every step. `fit_classifier` drives it epoch by epoch
for a classifier and evaluates on the test set after each epoch (one printed line per epoch with
rounded numbers when verbose: deterministic, so strict nbval can compare it).
`train_classifier` builds data, vocabulary and model and trains them by `RECIPE` in one call:
notebook 03's model, which notebooks 04 and 06 and the sentiment app reuse.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import takewhile

import torch
from torch import nn

from .checks import check_bool, check_choice, check_int, check_number
from .data import Reviews, Vocab, make_contrast_reviews, make_reviews
from .models import TinyTransformer, eval_mode
from .probes import uniform_attention
from .repro import seed_of

# Notebook 03's recipe: model size, optimiser and data size.
RECIPE = {
    "d_model": 32, "n_heads": 4, "d_ff": 64,  # model
    "lr": 3e-3, "batch_size": 64, "epochs": 12,  # Adam, minibatches, passes over the data
    "n_train": 1600, "n_test": 400,  # reviews
}
# "contrast": notebook 03's task (the word after "but" decides); "bag": one sentiment word.
TASKS = {"contrast": make_contrast_reviews, "bag": make_reviews}


def recipe(defaults: dict, overrides: dict) -> dict:
    """`defaults` with some entries replaced, each checked: a key the recipe does not have is a
    TypeError (like an unknown keyword argument, so `epoch=3` cannot pass unnoticed); sizes must
    be positive ints and the learning rate a positive number."""
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(f"unknown recipe keys {sorted(unknown)}; "
                        f"expected some of {sorted(defaults)}")
    r = {**defaults, **overrides}
    for name, value in r.items():
        if name == "lr":
            check_number("lr", value, minimum=0.0, exclusive_minimum=True)
        elif isinstance(defaults[name], int) and not isinstance(defaults[name], bool):
            check_int(name, value, minimum=0 if name == "warmup" else 1)
    return r


def fit(model: nn.Module, batches: Iterable, loss_fn: Callable, *, lr: float,
        warmup: int = 0, decay_steps: int | None = None,
        after_step: Callable[[int, float], None] | None = None) -> list[float]:
    """The one training loop: for each batch, loss_fn(model, batch), gradients, one Adam step.

    `warmup` steps raise the learning rate linearly from lr/warmup to lr; with `decay_steps` it
    then falls linearly to 0 at that step (the last steps settle instead of jumping about).
    `after_step(step, loss)` runs after every step (an evaluation, a progress line). The model
    trains in train mode and is left in eval mode, also when a step raises. Returns the loss of
    every step. The same model, batches and seed give the same weights bit for bit (one thread).
    """
    lr = check_number("lr", lr, minimum=0.0, exclusive_minimum=True)
    warmup = check_int("warmup", warmup, minimum=0)

    def factor(step: int) -> float:  # the learning rate of step `step`, as a fraction of lr
        rise = min(1.0, (step + 1) / warmup) if warmup else 1.0
        return rise * (1.0 - step / decay_steps if decay_steps else 1.0)

    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # one kernel per step
    schedule = (torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
                if warmup or decay_steps else None)
    losses = []
    model.train()
    try:
        for step, batch in enumerate(batches):
            loss = loss_fn(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if schedule is not None:
                schedule.step()
            losses.append(loss.item())
            if after_step is not None:
                after_step(step, losses[-1])
    finally:
        model.eval()
    return losses


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
             batch_size: int = 1024) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy) of a classifier on (x, y), in eval mode (the model's
    mode is restored afterwards, also when it raises)."""
    total_loss, correct = 0.0, 0
    with eval_mode(model):
        for i in range(0, len(y), batch_size):
            logits = model(x[i:i + batch_size])  # (b, C)
            total_loss += float(nn.functional.cross_entropy(logits, y[i:i + batch_size],
                                                            reduction="sum"))
            correct += int((logits.argmax(-1) == y[i:i + batch_size]).sum())
    return total_loss / len(y), correct / len(y)


def shuffled_batches(n: int, batch_size: int, epochs: int, seed: int) -> Iterator[torch.Tensor]:
    """Index minibatches: each epoch a new random order of 0..n-1 (from a generator seeded with
    `seed`), cut into batches of `batch_size` (the last one may be shorter)."""
    generator = torch.Generator().manual_seed(seed_of(seed))
    for _ in range(epochs):
        yield from torch.randperm(n, generator=generator).split(batch_size)


def fit_classifier(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor,
                   x_test: torch.Tensor, y_test: torch.Tensor, *, epochs: int = RECIPE["epochs"],
                   lr: float = RECIPE["lr"], batch_size: int = RECIPE["batch_size"],
                   seed: int = 0, warmup: int = 0, verbose: bool = False,
                   stop_at: float | None = None) -> dict:
    """Train a classifier with `fit` on shuffled minibatches, `epochs` passes over the training
    set (the first `warmup` steps raising the learning rate), and evaluate on the test set after
    every epoch. With `stop_at`, training stops after the first epoch whose test accuracy is at
    least `stop_at` (the epochs up to it are those of the full run: the batch order is the same).

    Returns the history: a dict of equal-length lists `epoch`, `train_loss` (the mean loss of the
    epoch's steps, taken while the model was still learning), `test_loss` and `test_acc`.
    """
    epochs = check_int("epochs", epochs, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    seed, verbose = check_int("seed", seed), check_bool("verbose", verbose)
    if stop_at is not None:
        stop_at = check_number("stop_at", stop_at)
    if len(x_train) != len(y_train) or len(x_test) != len(y_test):
        raise ValueError(f"x and y must have the same length, got train "
                         f"{len(x_train)}/{len(y_train)}, test {len(x_test)}/{len(y_test)}")
    per_epoch = -(-len(y_train) // batch_size)  # steps per epoch (the last batch may be short)
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
            print(f"epoch {epoch:2d}/{epochs}  train loss {history['train_loss'][-1]:.3f}  |  "
                  f"test loss {test_loss:.3f}  acc {test_acc:.3f}", flush=True)

    def loss_fn(model, batch):
        sizes.append(len(batch))
        return nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])

    batches = takewhile(lambda _: not reached,
                        shuffled_batches(len(y_train), batch_size, epochs, seed))
    fit(model, batches, loss_fn, lr=lr, warmup=warmup, after_step=after_step)
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


def task_reviews(task: str = "contrast", seed: int = 0, n_train: int = RECIPE["n_train"],
                 n_test: int = RECIPE["n_test"]) -> tuple[Reviews, Reviews]:
    """(train, test): the reviews `train_classifier` trains and tests on. They are generated
    from the seed, never stored, so a model loaded from a file gets its reviews back from here."""
    check_choice("task", task, TASKS)
    return TASKS[task](n_train + n_test, seed=seed).split(n_train)


def initial_model(vocab_size: int, positions: str = "learned", seed: int = 0,
                  dtype: torch.dtype = torch.float64, **overrides) -> TinyTransformer:
    """The untrained TinyTransformer that `train_classifier` starts from with these arguments:
    its weights drawn from `seed`, the caller's random state left as it was."""
    r = recipe(RECIPE, overrides)
    with torch.random.fork_rng(devices=[]):  # seed the weights, leave the caller's RNG alone
        torch.manual_seed(seed_of(seed))
        return TinyTransformer(vocab_size, r["d_model"], r["n_heads"], r["d_ff"],
                               positions=positions, dtype=dtype)


def train_classifier(task: str = "contrast", positions: str = "learned", seed: int = 0,
                     verbose: bool = False, dtype: torch.dtype = torch.float64,
                     uniform: bool = False, **overrides) -> Trained:
    """Generate a task's reviews, build `Vocab.for_reviews()` and a TinyTransformer, train it.

    With no arguments this is notebook 03's model: contrast reviews ("... good ... but ...
    dull ..."), learned positions, seed 0, float64, `RECIPE`; a few seconds on one CPU thread.
    task: "contrast" or "bag" (one sentiment word decides). positions: "learned",
    "sinusoidal", "rotary" or "none". `seed` seeds the data, the initial weights and the batch
    order (the global RNG state is left as it was). Keyword overrides replace entries of
    `RECIPE` (e.g. epochs=20). float64 makes the result the same on any CPU (`draw_float64`).
    uniform=True trains (and tests) with uniform attention throughout (`uniform_attention`):
    notebook 03's control, can the task be learned without attention at all?
    """
    check_choice("task", task, TASKS)
    check_bool("uniform", uniform)
    seed = check_int("seed", seed)
    r = recipe(RECIPE, overrides)
    train, test = task_reviews(task, seed, r["n_train"], r["n_test"])
    vocab = Vocab.for_reviews()
    x_train, y_train, _ = train.tensors(vocab)
    x_test, y_test, _ = test.tensors(vocab)
    model = initial_model(len(vocab), positions, seed, dtype, **overrides)
    with uniform_attention(model) if uniform else contextlib.nullcontext():
        history = fit_classifier(model, x_train, y_train, x_test, y_test, epochs=r["epochs"],
                                 lr=r["lr"], batch_size=r["batch_size"], seed=seed,
                                 verbose=verbose)
    return Trained(model, vocab, history, train, test)

"""Training: the one way every model of the series is trained, and notebook 03's classifier.

`train(recipe, model, loss_fn, data, seed=...)` is it: it draws the model's first weights from
the seed (the caller's random state left as it was), cuts the data into the recipe's
minibatches (epochs in a seeded random order, or steps in order on new data) and runs `fit`,
plain Adam with the recipe's warm-up or decay. Every trainer of the series (`train_classifier`,
`scaling.train_at_scale`, `generation.train_sorter` and `train_reverser`,
`induction.train_induction`, `sets.train_odd_one_out`, `sentiment.fit_head`) is a few lines
that build its task's data and model and call it; the recipes are in `attnlab.recipes`.
`fit_classifier` trains a classifier and evaluates it after each epoch (one printed line per
epoch with rounded numbers when verbose: deterministic, so strict nbval can compare it).
`train_classifier` builds data, vocabulary and model and trains them by `recipes.TINY`:
notebook 03's model, which notebooks 04 and 06 and the sentiment app reuse.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import takewhile

import torch
from torch import nn

from .checks import check_bool, check_choice, check_int, check_number, check_tensor
from .data import Reviews, Vocab, make_contrast_reviews, make_reviews, make_undecided_reviews
from .models import TinyTransformer, eval_mode
from .probes import uniform_attention
from .recipes import TINY, ClassifierRecipe, Recipe
from .repro import seed_of

# "contrast": notebook 03's task (the word after "but" decides); "bag": one sentiment word.
TASKS = {"contrast": make_contrast_reviews, "bag": make_reviews}


def seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """build(), its random draws (the first weights) made from `seed` (`seed_of`), the caller's
    random state left as it was: the one place the series seeds a model's weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed_of(check_int("seed", seed)))
        return build()


def train(recipe: Recipe, model: nn.Module | Callable[[], nn.Module], loss_fn: Callable,
          data, *, seed: int = 0, after_step: Callable[[int, float], None] | None = None,
          until: Callable[[], bool] | None = None) -> tuple[nn.Module, list[float]]:
    """Train a model by `recipe`: the one path every model of the series is trained on.

    model: the model, or a function that builds it (called through `seeded(build, seed)`).
    data: a tensor or a tuple of tensors of equal length, one row per example. A recipe with
    `epochs` passes over them that many times, each pass in a new random order drawn from
    `seed` (`shuffled_batches`); a recipe with `steps` takes them in order, a new minibatch
    every step (the data holds steps × batch_size rows). loss_fn(model, batch) gets one
    minibatch in the same form as `data`. after_step(step, loss) runs after every step;
    training stops before the next step once until() is true.
    Returns (the model in eval mode, the loss of every step).
    """
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be one of attnlab.recipes (e.g. recipes.TINY), "
                        f"got {type(recipe).__name__}")
    model = model if isinstance(model, nn.Module) else seeded(model, seed)
    parts = data if isinstance(data, tuple) else (data,)
    for i, part in enumerate(parts):
        check_tensor(f"data[{i}]" if isinstance(data, tuple) else "data", part, min_dim=1)
    if len({len(part) for part in parts}) != 1:
        raise ValueError(f"data's tensors must have one row per example each, got lengths "
                         f"{[len(part) for part in parts]}")
    size, n = recipe.batch_size, len(parts[0])
    if hasattr(recipe, "epochs"):
        batches = (tuple(part[i] for part in parts)
                   for i in shuffled_batches(n, size, recipe.epochs, seed))
    else:
        if n < recipe.steps * size:
            raise ValueError(f"data must hold steps × batch_size = {recipe.steps * size} rows "
                             f"(new examples every step), got {n}")
        batches = zip(*(part[:recipe.steps * size].split(size) for part in parts))
    if not isinstance(data, tuple):
        batches = (batch for batch, in batches)
    if until is not None:
        batches = takewhile(lambda _: not until(), batches)
    losses = fit(model, batches, loss_fn, lr=recipe.lr, warmup=recipe.warmup,
                 decay_steps=recipe.steps if recipe.decay else None, after_step=after_step)
    return model, losses


def fit(model: nn.Module, batches: Iterable, loss_fn: Callable, *, lr: float,
        warmup: int = 0, decay_steps: int | None = None,
        after_step: Callable[[int, float], None] | None = None) -> list[float]:
    """The loop inside `train`: for each batch, loss_fn(model, batch), gradients, one Adam step.

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
    of guessing with certainty (the sentiment app's TinyTransformer; notebook 06).
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

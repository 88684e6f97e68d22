"""Training: the one way every model of the series is trained.

`train(recipe, model, loss_fn, data, seed=...)` is it: it draws the model's first weights from
the seed (the caller's random state left as it was), cuts the data into the recipe's
minibatches (epochs in a seeded random order, or steps in order on new data) and runs `fit`,
plain Adam with the recipe's warm-up or decay. Every trainer of the series
(`lessons.classifier.train_classifier`, `lessons.scaling.train_at_scale`,
`lessons.decoders.train_sorter` and `train_reverser`, `lessons.induction.train_induction`,
`lessons.sets.train_odd_one_out`, `lessons.sentiment.fit_head`) is a few lines that build its
task's data and model and call it, by a recipe of `attnlab.core.recipes`. Nothing here knows
a lesson's task: the loop serves them all, so it sits in the core.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import takewhile

import torch
from torch import nn

from ..plumbing.checks import check_int, check_number, check_tensor
from ..plumbing.repro import seed_of
from .hooks import eval_mode
from .recipes import Recipe


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
        raise TypeError(f"recipe must be one of attnlab.core.recipes (e.g. recipes.TINY), "
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

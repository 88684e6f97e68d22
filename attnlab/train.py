"""Training: one seeded loop for every TinyTransformer in the series, and the lab's recipe.

`fit` is plain minibatch Adam with an evaluation after each epoch; it returns the history the
plots draw. Its progress display is one printed line per epoch with rounded numbers: it shows up
live in JupyterLab and, being deterministic, strict nbval can compare it (pass verbose=False to
stay quiet). `train_classifier` builds data, vocabulary and model and trains them by `RECIPE` in
one call, which is what notebooks 03/04/06 and the sentiment app use.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .data import Reviews, Vocab, make_order_reviews, make_reviews
from .models import TinyTransformer

# The lab's recipe (notebook 03): model size, optimiser and data size.
RECIPE = {
    "d_model": 32, "n_heads": 4, "d_ff": 64,  # model
    "lr": 3e-3, "batch_size": 64, "epochs": 12,  # Adam, minibatches, passes over the data
    "n_train": 1600, "n_test": 400,  # reviews
}
TASKS = {"reviews": make_reviews, "order": make_order_reviews}


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy) of a classifier on (x, y), in eval mode."""
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    for i in range(0, len(y), batch_size):
        logits = model(x[i:i + batch_size])  # (b, C)
        total_loss += float(nn.functional.cross_entropy(logits, y[i:i + batch_size], reduction="sum"))
        correct += int((logits.argmax(-1) == y[i:i + batch_size]).sum())
    model.train(was_training)
    return total_loss / len(y), correct / len(y)


def fit(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
        y_test: torch.Tensor, *, epochs: int = RECIPE["epochs"], lr: float = RECIPE["lr"],
        batch_size: int = RECIPE["batch_size"], seed: int = 0, verbose: bool = True) -> dict:
    """Train with Adam on shuffled minibatches; evaluate on the test set after every epoch.

    The batch order comes from a generator seeded with `seed`, so the same model, data and seed
    give the same weights bit for bit (on one thread). Returns the history: a dict of equal-length
    lists `epoch`, `train_loss`, `train_acc`, `test_loss`, `test_acc`.
    """
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not 0 < lr < float("inf"):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if len(x_train) != len(y_train) or len(x_test) != len(y_test):
        raise ValueError(f"x and y must have the same length, got train {len(x_train)}/{len(y_train)}, "
                         f"test {len(x_test)}/{len(y_test)}")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # fused: one kernel per step
    history = {"epoch": [], "train_loss": [], "train_acc": [], "test_loss": [], "test_acc": []}
    model.train()
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(y_train), generator=generator)
        loss_sum, correct = 0.0, 0
        for i in range(0, len(order), batch_size):
            batch = order[i:i + batch_size]
            logits = model(x_train[batch])  # (b, C)
            loss = nn.functional.cross_entropy(logits, y_train[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(batch)
            correct += int((logits.argmax(-1) == y_train[batch]).sum())
        # Train metrics are running averages over the epoch's minibatches (as Keras reports them):
        # free to compute, where a second pass over the training set would cost a third of the time.
        train_loss, train_acc = loss_sum / len(order), correct / len(order)
        test_loss, test_acc = evaluate(model, x_test, y_test)
        for key, value in zip(history, (epoch, train_loss, train_acc, test_loss, test_acc)):
            history[key].append(value)
        if verbose:
            print(f"epoch {epoch:2d}/{epochs}  train loss {train_loss:.3f}  acc {train_acc:.3f}  |  "
                  f"test loss {test_loss:.3f}  acc {test_acc:.3f}", flush=True)
    model.eval()
    return history


@dataclass
class Trained:
    """What `train_classifier` returns: the trained model (in eval mode), its vocabulary, the
    history from `fit`, and the train/test reviews it used."""

    model: TinyTransformer
    vocab: Vocab
    history: dict
    train: Reviews
    test: Reviews

    @property
    def test_accuracy(self) -> float:
        return self.history["test_acc"][-1]


def train_classifier(task: str = "reviews", positions: str = "learned", seed: int = 0,
                     verbose: bool = False, **recipe) -> Trained:
    """Generate a task's reviews, build `Vocab.for_reviews()` and a TinyTransformer, and train it.

    task: "reviews" (one decisive word) or "order" (which sentiment word comes first).
    positions: "learned", "sinusoidal" or "none". `seed` seeds the data, the initial weights and
    the batch order (the global RNG state is left as it was). Keyword overrides replace entries
    of `RECIPE` (e.g. epochs=20).
    With the defaults this is notebook 03's model: a few seconds on one CPU thread.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {tuple(TASKS)}, got {task!r}")
    unknown = set(recipe) - set(RECIPE)
    if unknown:
        raise TypeError(f"unknown recipe keys {sorted(unknown)}; expected some of {sorted(RECIPE)}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    r = {**RECIPE, **recipe}
    train, test = TASKS[task](r["n_train"] + r["n_test"], seed=seed).split(r["n_train"])
    vocab = Vocab.for_reviews()
    x_train, y_train, _ = train.tensors(vocab)
    x_test, y_test, _ = test.tensors(vocab)
    with torch.random.fork_rng(devices=[]):  # seed the initial weights without touching the caller's RNG
        torch.manual_seed(seed)
        model = TinyTransformer(len(vocab), r["d_model"], r["n_heads"], r["d_ff"], positions=positions)
    history = fit(model, x_train, y_train, x_test, y_test, epochs=r["epochs"], lr=r["lr"],
                  batch_size=r["batch_size"], seed=seed, verbose=verbose)
    return Trained(model, vocab, history, train, test)

"""Training: one seeded loop for every TinyTransformer in the series, and notebook 03's recipe.

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

from .checks import check_bool, check_choice, check_int, check_number
from .data import Reviews, Vocab, make_order_reviews, make_reviews
from .models import TinyTransformer, eval_mode

# Notebook 03's recipe: model size, optimiser and data size.
RECIPE = {
    "d_model": 32, "n_heads": 4, "d_ff": 64,  # model
    "lr": 3e-3, "batch_size": 64, "epochs": 12,  # Adam, minibatches, passes over the data
    "n_train": 1600, "n_test": 400,  # reviews
}
TASKS = {"reviews": make_reviews, "order": make_order_reviews}


def with_recipe(defaults: dict, overrides: dict) -> dict:
    """`defaults` with some entries replaced; a key the recipe does not have is a TypeError
    (like an unknown keyword argument), so a typo such as `epoch=3` cannot pass unnoticed."""
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(f"unknown recipe keys {sorted(unknown)}; "
                        f"expected some of {sorted(defaults)}")
    return {**defaults, **overrides}


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


def fit(model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
        y_test: torch.Tensor, *, epochs: int = RECIPE["epochs"], lr: float = RECIPE["lr"],
        batch_size: int = RECIPE["batch_size"], seed: int = 0, verbose: bool = True) -> dict:
    """Train with Adam on shuffled minibatches; evaluate on the test set after every epoch.

    The batch order comes from a generator seeded with `seed`, so the same model, data and seed
    give the same weights bit for bit (on one thread). Returns the history: a dict of equal-length
    lists `epoch`, `train_loss`, `train_acc`, `test_loss`, `test_acc`.
    """
    epochs = check_int("epochs", epochs, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_number("lr", lr, minimum=0, exclusive_minimum=True)
    seed, verbose = check_int("seed", seed), check_bool("verbose", verbose)
    if len(x_train) != len(y_train) or len(x_test) != len(y_test):
        raise ValueError(f"x and y must have the same length, got train "
                         f"{len(x_train)}/{len(y_train)}, test {len(x_test)}/{len(y_test)}")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # one kernel per step
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
            print(f"epoch {epoch:2d}/{epochs}  train loss {train_loss:.3f}  "
                  f"acc {train_acc:.3f}  |  test loss {test_loss:.3f}  acc {test_acc:.3f}",
                  flush=True)
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


def task_reviews(task: str = "reviews", seed: int = 0, n_train: int = RECIPE["n_train"],
                 n_test: int = RECIPE["n_test"]) -> tuple[Reviews, Reviews]:
    """(train, test): the reviews `train_classifier` trains and tests on. They are generated
    from the seed, never stored, so a model loaded from a file gets its reviews back from here."""
    check_choice("task", task, TASKS)
    return TASKS[task](n_train + n_test, seed=seed).split(n_train)


def initial_model(vocab_size: int, positions: str = "learned", seed: int = 0,
                  dtype: torch.dtype = torch.float64, **recipe) -> TinyTransformer:
    """The untrained TinyTransformer that `train_classifier` starts from with these arguments:
    its weights drawn from `seed`, the caller's random state left as it was. Notebook 06 uses it
    to show which embedding rows training never touched."""
    r = with_recipe(RECIPE, recipe)
    with torch.random.fork_rng(devices=[]):  # seed the weights, leave the caller's RNG alone
        torch.manual_seed(seed)
        return TinyTransformer(vocab_size, r["d_model"], r["n_heads"], r["d_ff"],
                               positions=positions, dtype=dtype)


def train_classifier(task: str = "reviews", positions: str = "learned", seed: int = 0,
                     verbose: bool = False, dtype: torch.dtype = torch.float64,
                     **recipe) -> Trained:
    """Generate a task's reviews, build `Vocab.for_reviews()` and a TinyTransformer, and train it.

    task: "reviews" (one decisive word) or "order" (which sentiment word comes first).
    positions: "learned", "sinusoidal" or "none". `seed` seeds the data, the initial weights and
    the batch order (the global RNG state is left as it was). Keyword overrides replace entries
    of `RECIPE` (e.g. epochs=20). The default `dtype=torch.float64` trains a model that comes
    out the same on any CPU (see `TinyTransformer`): float32 initial weights already differ in
    their last bits between CPUs' kernel paths, and training amplifies that into other
    accuracies. Notebooks 03, 04 and 06 and the sentiment app all use this one model.
    With the defaults this is notebook 03's recipe: a few seconds on one CPU thread.
    """
    check_choice("task", task, TASKS)
    seed = check_int("seed", seed)
    r = with_recipe(RECIPE, recipe)
    train, test = task_reviews(task, seed, r["n_train"], r["n_test"])
    vocab = Vocab.for_reviews()
    x_train, y_train, _ = train.tensors(vocab)
    x_test, y_test, _ = test.tensors(vocab)
    model = initial_model(len(vocab), positions, seed, dtype, **recipe)
    history = fit(model, x_train, y_train, x_test, y_test, epochs=r["epochs"], lr=r["lr"],
                  batch_size=r["batch_size"], seed=seed, verbose=verbose)
    return Trained(model, vocab, history, train, test)

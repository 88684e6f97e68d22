"""Notebook 10's exercises: right answers written in other ways, the predict and explore cases,
and the cases the tables of mistakes do not hold (the tables: tests/test_exercises.py; hostile
answers: there too)."""
from types import SimpleNamespace

import pytest
import torch
from exercise_doubles import expect

from attnlab.core import measures
from attnlab.exercises import ex10
from attnlab.lessons.induction import N_TEST, TEST_SEED, evaluate, repeat_task, train_induction


def right(weights, tokens):
    B, H, T, _ = weights.shape
    pos = torch.arange(T)
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & (pos < pos[:, None])  # (B, T, T)
    last = torch.where(earlier, pos, -1).amax(-1)  # (B, T)   the last s < t, or -1
    index = (last + 1).clamp(max=T - 1)[:, None, :, None].expand(B, H, T, 1)
    w = weights.gather(-1, index)[..., 0]  # (B, H, T)
    counted = (last >= 0).to(weights.dtype)  # (B, T)
    return (w * counted[:, None]).sum((0, 2)) / counted.sum()  # (H,)


def per_sequence(weights, tokens):  # the mean per sequence, then over sequences
    return torch.stack([right(weights[b:b + 1], tokens[b:b + 1])
                        for b in range(len(tokens))]).mean(0)


def test_induction_score(capsys):
    answers = [right, per_sequence, measures.induction_score]
    assert expect(capsys, ex10.induction_score, answers, "✓",
                  "induction_score: matches "
                  "attnlab.core.measures.induction_score on 2 batches") == answers
    (got,) = expect(capsys, ex10.induction_score, [lambda w, t: right(w, t) * 1.1], "✗",
                    "your score differs from the reference by up to")  # no named mistake
    assert got is measures.induction_score


def test_one_layer_loss(capsys):
    expect(capsys, ex10.one_layer_loss, [2.5], "✎",
           "measured 2.71 (within 0.4). One layer can favour the tokens", 2.706)
    assert expect(capsys, ex10.one_layer_loss, [0.0], "✎", "(2.71 apart)", 2.706) == [None]


def test_induction_layer(capsys):
    expect(capsys, ex10.induction_layer, [2], "✎", "you predicted 2; measured 2 (within 0).", 2)
    expect(capsys, ex10.induction_layer, [1], "✎", "measured 2 (1 apart)", 2)


STEPS = 20  # a short run of the real experiment, as the framework's hostile-answer test trains it


def test_shorter_repeat_runs_the_experiment_itself(capsys):
    short_test = repeat_task(N_TEST, seed=TEST_SEED, repeat=(3, 6))
    short = evaluate(train_induction(2, repeat=(3, 6), steps=STEPS).model, short_test)
    got = expect(capsys, ex10.shorter_repeat, [short["repeated"], short["repeated"] + 0.08], "✓",
                 "that is the loss the experiment gives", STEPS)
    assert got == [short["repeated"], short["repeated"] + 0.08]


@pytest.fixture
def measured(monkeypatch):
    """The experiment's outcome as notebook 10 measures it, without training: the model trained
    on repeats of 3-6 and the one trained on 6-12, each measured on the short repeats."""
    losses = {("3-6", "short"): {"repeated": 2.77, "random": 3.51},
              ("6-12", "short"): {"repeated": 1.76, "random": 4.1},
              ("6-12", "usual"): {"repeated": 0.62, "random": 3.71}}

    def trained(n_layers, repeat=(6, 12), **recipe):
        return SimpleNamespace(model=f"{repeat[0]}-{repeat[1]}")

    def evaluate(model, batch):
        return losses[model, "short" if int(batch.size.max()) <= 6 else "usual"]

    monkeypatch.setattr(ex10, "train_induction", trained)
    monkeypatch.setattr(ex10, "evaluate", evaluate)
    return losses


def test_shorter_repeat_names_the_mistakes(capsys, measured):
    for answer, mark, words in [
        (2.77, "✓", "that is the loss the experiment gives"),
        (2.70, "✓", "that is the loss the experiment gives"),
        (1.76, "✗", "that is the model trained on repeats of 6 to 12 tokens"),  # short repeats
        (0.62, "✗", "that is the model trained on repeats of 6 to 12 tokens"),  # its own test
        (3.51, "✗", "looks like the loss on the random tokens"),
        (1.0, "✗", "1.00 nats is not the loss the experiment gives"),
    ]:
        (got,) = expect(capsys, ex10.shorter_repeat, [answer], mark, words)
        assert got == (answer if mark == "✓" else 2.77), answer

"""Notebook 10's exercises: right answers written in other ways, the predict and explore cases,
and the cases the tables of mistakes do not hold (the tables: tests/test_exercises.py; hostile
answers: there too)."""
import weakref
from types import SimpleNamespace

import pytest
import torch
from exercise_doubles import expect

from attnlab.core import measures
from attnlab.exercises import ex10
from attnlab.lessons.induction import (
    N_TEST,
    TEST_SEED,
    evaluate,
    evaluate_by_length,
    repeat_task,
    train_induction,
)


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


STEPS = 20  # a short run of the real models, as the framework's hostile-answer test trains them


def test_shorter_repeat_runs_the_experiment_itself(capsys):
    model = train_induction(2, steps=STEPS).model
    losses = [evaluate(model, repeat_task(N_TEST, seed=TEST_SEED, repeat=(n, n)))["repeated"]
              for n in ex10.LENGTHS]
    as_dict = dict(zip(ex10.LENGTHS, losses, strict=True))
    got = expect(capsys, ex10.shorter_repeat,
                 [losses, torch.tensor(losses) + 0.08, as_dict], "✓", "the losses the experiment "
                 "gives at every length", STEPS)
    assert got[0] == losses and got[2] == losses  # as a list, in the order of LENGTHS
    assert torch.allclose(torch.tensor(got[1]), torch.tensor(losses) + 0.08)



def test_shorter_repeat_measures_each_model_once(capsys, monkeypatch):
    """A check run again (or judged again by a grader) answers at once: each model's losses
    per length are measured on the first run only."""
    measured = []
    monkeypatch.setattr(ex10, "_measured", weakref.WeakKeyDictionary())
    monkeypatch.setattr(ex10, "evaluate_by_length", lambda model, lengths: measured.append(
        model) or evaluate_by_length(model, lengths))
    for _ in range(3):
        ex10.shorter_repeat([1.0] * 11, STEPS)
    assert len(measured) == 2 and measured[0] is train_induction(2, steps=STEPS).model
    capsys.readouterr()

@pytest.fixture
def measured(monkeypatch):
    """The two models' losses per length as notebook 10 measures them, without training."""
    two = [{"repeated": 3.0 - 0.25 * i, "random": 3.6 + 0.01 * i} for i in range(11)]
    one = [{"repeated": 3.5 - 0.08 * i, "random": 3.7} for i in range(11)]
    monkeypatch.setattr(ex10, "train_induction",
                        lambda n_layers, **recipe: SimpleNamespace(model=n_layers))
    monkeypatch.setattr(ex10, "_by_length", lambda model: {2: two, 1: one}[model])
    return [r["repeated"] for r in two], [r["repeated"] for r in one], [r["random"] for r in two]


def test_shorter_repeat_names_the_mistakes(capsys, measured):
    reference, one_layer, random = measured
    for answer, mark, words in [
        (reference, "✓", "the losses the experiment gives"),
        ([v - 0.09 for v in reference], "✓", "the losses the experiment gives"),
        (reference[::-1], "✗", "run from length 12 down to 2"),
        (one_layer, "✗", "the one-layer model's losses"),
        (random, "✗", "looks like the loss on the random tokens"),
        ([1.2] * 11, "✗", "every length gives the same loss"),
        (reference[:5] + [9.0] + reference[6:], "✗", "your loss for length 7, 9.00 nats, is not"),
        (reference[:10], "✗", "expected 11 losses, one per length in LENGTHS (2 to 12), got 10"),
        (reference[:10] + [float("nan")], "✗", "your loss for length 12 is nan"),
        (2.5, "✗", "should be a list of 11 numbers, one per length in LENGTHS, got a float"),
        ({n: 1.0 for n in range(1, 12)}, "✗", "should be a list of 11 numbers"),
        (..., "○", "not attempted yet; run the experiment and put the losses in `by_length`"),
    ]:
        (got,) = expect(capsys, ex10.shorter_repeat, [answer], mark, words)
        assert got == (answer if mark == "✓" else reference), answer

"""attnlab.plumbing.repro: the seed of the series and the one-ulp nudge of make test-portable."""
import numpy as np
import pytest
import torch

from attnlab.core.training import shuffled_batches
from attnlab.lessons.classifier import initial_model
from attnlab.lessons.data import make_contrast_reviews
from attnlab.plumbing.repro import nudge, seed_of, series_seed


def test_nudge_moves_every_element_one_ulp_up_only_when_asked(monkeypatch):
    a = np.array([0.0, 1.0, -2.5, 3e-39], np.float32)
    t = torch.tensor([0.0, 1.0, -2.5], dtype=torch.float32)
    monkeypatch.delenv("ATTNLAB_NUDGE_ULP", raising=False)
    assert nudge(a) is a and nudge(t) is t
    monkeypatch.setenv("ATTNLAB_NUDGE_ULP", "1")
    moved = nudge(a)
    assert moved.dtype == np.float32
    np.testing.assert_array_equal(moved, np.nextafter(a, np.float32(np.inf)))
    assert (moved > a).all()
    moved = nudge(t)
    assert moved.dtype == torch.float32 and (moved > t).all()
    assert torch.equal(moved, torch.nextafter(t, torch.tensor(float("inf"))))


def test_the_series_seed_moves_every_seed_and_only_when_set(monkeypatch):
    monkeypatch.delenv("ATTNLAB_SEED", raising=False)
    assert series_seed() == 0 and [seed_of(s) for s in (0, 1, 2)] == [0, 1, 2]
    monkeypatch.setenv("ATTNLAB_SEED", "2")
    moved = [seed_of(s) for s in (0, 1, 2)]
    assert series_seed() == 2 and len(set(moved) | {0, 1, 2}) == 6
    monkeypatch.setenv("ATTNLAB_SEED", "1")
    assert not set(moved) & {seed_of(s) for s in (0, 1, 2)}, "two series share no seed"


def test_the_series_seed_moves_data_weights_and_batches(monkeypatch):
    monkeypatch.delenv("ATTNLAB_SEED", raising=False)
    reviews = make_contrast_reviews(20, seed=0).texts()
    weights = initial_model(40, seed=0).head.weight.clone()
    batches = [b.tolist() for b in shuffled_batches(10, 5, 1, seed=0)]
    monkeypatch.setenv("ATTNLAB_SEED", "1")
    assert make_contrast_reviews(20, seed=0).texts() != reviews
    assert not torch.equal(initial_model(40, seed=0).head.weight, weights)
    assert [b.tolist() for b in shuffled_batches(10, 5, 1, seed=0)] != batches


def test_a_series_seed_that_is_not_a_whole_number_is_refused(monkeypatch):
    for bad in ("-1", "one", "1.5"):
        monkeypatch.setenv("ATTNLAB_SEED", bad)
        with pytest.raises(ValueError, match="ATTNLAB_SEED must be a whole number"):
            series_seed()

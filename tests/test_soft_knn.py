"""attnlab.lessons.retrieval.soft_knn and hit_at_k: retrieval read as attention (notebook 06).

Synthetic features only (no MobileNetV2): the claims are about the formula, not the network.
"""
import numpy as np
import pytest
import torch
from helpers import raises_each

from attnlab.lessons import retrieval


def problem(seed=0, n_q=30, n_d=80, dim=16, n_classes=5):
    g = torch.Generator().manual_seed(seed)
    queries = torch.randn(n_q, dim, generator=g, dtype=torch.float64)    # (N_q, D)
    database = torch.randn(n_d, dim, generator=g, dtype=torch.float64)   # (N_d, D)
    labels = torch.randint(0, n_classes, (n_d,), generator=g)            # (N_d,)
    return queries, database, labels


def test_soft_knn_is_the_written_out_formula():
    q, d, labels = problem()
    probs, weights = retrieval.soft_knn(q, d, labels, tau=0.1, n_classes=5)
    cos = (q / q.norm(dim=1, keepdim=True)) @ (d / d.norm(dim=1, keepdim=True)).T  # (N_q, N_d)
    expected_w = torch.softmax(cos / 0.1, dim=1)
    expected_p = torch.stack([expected_w[:, labels == c].sum(1) for c in range(5)], dim=1)
    assert probs.shape == (30, 5) and weights.shape == (30, 80)
    assert probs.dtype == weights.dtype == torch.float64
    assert torch.allclose(weights, expected_w, atol=1e-12)
    assert torch.allclose(probs, expected_p, atol=1e-12)
    assert torch.allclose(probs.sum(1), torch.ones(30, dtype=torch.float64))


def test_small_tau_limit_is_one_nearest_neighbour():
    q, d, labels = problem(seed=1)
    nearest = retrieval.nearest_neighbours(q, d, k=2)                   # (N_q, 2)
    cos = torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(d, dim=1).T
    gap = cos.gather(1, torch.from_numpy(nearest)).diff(dim=1).abs().min().item()
    tau = gap / 50                      # every runner-up is 50 τ behind: weight e^-50 or less
    probs, weights = retrieval.soft_knn(q, d, labels, tau=tau, n_classes=5)
    one_nn = labels[torch.from_numpy(nearest[:, 0])]                     # (N_q,)
    assert torch.equal(probs.argmax(1), one_nn)
    assert torch.allclose(probs, torch.nn.functional.one_hot(one_nn, 5).double(), atol=1e-12)
    assert torch.equal(weights.argmax(1), torch.from_numpy(nearest[:, 0]))


def test_large_tau_limit_is_the_database_class_frequencies():
    q, d, labels = problem(seed=2)
    probs, _ = retrieval.soft_knn(q, d, labels, tau=1e9, n_classes=5)
    frequencies = torch.bincount(labels, minlength=5).double() / len(labels)
    assert torch.allclose(probs, frequencies.expand(30, 5), atol=1e-8)


def test_soft_knn_accepts_numpy_and_ignores_row_lengths():
    q, d, labels = problem(seed=3)
    a, _ = retrieval.soft_knn(q.numpy(), d.numpy(), labels.numpy(), 0.05, n_classes=5)
    b, _ = retrieval.soft_knn(3 * q, 0.5 * d, labels, 0.05, n_classes=5)  # lengths drop out
    assert torch.allclose(a, b, atol=1e-12)


def test_soft_knn_refuses_shapes_and_labels_that_do_not_fit():
    q, d, labels = problem()
    raises_each([
        (lambda: retrieval.soft_knn(q[:, :8], d, labels, 0.1, n_classes=5), ValueError,
         "same width"),
        (lambda: retrieval.soft_knn(q, d, labels[:-1], 0.1, n_classes=5), ValueError, "labels"),
        (lambda: retrieval.soft_knn(q, d, labels.double(), 0.1, n_classes=5), TypeError,
         "labels"),
        (lambda: retrieval.soft_knn(q, d, labels, 0.1, n_classes=3), ValueError,
         "labels"),  # the labels go up to 4
    ])


def test_hit_at_k_counts_queries_with_any_right_item():
    query = np.array([0, 1, 2, 3])
    neighbours = np.array([[0, 9, 9], [9, 9, 1], [9, 9, 9], [3, 3, 3]])
    hit = retrieval.hit_at_k(query, neighbours)
    assert hit.dtype == torch.float32 and hit.shape == ()
    assert hit.item() == 0.75
    top1 = retrieval.hit_at_k(torch.tensor(query), torch.tensor(neighbours[:, :1]))  # hit@1 = top-1
    assert top1.item() == 0.5
    with pytest.raises(ValueError, match="neighbour_labels"):
        retrieval.hit_at_k(query, neighbours[:3])

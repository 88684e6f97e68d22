"""The exercises of notebook 05 (a pre-trained CNN for retrieval), checked.

- `five_neighbours` (predict): precision@5 and hit@5 of the MobileNetV2 search, guessed from
  its top-1 before they are measured;
- `hit_at_k` (implement): the share of queries with at least one right item among their k
  results, against `attnlab.retrieval.hit_at_k`;
- `soft_knn` (implement): soft k-nearest neighbours as attention (cosine scores, one-hot labels
  as values, scale 1/τ), against `attnlab.retrieval.soft_knn`;
- `beat_one_nn` (explore): a temperature τ at which the soft vote beats the single nearest
  neighbour.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use. The
implement checks run on small random tensors, not on the network, so they are instant.
"""
from __future__ import annotations

import numpy as np
import torch

from .. import retrieval
from ..report import fmt
from . import Verdict, as_number, check_answer, check_function, check_prediction, exercise

N_CLASSES = len(retrieval.CLASS_NAMES)
TAUS = (0.01, 0.02, 0.05)  # where the reference answer of `beat_one_nn` is looked for


@exercise("predict", args=((0.739, 0.945),))
def five_neighbours(guess, measured):
    """Your [precision@5, hit@5] against the measured pair (±0.05 each)."""
    return check_prediction(
        guess, measured, name="precision@5 and hit@5", tolerance=0.05,
        lesson="precision@5 also counts the 2nd to 5th neighbours, which are less similar than "
               "the first; hit@5 needs only one right item among the five.")


def _hit_inputs(seed: int = 5) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(query_labels (N,), neighbour_labels (N, k)) pairs, k = 5, 1 and 3, drawn so that some
    queries have several right neighbours, some one and some none: precision@k, top-1 and
    "all k right" all give other numbers than hit@k."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for n, k, classes in ((40, 5, 4), (12, 1, 3), (30, 3, 6)):
        pairs.append((torch.randint(0, classes, (n,), generator=g),
                      torch.randint(0, classes, (n, k), generator=g)))
    return pairs


def _as_float32_share(fn):
    """A float tensor or a Python float is a fine answer: compare it as float32."""
    if not callable(fn):
        return fn

    def share(*args):
        out = fn(*args)
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            return out.float()
        if isinstance(out, float):
            return torch.tensor(out)
        return out
    return share


@exercise("implement")
def hit_at_k(fn):
    """Your `fn(query_labels, neighbour_labels) -> share` against `retrieval.hit_at_k`."""
    return check_function(
        _as_float32_share(fn), retrieval.hit_at_k, _hit_inputs(), name="hit@k",
        hint="compare each row of neighbour_labels with its query's label (query_labels[:, None] "
             "broadcasts), ask whether *any* entry of the row matches, then average over the "
             "queries as a float.")


def _soft_knn_reference(queries, database, labels, tau):
    """attnlab's soft k-NN with Fashion-MNIST's ten classes: (probabilities, weights)."""
    return retrieval.soft_knn(queries, database, labels, tau, n_classes=N_CLASSES)


def _soft_knn_inputs(seed: int = 5) -> list[tuple]:
    """(queries, database, labels, tau): float64 features of several widths and lengths, a
    database of 6 (not every class present: `one_hot` needs its number of classes) and three
    temperatures, so that a missing normalisation, the default 1/√d scale or τ used the wrong
    way round all show."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for n_q, n_d, dim, tau in ((4, 30, 8, 0.1), (3, 6, 5, 0.03), (7, 50, 16, 1.0)):
        cases.append((torch.randn(n_q, dim, generator=g, dtype=torch.float64),    # (N_q, D)
                      torch.randn(n_d, dim, generator=g, dtype=torch.float64),    # (N_d, D)
                      torch.randint(0, N_CLASSES, (n_d,), generator=g),           # (N_d,)
                      tau))
    return cases


@exercise("implement")
def soft_knn(fn):
    """Your `fn(queries, database, labels, tau) -> (probabilities, weights)` against attnlab's."""
    return check_function(
        fn, _soft_knn_reference, _soft_knn_inputs(), name="soft k-NN as attention", atol=1e-8,
        hint="normalise the rows of queries and database to length 1 (then q·k is the cosine), "
             "turn the labels into one-hot rows of 10 floats as the values, call "
             "attnlab.scaled_dot_product_attention with scale=1 / tau, and return what it returns.")


def _top1(queries, database, database_labels, query_labels, tau) -> int | None:
    """How many queries the soft vote at `tau` gets right (None if tau is not usable)."""
    try:
        probs, _ = retrieval.soft_knn(queries, database, database_labels, tau, n_classes=N_CLASSES)
    except (TypeError, ValueError):
        return None
    return int((probs.argmax(1).numpy() == np.asarray(query_labels)).sum())


def _clusters(seed: int = 0) -> tuple[np.ndarray, ...]:
    """(queries, database, database_labels, query_labels) as the notebook passes them, made up:
    ten classes around orthogonal centres, 30% of the database labels flipped, so that the
    single nearest neighbour is often a flipped one and a vote over the cluster is not."""
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.eye(10, 32, dtype=torch.float64)                        # (10, 32)
    db_y = torch.arange(200) % 10
    database = centres[db_y] + torch.randn(200, 32, generator=g, dtype=torch.float64)
    flip = torch.rand(200, generator=g) < 0.3
    db_y = torch.where(flip, torch.randint(0, 10, (200,), generator=g), db_y)
    q_y = torch.arange(50) % 10
    queries = centres[q_y] + torch.randn(50, 32, generator=g, dtype=torch.float64)
    return queries.numpy(), database.numpy(), db_y.numpy(), q_y.numpy()


@exercise("explore", args=_clusters)
def beat_one_nn(tau, queries, database, database_labels, query_labels):
    """Your τ must make the soft vote right on more queries than 1-NN is.

    Returns your τ when it does, else the best of `TAUS` on these data.
    """
    query_labels = np.asarray(query_labels)
    n = len(query_labels)
    nearest = retrieval.nearest_neighbours(queries, database)[:, 0]             # (N_q,)
    one_nn = int((np.asarray(database_labels)[nearest] == query_labels).sum())
    expected = (f"a τ > 0 at which the soft vote is right on more than 1-NN's {one_nn} of {n} "
                "queries")

    def judge(tau):
        value, problem = as_number(tau)
        if problem:
            return f"{problem} ({expected})"
        hits = _top1(queries, database, database_labels, query_labels, value)
        if hits is None or hits <= one_nn:
            return f"{fmt(value, 4, guard=False)} does not satisfy it yet ({expected})"
        return Verdict.right(
            f"at τ = {value:g} the soft vote is right on {hits} of {n} queries, 1-NN on {one_nn} "
            f"({fmt(hits / n, 3, guard=False)} against {fmt(one_nn / n, 3, guard=False)}): a few "
            "close neighbours voting beat the single nearest one.")

    scores = {t: _top1(queries, database, database_labels, query_labels, t) for t in TAUS}
    return check_answer(
        tau, judge, name="a τ that beats 1-NN", reference=max(TAUS, key=lambda t: scores[t]),
        hint="look at the accuracy curve above: where does the soft vote rise above the 1-NN "
             "line? Try values between the two limits.",
        todo="not attempted yet; put your number in the cell above.")

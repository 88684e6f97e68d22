"""Retrieval: a query's nearest neighbours by cosine similarity, their scores against the
query's label, and soft k-NN, which is attention over the database (notebook 06).

The features come from `attnlab.pretrained.embeddings` (a frozen MobileNetV2, or raw pixels).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..core.attention import scaled_dot_product_attention
from ..plumbing.checks import check_int, check_number
from ..plumbing.repro import seed_of
from ..pretrained.embeddings import check_images, embed_images

CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def _check_features(name, x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.numpy(force=True)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.number):
        raise TypeError(f"{name} must be a numeric array (N, D), got dtype {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D numeric array (N, D), got shape {x.shape}")
    return x.astype(np.float64)


def nearest_neighbours(queries, database, k: int = 1) -> np.ndarray:
    """Indices (N_q, k) of each query's k most cosine-similar database rows, most similar first.

    cos(q, d) = q·d / (|q| |d|); ties go to the lower index. Computed in float64 so that the
    ranking does not depend on the BLAS's summation order.
    """
    q, d = _check_features("queries", queries), _check_features("database", database)
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"queries and database must have the same width, "
                         f"got {q.shape[1]} and {d.shape[1]}")
    k = check_int("k", k, minimum=1, maximum=len(d))  # at most the database size
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)  # a zero row stays zero
    d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    similarity = q @ d.T                                                  # (N_q, N_d)
    if k == 1:                                    # the same answer, without sorting every row
        return similarity.argmax(axis=1)[:, None]                         # (N_q, 1)
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k]


def _check_labels(name, labels, n) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {labels.shape}")
    return labels


def same_class_rates(query_labels, database_labels, neighbours) -> dict:
    """How often retrieved images share the query's label.

    `neighbours` (N_q, k) from `nearest_neighbours`. Returns {"top1": share of queries whose
    nearest neighbour has their label, f"top{k}": share of all k neighbours that have it
    (precision@k)}; for k = 1 only "top1".
    """
    neighbours = np.asarray(neighbours)
    if neighbours.ndim != 2 or neighbours.shape[1] < 1:
        raise ValueError(f"neighbours must have shape (N_q, k), got {neighbours.shape}")
    ql = _check_labels("query_labels", query_labels, len(neighbours))
    dl = np.asarray(database_labels)
    same = dl[neighbours] == ql[:, None]                                  # (N_q, k)
    rates = {"top1": float(same[:, 0].mean())}
    if same.shape[1] > 1:
        rates[f"top{same.shape[1]}"] = float(same.mean())
    return rates


def chance_top1(query_labels, database_labels) -> float:
    """Top-1 rate of a neighbour drawn at random from the database: Σ_c P_query(c) · P_db(c)."""
    ql, dl = np.asarray(query_labels), np.asarray(database_labels)
    classes = np.union1d(ql, dl)
    return float(sum((ql == c).mean() * (dl == c).mean() for c in classes))


def shift(images, pixels: int, seed: int = 0) -> np.ndarray:
    """Copies of uint8 images (N, H, W), each moved `pixels` pixels up, down, left or right (a
    random direction per image, from `seed`), the uncovered edge filled with black, Fashion-
    MNIST's background. pixels 0: unchanged copies."""
    images = check_images(images)
    d = check_int("pixels", pixels, minimum=0)
    rng = np.random.default_rng(seed_of(check_int("seed", seed, minimum=0)))
    height, width = images.shape[1:]
    direction = rng.integers(0, 4, len(images))                 # (N,) up, down, left, right
    out = np.zeros_like(images)
    for k, (dy, dx) in enumerate(((-min(d, height), 0), (min(d, height), 0),
                                  (0, -min(d, width)), (0, min(d, width)))):
        rows = slice(max(dy, 0), height + min(dy, 0)), slice(max(-dy, 0), height - max(dy, 0))
        cols = slice(max(dx, 0), width + min(dx, 0)), slice(max(-dx, 0), width - max(dx, 0))
        chosen = direction == k
        out[chosen, rows[0], cols[0]] = images[chosen, rows[1], cols[1]]
    return out


#: cosines closer than this are a tie: CPUs differ in the last bits of a network's features
#: (up to about 1e-7 in cosine between oneDNN's kernels, measured), never by this much
TIE = 1e-5


def top1_scores(queries, database, query_labels, database_labels) -> np.ndarray:
    """Per query (N_q,): 1.0 when its most cosine-similar database item has its label, 0.0 when
    not, and 0.5 when the best item of its label and the best of another lie within `TIE` of
    each other. Such a near-tie is decided by the last bits of the features, which another CPU
    computes differently; counted as half, it prints the same number on every CPU."""
    q, d = _check_features("queries", queries), _check_features("database", database)
    ql = _check_labels("query_labels", query_labels, len(q))
    dl = _check_labels("database_labels", database_labels, len(d))
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    similarity = q @ d.T                                                  # (N_q, N_d)
    same = dl[None, :] == ql[:, None]                                     # (N_q, N_d)
    best_same = np.where(same, similarity, -np.inf).max(axis=1)           # (N_q,)
    best_other = np.where(same, -np.inf, similarity).max(axis=1)          # (N_q,)
    margin = best_same - best_other
    return np.where(margin > TIE, 1.0, np.where(margin < -TIE, 0.0, 0.5))


def top1_centred_and_moved(queries, moved, database, query_labels, database_labels) -> dict:
    """`top1_scores` of the same queries as they are and moved: {"centred": (N_q,),
    "moved": (N_q,)}, in one search space.

    `queries` and `moved` are the features (N_q, D) of the same images before and after a move
    (`shift`), `database` (N_d, D). Kept per query, so that two search spaces can be compared
    query by query (a paired difference), not only by their means.
    """
    q, m = _check_features("queries", queries), _check_features("moved", moved)
    if m.shape != q.shape:
        raise ValueError(f"moved must hold the features of the same images as queries, shape "
                         f"{q.shape}, got {m.shape}")
    return {name: top1_scores(x, database, query_labels, database_labels)
            for name, x in (("centred", q), ("moved", m))}


def random_weights_control(query_images, moved_images, database_images, query_labels,
                           database_labels, seeds=(0, 1, 2), alpha: float = 0.35) -> dict:
    """The same retrieval with MobileNetV2 of random weights: {seed: top1_centred_and_moved}.

    Convolutions reuse one filter at every position and the last feature map is averaged over
    positions, so some tolerance of moves comes with the architecture, whatever its weights.
    Only a network with the same architecture and untrained weights (`embed_images(...,
    seed=s)`, Keras's initialisers drawn from `seed_of(s)`) tells how much of the pre-trained
    network's tolerance is the pre-training's. About 1.6 ms of CPU per image on 2 cores, so
    notebook 06 runs it on a subset of its images.
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed of random weights, got none")
    out = {}
    for seed in seeds:
        q, m, d = (embed_images(x, alpha, seed=seed)                     # (N, 1280) each
                   for x in (query_images, moved_images, database_images))
        out[seed] = top1_centred_and_moved(q, m, d, query_labels, database_labels)
    return out


# ---------------------------------------------------------------------------------------------
# retrieval read as attention (notebook 06, section "Retrieval is attention")


def soft_knn(queries, database, labels, tau: float, n_classes: int = len(CLASS_NAMES)):
    """A soft k-nearest-neighbour classifier written as attention; returns (class probabilities
    (N_q, n_classes), weights (N_q, N_d)), both float64.

    The queries attend over the database: the keys are the L2-normalised database rows, so each
    score q·k is a cosine; the values are one-hot labels, so the output is each class's share of
    the weight. softmax(cos / τ) is Nadaraya–Watson kernel regression with the kernel
    exp(cos / τ). As τ → 0 all the weight goes to the most similar item (1-NN); as τ → ∞ every
    item weighs the same and each query gets the database's class frequencies. Float64, like
    `nearest_neighbours`, so the result does not depend on the BLAS's summation order.
    """
    q = torch.from_numpy(_check_features("queries", queries))     # (N_q, D) float64
    d = torch.from_numpy(_check_features("database", database))   # (N_d, D) float64
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"queries and database must have the same width, "
                         f"got {q.shape[1]} and {d.shape[1]}")
    n_classes = check_int("n_classes", n_classes, minimum=1)
    tau = check_number("tau", tau, minimum=0.0, exclusive_minimum=True)
    labels = _check_labels("labels", labels.numpy(force=True) if isinstance(labels, torch.Tensor)
                           else labels, len(d))
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"labels must be integer class indices, got dtype {labels.dtype}")
    if len(labels) and not 0 <= labels.min() <= labels.max() < n_classes:
        raise ValueError(f"labels must lie in [0, {n_classes - 1}] (n_classes={n_classes}), "
                         f"got values from {labels.min()} to {labels.max()}")
    keys = F.normalize(d, dim=1)                                            # (N_d, D) unit rows
    values = F.one_hot(torch.from_numpy(labels).long(), n_classes).double()  # (N_d, C)
    return scaled_dot_product_attention(F.normalize(q, dim=1), keys, values, scale=1.0 / tau)


def hit_at_k(query_labels, neighbour_labels) -> torch.Tensor:
    """hit@k, a float32 scalar tensor: the share of queries with at least one of their k
    retrieved items in their own class (metric-learning papers call it Recall@k).

    Precision@k (`same_class_rates`' f"top{k}") counts all k items; hit@k asks whether a user
    scanning the k results finds one right item. `neighbour_labels` (N_q, k) are the labels of
    each query's retrieved items, e.g. `database_labels[nearest_neighbours(q, d, k)]`.
    """
    ql = torch.as_tensor(np.asarray(query_labels))             # (N_q,)
    nl = torch.as_tensor(np.asarray(neighbour_labels))         # (N_q, k)
    if ql.dim() != 1 or nl.dim() != 2 or nl.shape[0] != ql.shape[0] or nl.shape[1] < 1:
        raise ValueError(f"query_labels must have shape (N_q,) and neighbour_labels (N_q, k), "
                         f"got {tuple(ql.shape)} and {tuple(nl.shape)}")
    return (nl == ql[:, None]).any(dim=1).float().mean()       # ()

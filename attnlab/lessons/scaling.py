"""Why attention divides by sqrt(d_k), measured (notebook 02).

Three measurements on random queries and keys whose entries are independent N(0, 1), the
situation the original paper reasons about:

1. `dot_product_std`: the spread of q·k grows like sqrt(d_k) (a sum of d_k unit-variance terms);
2. `max_softmax_weight`: unscaled, that spread pushes softmax towards a one-hot vector;
3. `softmax_gradient_norm`: a one-hot softmax passes (almost) no gradient back to the query,
   because its slope (`softmax_slope`, the student's exercise in notebook 02) vanishes there.

Every function takes a list of d_k values and a seed, draws its samples from its own
`torch.Generator` (so calling order does not matter), works in float64 (so rounding differences
between machines stay far below the printed digits) and returns NumPy arrays aligned with the
d_k list. All attention weights come from `attnlab.scaled_dot_product_attention`: scale=None is
the real thing, scale=1.0 the "unscaled" variant.

Then the scale in a model that trains, where q and k are not unit-variance draws:

4. `score_spread`: the spread of a layer's scaled scores over the pairs of real tokens (notebook
   03's model: far below 1 at initialisation, about 1 after training);
5. `train_at_scale`: notebook 03's model and recipe with one head of size d_head, trained with
   the scale, without it, or with it folded into W_Q at initialisation (the same function at
   step 0, another parametrisation for Adam); `initial_at_scale` is the model it starts from.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..core.attention import MultiHeadAttention, scaled_dot_product_attention
from ..core.models import TinyTransformer
from ..plumbing.checks import check_bool, check_int, check_number, check_tensor
from ..plumbing.repro import seed_of
from .classifier import Trained, fit_classifier, initial_model, task_reviews
from .data import Vocab

DEFAULT_D_KS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


def check_d_ks(d_ks) -> list[int]:
    """The d_k values as a list of ints; raises TypeError/ValueError naming what was wrong."""
    if isinstance(d_ks, (str, bytes)) or not isinstance(d_ks, (Sequence, np.ndarray)):
        raise TypeError(f"d_ks must be a sequence of positive ints, got {type(d_ks).__name__}")
    if len(d_ks) == 0:
        raise ValueError("d_ks must not be empty, got an empty sequence")
    return [check_int(f"d_ks[{i}]", d, minimum=1) for i, d in enumerate(d_ks)]


def _generator(seed) -> torch.Generator:
    """A torch.Generator seeded with `seed` (an int): each measurement draws from its own."""
    return torch.Generator().manual_seed(seed_of(check_int("seed", seed)))


def _draw(generator: torch.Generator, n_samples: int, n_keys: int, d_k: int):
    """n_samples independent problems: one query, n_keys keys, entries N(0, 1)."""
    q = torch.randn(n_samples, 1, d_k, generator=generator, dtype=torch.float64)  # (N, 1, d_k)
    k = torch.randn(n_samples, n_keys, d_k, generator=generator, dtype=torch.float64)  # (N, T, d_k)
    return q, k


# The two variants every measurement compares, as `scale` arguments of
# scaled_dot_product_attention: 1.0 = softmax(q·k), None = softmax(q·k / sqrt(d_k)).
SCALES = (("unscaled", 1.0), ("scaled", None))


def _compare_scales(measure, d_ks, n_keys: int, n_samples: int, d_v: int,
                    seed) -> dict[str, np.ndarray]:
    """The experiment behind max_softmax_weight and softmax_gradient_norm: for each d_k, draw
    n_samples problems (query (N, 1, d_k), keys (N, T, d_k), values (N, T, d_v) and an upstream
    gradient (N, 1, d_v), all N(0, 1), from one generator seeded with `seed`), and call
    measure(q, k, v, upstream, scale) -> float for both SCALES on the same draw.
    Returns {"unscaled": (len(d_ks),), "scaled": (len(d_ks),)}."""
    d_ks = check_d_ks(d_ks)
    n_keys = check_int("n_keys", n_keys, minimum=2)
    n_samples = check_int("n_samples", n_samples, minimum=1)
    d_v = check_int("d_v", d_v, minimum=1)
    gen = _generator(seed)
    result = {name: [] for name, _ in SCALES}
    for d in d_ks:
        q, k = _draw(gen, n_samples, n_keys, d)  # (N, 1, d), (N, T, d)
        v = torch.randn(n_samples, n_keys, d_v, generator=gen, dtype=torch.float64)  # (N, T, d_v)
        upstream = torch.randn(n_samples, 1, d_v, generator=gen, dtype=torch.float64)  # (N, 1, d_v)
        for name, scale in SCALES:
            result[name].append(measure(q, k, v, upstream, scale))
    return {name: np.array(values) for name, values in result.items()}


def dot_product_std(d_ks=DEFAULT_D_KS, n_samples: int = 4000, seed: int = 0) -> np.ndarray:
    """Standard deviation of q·k over n_samples random pairs, for each d_k.

    Theory: q·k = sum of d_k products of independent unit normals, each with variance 1, so
    Var(q·k) = d_k and std = sqrt(d_k). Dividing by sqrt(d_k) brings it back to 1.
    """
    d_ks = check_d_ks(d_ks)
    n_samples = check_int("n_samples", n_samples, minimum=2)
    g = _generator(seed)
    stds = []
    for d in d_ks:
        q, k = _draw(g, n_samples, 1, d)  # (N, 1, d), (N, 1, d)
        dots = (q * k).sum(-1).flatten()  # (N,)   q·k
        stds.append(dots.std().item())
    return np.array(stds)


def loglog_slope(x, y) -> float:
    """Slope of the least-squares line through (log x, log y): the exponent p in y ∝ x^p."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"x and y must be 1-D of the same length >= 2, "
                         f"got shapes {x.shape} and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("x and y must be positive to take logarithms")
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)


def softmax_slope(weights: torch.Tensor) -> torch.Tensor:
    """The softmax's slope from its output: entry [i, j] is dw_i/ds_j = w_i (delta_ij - w_j),
    for weights w (..., n) -> (..., n, n). No score is needed: the weights alone say how much
    each moves when a score moves, and every entry is 0 when one weight is 1 (saturation)."""
    weights = check_tensor("weights", weights, min_dim=1, floating=True)
    return torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)  # (..., n, n)


def _largest_weight(q, k, v, upstream, scale) -> float:
    _, w = scaled_dot_product_attention(q, k, v, scale=scale)  # (N, 1, T)
    return w.amax(-1).mean().item()


def max_softmax_weight(d_ks=DEFAULT_D_KS, n_keys: int = 16, n_samples: int = 500,
                       seed: int = 0) -> dict[str, np.ndarray]:
    """Mean (over n_samples queries) of the largest attention weight among n_keys keys.

    Returns {"unscaled": ..., "scaled": ...}. A uniform softmax has max weight 1/n_keys, a
    one-hot softmax 1. Both variants see the same q and k.
    """
    return _compare_scales(_largest_weight, d_ks, n_keys, n_samples, 1, seed)


def _query_gradient_norm(q, k, v, upstream, scale) -> float:
    q_leaf = q.clone().requires_grad_(True)
    out, _ = scaled_dot_product_attention(q_leaf, k, v, scale=scale)  # (N, 1, d_v)
    (out * upstream).sum().backward()  # samples are independent: one backward for all
    norms = q_leaf.grad.norm(dim=-1).flatten()  # (N,)   ||d loss_i / d q_i||
    return norms.median().item()


def softmax_gradient_norm(d_ks=DEFAULT_D_KS, n_keys: int = 16, n_samples: int = 500,
                          d_v: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """Median norm of the gradient that reaches the query through the softmax, for each d_k.

    For each sample, loss = <g, attention output> with random values v and a random upstream
    gradient g (both N(0, 1)), as if some later layer sent g back; we measure ||d loss / d q||,
    the signal that would train the query projection. Returns {"unscaled": ..., "scaled": ...}.

    The median, not the mean: the typical query is what matters, and the mean is dominated by
    the rare samples whose two best keys happen to tie (there the softmax is not saturated).
    """
    return _compare_scales(_query_gradient_norm, d_ks, n_keys, n_samples, d_v, seed)


def softmax_pair(d_k: int, n_keys: int = 8, seed: int = 0, max_d_k: int = 1024) -> dict:
    """One query and n_keys keys with d_k dimensions, and the softmax weights both ways.

    The vectors are the first d_k coordinates of one fixed draw of max_d_k coordinates, so
    moving d_k keeps the same query and keys and only adds dimensions: this is what the d_k
    slider of notebook 02 shows. Returns d_k, the query (d_k,), the keys (n_keys, d_k), the raw
    scores q·k, the scale 1/sqrt(d_k), and the "unscaled" and "scaled" weights (n_keys,).
    """
    d_k = check_int("d_k", d_k, minimum=1)
    n_keys = check_int("n_keys", n_keys, minimum=2)
    max_d_k = check_int("max_d_k", max_d_k, minimum=1)
    if d_k > max_d_k:
        raise ValueError(f"d_k must be at most max_d_k={max_d_k}, got {d_k}")
    g = _generator(seed)
    q_all, k_all = _draw(g, 1, n_keys, max_d_k)  # (1, 1, max_d_k), (1, T, max_d_k)
    q, k = q_all[..., :d_k], k_all[..., :d_k]  # (1, 1, d_k), (1, T, d_k)
    v = torch.zeros(1, n_keys, 1, dtype=torch.float64)
    _, unscaled = scaled_dot_product_attention(q, k, v, scale=1.0)  # (1, 1, T)
    _, scaled = scaled_dot_product_attention(q, k, v)  # (1, 1, T)
    return {
        "d_k": d_k,
        "query": q.flatten().numpy(),  # (d_k,)
        "keys": k[0].numpy(),  # (T, d_k)
        "scores": (q @ k.transpose(-2, -1)).flatten().numpy(),  # (T,)   q·k, unscaled
        "scale": 1.0 / math.sqrt(d_k),
        "unscaled": unscaled.flatten().numpy(),
        "scaled": scaled.flatten().numpy(),
    }


# --- the scale in a model that trains (notebook 02, sections 4 and 5) -------------------------

@torch.no_grad()
def score_spread(attn: MultiHeadAttention, h: torch.Tensor,
                 real: torch.Tensor | None = None) -> torch.Tensor:
    """Standard deviation of an attention layer's scaled scores, q·k times its scale, over every
    (query, key) pair of real tokens, all heads together; a 0-dim tensor.

    Section 1's argument is about q and k with unit-variance entries, whose scaled scores spread
    about 1. A layer in a model has its own q and k: this measures what its softmax really sees.
    h (B, T, d_model) is the layer's input; real (B, T) bool marks the tokens that are not
    padding (default: all). The scale is the layer's `scale`, or 1/√d_head when that is None.
    """
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"attn must be a MultiHeadAttention layer (e.g. model.blocks[0].attn), "
                        f"got {type(attn).__name__}")
    check_tensor("h", h, floating=True)
    if h.dim() != 3 or h.shape[-1] != attn.d_model:
        raise ValueError(f"h must have shape (B, T, d_model={attn.d_model}), got {tuple(h.shape)}")
    if real is None:
        real = torch.ones(h.shape[:2], dtype=torch.bool, device=h.device)
    elif check_tensor("real", real).dtype != torch.bool or real.shape != h.shape[:2]:
        raise ValueError(f"real must be a bool tensor of shape {tuple(h.shape[:2])} (B, T), got "
                         f"{real.dtype} of shape {tuple(real.shape)}")
    q, k, _ = attn.project(h)  # (B, H, T, D), (B, H_kv, T, D)
    k = k.repeat_interleave(attn.n_heads // attn.n_kv_heads, dim=1)  # (B, H, T, D)
    scale = attn.scale if attn.scale is not None else attn.d_head ** -0.5
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, T)   what the softmax sees
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)   both tokens real
    return scores[pairs.expand_as(scores)].std()


def initial_at_scale(scale: float | None = None, *, fold: bool = False, seed: int = 0,
                     d_head: int = 64) -> TinyTransformer:
    """The untrained model `train_at_scale` starts from: notebook 03's TinyTransformer with one
    head of size `d_head` (d_model = d_head), its weights drawn from `seed`, its attention scale
    `scale` (None: 1/√d_head).

    fold=True divides W_Q (weight and bias) by √d_head and sets the scale to 1.0: the same
    function as scale=None, every score and prediction equal, with the scale stored in W_Q.
    """
    if fold and scale is not None:
        raise ValueError(f"fold=True folds 1/√d_head into W_Q and trains without a division; "
                         f"scale must be None with it, got {scale!r}")
    check_bool("fold", fold)
    seed, d_head = check_int("seed", seed), check_int("d_head", d_head, minimum=1)
    model = initial_model(len(Vocab.for_reviews()), seed=seed, d_model=d_head, n_heads=1)
    attn = model.blocks[0].attn
    if scale is not None:
        attn.scale = check_number("scale", scale, minimum=0.0, exclusive_minimum=True)
    if fold:
        with torch.no_grad():
            attn.q.weight /= math.sqrt(d_head)  # W_Q / √d_head: the scale, stored in the weights
            attn.q.bias /= math.sqrt(d_head)
        attn.scale = 1.0
    return model


def train_at_scale(scale: float | None = None, *, fold: bool = False, seed: int = 0,
                   epochs: int = 5, d_head: int = 64) -> Trained:
    """Notebook 03's model, task and recipe (`attnlab.lessons.classifier`) with one head of size
    `d_head` (d_model = d_head), trained with another attention scale; returns `Trained`.

    scale=None is the usual 1/√d_head, scale=1.0 no division. fold=True starts from the scaled
    model with 1/√d_head folded into W_Q (`initial_at_scale`) and trains without a division: the
    same function at step 0, but a W_Q that is √d_head times smaller, which Adam (a step of
    about lr per weight, whatever the gradient's size) moves √d_head times faster relative to
    its size. `seed` seeds the data, the weights and the batch order; float64, so the curves
    are the same on any CPU.
    """
    model = initial_at_scale(scale, fold=fold, seed=seed, d_head=d_head)
    train, test = task_reviews("contrast", seed)
    vocab = Vocab.for_reviews()
    x_train, y_train, _ = train.tensors(vocab)
    x_test, y_test, _ = test.tensors(vocab)
    history = fit_classifier(model, x_train, y_train, x_test, y_test, epochs=epochs, seed=seed)
    return Trained(model, vocab, history, train, test)

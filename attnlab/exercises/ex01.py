"""The exercises of notebook 01 (attention by hand), checked.

- `predict_weights` (predict): the three weights of the worked example, guessed before the
  softmax is computed;
- `attention` (implement): softmax(q kᵀ / √d_k) v in three lines, against attnlab's
  `scaled_dot_product_attention` on random inputs, batched ones included;
- `key_2_wins` (explore): a query for which key 2 of the worked example gets the largest weight.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import torch

from ..attention import scaled_dot_product_attention
from ..report import fmt
from . import (
    Verdict,
    _kind,
    as_number,
    check_answer,
    check_function,
    check_prediction,
    exercise,
)

LIMIT = 3.0  # the playground's sliders run from -LIMIT to LIMIT
MARGIN = 0.01  # key 2 must beat the others by this much, so that the win shows in 3 decimals
WORKED_KEYS = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0],
                            [0.7, 0.7, 0.0, 0.0]])  # (3, 4): the notebook's worked example


@exercise("predict", args=(torch.tensor([0.405, 0.246, 0.349]),))
def predict_weights(guess, measured):
    """Your guess for the worked example's three weights against the measured ones (±0.1 each)."""
    return check_prediction(
        guess, measured, name="predict the weights", tolerance=0.1,
        lesson="Even key 1, which does not match at all, keeps a large share: e^0 = 1 is not 0.")


def _attention_inputs(seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Random (q, k, v) triples: one sequence, a batch, and batch × heads with T_q ≠ T_k and
    d_v ≠ d_k, so that a version that only works on 2-D inputs or square shapes is caught."""
    g = torch.Generator().manual_seed(seed)
    shapes = [((3, 4), (5, 4), (5, 2)),  # q (T_q, d_k), k (T_k, d_k), v (T_k, d_v)
              ((2, 6, 8), (2, 6, 8), (2, 6, 8)),  # a batch of 2 sequences
              ((2, 4, 5, 16), (2, 4, 7, 16), (2, 4, 7, 3))]  # (B, H, T, d)
    return [tuple(torch.randn(s, generator=g) for s in triple) for triple in shapes]


@exercise("implement")
def attention(fn):
    """Your `fn(q, k, v) -> (output, weights)` against `attnlab.scaled_dot_product_attention`."""
    return check_function(
        fn, scaled_dot_product_attention, _attention_inputs(), name="attention",
        hint="transpose only the last two dimensions of k, divide the scores by √d_k, take the "
             "softmax over the keys (the last dimension), and return (weights @ v, weights).")


def _as_vector(answer, n: int) -> tuple[torch.Tensor | None, str | None]:
    """(the answer as a float tensor of n numbers, None) or (None, what is wrong with it)."""
    if isinstance(answer, torch.Tensor):
        answer = answer.detach().flatten().tolist() if answer.dim() <= 1 else answer
    elif hasattr(answer, "tolist") and getattr(answer, "ndim", 2) <= 1:  # a NumPy vector
        answer = answer.tolist()
    if not isinstance(answer, (list, tuple)):
        return None, f"your query should be a list of {n} numbers, got {_kind(answer)}"
    if len(answer) != n:
        return None, f"your query has {len(answer)} numbers, expected {n} (one per dimension d_k)"
    values = []
    for x in answer:
        value, problem = as_number(x, "each coordinate")
        if problem:
            return None, problem
        values.append(value)
    return torch.tensor(values), None


@exercise("explore", args=lambda: (WORKED_KEYS,))
def key_2_wins(query, keys: torch.Tensor):
    """Your query (d_k numbers within the sliders' range) must give key 2 the largest weight.

    Returns your query as a tensor (d_k,) when it does, else a query that does.
    """
    def judge(query):
        q, problem = _as_vector(query, keys.shape[-1])
        if problem is None and q.abs().max() > LIMIT:
            problem = f"keep every coordinate within [-{LIMIT:g}, {LIMIT:g}] (the sliders' range)"
        if problem:
            return problem
        q = q.to(keys.dtype)
        _, w = scaled_dot_product_attention(q[None], keys, keys)  # (1, T)
        w = w[0]  # (T,)
        shown = "[" + ", ".join(fmt(x, 3, guard=False) for x in w.tolist()) + "]"
        rivals = torch.cat([w[:2], w[3:]])
        if w[2] > rivals.max() + MARGIN:
            return Verdict.right(f"weights {shown}; key 2 takes the largest share.", value=q)
        tops = [j for j, x in enumerate(w.tolist()) if x > w.max().item() - 1e-6]
        if len(tops) > 1:
            return f"weights {shown}; keys {', '.join(map(str, tops))} tie for the largest share"
        if tops[0] != 2:
            return f"weights {shown}; key {tops[0]} takes the largest share"
        return f"weights {shown}; key 2 leads by less than {MARGIN:g}, too close to call"

    return check_answer(
        query, judge, name="key 2 wins",
        reference=torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=keys.dtype),
        hint="a query that matches key 0 and key 1 equally well; what does key 2 have that they "
             "lack?",
        todo="not attempted yet; put your query in the cell above.")

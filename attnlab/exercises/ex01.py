"""The exercises of notebook 01 (attention by hand), checked.

- `predict_weights` (predict): the worked example's three weights, guessed before the softmax;
- `attention` (implement): softmax(q kᵀ / √d_k) v, against `scaled_dot_product_attention`;
- `key_2_wins` (explore): a query that gives key 2 of the worked example the largest weight;
- `predict_winner` (predict): which of four keys, one of them long, gets the largest weight;
- `split_heads`, `merge_heads` (implement): (B, T, d_model) <-> (B, H, T, d_head), against
  attnlab's.
"""
from __future__ import annotations

import itertools

import torch

from ..core.attention import merge_heads as reference_merge
from ..core.attention import scaled_dot_product_attention
from ..core.attention import split_heads as reference_split
from ..plumbing.report import fmt
from . import (
    Implement,
    Like,
    Predict,
    Verdict,
    When,
    _kind,
    as_number,
    check_answer,
    exercise,
    prediction,
    same,
)

LIMIT = 3.0  # the playground's sliders run from -LIMIT to LIMIT
MARGIN = 0.01  # key 2 must beat the others by this much, so that the win shows in 3 decimals
WORKED_KEYS = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0],
                            [0.7, 0.7, 0.0, 0.0]])  # (3, 4): the notebook's worked example

predict_weights = Predict(
    "predict the weights", tolerance=0.1, example=torch.tensor([0.405, 0.246, 0.349]),
    lesson="Even key 1, which does not match at all, keeps a large share: e^0 = 1 is not 0.")


# --- attention ----------------------------------------------------------------------------------

def _attention_inputs(seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Random (q, k, v) triples: one sequence, a batch, and batch × heads with T_q ≠ T_k and
    d_v ≠ d_k, so that a version that only works on 2-D inputs or square shapes is caught."""
    g = torch.Generator().manual_seed(seed)
    shapes = [((3, 4), (5, 4), (5, 2)),  # q (T_q, d_k), k (T_k, d_k), v (T_k, d_v)
              ((2, 6, 8), (2, 6, 8), (2, 6, 8)),  # a batch of 2 sequences
              ((2, 4, 5, 16), (2, 4, 7, 16), (2, 4, 7, 3))]  # (B, H, T, d)
    return [tuple(torch.randn(s, generator=g) for s in triple) for triple in shapes]


def _attend(q, k, v, scale: float | None = None, over: int = -1):
    """(weights @ v, weights), the scores scaled by `scale` (None: 1/√d_k), the softmax `over`
    the keys (-1) or the queries (-2)."""
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    weights = scores.softmax(over)  # (..., T_q, T_k)
    return weights @ v, weights


def _weights(result, *_) -> torch.Tensor:
    """The weights of an (output, weights) tuple of tensors, in float64: the mistakes are told by
    the weights alone, whatever the output (raises for any other result: no match)."""
    if not isinstance(result, tuple) or not all(isinstance(t, torch.Tensor) for t in result):
        raise TypeError("not a tuple of tensors")
    _, weights = result
    return weights.detach().double()


attention = Implement(
    "attention", scaled_dot_product_attention, _attention_inputs, view=_weights,
    mistakes=[
        Like(lambda q, k, v: _attend(q, k, v, scale=1.0),
             "your weights are softmax(q kᵀ): the scores are not divided by √d_k"),
        Like(lambda q, k, v: _attend(q, k, v, scale=q.shape[-1] ** 0.5),
             "your weights come from scores multiplied by √d_k, not divided by it"),
        Like(lambda q, k, v: _attend(q, k, v, over=-2),
             "your weights sum to 1 over the queries (each column), not over the keys (each row)"),
        When(lambda got, expected, *_: same(_weights(got), _weights(expected), 1e-5, 1e-4),
             "your weights are right, but the output is not weights @ v",
             example=lambda q, k, v: (_attend(q, k, v)[1] @ k, _attend(q, k, v)[1])),
    ],
    hint=("write out softmax(q kᵀ / √d_k) v one step at a time and compare each step with yours.",
          "transpose only the last two dimensions of k, divide the scores by √d_k, take the "
          "softmax over the keys (the last dimension), and return (weights @ v, weights)."))


# --- explore: a query that makes key 2 win -------------------------------------------------------

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


def _shown(weights: torch.Tensor) -> str:
    return "[" + ", ".join(fmt(x, 3, guard=False) for x in weights.tolist()) + "]"


@exercise("explore", args=lambda: (WORKED_KEYS,))
def key_2_wins(query, keys: torch.Tensor):
    """Your query (d_k numbers within the sliders' range) must give key 2 the largest weight.
    Returns your query as a tensor (d_k,) when it does, else a query that does."""
    def judge(query):
        q, problem = _as_vector(query, keys.shape[-1])
        if problem is None and q.abs().max() > LIMIT:
            problem = f"keep every coordinate within [-{LIMIT:g}, {LIMIT:g}] (the sliders' range)"
        if problem:
            return problem
        q = q.to(keys.dtype)
        w = scaled_dot_product_attention(q[None], keys, keys)[1][0]  # (T,)
        shown = _shown(w)
        if w[2] > torch.cat([w[:2], w[3:]]).max() + MARGIN:
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
        hint=("a query that matches key 0 and key 1 equally well; what does key 2 have that they "
              "lack?",
              "key 2 = [0.7, 0.7, 0, 0] is the sum of key 0's and key 1's directions: a query "
              "with equal positive first and second numbers (and zeros after) scores key 2 at "
              "1.4 times each of the others."),
        todo="not attempted yet; put your query in the cell above.")


@exercise("predict", args=(torch.tensor([0.166, 0.166, 0.251, 0.417]),))
def predict_winner(guess, weights: torch.Tensor):
    """Your guess for the key that gets the largest weight against the measured `weights` (T,)
    (notebook 01: q = [1, 1, 0, 0] and a fourth key, [2, 0, 0, 0])."""
    measured = int(weights.argmax())

    def read(guess):
        value, problem = as_number(guess, "your guess")
        if problem is None and (value != int(value) or not 0 <= value < len(weights)):
            problem = f"your guess is {fmt(value, 4, guard=False)}, not a key number"
        return (None, f"{problem} (0 to {len(weights) - 1})") if problem else (int(value), None)

    return prediction(
        guess, name="which key wins?", read=read,
        describe=lambda key: f"you predicted key {key}; key {measured} gets the largest weight "
                             f"({_shown(weights)})",
        lesson="q·k = |q| |k| cos θ: the agreement of the directions times both lengths, so a "
               "long key can beat one that points the query's way better.",
        todo="no prediction yet; write a key number in the cell above before running.",
        write="Write one key number, such as 2.")


# --- split and merge heads ----------------------------------------------------------------------

AXES = ("B", "H", "T", "d_head")  # the axes of split_heads' result and merge_heads' input
SPLIT = tuple(range(4))  # (B, H, T, d_head), the axes' right order


def _split_inputs(seed: int = 11) -> list[tuple[torch.Tensor, int]]:
    """(x (B, T, d_model), n_heads) with B, H, T and d_head all different and T ≠ H, so that a
    reshape without the transpose, or axes in another order, cannot pass for the right split."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(B, T, H * D, generator=g), H)
            for B, T, H, D in ((2, 5, 3, 4), (3, 4, 2, 6), (1, 7, 4, 2))]


def _in_order(order: tuple[int, ...]):
    """The ✗ line of a split whose axes come in `order` (of B, H, T, d_head)."""
    named = "(" + ", ".join(AXES[i] for i in order) + ")"
    start = "the split is right but the transpose is missing" if order == (0, 2, 1, 3) else \
        "the transpose of the wrong dimensions"
    return lambda got, expected, *_: f"{start}: your axes are in the order {named}, expected " \
                                     f"(B, H, T, d_head) = {tuple(expected.shape)}"


split_heads = Implement(
    "split_heads", reference_split, _split_inputs,
    mistakes=[
        *[Like(lambda x, h, order=order: reference_split(x, h).permute(order), _in_order(order))
          for order in itertools.permutations(SPLIT) if order != SPLIT],
        Like(lambda x, h: x.reshape(len(x), h, x.shape[1], -1),
             "a reshape without the transpose: x.reshape(B, H, T, d_head) has the right shape, "
             "but deals one token's numbers out over several positions of a head"),
        Like(lambda x, h: x.transpose(1, 2).reshape(len(x), h, x.shape[1], -1),
             "the transpose of the wrong dimensions: swapping T and d_model before the split "
             "mixes the tokens' numbers"),
        Like(lambda x, h: x.unflatten(-1, (-1, h)).permute(0, 3, 1, 2),
             "d_model split as (d_head, H) instead of (H, d_head): a head's d_head numbers are "
             "consecutive in a token's vector, not every H-th one"),
    ],
    hint=("a head needs, for every token, its own d_head consecutive numbers of that token; "
          "which shape lets you pick them out without mixing tokens, and which axis is in the "
          "wrong place after that?",
          "first split the last axis only, d_model = H · d_head, keeping B and T where they "
          "are; then swap the token axis with the head axis."))


def _merge_inputs(seed: int = 12) -> list[tuple[torch.Tensor]]:
    """x (B, H, T, d_head) with B, H, T and d_head all different, as split_heads makes them."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(B, H, T, D, generator=g),)
            for B, H, T, D in ((2, 3, 5, 4), (3, 2, 4, 6), (1, 4, 7, 2))]


merge_heads = Implement(
    "merge_heads", reference_merge, _merge_inputs,
    mistakes=[
        Like(lambda x: x.transpose(1, 2),
             lambda got, expected, x: "the heads are back beside each other per token, but not "
                                      f"merged yet: shape (B, T, H, d_head) = {tuple(got.shape)}, "
                                      f"expected (B, T, H · d_head) = {tuple(expected.shape)}"),
        Like(lambda x: x.reshape(len(x), x.shape[2], -1),
             "a reshape without transposing back: x.reshape(B, T, H · d_head) has the right "
             "shape, but a row mixes several positions of one head"),
        *[Like(lambda x, i=i, j=j: x.transpose(i, j).reshape(len(x), x.shape[2], -1),
               f"the transpose of the wrong dimensions ({AXES[i]} and {AXES[j]}): a row of the "
               "result must hold one position's numbers from every head")
          for i, j in itertools.combinations(range(4), 2) if (i, j) != (1, 2)],
    ],
    hint=("merge_heads undoes split_heads: which of split's two steps must be undone first?",
          "bring the token axis back next to the batch axis, so that each position holds its H "
          "heads side by side, then flatten the last two axes into one; a transposed tensor is "
          "not contiguous, which one of .view and .reshape minds."))

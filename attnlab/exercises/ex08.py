"""The exercises of notebook 08 (what attention costs), checked.

- `flop_ratios` (predict): by how much the FLOPs of a self-attention layer grow when the context
  grows 4× (T = d = 64 to T = 256): the score part, the four projections, the whole layer;
- `decode_step` (implement): one decoding step with a KV cache: project the new token, append its
  key and value, attend with its query over everything cached (each key/value head shared by its
  group of query heads), merge the heads, project out; checked against recomputing the whole
  prefix (`kv_cache.recompute_step`). Attending before the append (the token cannot see
  itself), forgetting the output projection, caching keys split into the query heads' count,
  tiling the shared heads in the wrong order and a rotary position off by one are named;
- `bytes_per_token` (implement): the KV cache's bytes per token from a model's configuration,
  on a table of configurations at once; a missing factor (the 2 for keys and values, the layers,
  the bytes) and the query heads' count where the key/value heads' belongs are named;
- `online_update` (implement): fold one block of keys into the running max, total and weighted
  sum of the online softmax; one call per block gives attention block by block.

Every check prints one line (✓, ✗ or ○) and returns something the next cells can use.
"""
from __future__ import annotations

import torch

from ..attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention
from ..kv_cache import KVCache, recompute_step
from ..kv_cache import bytes_per_token as reference_bytes
from ..kv_cache import decode_step as reference_step
from ..online_softmax import empty_state
from ..online_softmax import online_update as reference_update
from . import (
    _kind,
    call_safely,
    check_answer,
    check_function,
    check_prediction,
    exercise,
    none_returned,
    tensor_problem,
)


@exercise("predict", args=([16.0, 4.0, 8.0],))
def flop_ratios(guess, measured):
    """Your [score part, projections, whole layer] ratios against the counted ones (±1 is right)."""
    return check_prediction(
        guess, measured, name="predict the FLOP ratios of a 4× longer context", tolerance=1.0,
        digits=1,
        lesson="Scores pair every query with every key (T²), projections touch each token "
               "once (T); the layer adds both.")


# --- one decoding step with a KV cache (implement) -------------------------------------------

class _WatchedCache(KVCache):
    """A KVCache that notes the shape of every key appended, so that keys split into the query
    heads' count are named (appending them fails, or fills the cache with the wrong numbers)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.appended: list[tuple[int, ...]] = []

    def append(self, k, v):
        self.appended.append(tuple(getattr(k, "shape", ())))
        return super().append(k, v)


def _decode_cases() -> list[tuple[MultiHeadAttention, torch.Tensor, int]]:
    """(layer, x (B, T, d_model), prefix length P): P tokens are cached first, the others are
    decoded one by one. Grouped-query layers, so that the shared heads and their order matter,
    one of them rotary, so that the new token's position matters; made under a private seed
    (the caller's random numbers are left as they were)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(8)
        grouped = MultiHeadAttention(16, 4, n_kv_heads=2)  # 2 query heads per key/value head
        rotated = MultiHeadAttention(16, 4, n_kv_heads=1, rotary=True)  # multi-query, rotary
        return [(grouped, torch.randn(2, 6, 16), 3), (rotated, torch.randn(1, 6, 16), 4)]


def _variant(attn, x_t, past_k, past_v, *, position, before_append=False, out=True,
             tiled=False):
    """A decoding step as a student may write it: right with the defaults; `before_append`
    attends over the past only, `out=False` skips the output projection, `tiled` repeats the
    key/value heads as a block (0, 1, 0, 1) instead of each in place (0, 0, 1, 1), `position`
    is where the new token is rotated."""
    q, k, v = attn.project(x_t, positions=torch.tensor([position]))  # (B, H, 1, D), (B, H_kv, 1, D)
    keys = past_k if before_append else torch.cat([past_k, k], dim=2)  # (B, H_kv, t, D)
    values = past_v if before_append else torch.cat([past_v, v], dim=2)
    group = attn.n_heads // attn.n_kv_heads
    if tiled:
        keys, values = keys.repeat(1, group, 1, 1), values.repeat(1, group, 1, 1)
    else:
        keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
    heads, _ = scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D)
    merged = merge_heads(heads)  # (B, 1, d_model)
    return attn.out(merged) if out else merged


def _named_mistake(got, attn, x_t, past_k, past_v, before: int) -> str | None:
    """The classic mistake whose output `got` is, or None."""
    mistakes = [
        (dict(before_append=True),
         "it attends over the cache before this token's key and value are in it: the token "
         "cannot see itself (append first, then attend over everything the cache returns)"),
        (dict(out=False),
         "the heads are merged but the output projection attn.out is missing"),
    ]
    if attn.n_kv_heads > 1:
        mistakes.append((dict(tiled=True),
                         "the shared key/value heads are repeated in the wrong order: query head h "
                         "reads key/value head h // G, so each must be repeated in place "
                         "(0, 0, 1, 1), not as a block (0, 1, 0, 1)"))
    if attn.rotary:
        mistakes += [
            (dict(position=0), "this layer is rotary and the new token was rotated as if at "
                               "position 0: it sits at position len(cache)"),
            (dict(position=before + 1), "the new token was rotated one position too far: "
                                        "positions start at 0, so it sits at len(cache) as it "
                                        "was before the append"),
        ]
    for change, problem in mistakes:
        wrong = _variant(attn, x_t, past_k, past_v, **{"position": before, **change})
        if got.shape == wrong.shape and torch.allclose(got, wrong, atol=1e-5, rtol=1e-4):
            return problem
    return None


def _heads_problem(cache: _WatchedCache, attn) -> str | None:
    """What is wrong with the head count of the keys appended to `cache`, or None."""
    wrong = [s[1] for s in cache.appended if len(s) == 4 and s[1] != attn.n_kv_heads]
    if wrong and wrong[0] == attn.n_heads:
        return (f"you appended keys with n_heads = {attn.n_heads} heads to the cache of a layer "
                f"with n_kv_heads = {attn.n_kv_heads}: the cache keeps the key/value heads only "
                f"(split k and v into attn.n_kv_heads heads, and share them among the query "
                f"heads only when attending)")
    if wrong:
        return (f"you appended keys with {wrong[0]} heads; this layer's cache holds "
                f"n_kv_heads = {attn.n_kv_heads}, as (B, n_kv_heads, t, d_head)")
    return None


def _judge_step(fn):
    """None when `fn(attn, x_t, cache)` decodes every token of every case as recomputing does
    and appends exactly one position per step; else what is wrong (a ○ Verdict for None)."""
    if not callable(fn):
        return f"expected a function, got {_kind(fn)}"
    first = True
    for attn, x, prefix in _decode_cases():
        B, T, _ = x.shape
        with torch.no_grad():
            cache = _WatchedCache.for_layer(attn, x, max_len=T)
            cache.append(*attn.project(x[:, :prefix])[1:])  # the prefix's keys and values
            cache.appended.clear()
            for t in range(prefix, T):
                before = len(cache)
                past_k = cache.keys[:, :, :before].clone()  # (B, H_kv, t - 1, D)
                past_v = cache.values[:, :, :before].clone()
                x_t = x[:, t:t + 1]  # (B, 1, d_model)
                expected = recompute_step(attn, x[:, :t + 1])  # (B, 1, d_model)
                got, problem = call_safely(fn, attn, x_t, cache)
                if first and problem is None and got is None:
                    return none_returned(fn)
                first = False
                problem = _heads_problem(cache, attn) or problem
                if problem is not None:
                    return problem
                where = (f"at position {t} (B = {B}, n_heads = {attn.n_heads}, n_kv_heads = "
                         f"{attn.n_kv_heads}{', rotary' if attn.rotary else ''})")
                problem = tensor_problem(got, expected, name="your output")
                if problem is not None:
                    if isinstance(got, torch.Tensor) and got.is_floating_point():
                        problem = _named_mistake(got, attn, x_t, past_k, past_v, before) \
                            or problem
                    return f"{where}, {problem}"
                if len(cache) != before + 1:
                    return (f"{where}, the output is right but the cache went from {before} to "
                            f"{len(cache)} positions: append this token's key and value, once")
    return None


@exercise("implement")
def decode_step(fn):
    """Your `fn(attn, x_t, cache) -> (B, 1, d_model)` for a grouped-query layer and a rotary
    multi-query one, step after step, against recomputing the whole prefix.

    Returns `fn` when it is right at every step, else `attnlab.kv_cache.decode_step`.
    """
    return check_answer(
        fn, _judge_step, name="decode_step", reference=reference_step,
        success="matches recomputing the whole prefix at 5 positions of two grouped-query "
                "layers (one rotary), and appends one position per step",
        todo="not attempted yet; write your function above and run the cell again.",
        hint=("the new token's key and value must be in the cache before its query looks at "
              "the cache; the query heads outnumber the key/value heads.",
              "project (at position len(cache)), append, give each query head the key/value "
              "head of its group, attend, merge the heads, project out."))


# --- the KV cache's bytes per token (implement) ----------------------------------------------

# (n_layers, d_model, n_heads, n_kv_heads, bytes_per_number), one configuration per column, made
# up so that each missing or wrong factor gives other numbers than every other mistake
_CONFIGS = torch.tensor([[3, 5, 2, 7],
                         [40, 96, 48, 64],
                         [8, 12, 6, 16],
                         [2, 3, 6, 1],
                         [4, 2, 1, 2]])


def _bytes_reference(n_layers, d_model, n_heads, n_kv_heads, bytes_per_number):
    """`kv_cache.bytes_per_token` for each configuration of a table whose columns are tensors."""
    columns = zip(n_layers.tolist(), d_model.tolist(), n_heads.tolist(), n_kv_heads.tolist(),
                  bytes_per_number.tolist())
    return torch.tensor([reference_bytes(layers, kv, d // heads, size)
                         for layers, d, heads, kv, size in columns])  # (n_configs,) int64


def _bytes_problem(got, expected, n_layers, d_model, n_heads, n_kv_heads, size):
    """What is wrong with `got` as the bytes per token, naming a missing or wrong factor."""
    d_head = d_model // n_heads
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and got.is_floating_point():
        return (f"your result has dtype {got.dtype}, expected {expected.dtype}: bytes are whole "
                "numbers (d_model / n_heads with / gives floats; // divides whole numbers)")
    problem = tensor_problem(got, expected, name="your result")
    if problem is None or not problem.startswith("your result differs"):
        return problem  # right, or not a tensor of the right shape and dtype
    mistakes = (
        (expected // 2, "the factor 2 is missing: each token stores a key AND a value"),
        (expected // n_layers, "the layers are missing: every layer keeps its own keys and "
                               "values"),
        (2 * n_layers * n_heads * d_head * size,
         "it uses the query heads' count: the cache stores only the n_kv_heads key/value heads"),
        (2 * n_layers * n_kv_heads * d_model * size,
         "each key/value head holds d_model / n_heads numbers, not d_model"),
        (expected // size, "that counts numbers, not bytes: multiply by bytes_per_number"),
    )
    for wrong, named in mistakes:
        if torch.equal(got, wrong):
            return named
    return f"your result {got.tolist()} differs from the reference {expected.tolist()}"


@exercise("implement")
def bytes_per_token(fn):
    """Your `fn(n_layers, d_model, n_heads, n_kv_heads, bytes_per_number)` on a table of
    configurations (one int64 tensor per argument, one entry per configuration) against
    `attnlab.kv_cache.bytes_per_token`. Returns `fn` when right, else the reference."""
    return check_function(
        fn, _bytes_reference, [tuple(_CONFIGS)], name="bytes_per_token",
        compare=_bytes_problem,
        success=f"matches attnlab's kv_cache.bytes_per_token on {_CONFIGS.shape[1]} "
                "configurations",
        hint=("count what one token leaves in the cache of one layer, then in all of them.",
              "per layer: a key and a value for each key/value head, each of d_model / n_heads "
              "numbers; then the layers, then the bytes of a number."))


# --- the online softmax (implement) ------------------------------------------------------------

def _update_inputs(seed: int = 8) -> list[tuple[torch.Tensor, ...]]:
    """(m, total, acc, scores, v_block) cases: the first block after `empty_state`; a second
    block whose scores are larger (its max replaces the old one, so what was kept must be
    rescaled); one whose scores are smaller (the old max stays). Sizes differ per dimension
    (T_q = 3, block = 4, d_v = 5, two heads) so that a transposed product is caught."""
    g = torch.Generator().manual_seed(seed)
    q, v1, v2 = (torch.randn(2, 3, 5, generator=g), torch.randn(2, 4, 5, generator=g),
                 torch.randn(2, 4, 5, generator=g))
    first, second = torch.randn(2, 3, 4, generator=g), torch.randn(2, 3, 4, generator=g)
    start = empty_state(q, v1)  # m = -inf, total = 0, acc = 0
    after_first = reference_update(*start, first, v1)
    return [(*start, first, v1), (*after_first, second + 3.0, v2), (*after_first, second - 3.0, v2)]


@exercise("implement")
def online_update(fn, *, seconds: float | None = None):
    """Your `fn(m, total, acc, scores, v_block) -> (m, total, acc)` against attnlab's."""
    return check_function(
        fn, reference_update, _update_inputs(), name="online_update", seconds=seconds,
        hint=("when a block brings a larger score, what happens to the totals you summed "
              "against the old max?",
              "the new max is the larger of the old max and the block's largest score; the old "
              "total and acc were computed against the old max, so both need the factor "
              "exp(old max - new max) before the block's terms are added."))

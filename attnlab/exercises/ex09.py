"""The exercises of notebook 09 (what attention costs), checked.

- `flop_ratios` (predict): how the score part, the projections and the whole layer grow with a
  4× longer context;
- `decode_step` (implement): one decoding step with a KV cache, step after step, against
  recomputing the whole prefix (`kv_cache.recompute_step`);
- `bytes_per_token` (implement): the KV cache's bytes per token on a table of configurations,
  against `kv_cache.bytes_per_token`;
- `online_update` (implement): fold one block of keys into the online softmax's running max,
  total and weighted sum, against `online_softmax.online_update`.
"""
from __future__ import annotations

import torch

from ..core.attention import MultiHeadAttention, merge_heads, scaled_dot_product_attention
from ..core.kv_cache import KVCache, recompute_step
from ..core.kv_cache import bytes_per_token as reference_bytes
from ..core.kv_cache import decode_step as reference_step
from ..core.online_softmax import empty_state
from ..core.online_softmax import online_update as reference_update
from . import (
    _IN_KERNEL,
    CHECK_WORK_S,
    TIME_LIMIT_S,
    Implement,
    Like,
    Predict,
    Verdict,
    When,
    _kind,
    alike,
    call_safely,
    check_answer,
    exercise,
    grader_seed,
    none_returned,
    refusing,
    result_problem,
    same,
    tensor_problem,
)

flop_ratios = Predict(
    "predict the FLOP ratios of a 4× longer context", tolerance=1.0, digits=1,
    example=[16.0, 4.0, 8.0],
    lesson="Scores pair every query with every key (T²), projections touch each token "
           "once (T); the layer adds both.")


# --- one decoding step with a KV cache ---------------------------------------------------------
# A function, not an `Implement`: the student's step changes the cache it is given, step after
# step, and its lines say at which position ("at position 3 (B = 2, ...), ...").

class _WatchedCache(KVCache):
    """A KVCache that notes the shape of every key appended, so that keys split into the query
    heads' count are named (appending them fails, or fills the cache with the wrong numbers)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.appended: list[tuple[int, ...]] = []

    def append(self, k, v):
        self.appended.append(tuple(getattr(k, "shape", ())))
        return super().append(k, v)


def _decode_cases(seed: int = 8) -> list[tuple[MultiHeadAttention, torch.Tensor, int]]:
    """(layer, x (B, T, d_model), prefix length P): P tokens are cached first, the others are
    decoded one by one. Grouped-query layers, so that the shared heads and their order matter,
    one of them rotary, so that the new token's position matters; made under a private seed
    (the caller's random numbers are left as they were)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        grouped = MultiHeadAttention(16, 4, n_kv_heads=2)  # 2 query heads per key/value head
        rotated = MultiHeadAttention(16, 4, n_kv_heads=1, rotary=True)  # multi-query, rotary
        return [(grouped, torch.randn(2, 6, 16), 3), (rotated, torch.randn(1, 6, 16), 4)]


def _step(attn, x_t, past_k, past_v, *, at=lambda t: t, before_append=False, out=True,
          tiled=False):
    """A decoding step as a student may write it: right with the defaults; the new token is
    rotated at position `at(len(cache))`; `before_append` attends over the past only,
    `out=False` skips the output projection, `tiled` repeats the key/value heads as a block
    (0, 1, 0, 1) instead of each in place (0, 0, 1, 1)."""
    q, k, v = attn.project(x_t, positions=torch.tensor([at(past_k.shape[2])]))  # (B, H(_kv), 1, D)
    keys = past_k if before_append else torch.cat([past_k, k], dim=2)  # (B, H_kv, t, D)
    values = past_v if before_append else torch.cat([past_v, v], dim=2)
    group = attn.n_heads // attn.n_kv_heads
    if tiled:
        keys, values = keys.repeat(1, group, 1, 1), values.repeat(1, group, 1, 1)
    else:
        keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
    merged = merge_heads(scaled_dot_product_attention(q, keys, values)[0])  # (B, 1, d_model)
    return attn.out(merged) if out else merged


# The classic mistakes: how the student's step differs from `_step`'s defaults, and what is
# wrong. One that makes no difference in a layer (the order of the heads where there is one
# key/value head, the position where there is no rotary) cannot be mistaken for a wrong output.
_STEP_MISTAKES = [
    (dict(before_append=True),
     "it attends over the cache before this token's key and value are in it: the token "
     "cannot see itself (append first, then attend over everything the cache returns)"),
    (dict(out=False), "the heads are merged but the output projection attn.out is missing"),
    (dict(tiled=True),
     "the shared key/value heads are repeated in the wrong order: query head h reads key/value "
     "head h // G, so each must be repeated in place (0, 0, 1, 1), not as a block (0, 1, 0, 1)"),
    (dict(at=lambda t: 0), "this layer is rotary and the new token was rotated as if at "
                           "position 0: it sits at position len(cache)"),
    (dict(at=lambda t: t + 1), "the new token was rotated one position too far: positions "
                               "start at 0, so it sits at len(cache) as it was before the append"),
]


def _heads_problem(appended: list[tuple[int, ...]], attn) -> str | None:
    """What is wrong with the head count of the keys appended to the cache (their shapes,
    `appended`), or None."""
    wrong = [s[1] for s in appended if len(s) == 4 and s[1] != attn.n_kv_heads]
    if wrong and wrong[0] == attn.n_heads:
        return (f"you appended keys with n_heads = {attn.n_heads} heads to the cache of a layer "
                f"with n_kv_heads = {attn.n_kv_heads}: the cache keeps the key/value heads only "
                f"(split k and v into attn.n_kv_heads heads, and share them among the query "
                f"heads only when attending)")
    if wrong:
        return (f"you appended keys with {wrong[0]} heads; this layer's cache holds "
                f"n_kv_heads = {attn.n_kv_heads}, as (B, n_kv_heads, t, d_head)")
    return None


def _run_steps(fn, attn, x: torch.Tensor, prefix: int, refuse: bool, on_step):
    """`fn(attn, x_t, cache)` step after step on one case, on a cache that holds the prefix's
    keys and values first, attnlab's decode_step refusing where `refuse`; after each step
    `on_step(got, problem, before, after, past_k, past_v, appended)` (the call's result or
    problem, the cache's length before and after, its keys and values before the step, the
    shapes appended so far) says what is wrong, and the first such answer ends the run."""
    T = x.shape[1]
    with torch.no_grad():
        cache = _WatchedCache.for_layer(attn, x, max_len=T)
        cache.append(*attn.project(x[:, :prefix])[1:])  # the prefix's keys and values
        cache.appended.clear()
        for t in range(prefix, T):
            before = len(cache)
            past_k = cache.keys[:, :, :before].clone()  # (B, H_kv, t - 1, D)
            past_v = cache.values[:, :, :before].clone()
            with refusing(reference_step if refuse else None):
                got, problem = call_safely(fn, attn, x[:, t:t + 1], cache)
            verdict = on_step(got, problem, before, len(cache), past_k, past_v,
                              list(cache.appended))
            if verdict is not None:
                return verdict
    return None


def _step_problem(attn, x: torch.Tensor, t: int, got, problem, before: int, after: int,
                  past_k, past_v, appended) -> str | None:
    """What is wrong with the step at position t that gave `got` (or `problem`), or None."""
    problem = _heads_problem(appended, attn) or problem
    if problem is not None:
        return problem
    B = x.shape[0]
    where = (f"at position {t} (B = {B}, n_heads = {attn.n_heads}, n_kv_heads = "
             f"{attn.n_kv_heads}{', rotary' if attn.rotary else ''})")
    with torch.no_grad():
        expected = recompute_step(attn, x[:, :t + 1])  # (B, 1, d_model)
        problem = tensor_problem(got, expected, name="your output")
        if problem is not None:
            named = [message for change, message in _STEP_MISTAKES if same(
                got, _step(attn, x[:, t:t + 1], past_k, past_v, **change), 1e-5, 1e-4)]
            return f"{where}, {(named or [problem])[0]}"
    if after != before + 1:
        return (f"{where}, the output is right but the cache went from {before} to "
                f"{after} positions: append this token's key and value, once")
    return None


def _judge_step(fn):
    """None when `fn(attn, x_t, cache)` decodes every token of every case as recomputing does
    and appends exactly one position per step; else what is wrong (a ○ Verdict for None).
    A grader's cases come from its seed, and attnlab's decode_step refuses to run in them."""
    if not callable(fn):
        return f"expected a function, got {_kind(fn)}"
    seed = grader_seed()
    first = True
    for attn, x, prefix in _decode_cases(*([] if seed is None else [seed])):
        at = iter(range(prefix, x.shape[1]))  # the position of each step

        def on_step(got, problem, *rest, attn=attn, x=x, at=at):
            nonlocal first
            if first and problem is None and got is None:
                return none_returned(fn)
            first = False
            return _step_problem(attn, x, next(at), got, problem, *rest)
        verdict = _run_steps(fn, attn, x, prefix, seed is not None, on_step)
        if verdict is not None:
            return verdict
    return None


def _checked_step(fn, judge):
    """`check_answer` with decode_step's words: in the kernel and in `make grade`'s process."""
    return check_answer(
        fn, judge, name="decode_step", reference=reference_step,
        success="matches recomputing the whole prefix at 5 positions of two grouped-query "
                "layers (one rotary), and appends one position per step",
        todo="not attempted yet; write your function above and run the cell again.",
        hint=("the new token's key and value must be in the cache before its query looks at "
              "the cache; the query heads outnumber the key/value heads.",
              "project (at position len(cache)), append, give each query head the key/value "
              "head of its group, attend, merge the heads, project out."))


@exercise("implement")
def decode_step(fn):
    """Your `fn(attn, x_t, cache) -> (B, 1, d_model)` for a grouped-query layer and a rotary
    multi-query one, step after step, against recomputing the whole prefix. Returns `fn` when
    it is right at every step, else `attnlab.core.kv_cache.decode_step`. `make grade` judges
    it in two halves (`_Decode`)."""
    return _checked_step(fn, _judge_step)


class _Decode:
    """`decode_step` in `make grade`'s two halves (`grading.split`): the grader's process draws
    the layers (shipped as their weights) and the tokens from its seed; the kernel runs the
    student's step after step on a cache it keeps there, attnlab's step refusing, and ships
    each step's output, the cache's length before and after, its keys and values before the
    step and the shapes appended (`calls`); the outputs are compared with recomputing the
    prefix, and the named mistake found, in the grader's process (`judged`)."""
    name = "decode_step"

    def made(self, seed: int | None = None) -> list[tuple]:
        return _decode_cases(*([] if seed is None else [seed]))

    def expected(self, made: list[tuple]) -> None:
        return None  # each step's reference is computed as it is judged (`_step_problem`)

    def seconds_for(self, n: int) -> float:
        return 5 * TIME_LIMIT_S + CHECK_WORK_S

    def calls(self, fn, made: list[tuple]):
        """The kernel's half: per case, the steps up to the first call that fails."""
        if not callable(fn):
            return f"expected a function, got {_kind(fn)}"
        done: list[tuple] = []
        for attn, x, prefix in made:
            steps: list[tuple] = []

            def on_step(got, problem, *rest, steps=steps):
                if not done and not steps and problem is None and got is None:
                    return none_returned(fn)
                steps.append((got, problem, *rest))
                return problem
            verdict = _run_steps(fn, attn, x, prefix, True, on_step)
            if isinstance(verdict, Verdict):
                return verdict
            done.append((steps, (attn, x.clone(), prefix), None, {}))
            if verdict is not None:
                break
        return done

    def judged(self, done, made: list[tuple], expected_all: None):
        """The grader's half: `decode_step`'s line on the steps handed back."""
        def judge(_):
            if not isinstance(done, list):
                return done
            for (attn, x, prefix), (steps, _, _, _) in zip(made, done):
                for t, (got, problem, before, after, past_k, past_v, appended) in zip(
                        range(prefix, x.shape[1]), steps):
                    problem = _step_problem(attn, x, t, got, problem, int(before), int(after),
                                            past_k, past_v, [tuple(s) for s in appended])
                    if problem is not None:
                        return problem
                if len(steps) < x.shape[1] - prefix:
                    return "your notebook handed back fewer results than the check asked for"
            if len(done) < len(made):
                return "your notebook handed back fewer results than the check asked for"
            return None
        return _checked_step(... if done is ... else _IN_KERNEL, judge)


decode_step.split = _Decode()


# --- the KV cache's bytes per token --------------------------------------------------------------

# (n_layers, d_model, n_heads, n_kv_heads, bytes_per_number), one configuration per column, made
# up so that each missing or wrong factor gives other numbers than every other mistake
_CONFIGS = torch.tensor([[3, 5, 2, 7],
                         [40, 96, 48, 64],
                         [8, 12, 6, 16],
                         [2, 3, 6, 1],
                         [4, 2, 1, 2]])


def _configs(seed: int | None = None) -> list[tuple[torch.Tensor, ...]]:
    """The table `bytes_per_token` is called on: `_CONFIGS`, or under a grader's `seed` four
    configurations drawn from it, unseen by the student (n_kv_heads divides n_heads, which
    divides d_model)."""
    if seed is None:
        return [tuple(_CONFIGS)]
    g = torch.Generator().manual_seed(seed)
    n_kv = torch.randint(1, 5, (4,), generator=g)  # (4,)
    n_heads = n_kv * torch.randint(1, 5, (4,), generator=g)  # (4,)
    d_model = n_heads * torch.randint(2, 33, (4,), generator=g)  # (4,)
    layers, size = torch.randint(2, 41, (4,), generator=g), torch.randint(1, 5, (4,), generator=g)
    return [(layers, d_model, n_heads, n_kv, size)]


def _bytes_reference(n_layers, d_model, n_heads, n_kv_heads, bytes_per_number):
    """`kv_cache.bytes_per_token` for each configuration of a table whose columns are tensors."""
    columns = zip(n_layers.tolist(), d_model.tolist(), n_heads.tolist(), n_kv_heads.tolist(),
                  bytes_per_number.tolist())
    return torch.tensor([reference_bytes(layers, kv, d // heads, size)
                         for layers, d, heads, kv, size in columns])  # (n_configs,) int64


def _bytes_problem(got, expected, *_) -> str | None:
    """The comparison of whole numbers: equal, with both lists shown where they are not."""
    if not alike(got, expected):
        return tensor_problem(got, expected, name="your result")
    return None if torch.equal(got, expected) else \
        f"your result {got.tolist()} differs from the reference {expected.tolist()}"


bytes_per_token = Implement(
    "bytes_per_token", _bytes_reference, _configs, refuse=(reference_bytes,),
    compare=_bytes_problem,
    success=f"matches attnlab's kv_cache.bytes_per_token on {_CONFIGS.shape[1]} configurations",
    mistakes=[
        When(lambda got, expected, *_: isinstance(got, torch.Tensor)
             and got.shape == expected.shape and got.is_floating_point(),
             lambda got, expected, *_: f"your result has dtype {got.dtype}, expected "
                                       f"{expected.dtype}: bytes are whole numbers (d_model / "
                                       "n_heads with / gives floats; // divides whole numbers)",
             example=lambda L, d, H, kv, size: 2 * L * kv * (d / H) * size),
        Like(lambda L, d, H, kv, size: L * kv * (d // H) * size,
             "the factor 2 is missing: each token stores a key AND a value"),
        Like(lambda L, d, H, kv, size: 2 * kv * (d // H) * size,
             "the layers are missing: every layer keeps its own keys and values"),
        Like(lambda L, d, H, kv, size: 2 * L * H * (d // H) * size,
             "it uses the query heads' count: the cache stores only the n_kv_heads key/value "
             "heads"),
        Like(lambda L, d, H, kv, size: 2 * L * kv * d * size,
             "each key/value head holds d_model / n_heads numbers, not d_model"),
        Like(lambda L, d, H, kv, size: 2 * L * kv * (d // H),
             "that counts numbers, not bytes: multiply by bytes_per_number"),
    ],
    hint=("count what one token leaves in the cache of one layer, then in all of them.",
          "per layer: a key and a value for each key/value head, each of d_model / n_heads "
          "numbers; then the layers, then the bytes of a number."))


# --- the online softmax --------------------------------------------------------------------------

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


def _update(m, total, acc, scores, v_block, *, running=True, rescale=True):
    """The update as a student may write it: right with the defaults; `running=False` takes the
    block's max for the new max, `rescale=False` adds to the old total and acc as they are."""
    block_max = scores.amax(dim=-1, keepdim=True)  # (..., T_q, 1)
    m_new = torch.maximum(m, block_max) if running else block_max
    factor = torch.exp(m - m_new) if rescale else 1.0  # (..., T_q, 1)
    p = torch.exp(scores - m_new)  # (..., T_q, block)
    return m_new, total * factor + p.sum(dim=-1, keepdim=True), acc * factor + p @ v_block


def _compared(got, expected, *_) -> str:
    """The comparison's own words: a mistake that these inputs catch but that is not named."""
    return result_problem(got, expected)


online_update = Implement(
    "online_update", reference_update, _update_inputs,
    mistakes=[Like(lambda *a: _update(*a, rescale=False), _compared),
              Like(lambda *a: _update(*a, running=False), _compared)],
    hint=("when a block brings a larger score, what happens to the totals you summed "
          "against the old max?",
          "the new max is the larger of the old max and the block's largest score; the old "
          "total and acc were computed against the old max, so both need the factor "
          "exp(old max - new max) before the block's terms are added."))

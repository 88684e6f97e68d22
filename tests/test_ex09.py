"""Notebook 09's exercises: right answers written in other ways, the predict check's cases,
decode_step's mistakes (a hand-written check, outside the tables) and what the tables of the
declared checks do not hold (the tables: tests/test_exercises.py; hostile answers: there too)."""
import torch
from exercise_doubles import expect

import attnlab
from attnlab.core import kv_cache, online_softmax
from attnlab.core.attention import merge_heads, split_heads
from attnlab.exercises import ex09, grading

# The first torch.broadcast_shapes of a process imports sympy (about a second): done here, so
# that the first check below does not spend its time limits (0.3 s per call here) on it.
attnlab.scaled_dot_product_attention(*torch.zeros(3, 1, 2, 2))


def test_flop_ratios(capsys):
    measured = [16.0, 4.0, 8.0]  # what notebook 09 counts: score part, projections, whole layer
    got = expect(capsys, ex09.flop_ratios, [[16, 4, 8], torch.tensor(measured)], "✎",
                 "; measured 16.0, 4.0, 8.0 (within 1). Scores pair every query", measured)
    assert got == [None, None]
    # the whole layer as all score part
    expect(capsys, ex09.flop_ratios, [[16, 4, 16]], "✎", "(8.0 apart at most) (written after",
           measured)


# --- decode_step (implement) ----------------------------------------------------------------

def step(attn, x_t, cache, *, position=None, append_first=True, out=True, split=None,
         expand=False, tile=False):
    """One decoding step, right by default. `position` rotates the new token there instead of at
    len(cache); `append_first=False` attends over the cache before the append; `out=False` skips
    the output projection; `split="query"` splits k and v into the query heads' count;
    `expand=True` appends keys already repeated for every query head; `tile=True` repeats the
    shared heads as a block."""
    G = attn.n_heads // attn.n_kv_heads
    if split == "query":
        q, k, v = (split_heads(lin(x_t), attn.n_heads) for lin in (attn.q, attn.k, attn.v))
    else:
        at = len(cache) if position is None else position(len(cache))
        q, k, v = attn.project(x_t, positions=torch.tensor([at]))
    if expand:
        k, v = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
    if append_first:
        keys, values = cache.append(k, v)  # (B, H_kv, t, D)
    else:
        keys, values = cache.keys[:, :, :len(cache)], cache.values[:, :, :len(cache)]
        cache.append(k, v)
    if keys.shape[1] != attn.n_heads:
        repeat = (lambda t: t.repeat(1, G, 1, 1)) if tile else (lambda t: t.repeat_interleave(G, 1))
        keys, values = repeat(keys), repeat(values)  # (B, H, t, D)
    heads, _ = attnlab.scaled_dot_product_attention(q, keys, values)  # (B, H, 1, D)
    merged = merge_heads(heads)  # (B, 1, d_model)
    return attn.out(merged) if out else merged


def with_attend(attn, x_t, cache):
    q, k, v = attn.project(x_t, positions=torch.tensor([len(cache)]))
    return attn.attend(q, *cache.append(k, v))[0]


def on_a_copy(attn, x_t, cache):
    """The right output, computed on a copy of the cache: the real one never grows."""
    B, H_kv, max_len, D = cache.keys.shape
    copy = kv_cache.KVCache(B, H_kv, D, max_len)
    copy.append(cache.keys[:, :, :len(cache)], cache.values[:, :, :len(cache)])
    return kv_cache.decode_step(attn, x_t, copy)


def test_decode_step(capsys):
    answers = [step, with_attend, kv_cache.decode_step]
    assert expect(capsys, ex09.decode_step, answers, "✓",
                  "matches recomputing the whole prefix at 5 positions") == answers
    for mistake, words in [
        (dict(append_first=False), "before this token's key and value are in it: the token "
                                   "cannot see itself"),
        (dict(out=False), "the output projection attn.out is missing"),
        (dict(split="query"), "you appended keys with n_heads = 4 heads to the cache of a layer "
                              "with n_kv_heads = 2"),
        (dict(expand=True), "you appended keys with n_heads = 4 heads"),
        (dict(tile=True), "repeated in the wrong order"),
        (dict(position=lambda t: 0), "rotated as if at position 0"),
        (dict(position=lambda t: t + 1), "one position too far"),
    ]:
        def answer(attn, x_t, cache, mistake=mistake):
            return step(attn, x_t, cache, **mistake)

        assert expect(capsys, ex09.decode_step, [answer], "✗", words) == [kv_cache.decode_step]
    expect(capsys, ex09.decode_step, [on_a_copy], "✗",  # the token never reaches the cache
           "the output is right but the cache went from 3 to 3 positions")
    expect(capsys, ex09.decode_step, [lambda *a: step(*a).double()], "✗",
           "your output has dtype torch.float64, expected torch.float32")


def test_decode_step_graded_on_fresh_layers_refuses_attnlabs():
    assert grading.judge("ex09.decode_step", lambda: step, seed=5)[0] == "✓"
    mark, _, message = grading.judge("ex09.decode_step", lambda: kv_cache.decode_step, seed=5)
    assert mark == "✗" and "attnlab's own version was called" in message, message


# --- bytes_per_token (implement) ---------------------------------------------------------------

def per_token(n_layers, d_model, n_heads, n_kv_heads, size, two=2):
    return two * n_layers * n_kv_heads * (d_model // n_heads) * size


def test_bytes_per_token(capsys):
    assert expect(capsys, ex09.bytes_per_token, [per_token], "✓",
                  "matches attnlab's kv_cache.bytes_per_token on 4 configurations") == [per_token]
    expect(capsys, ex09.bytes_per_token, [lambda *c: per_token(*c, two=3)], "✗",  # no named one
           "your result [360, 720, 288, 168] differs from the reference [240, 480, 192, 112]")
    # the reference the check falls back on: the notebook's 7B-style stack with 8 KV heads
    columns = [torch.tensor([c]) for c in (32, 4096, 32, 8, 2)]
    assert ex09._bytes_reference(*columns).tolist() == [128 * 1024]  # 8 KV heads: a quarter


# --- online_update (implement) -------------------------------------------------------------

def update(m, total, acc, scores, v_block, *, wrong_way=False):
    """The update, right by default; `wrong_way` rescales by exp(new max - old max)."""
    m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
    factor = torch.exp(m_new - m if wrong_way else m - m_new)
    p = torch.exp(scores - m_new)
    return m_new, total * factor + p.sum(dim=-1, keepdim=True), acc * factor + p @ v_block


def test_online_update(capsys):
    answers = [update, online_softmax.online_update]
    assert expect(capsys, ex09.online_update, answers, "✓",
                  "online_update: matches attnlab's version on 3 random inputs.") == answers
    for answers, words in [
        ([lambda *a: update(*a, wrong_way=True)], "contains NaN or inf"),  # exp(+inf) at first
        ([lambda *a: update(*a)[2] / update(*a)[1],  # the output, not the state
          lambda *a: update(*a)[:2]], "should return a tuple of 3 tensors"),
    ]:
        got = expect(capsys, ex09.online_update, answers, "✗", words)
        assert got == [online_softmax.online_update] * len(got), words

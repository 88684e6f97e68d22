"""Notebook 08's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import torch
from exercise_doubles import expect

import attnlab
from attnlab import kv_cache, online_softmax
from attnlab.attention import merge_heads, split_heads
from attnlab.exercises import ex08

# The first torch.broadcast_shapes of a process imports sympy (about a second): done here, so
# that the first check below does not spend its time limits (0.3 s per call here) on it.
attnlab.scaled_dot_product_attention(*torch.zeros(3, 1, 2, 2))


def test_flop_ratios(capsys):
    measured = [16.0, 4.0, 8.0]  # what notebook 08 counts: score part, projections, whole layer
    got = expect(capsys, ex08.flop_ratios, [[16, 4, 8], torch.tensor(measured)], "✎",
                 "; measured 16.0, 4.0, 8.0 (within 1). Scores pair every query", measured)
    assert got == [None, None]
    # the whole layer as all score part
    expect(capsys, ex08.flop_ratios, [[16, 4, 16]], "✎", "(8.0 apart at most) (written after",
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


def test_decode_step_right(capsys):
    answers = [step, with_attend, kv_cache.decode_step]
    got = expect(capsys, ex08.decode_step, answers, "✓",
                 "matches recomputing the whole prefix at 5 positions")
    assert got == answers


def test_decode_step_names_each_classic_mistake(capsys):
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

        got = expect(capsys, ex08.decode_step, [answer], "✗", words)
        assert got == [kv_cache.decode_step], words
    expect(capsys, ex08.decode_step, [on_a_copy], "✗",  # the token never reaches the cache
           "the output is right but the cache went from 3 to 3 positions")


# --- bytes_per_token (implement) ---------------------------------------------------------------

def per_token(n_layers, d_model, n_heads, n_kv_heads, size, *, kv=True, two=2, layers=True,
              head=True, use_bytes=True):
    """The bytes per token, right by default; each switch leaves out (or mistakes) one factor."""
    d_head = d_model // n_heads if head else d_model
    return (two * (n_layers if layers else 1) * (n_kv_heads if kv else n_heads) * d_head
            * (size if use_bytes else 1))


def test_bytes_per_token_right_and_the_reference_is_attnlabs(capsys):
    got = expect(capsys, ex08.bytes_per_token, [per_token], "✓",
                 "matches attnlab's kv_cache.bytes_per_token on 4 configurations")
    assert got == [per_token]
    # the reference the check falls back on: the notebook's 7B-style stack with 8 KV heads
    columns = [torch.tensor([c]) for c in (32, 4096, 32, 8, 2)]
    assert ex08._bytes_reference(*columns).tolist() == [128 * 1024]  # 8 KV heads: a quarter


def test_bytes_per_token_names_each_typical_mistake(capsys):
    for mistake, words in [
        (dict(two=1), "the factor 2 is missing: each token stores a key AND a value"),
        (dict(layers=False), "the layers are missing"),
        (dict(kv=False), "it uses the query heads' count"),
        (dict(head=False), "holds d_model / n_heads numbers, not d_model"),
        (dict(use_bytes=False), "that counts numbers, not bytes"),
        (dict(two=3), "your result [360, 720, 288, 168] differs from the reference"),
    ]:
        def answer(*columns, mistake=mistake):
            return per_token(*columns, **mistake)

        got = expect(capsys, ex08.bytes_per_token, [answer], "✗", words)
        assert got == [ex08._bytes_reference], words

    def divided(n_layers, d_model, n_heads, n_kv_heads, size):  # / where // belongs
        return 2 * n_layers * n_kv_heads * (d_model / n_heads) * size

    expect(capsys, ex08.bytes_per_token, [divided], "✗", "// divides whole numbers")


# --- online_update (implement) -------------------------------------------------------------

def update(m, total, acc, scores, v_block, *, running_max=True, rescale=1):
    """The update, right by default; `running_max=False` uses the block's max only, `rescale`
    0 forgets the old terms' rescaling and -1 rescales the wrong way."""
    block_max = scores.amax(dim=-1, keepdim=True)
    m_new = torch.maximum(m, block_max) if running_max else block_max
    factor = {1: torch.exp(m - m_new), 0: 1.0, -1: torch.exp(m_new - m)}[rescale]
    p = torch.exp(scores - m_new)
    return m_new, total * factor + p.sum(dim=-1, keepdim=True), acc * factor + p @ v_block


def test_online_update_right_answers(capsys):
    answers = [update, online_softmax.online_update]
    got = expect(capsys, ex08.online_update, answers, "✓",
                 "online_update: matches attnlab's version on 3 random inputs.")
    assert got == answers


def test_online_update_names_each_typical_mistake(capsys):
    for answers, words in [
        ([lambda *a: update(*a, rescale=0), lambda *a: update(*a, running_max=False)],
         "differs from the reference"),
        ([lambda *a: update(*a, rescale=-1)], "contains NaN or inf"),  # exp(+inf) at the start
        ([lambda *a: update(*a)[2] / update(*a)[1],  # the output, not the state
          lambda *a: update(*a)[:2]], "should return a tuple of 3 tensors"),
    ]:
        got = expect(capsys, ex08.online_update, answers, "✗", words)
        assert got == [online_softmax.online_update] * len(got), words

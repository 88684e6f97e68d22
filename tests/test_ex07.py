"""Notebook 07's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.)"""
import torch
import torch.nn.functional as F
from exercise_doubles import expect

import attnlab
from attnlab.exercises import ex07
from attnlab.generation import filter_logits

# --- padding_and_causal (implement) ------------------------------------------------------------

def both(real):  # (B, 1, T, T)
    return real[:, None, None, :] & attnlab.causal_mask(real.shape[1])


def causal(real):
    return attnlab.causal_mask(real.shape[1])  # (T, T)


def keys(real):
    return real[:, None, None, :]  # (B, 1, 1, T)


def test_padding_and_causal_right_answers(capsys):
    answers = [both, lambda r: both(r).expand(-1, 3, -1, -1),  # one copy per head of the scores
               lambda r: torch.tril(keys(r).expand(-1, 1, r.shape[1], -1))]
    got = expect(capsys, ex07.padding_and_causal, answers, "✓",
                 "padding_and_causal: matches the reference on 2 padded batches, after "
                 "broadcasting to (B, H, T, T).")
    assert got == answers


def test_padding_and_causal_names_each_typical_mistake(capsys):
    real = torch.tensor([[True, True, False]])
    for answers, words in [
        ([lambda r: r[:, None, :, None] & causal(r)], "the padding mask is on the query side"),
        ([lambda r: keys(r) & causal(r).T], "see the future, not the past"),
        ([lambda r: keys(r) | causal(r)], "combined with |"),
        ([lambda r: r[:, None, :] & causal(r), lambda r: (r[:, None, :] & causal(r))[None]],
         "does not broadcast to (B, H, T, T) = (2, 3, 5, 5)"),
        ([lambda r: ~both(r)], "True where attention is forbidden"),
        ([lambda r: r[:, None, :, None] & both(r)], "also hides the padding queries' rows"),
        ([causal], "only the causal part"),
        ([keys], "only the padding part"),
        ([lambda r: both(r).float(), lambda r: torch.zeros(1).masked_fill(~both(r), -1e9)],
         "dtype torch.float32, expected torch.bool"),  # 0/1, or an additive mask
    ]:
        got = expect(capsys, ex07.padding_and_causal, answers, "✗", words)
        assert torch.equal(got[0](real), both(real)), words  # the reference comes back


# --- next_token_loss (implement) -----------------------------------------------------------------

def flat(model, seqs):
    logits = model(seqs[:, :-1])  # (B, T - 1, V)
    return F.cross_entropy(logits.flatten(0, 1), seqs[:, 1:].flatten())


def per_sequence(model, seqs):  # the mean of per-sequence means: the same for equal lengths
    losses = F.cross_entropy(model(seqs[:, :-1]).transpose(1, 2), seqs[:, 1:], reduction="none")
    return losses.mean(1).mean()


def ce(logits, targets, reduction="mean"):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction=reduction)


def test_next_token_loss_right_answers(capsys):
    answers = [flat, per_sequence,
               lambda m, s: F.cross_entropy(m(s[:, :-1]).transpose(1, 2), s[:, 1:])]
    got = expect(capsys, ex07.next_token_loss, answers, "✓",
                 "next_token_loss: your loss is attnlab's next_token_loss, on two batches of "
                 "sequences.")
    assert got == answers


def test_next_token_loss_names_each_typical_mistake(capsys):
    for answers, words in [
        ([lambda m, s: ce(m(s[:, :-1]), s[:, :-1]), lambda m, s: ce(m(s), s)],
         "the targets are not shifted"),
        ([lambda m, s: ce(m(s[:, 1:]), s[:, :-1]), lambda m, s: ce(m(s[:, :-2]), s[:, 2:])],
         "misaligned by one the other way"),
        ([lambda m, s: ce(m(s[:, :-1]), s[:, 1:], "sum")], "the sum over every position"),
        ([lambda m, s: ce(m(s[:, :-1]), s[:, 1:], "sum") / len(s)],
         "sums over the positions of each sequence"),
        ([lambda m, s: ce(m(s[:, :-1]), s[:, 1:], "sum") / (s.shape[1] - 1)],
         "sums over the sequences"),
        ([lambda m, s: ce(m(s[:, -2:-1]), s[:, -1:])], "your loss is"),  # no context at all
        ([lambda m, s: ce(m(s[:, :-1])[:, -1:], s[:, -1:])], "only the last position"),
        ([lambda m, s: flat(m, s).item()], "a Python number (.item()?)"),
    ]:
        got = expect(capsys, ex07.next_token_loss, answers, "✗", words)
        assert got == [attnlab.generation.next_token_loss] * len(got), words


# --- top_p_filter (implement) --------------------------------------------------------------------

def nucleus(logits, p):
    probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
    ahead = probs.cumsum(-1) - probs
    drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, ahead >= p)
    return logits.masked_fill(drop, float("-inf"))


def nucleus_by_loop(logits, p):  # row by row, token by token: slow but right
    out = torch.full_like(logits, float("-inf"))
    for row, probs in enumerate(torch.softmax(logits, dim=-1)):
        total = 0.0
        for token in probs.argsort(descending=True).tolist():
            out[row, token] = logits[row, token]
            total += probs[token].item()
            if total >= p:
                break
    return out


def in_place(logits, p):
    logits[~torch.isfinite(nucleus(logits, p))] = float("-inf")
    return logits


def test_top_p_filter_right_answers(capsys):
    answers = [nucleus, nucleus_by_loop, lambda x, p: filter_logits(x, top_p=p)]
    got = expect(capsys, ex07.top_p_filter, answers, "✓",
                 "top_p_filter: matches attnlab's filter_logits(top_p=p) on 3 batches of logits.")
    assert got == answers


def cumulate_logits(x, p):
    values, order = x.sort(-1, descending=True)
    drop = values.cumsum(-1) - values >= p
    return x.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))


def ascending(x, p):
    probs, order = torch.softmax(x, -1).sort(-1)
    drop = probs.cumsum(-1) - probs >= p
    return x.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))


def test_top_p_filter_names_each_typical_mistake(capsys):
    for answer, words in [
        (lambda x, p: x.masked_fill(torch.zeros_like(x, dtype=torch.bool).scatter(
            -1, x.argsort(-1, descending=True),
            torch.softmax(x, -1).sort(-1, descending=True).values.cumsum(-1) > p),
            float("-inf")), "stops before the token that crosses p"),
        (lambda x, p: nucleus(x, p).sort(-1, descending=True).values, "in sorted order"),
        (lambda x, p: torch.where(torch.isinf(nucleus(x, p)), 0.0, x), "logit 0"),
        (lambda x, p: torch.softmax(nucleus(x, p), -1), "looks like probabilities"),
        (lambda x, p: x.clone(), "returns the logits unchanged"),
        (lambda x, p: nucleus(x, min(1.0, p + 0.3)), "keeps"),  # a larger nucleus
        (in_place, "changed the logits it was given (in place)"),
        (cumulate_logits, "adds up logits"),
        (ascending, "least likely tokens"),
    ]:
        expect(capsys, ex07.top_p_filter, [answer], "✗", words)


# --- temperature (predict) -----------------------------------------------------------------------

def test_temperature_predictions(capsys):
    expect(capsys, ex07.temperature_accuracy, [[0.95, 0.1]], "✎",
           "measured 1.000, 0.164 (within 0.15). Dividing the logits by 0.1", [1.0, 0.164])
    expect(capsys, ex07.temperature_accuracy, [[0.5, 0.1]], "✎", "(0.500 apart at most)",
           [1.0, 0.164])
    expect(capsys, ex07.temperature_diversity, [[1, 9]], "✎", "measured 1.00, 10.00 (within 2)",
           [1.0, 10.0])
    expect(capsys, ex07.temperature_diversity, [[1, 5, 10]], "○", "expected 2 numbers, got 3",
           [1.0, 10.0])



# --- decoder_block (implement) -------------------------------------------------------------------

def written_out(block, x, context, mask):
    a, _ = block.self_attn(x, mask)
    x = block.norm1(x + a)
    if context is not None:
        c, _ = block.cross_attn(x, context=context)
        x = block.norm2(x + c)
    return block.norm3(x + block.ff(x))


def without_residual(block, x, context, mask):
    x = block.norm1(block.self_attn(x, mask)[0])
    if context is not None:
        x = block.norm2(block.cross_attn(x, context=context)[0])
    return block.norm3(block.ff(x))


def pre_norm(block, x, context, mask):
    x = x + block.self_attn(block.norm1(x), mask)[0]
    if context is not None:
        x = x + block.cross_attn(block.norm2(x), context=context)[0]
    return x + block.ff(block.norm3(x))


def swapped_cross(block, x, context, mask):
    x = block.norm1(x + block.self_attn(x, mask)[0])
    if context is not None:
        x = block.norm2(context + block.cross_attn(context, context=x)[0])
    return block.norm3(x + block.ff(x))


def cross_first(block, x, context, mask):
    if context is not None:
        x = block.norm2(x + block.cross_attn(x, context=context)[0])
    x = block.norm1(x + block.self_attn(x, mask)[0])
    return block.norm3(x + block.ff(x))


def test_decoder_block_right_answers(capsys):
    answers = [written_out, lambda b, x, c, m: b(x, c, mask=m)[0]]
    got = expect(capsys, ex07.decoder_block, answers, "✓",
                 "decoder_block: your block is attnlab's DecoderBlock, with and without "
                 "cross-attention.")
    assert got == answers


def test_decoder_block_names_each_typical_mistake(capsys):
    for answer, words in [
        (without_residual, "the residual connections are missing"),
        (pre_norm, "this is pre-norm"),
        (lambda b, x, c, m: written_out(b, x, c, None), "your self-attention has no mask"),
        (lambda b, x, c, m: written_out(b, x, None, m), "the cross-attention is missing"),
        (cross_first, "cross-attention comes before self-attention"),
        (swapped_cross, "the queries come from x (the target)"),
        (lambda b, x, c, m: b(x, c, mask=m), "return only the new x"),
        (lambda b, x, c, m: written_out(b, x, c, m) + 1e-6, "differs from the reference"),
    ]:
        expect(capsys, ex07.decoder_block, [answer], "✗", words)


# --- predict: which encodings survive twice the length -------------------------------------------

def test_survivors(capsys):
    expect(capsys, ex07.survivors, [{"rotary"}, ["rotary"], "rotary"], "✎",
           "you predicted {rotary}; measured {rotary}. A", {"rotary"})
    expect(capsys, ex07.survivors, [{"rotary", "sinusoidal"}, set()], "✎",
           "measured {rotary} (written after the measurement was shown). A rotary score",
           {"rotary"})
    for answers, words in [
        ([{"rotary", "alibi"}], "'alibi' is not one of the encodings"),
        ([0.9], "expected a set of encoding names, got a float"),
    ]:
        expect(capsys, ex07.survivors, answers, "○", words, {"rotary"})

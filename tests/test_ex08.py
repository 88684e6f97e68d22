"""Notebook 08's exercises: right answers written in other ways, and the cases the tables of
mistakes do not hold (the tables: tests/test_exercises.py; hostile answers: there too)."""
import torch
import torch.nn.functional as F
from exercise_doubles import expect

import attnlab
from attnlab.core.generation import filter_logits
from attnlab.exercises import ex08


def both(real):  # (B, 1, T, T)
    return real[:, None, None, :] & attnlab.causal_mask(real.shape[1])


def test_padding_and_causal(capsys):
    answers = [both, lambda r: both(r).expand(-1, 3, -1, -1),  # one copy per head of the scores
               lambda r: torch.tril(r[:, None, None, :].expand(-1, 1, r.shape[1], -1))]
    assert expect(capsys, ex08.padding_and_causal, answers, "✓",
                  "padding_and_causal: matches the reference on 2 padded batches, after "
                  "broadcasting to (B, H, T, T).") == answers
    causal = attnlab.causal_mask
    for answers, words in [
        ([lambda r: r[:, None, :] & causal(r.shape[1]),
          lambda r: (r[:, None, :] & causal(r.shape[1]))[None]],
         "does not broadcast to (B, H, T, T) = (2, 3, 5, 5)"),
        ([lambda r: both(r).float(), lambda r: torch.zeros(1).masked_fill(~both(r), -1e9)],
         "dtype torch.float32, expected torch.bool"),  # 0/1, or an additive mask
        ([lambda r: both(r) & (torch.rand(r.shape[1], r.shape[1]) > 2)], "differs from the "
                                                                          "reference in"),
    ]:
        expect(capsys, ex08.padding_and_causal, answers, "✗", words)


def ce(logits, targets, reduction="mean"):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction=reduction)


def test_next_token_loss(capsys):
    answers = [lambda m, s: ce(m(s[:, :-1]), s[:, 1:]),
               lambda m, s: F.cross_entropy(m(s[:, :-1]).transpose(1, 2), s[:, 1:]),
               lambda m, s: F.cross_entropy(m(s[:, :-1]).transpose(1, 2), s[:, 1:],
                                            reduction="none").mean(1).mean()]
    assert expect(capsys, ex08.next_token_loss, answers, "✓",
                  "next_token_loss: your loss is attnlab's next_token_loss, on two batches of "
                  "sequences.") == answers
    expect(capsys, ex08.next_token_loss, [lambda m, s: ce(m(s[:, -2:-1]), s[:, -1:])], "✗",
           "your loss is")  # no context at all: no named mistake


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
    logits[~torch.isfinite(filter_logits(logits, top_p=p))] = float("-inf")
    return logits


def test_top_p_filter(capsys):
    answers = [nucleus_by_loop, lambda x, p: filter_logits(x, top_p=p)]
    assert expect(capsys, ex08.top_p_filter, answers, "✓",
                  "top_p_filter: matches attnlab's filter_logits(top_p=p) on 3 batches of "
                  "logits.") == answers
    for answer, words in [
        (lambda x, p: filter_logits(x, top_p=min(1.0, p + 0.3)), "keeps"),  # a larger nucleus
        (in_place, "changed the logits it was given (in place)"),
    ]:
        expect(capsys, ex08.top_p_filter, [answer], "✗", words)


def test_temperature_predictions(capsys):
    expect(capsys, ex08.temperature_accuracy, [[0.95, 0.1]], "✎",
           "measured 1.000, 0.164 (within 0.15). Dividing the logits by 0.1", [1.0, 0.164])
    expect(capsys, ex08.temperature_accuracy, [[0.5, 0.1]], "✎", "(0.500 apart at most)",
           [1.0, 0.164])
    expect(capsys, ex08.temperature_diversity, [[1, 9]], "✎", "measured 1.00, 10.00 (within 2)",
           [1.0, 10.0])
    expect(capsys, ex08.temperature_diversity, [[1, 5, 10]], "○", "expected 2 numbers, got 3",
           [1.0, 10.0])


def written_out(block, x, context, mask):
    a, _ = block.self_attn(x, mask)
    x = block.norm1(x + a)
    if context is not None:
        c, _ = block.cross_attn(x, context=context)
        x = block.norm2(x + c)
    return block.norm3(x + block.ff(x))


def test_decoder_block(capsys):
    answers = [written_out, lambda b, x, c, m: b(x, c, mask=m)]
    assert expect(capsys, ex08.decoder_block, answers, "✓",
                  "decoder_block: your block is attnlab's DecoderBlock, with and without "
                  "cross-attention.") == answers
    expect(capsys, ex08.decoder_block, [lambda b, x, c, m: written_out(b, x, c, m) + 1e-6], "✗",
           "differs from the reference")


def test_survivors(capsys):
    expect(capsys, ex08.survivors, [{"rotary"}, ["rotary"], "rotary"], "✎",
           "you predicted {rotary}; measured {rotary}. A", {"rotary"})
    expect(capsys, ex08.survivors, [{"rotary", "sinusoidal"}, set()], "✎",
           "measured {rotary} (written after the measurement was shown). A rotary score",
           {"rotary"})
    for answers, words in [
        ([{"rotary", "alibi"}], "'alibi' is not one of the encodings"),
        ([0.9], "expected a set of encoding names, got a float"),
    ]:
        expect(capsys, ex08.survivors, answers, "○", words, {"rotary"})

"""Notebook 07's exercises: right answers written in other ways, the explore and predict checks'
cases, and what the tables of mistakes do not hold (the tables: tests/test_exercises.py; hostile
answers: there too). A stand-in for `attention_maps` for the checks; MiniLM (0.5 s to load) for
the measurements behind them (`encode_without_key`, `reliability`) and one real minimal pair."""
import numpy as np
import pytest
import torch
from exercise_doubles import expect

from attnlab.core.attention import scaled_dot_product_attention
from attnlab.exercises import ex07
from attnlab.lessons.sentiment import encode_without_key, reliability


def test_uniform_cosine(capsys):
    expect(capsys, ex07.uniform_cosine, [0.5], "✎",
           "; measured 0.44 (within 0.15). With every weight equal", 0.439)
    expect(capsys, ex07.uniform_cosine, [0.95], "✎",  # "attention only fine-tunes the vectors"
           "(0.51 apart) (written after", 0.439)


def right(q, k, v, key, how):
    hidden = torch.arange(k.shape[-2]) == key[:, None]  # (B, S)
    if how == "mask":
        return scaled_dot_product_attention(q, k, v, ~hidden[:, None, None, :])[0]
    return scaled_dot_product_attention(q, k, v * ~hidden[:, None, :, None])[0]


def value_as_column(q, k, v, key, how):
    """"value" done as zeroing the column after the softmax: the same output, so right."""
    if how == "mask":
        return right(q, k, v, key, how)
    _, w = scaled_dot_product_attention(q, k, v)
    return w.masked_fill((torch.arange(k.shape[-2]) == key[:, None])[:, None, None, :], 0.0) @ v


def test_without_key(capsys):
    answers = [right, value_as_column]
    assert expect(capsys, ex07.without_key, answers, "✓",
                  "without_key: matches attnlab's version on 6 random inputs.") == answers
    expect(capsys, ex07.without_key, [lambda q, k, v, key, how: right(q, k, v, key, "mask")],
           "✗", 'your output for how="value" differs from the reference')  # `how` ignored


# --- explore: a minimal pair ----------------------------------------------------------------------

PAIR, CANDIDATES, HEAD, MAPS = ex07.minimal_pair.exercise.args()  # a stand-in for MiniLM's maps


def weights_of(head=HEAD, read_from=False):  # what "it" puts on each candidate (or the reverse)
    rows = []
    for sentence in PAIR:
        tokens, maps = MAPS(sentence)
        w = maps[head[0]][0, head[1]]  # (T, T)
        w = w.T if read_from else w
        rows.append([float(w[tokens.index("it"), tokens.index(c)]) for c in CANDIDATES])
    return rows


def test_minimal_pair_recomputes_the_students_weights(capsys):
    ok = weights_of()
    moved = (ok[1][1] - ok[1][0]) - (ok[0][1] - ok[0][0])
    got = expect(capsys, ex07.minimal_pair, [ok, np.array(ok), torch.tensor(ok)], "✓",
                 f"the one word moved it by {moved:+.2f} towards 'cat'",
                 PAIR, CANDIDATES, HEAD, MAPS)
    assert got[0] is ok
    reference = ex07.minimal_pair(..., PAIR, CANDIDATES, HEAD, MAPS)
    assert torch.allclose(reference, torch.tensor(ok, dtype=torch.float64))
    capsys.readouterr()
    expect(capsys, ex07.minimal_pair, [ok], "○", "choose a (layer, head)",
           PAIR, CANDIDATES, (..., ...), MAPS)


def test_minimal_pair_names_what_is_wrong(capsys):
    for weights, words in [
        (np.array(weights_of()).T.tolist(), "your rows are the candidates"),
        (weights_of(read_from=True), 'the weights each candidate puts on "it"'),
        (weights_of(head=(0, 0)), "not the weights recomputed from your sentences"),
        ([0.1, 0.2, 0.3, 0.4], "weights should be 2 x 2 numbers"),
    ]:
        expect(capsys, ex07.minimal_pair, [weights], "✗", words, PAIR, CANDIDATES, HEAD, MAPS)
    for pair, candidates, head, words in [
        (("The dog bit the cat because it was angry.",
          "The cat bit the dog because it was angry."), CANDIDATES, HEAD,
         "the same but for one word"),
        (("The dog bit the cat since he was angry.", "The dog bit the cat since he was scared."),
         CANDIDATES, HEAD, 'hold the word "it" exactly once'),
        (PAIR, ("dog", "mouse"), HEAD, "hold the candidate 'mouse' exactly once"),
        ("The dog bit the cat.", CANDIDATES, HEAD, "pair should be two sentences"),
        (PAIR, CANDIDATES, (2, 0), "the layer should be a whole number from 0 to 1"),
    ]:
        assert expect(capsys, ex07.minimal_pair, [[[0.1, 0.2], [0.3, 0.4]]], "✗", words,
                      pair, candidates, head, MAPS) == [None], words


# --- implement: reliability bins ------------------------------------------------------------------

def bins_by_loop(confidence, correct, n_bins):
    width = 0.5 / n_bins
    count = torch.zeros(n_bins, dtype=torch.int64)
    conf = torch.full((n_bins,), float("nan"), dtype=confidence.dtype)
    acc = conf.clone()
    for b in range(n_bins):
        upper = confidence < 0.5 + (b + 1) * width if b < n_bins - 1 else confidence <= 1
        inside = (confidence >= 0.5 + b * width) & upper
        count[b] = inside.sum()
        if count[b]:
            conf[b], acc[b] = confidence[inside].mean(), correct[inside].to(conf.dtype).mean()
    return count, conf, acc


def test_reliability(capsys):
    answers = [reliability, bins_by_loop]
    assert expect(capsys, ex07.reliability, answers, "✓",
                  "reliability: matches attnlab's version on 3 random inputs") == answers


def test_reliability_arguments():
    count, conf, acc = reliability(torch.tensor([0.5, 0.75, 1.0]), torch.tensor([1, 0, 1]), 2)
    assert count.tolist() == [1, 2] and conf.tolist() == [0.5, 0.875] and acc.tolist() == [1, 0.5]
    with pytest.raises(ValueError, match="confidence must be in"):
        reliability(torch.tensor([0.2]), torch.tensor([1]))
    with pytest.raises(ValueError, match="same length"):
        reliability(torch.tensor([0.7, 0.8]), torch.tensor([1]))


# --- the measurements behind them, on MiniLM ------------------------------------------------------

SENTENCES = ["The cat sat on the mat because it was tired.", "A man is playing a guitar."]


def test_hiding_cls_moves_more_than_zeroing_its_value(minilm):
    original = minilm.encode(SENTENCES)                                       # (2, 384)
    hidden = encode_without_key(minilm, SENTENCES, 0)                         # (2, 384)
    zeroed = encode_without_key(minilm, SENTENCES, 0, how="value")
    assert hidden.shape == zeroed.shape == (2, 384)
    assert torch.allclose(hidden.norm(dim=1), torch.ones(2), atol=1e-5)
    assert ((zeroed * original).sum(1) > 0.98).all()
    assert ((hidden * original).sum(1) < 0.9).all()
    assert torch.allclose(minilm.encode(SENTENCES), original)               # no hook left behind


def test_a_word_of_several_pieces_is_taken_out_whole(minilm):
    texts = ["the plot was mediocre", "a mediocre plot"]                     # med ##io ##cre
    assert minilm.tokenize(texts).word_ids[0] == [None, 0, 1, 2, 3, 3, 3, None]
    by_word = encode_without_key(minilm, texts, word_index=[3, 1])
    pieces = [encode_without_key(minilm, [texts[0]], p) for p in (4, 5, 6)]
    assert not any(torch.allclose(by_word[0], p[0], atol=1e-4) for p in pieces)  # all three
    first = encode_without_key(minilm, texts, word_index=[0, 0])
    assert torch.allclose(first, encode_without_key(minilm, texts, 1), atol=1e-6)  # one piece


def test_encode_without_key_positions_and_arguments(minilm):
    lengths = [len(t) for t in minilm.tokenize(SENTENCES).tokens]           # [13, 9]
    last = encode_without_key(minilm, SENTENCES, -1)
    one = encode_without_key(minilm, SENTENCES[1:], lengths[1] - 1)        # the same [SEP]
    assert torch.allclose(last[1], one[0], atol=1e-5)
    with pytest.raises(ValueError, match="position"):
        encode_without_key(minilm, SENTENCES, 9)
    with pytest.raises(TypeError, match="encoder"):
        encode_without_key("minilm", SENTENCES, 0)
    with pytest.raises(TypeError, match="not both"):
        encode_without_key(minilm, SENTENCES, 0, word_index=[0, 0])
    with pytest.raises(ValueError, match="one entry per sentence"):
        encode_without_key(minilm, SENTENCES, word_index=[0])
    with pytest.raises(ValueError, match=r"word_index\[1\]"):
        encode_without_key(minilm, SENTENCES, word_index=[0, 7])


def test_a_real_minimal_pair_and_a_candidate_of_several_pieces(minilm, capsys):
    pair = ("The cat sat on the mat because it was tired.",
            "The cat sat on the mat because it was soft.")
    reference = ex07.minimal_pair(..., pair, ("cat", "mat"), (3, 1), minilm.attention_maps)
    assert capsys.readouterr().out.startswith("○") and reference.shape == (2, 2)
    expect(capsys, ex07.minimal_pair, [reference.tolist()], "✓", "in layer 3, head 1",
           pair, ("cat", "mat"), (3, 1), minilm.attention_maps)
    odd = ("The cat sat on the mediocre mat because it was tired.",
           "The cat sat on the mediocre mat because it was soft.")
    expect(capsys, ex07.minimal_pair, [reference.tolist()], "✗", "'mediocre' is not one word piece",
           odd, ("cat", "mediocre"), (3, 1), minilm.attention_maps)

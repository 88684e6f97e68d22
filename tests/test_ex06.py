"""Notebook 06's exercise checks: right, wrong, untouched and hostile answers each get one line
(✓, ✗ or ○) and a return value the notebook's next cells can use. Synthetic tensors for the
checks; MiniLM (0.5 s to load) only for `encode_without_key`, the measurement behind the
[CLS] exercise."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_doubles import loops_forever, one_line, placeholder, raises

from attnlab import assets
from attnlab.exercises import ex06
from attnlab.minilm import MiniLM

# --- implement mean pooling --------------------------------------------------------------------

def pool_right(hidden, keep):
    k = keep.unsqueeze(-1).to(hidden.dtype)               # (B, T, 1)
    return F.normalize((hidden * k).sum(1) / k.sum(1), dim=1)


def pool_sum(hidden, keep):  # the sum points the same way as the mean: also right
    return F.normalize((hidden * keep.unsqueeze(-1)).sum(1), dim=1)


def pool_with_padding(hidden, keep):
    return F.normalize(hidden.mean(1), dim=1)


def pool_not_normalised(hidden, keep):
    k = keep.unsqueeze(-1).float()
    return (hidden * k).sum(1) / k.sum(1)


def pool_normalised_over_tokens(hidden, keep):
    k = keep.unsqueeze(-1).float()
    return F.normalize((hidden * k).sum(1) / k.sum(1), dim=0)


def pool_first_token(hidden, keep):  # the [CLS] vector instead of the mean
    return F.normalize(hidden[:, 0], dim=1)


def pool_no_unsqueeze(hidden, keep):  # (B, T) * (B, T, d) does not broadcast
    return F.normalize((hidden * keep).sum(1), dim=1)


@pytest.mark.parametrize("answer, expected_mark, words", [
    (pool_right, "✓", "mean pooling: matches attnlab's version on 3 random inputs"),
    (MiniLM.pool, "✓", "matches"),
    (pool_sum, "✓", "matches"),
    (pool_with_padding, "✗", "differs from the reference"),
    (pool_not_normalised, "✗", "differs from the reference"),
    (pool_normalised_over_tokens, "✗", "differs from the reference"),
    (pool_first_token, "✗", "differs from the reference"),
    (pool_no_unsqueeze, "✗", "raised RuntimeError"),
    (lambda h, k: h, "✗", "has shape (3, 5, 8), expected (3, 8)"),
    (lambda h, k: pool_right(h, k).double(), "✗", "dtype torch.float64"),
    (lambda h, k: pool_right(h, k) * float("nan"), "✗", "NaN"),
    (lambda h, k: pool_right(h, k).numpy(), "✗", "NumPy array"),
    (lambda h, k: "vector", "✗", "should be a torch.Tensor"),
    (lambda h, k: 1, "✗", "got a int"),
    (raises, "✗", "raised ZeroDivisionError: oops"),
    (loops_forever, "✗", "did not finish"),
    ("pool", "✗", "expected a function"),
    (placeholder, "○", "not attempted yet"),
    (..., "○", "not attempted yet"),
    (None, "○", "not attempted yet"),
])
def test_mean_pool(capsys, answer, expected_mark, words):
    fn = ex06.mean_pool(answer)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    hidden, keep = ex06.pool_inputs()[0]
    assert torch.allclose(fn(hidden, keep), MiniLM.pool(hidden, keep), atol=1e-6)  # usable


# --- explore: "it" -> "cat" --------------------------------------------------------------------

TOKENS = ["[CLS]", "the", "cat", "sat", "because", "it", "was", "tired", "[SEP]"]


def fake_maps(best=(4, 7)):
    """Six layers of twelve random heads, each row a softmax; head `best` looks from "it" to
    "cat" more than any other."""
    g = torch.Generator().manual_seed(0)
    maps = [torch.softmax(torch.randn(1, 12, 9, 9, generator=g), dim=-1) for _ in range(6)]
    maps[best[0]][0, best[1], TOKENS.index("it")] = F.one_hot(torch.tensor(TOKENS.index("cat")), 9)
    return maps


MAPS = fake_maps()


@pytest.mark.parametrize("answer, expected_mark, words", [
    ((4, 7), "✓", 'layer 4, head 7 puts 1.00 of "it"\'s attention on "cat", the most of all 72'),
    ([4, 7], "✓", "the most of all 72 heads"),
    (torch.tensor([4, 7]), "✓", "the most"),
    ((np.int64(4), np.int64(7)), "✓", "the most"),
    ((4.0, 7.0), "✓", "the most"),
    ((3, 7), "✗", "another head puts more"),
    ((0, 0), "✗", "another head puts more"),
    ((6, 7), "✗", "the layer should be a whole number from 0 to 5"),
    ((4, 12), "✗", "the head should be a whole number from 0 to 11"),
    ((-1, 7), "✗", "whole number"),
    ((4.5, 7), "✗", "whole number"),
    ((4, float("nan")), "✗", "finite"),
    (("4", 7), "✗", "should be a number"),
    ((4,), "✗", "expected a pair (layer, head)"),
    (47, "✗", "expected a pair (layer, head), got a int"),
    ("4, 7", "✗", "expected a pair"),
    ((..., ...), "○", "not attempted yet"),
    (..., "○", "not attempted yet"),
    (None, "○", "not attempted yet"),
])
def test_it_to_cat(capsys, answer, expected_mark, words):
    got = ex06.it_to_cat(answer, TOKENS, MAPS)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    layer, head = got                                        # usable: a valid pair either way
    assert (int(layer), int(head)) == (4, 7)


# --- predict: hide [CLS] as a key ----------------------------------------------------------------

@pytest.mark.parametrize("guess, expected_mark, words", [
    (0.7, "✓", "you predicted 0.70; measured 0.61"),
    (torch.tensor(0.55), "✓", "measured 0.61"),
    (0.99, "✗", "more than 0.1 apart"),       # "a no-op: nothing changes"
    (0.3, "✗", "more than 0.1 apart"),
    (float("nan"), "✗", "finite"),
    ("0.6", "✗", "should be a number"),
    ([0.6], "✗", "should be a number"),
    (..., "○", "no prediction yet"),
    (None, "○", "no prediction yet"),
])
def test_mask_cls(capsys, guess, expected_mark, words):
    got = ex06.mask_cls(guess, 0.609)
    sign, line = one_line(capsys)
    assert sign == expected_mark and words in line, line
    if sign != "✓":
        assert got == 0.609


# --- the measurement behind it: encode_without_key ------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    try:
        assets.require("minilm/model.safetensors")
    except assets.AssetError as e:
        pytest.skip(f"asset missing here: {str(e).splitlines()[0]}")
    from attnlab.minilm import load_minilm
    return load_minilm()


SENTENCES = ["The cat sat on the mat because it was tired.", "A man is playing a guitar."]


def test_hiding_cls_moves_more_than_zeroing_its_value(minilm):
    from attnlab.sentiment import encode_without_key
    original = minilm.encode(SENTENCES)                                       # (2, 384)
    hidden = encode_without_key(minilm, SENTENCES, 0)                         # (2, 384)
    zeroed = encode_without_key(minilm, SENTENCES, 0, how="value")
    assert hidden.shape == zeroed.shape == (2, 384)
    assert torch.allclose(hidden.norm(dim=1), torch.ones(2), atol=1e-5)
    assert ((zeroed * original).sum(1) > 0.98).all()
    assert ((hidden * original).sum(1) < 0.9).all()
    assert torch.allclose(minilm.encode(SENTENCES), original)               # no hook left behind


def test_encode_without_key_positions_and_arguments(minilm):
    from attnlab.sentiment import encode_without_key
    lengths = [len(t) for t in minilm.tokenize(SENTENCES).tokens]           # [13, 9]
    last = encode_without_key(minilm, SENTENCES, -1)
    one = encode_without_key(minilm, SENTENCES[1:], lengths[1] - 1)        # the same [SEP]
    assert torch.allclose(last[1], one[0], atol=1e-5)
    with pytest.raises(ValueError, match="position"):
        encode_without_key(minilm, SENTENCES, 9)
    with pytest.raises(ValueError, match="how"):
        encode_without_key(minilm, SENTENCES, 0, how="drop")
    with pytest.raises(TypeError, match="position"):
        encode_without_key(minilm, SENTENCES, "0")
    with pytest.raises(TypeError, match="encoder"):
        encode_without_key("minilm", SENTENCES, 0)

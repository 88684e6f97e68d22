"""Notebook 06's exercises: the right answers and the typical mistakes, one case per ✗ message.
(Hostile answers, for every check at once: tests/test_exercises.py.) Synthetic tensors for the
checks; MiniLM (0.5 s to load) only for `encode_without_key`, the measurement behind the
[CLS] exercise."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exercise_doubles import expect

from attnlab import assets
from attnlab.exercises import ex06
from attnlab.minilm import MiniLM, load_minilm
from attnlab.sentiment import encode_without_key

# --- implement mean pooling --------------------------------------------------------------------

def pool_right(hidden, keep):
    k = keep.unsqueeze(-1).to(hidden.dtype)               # (B, T, 1)
    return F.normalize((hidden * k).sum(1) / k.sum(1), dim=1)


@pytest.mark.parametrize("answers, mark, words", [
    ([pool_right, MiniLM.pool,
      lambda h, k: F.normalize((h * k.unsqueeze(-1)).sum(1), dim=1)],  # the sum points the same way
     "✓", "mean pooling: matches attnlab's version on 3 random inputs."),
    ([lambda h, k: F.normalize(h.mean(1), dim=1),  # padding included
      lambda h, k: pool_right(h, k) * k.sum(1, keepdim=True),  # not scaled to length 1
      lambda h, k: F.normalize((h * k.unsqueeze(-1)).sum(1), dim=0),  # normalised over the batch
      lambda h, k: F.normalize(h[:, 0], dim=1)],  # the [CLS] vector instead of the mean
     "✗", "differs from the reference"),
    ([lambda h, k: F.normalize((h * k).sum(1), dim=1)], "✗", "raised RuntimeError"),  # (B, T)
    ([lambda h, k: h], "✗", "has shape (3, 5, 8), expected (3, 8)"),
])
def test_mean_pool(capsys, answers, mark, words):
    expect(capsys, ex06.mean_pool, answers, mark, words)


# --- explore: "it" -> "cat" --------------------------------------------------------------------

@pytest.mark.parametrize("answers, mark, words", [
    ([(4, 7), [4, 7], torch.tensor([4, 7]), (np.int64(4), np.int64(7)), (4.0, 7.0)], "✓",
     '"it" → "cat": layer 4, head 7 puts 1.00 of "it"\'s attention on "cat", the most of all 72 '
     'heads.'),
    ([(3, 7), (0, 0)], "✗", "another head puts more. Hint: for every layer"),
    ([(6, 7), (-1, 7), (4.5, 7)], "✗", "the layer should be a whole number from 0 to 5"),
    ([(4, 12)], "✗", "the head should be a whole number from 0 to 11"),
    ([(4,), 47], "✗", "expected a pair (layer, head)"),
    ([(..., ...)], "○", "not attempted yet"),  # the notebook passes (my_layer, my_head)
])
def test_it_to_cat(capsys, answers, mark, words):
    tokens, maps = ex06.it_to_cat.exercise.args()  # made up: head (4, 7) looks from it to cat
    for got in expect(capsys, ex06.it_to_cat, answers, mark, words, tokens, maps):
        assert tuple(map(int, got)) == (4, 7)  # usable: a valid pair, either way


def test_mask_cls(capsys):
    expect(capsys, ex06.mask_cls, [0.7, torch.tensor(0.55)], "✓",
           "; measured 0.61. The most attended token is not a no-op", 0.609)
    expect(capsys, ex06.mask_cls, [0.99, 0.3], "✗",  # "a no-op: nothing changes"
           "more than 0.1 apart). Hint: The most attended token", 0.609)


# --- the measurement behind it: encode_without_key ------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    try:
        assets.require("minilm/model.safetensors")
    except assets.AssetError as e:
        pytest.skip(f"asset missing here: {str(e).splitlines()[0]}")
    return load_minilm()


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


def test_encode_without_key_positions_and_arguments(minilm):
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

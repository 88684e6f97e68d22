"""attnlab.core.interventions.hide_key (a key taken out of attention: as a mask, or its value
zeroed) and pointing_scores (weight on the keys a query needs, against an even spread): notebook
08's probes of the sorter's BOS sink and of where its heads point."""
import pytest
import torch

from attnlab.core.attention import MultiHeadAttention, causal_mask
from attnlab.core.hooks import HOOK_POINTS
from attnlab.core.interventions import hide_key
from attnlab.core.measures import pointing_scores


def layer_and_input(seed=0):
    torch.manual_seed(seed)
    attn = MultiHeadAttention(8, 2).double()
    return attn, torch.randn(3, 5, 8, dtype=torch.float64)  # (B, T, d)


def test_hiding_a_key_as_a_mask_is_a_padding_mask_on_that_key():
    attn, x = layer_and_input()
    keys = torch.tensor([True, False, True, True, True])  # (S,)
    expected = attn(x, causal_mask(5) & keys)
    with torch.no_grad(), hide_key(attn, position=1):
        got = attn(x, causal_mask(5))
        assert torch.equal(attn(x)[1][..., 1], torch.zeros(3, 2, 5))  # no mask given: still hidden
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    with torch.no_grad(), hide_key(attn, position=0):
        first = attn(x, causal_mask(5))[1][:, :, 0]  # (B, H, S)   query 0 has no key left
    assert torch.equal(first, torch.zeros(3, 2, 5, dtype=torch.float64))


def test_zeroing_a_value_keeps_the_weights_and_takes_nothing_from_the_key():
    attn, x = layer_and_input(1)
    context = torch.randn(3, 4, 8, dtype=torch.float64)  # (B, S, d)
    with torch.no_grad():
        q, k, v = attn.project(x, context)
        before = attn(x, context=context)
        expected = attn.attend(q, k, v.index_fill(2, torch.tensor([3]), 0.0))
        with hide_key(attn, position=-1, how="value"):
            got = attn(x, context=context)
        after = attn(x, context=context)
    assert torch.equal(got[1], before[1]) and torch.allclose(got[0], expected[0], atol=1e-12)
    assert not torch.allclose(got[0], before[0])
    assert all(torch.equal(a, b) for a, b in zip(after, before))  # the hook is gone


def test_keys_hide_other_positions_in_each_sequence_both_ways():
    attn, x = layer_and_input(2)
    keys = torch.tensor([[0, 1, 0, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    real = ~keys[:, None, None, :]  # (B, 1, 1, S)   what a padding mask of those keys says
    with torch.no_grad():
        expected = attn(x, causal_mask(5) & real)
        with hide_key(attn, keys=keys):
            got = attn(x, causal_mask(5))
        q, k, v = attn.project(x)
        zeroed = attn.attend(q, k, v.masked_fill(keys[:, None, :, None], 0.0), causal_mask(5))
        with hide_key(attn, keys=keys, how="value"):
            valued = attn(x, causal_mask(5))
    assert all(torch.equal(g, e) for g, e in zip(got, expected))
    assert all(torch.equal(g, e) for g, e in zip(valued, zeroed))


def test_hide_key_is_undone_after_an_error_and_refuses_bad_arguments():
    attn, x = layer_and_input()
    with pytest.raises(RuntimeError), hide_key(attn, position=0):
        raise RuntimeError
    assert not any(getattr(attn, f"hook_{n}").hooked for n in HOOK_POINTS)
    with pytest.raises(TypeError, match="MultiHeadAttention"), hide_key(torch.nn.Linear(2, 2),
                                                                        position=0):
        pass
    with pytest.raises(ValueError, match="how"), hide_key(attn, position=0, how="zero"):
        pass
    with pytest.raises(TypeError, match="name the model"), hide_key(position=0):
        pass
    for both_or_neither in ({}, {"position": 0, "keys": torch.ones(3, 5, dtype=torch.bool)}):
        with pytest.raises(TypeError, match="give position .* or keys"):
            with hide_key(attn, **both_or_neither):
                pass


def test_pointing_scores_against_an_even_spread():
    B, H, T, S = 2, 2, 3, 4
    candidates = torch.zeros(B, T, S, dtype=torch.bool)
    candidates[:, 1:, :] = True  # queries 1 and 2 choose among the 4 keys; query 0 needs nothing
    targets = torch.zeros(B, T, S, dtype=torch.bool)
    targets[:, 1, 2] = True
    targets[:, 2, :2] = True  # two copies of the needed token
    weights = torch.full((B, H, T, S), 0.25, dtype=torch.float64)
    weights[:, 0] = targets[:, None].double()[:, 0] / targets.sum(-1, keepdim=True).clamp(min=1)
    scores = pointing_scores(weights, targets, candidates)
    assert scores["base_rate"] == pytest.approx((0.25 + 0.5) / 2)
    torch.testing.assert_close(scores["times_even"], torch.tensor([(4 + 2) / 2, 1.0],
                                                                 dtype=torch.float64))
    assert scores["hit_rate"][0] == 1.0
    with pytest.raises(ValueError, match="targets must be a bool tensor"):
        pointing_scores(weights, targets.double(), candidates)

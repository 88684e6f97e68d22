"""TinyTransformer: shapes, padding never attended or pooled, permutation symmetry without
positions, the attention intervention, and the hit-rate measure."""
import pytest
import torch

from attnlab.data import Vocab, make_reviews
from attnlab.models import TinyTransformer, attention_hit_rate


def batch(n=8, seed=0):
    return make_reviews(n, seed=seed).tensors(Vocab.for_reviews())


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "none"])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_shapes_and_attention_maps(positions, n_layers):
    torch.manual_seed(0)
    x, _, _ = batch()
    model = TinyTransformer(62, d_model=32, n_heads=4, d_ff=64, n_layers=n_layers,
                            positions=positions)
    assert model(x).shape == (8, 2)
    states, maps = model.encode(x)
    assert states.shape == (8, x.shape[1], 32)
    got = model.get_attention_maps(x)
    assert len(got) == n_layers and all(m.shape == (8, 4, x.shape[1], x.shape[1]) for m in got)
    real = x != 0
    rows = got[0].sum(-1)  # (B, H, T)
    assert torch.allclose(rows[real[:, None, :].expand_as(rows)], torch.tensor(1.0))
    probs = model.predict_proba(x)
    assert torch.allclose(probs.sum(-1), torch.ones(8)) and not probs.requires_grad


def test_padding_is_never_attended_and_never_changes_a_prediction():
    torch.manual_seed(0)
    x, _, _ = batch()
    model = TinyTransformer(62, positions="learned").eval()
    (weights,) = model.get_attention_maps(x)  # (B, H, T, T)
    pad_keys = (x == 0)[:, None, None, :].expand_as(weights)
    assert pad_keys.any() and weights[pad_keys].abs().max() == 0
    wider = torch.cat([x, torch.zeros(8, 20, dtype=torch.long)], dim=1)  # 20 more PAD columns
    assert torch.allclose(model(wider), model(x), atol=1e-6)


def test_without_positions_the_encoder_is_permutation_equivariant():
    torch.manual_seed(0)
    x, _, _ = batch()
    x = x[:, :5]  # every review has >= 5 real tokens: no padding in these columns
    perm = torch.tensor([3, 0, 4, 1, 2])
    plain = TinyTransformer(62, positions="none").eval()
    states, _ = plain.encode(x)
    shuffled, _ = plain.encode(x[:, perm])
    assert torch.allclose(shuffled, states[:, perm], atol=1e-5)
    assert torch.allclose(plain(x[:, perm]), plain(x), atol=1e-5)
    with_pos = TinyTransformer(62, positions="sinusoidal").eval()
    assert not torch.allclose(with_pos(x[:, perm]), with_pos(x), atol=1e-3)


def test_attend_mask_hides_chosen_tokens_from_every_query():
    torch.manual_seed(0)
    x, _, pos = batch()
    model = TinyTransformer(62).eval()
    attend = torch.ones_like(x, dtype=torch.bool)
    attend[torch.arange(8), pos] = False
    (weights,) = model.get_attention_maps(x, attend)
    assert weights[torch.arange(8), :, :, pos].abs().max() == 0
    assert not torch.allclose(model.predict_proba(x, attend), model.predict_proba(x))


def test_an_all_padding_row_gives_a_finite_prediction():
    model = TinyTransformer(62)
    probs = model.predict_proba(torch.zeros(2, 3, dtype=torch.long))
    assert torch.isfinite(probs).all() and torch.allclose(probs.sum(-1), torch.ones(2))


def test_hit_rate_counts_the_most_attended_token():
    torch.manual_seed(0)
    model = TinyTransformer(62, n_layers=2)
    x = torch.zeros(6, 16, dtype=torch.long)
    x[:, 0] = 5  # one real token per sentence: all attention goes to it
    hits = attention_hit_rate(model, x, torch.zeros(6, dtype=torch.long))
    assert hits["per_head"].shape == (2, 4) and (hits["per_head"] == 1).all()
    assert (hits["head_mean"] == 1).all() and hits["chance"] == 1.0
    miss = attention_hit_rate(model, x, torch.ones(6, dtype=torch.long))
    assert (miss["per_head"] == 0).all()
    x2, _, pos = batch(20)
    rates = attention_hit_rate(model, x2, pos)
    lengths = (x2 != 0).sum(1).float()
    assert rates["chance"] == pytest.approx(float((1 / lengths).mean()))
    assert ((rates["per_head"] >= 0) & (rates["per_head"] <= 1)).all()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: TinyTransformer(62, positions="rotary"), ValueError, "positions must be one of"),
    (lambda: TinyTransformer(0), ValueError, "vocab_size must be an int >= 1, got 0"),
    (lambda: TinyTransformer(62.0), TypeError, r"vocab_size must be an int, got 62\.0 \(float\)"),
    (lambda: TinyTransformer(62, pad_id=62), ValueError, "pad_id must be an int >= 0 and <= 61"),
    (lambda: TinyTransformer(62, d_model=30, n_heads=4), ValueError, "divisible"),
    (lambda: TinyTransformer(62)(torch.zeros(2, 3)), TypeError, "int64 tensor"),
    (lambda: TinyTransformer(62)([[1, 2]]), TypeError, "x must be a torch.Tensor, got list"),
    (lambda: TinyTransformer(62, max_len=4)(torch.ones(1, 5, dtype=torch.long)), ValueError,
     "max_len"),
    (lambda: TinyTransformer(62)(torch.ones(5, dtype=torch.long)), ValueError, r"shape \(B, T\)"),
    (lambda: TinyTransformer(62)(torch.full((1, 3), 62)), ValueError, r"token ids in 0\.\.61"),
    (lambda: TinyTransformer(62)(torch.ones(1, 3, dtype=torch.long),
                                 torch.ones(1, 4, dtype=torch.bool)), ValueError, "attend must be"),
    (lambda: attention_hit_rate(TinyTransformer(62), torch.ones(2, 3, dtype=torch.long),
                                torch.zeros(3)), ValueError, "positions must be a tensor of shape"),
    (lambda: attention_hit_rate(TinyTransformer(62), torch.ones(2, 3, dtype=torch.long), [0, 0]),
     TypeError, "positions must be a torch.Tensor, got list"),
])
def test_bad_arguments_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def _float64_weights_digest() -> str:
    """A digest of a float64 TinyTransformer's initial weights, in a fresh interpreter whose
    environment decides the kernel path."""
    import hashlib

    torch.manual_seed(0)
    model = TinyTransformer(62, positions="learned", dtype=torch.float64)
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode() + p.detach().numpy().tobytes())
    return h.hexdigest()


def test_float64_initial_weights_are_the_same_on_the_portable_kernels():
    """The reason notebooks 03, 04 and 06 train in float64: the same initial weights on any CPU.
    PyTorch's portable kernels (ATEN_CPU_CAPABILITY=default) stand in for another CPU."""
    import os
    import subprocess
    import sys

    code = ("import torch; torch.set_num_threads(1); import test_models as t; "
            "print(t._float64_weights_digest())")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    env["PYTHONPATH"] = os.path.dirname(__file__) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    # this process runs on the machine's own kernel path (unless the caller chose "default")
    assert out.stdout.strip() == _float64_weights_digest()


def test_float64_initialisation_has_the_float32_distributions():
    torch.manual_seed(0)
    f32 = TinyTransformer(62, d_model=32, dtype=torch.float32)
    torch.manual_seed(0)
    f64 = TinyTransformer(62, d_model=32, dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in f64.parameters())
    for (name, a), (_, b) in zip(f32.named_parameters(), f64.named_parameters()):
        assert a.shape == b.shape, name
        if a.numel() > 100:  # the spread of each weight matrix agrees within sampling noise
            assert float(b.detach().std()) == pytest.approx(float(a.detach().std()), rel=0.15), name
    assert torch.all(f64.embed.weight[0] == 0)  # the PAD row stays zero

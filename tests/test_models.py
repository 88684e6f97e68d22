"""attnlab.core.models: shapes and the one attention-map convention, padding never attended or
pooled, permutation symmetry without positions, causality of the decoders, float64 initial weights
that are the same on any CPU, every model on the meta device; attnlab.core.measures'
scores."""
import hashlib
import inspect
import math
import os
import subprocess
import sys
import threading

import pytest
import torch
from helpers import raises_each

import attnlab
from attnlab.core.measures import alignment_share, future_share, target_scores
from attnlab.core.models import (
    AttentionPooling,
    DecoderOnly,
    EncoderDecoder,
    TinyTransformer,
    draw_float64,
    encoder_replaced,
)
from attnlab.lessons.data import Vocab, make_reviews
from attnlab.lessons.decoders import VOCAB


def batch(n=8, seed=0):
    return make_reviews(n, seed=seed).tensors(Vocab.for_reviews())


def ids(*shape, high=VOCAB, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def test_encoder_shapes_and_attention_maps_for_every_kind_of_positions():
    x, _, _ = batch()
    real = x != 0
    for positions in ("learned", "sinusoidal", "rotary", "none"):
        torch.manual_seed(0)
        model = TinyTransformer(63, n_layers=2, positions=positions)
        assert model(x).shape == (8, 2), positions
        states = model.encode(x)
        assert states.shape == (8, x.shape[1], 32), positions
        logits, got = attnlab.run_with_maps(model, x)
        assert torch.equal(logits, model.eval()(x)), positions  # reading maps changes nothing
        assert len(got) == 2, positions
        assert all(m.shape == (8, 4, x.shape[1], x.shape[1]) for m in got), positions
        h, mask = model.embed(x), real[:, None, None, :]  # the weights each layer returns
        for block, w in zip(model.blocks, got):
            assert torch.equal(block.attn(h, mask)[1], w), positions
            h = block(h, mask)
        rows = got[0].sum(-1)  # (B, H, T)
        assert torch.allclose(rows[real[:, None, :].expand_as(rows)], torch.tensor(1.0)), positions
        probs = model.predict_proba(x)
        assert torch.allclose(probs.sum(-1), torch.ones(8)) and not probs.requires_grad, positions


def test_padding_is_never_attended_and_never_changes_a_prediction():
    torch.manual_seed(0)
    x, _, _ = batch()
    model = TinyTransformer(63).eval()
    (weights,) = attnlab.attention_maps(model, x)  # (B, H, T, T)
    pad_keys = (x == 0)[:, None, None, :].expand_as(weights)
    assert pad_keys.any() and weights[pad_keys].abs().max() == 0
    wider = torch.cat([x, torch.zeros(8, 20, dtype=torch.long)], dim=1)  # 20 more PAD columns
    assert torch.allclose(model(wider), model(x), atol=1e-6)
    all_padding = model.predict_proba(torch.zeros(2, 3, dtype=torch.long))
    assert torch.isfinite(all_padding).all()


def test_without_positions_the_encoder_sees_a_bag_of_words():
    torch.manual_seed(0)
    x, _, _ = batch()
    x = x[:, :5]  # every review has >= 5 real tokens: no padding in these columns
    perm = torch.tensor([3, 0, 4, 1, 2])
    plain = TinyTransformer(63, positions="none").eval()
    states = plain.encode(x)
    assert torch.allclose(plain.encode(x[:, perm]), states[:, perm], atol=1e-5)
    assert torch.allclose(plain(x[:, perm]), plain(x), atol=1e-5)
    for positions in ("sinusoidal", "rotary"):
        with_pos = TinyTransformer(63, positions=positions).eval()
        assert not torch.allclose(with_pos(x[:, perm]), with_pos(x), atol=1e-6), positions


def test_hide_key_hides_chosen_tokens_from_every_query():
    torch.manual_seed(0)
    x, _, pos = batch()
    model = TinyTransformer(63).eval()
    hidden = torch.zeros_like(x, dtype=torch.bool)
    hidden[torch.arange(8), pos] = True
    with attnlab.core.interventions.hide_key(model, keys=hidden):
        (weights,) = attnlab.attention_maps(model, x)
    assert weights[torch.arange(8), :, :, pos].abs().max() == 0


def test_encoder_replaced_runs_the_given_block_and_gives_the_model_back():
    torch.manual_seed(0)
    x, _, _ = batch()
    model = TinyTransformer(63, dtype=torch.float64).eval()
    own = model(x)
    calls = []

    def doubled(m, ids):  # another block: the model's states, twice
        calls.append(ids.shape)
        return 2 * TinyTransformer.encode(m, ids), None

    with encoder_replaced(model, doubled):
        replaced = model(x)
        (weights,) = attnlab.attention_maps(model, x)  # the hooks inside still fire
    assert calls and not torch.allclose(replaced, own)
    assert weights.shape == (8, 4, x.shape[1], x.shape[1])
    assert torch.equal(model(x), own) and "encode" not in vars(model)
    with pytest.raises(RuntimeError), encoder_replaced(model, doubled):
        raise RuntimeError("a failing cell")
    assert "encode" not in vars(model)
    raises_each([(lambda: encoder_replaced(model, "mine").__enter__(), "must be a function"),
                 (lambda: encoder_replaced(torch.nn.Linear(2, 2), doubled).__enter__(),
                  "must be a TinyTransformer, got Linear")], TypeError)


def test_decoder_outputs_before_t_are_bit_identical_whatever_comes_from_t_on():
    x = ids(3, 10, seed=4)
    for positions in ("learned", "rotary", "none"):
        torch.manual_seed(0)
        model = DecoderOnly(VOCAB, 16, 2, 32, n_layers=2, positions=positions, n_kv_heads=1).eval()
        logits = model(x)
        for w in attnlab.attention_maps(model, x):
            assert torch.all(w[..., ~attnlab.causal_mask(10)] == 0.0), positions  # exactly 0
        for t in range(10):
            changed = x.clone()
            changed[:, t:] = (x[:, t:] + 1 + ids(3, 10 - t, high=VOCAB - 1, seed=t)) % VOCAB
            assert torch.equal(model(changed)[:, :t], logits[:, :t]), (positions, t)
        open_model = DecoderOnly(VOCAB, 16, 2, 32, n_layers=2, positions=positions, n_kv_heads=1,
                                 causal=False).eval()
        open_model.load_state_dict(model.state_dict())
        changed = x.clone()
        changed[:, -1] = (x[:, -1] + 1) % VOCAB
        assert not torch.allclose(open_model(changed)[:, 0], open_model(x)[:, 0]), positions


def test_pre_norm_decoder_ends_with_a_layer_norm():
    model = DecoderOnly(VOCAB, norm="pre")
    assert isinstance(model.final_norm, torch.nn.LayerNorm)
    assert DecoderOnly(VOCAB).final_norm is None


def test_encoder_decoder_is_causal_in_the_target_and_reads_the_whole_source():
    torch.manual_seed(0)
    model = EncoderDecoder(10, VOCAB, 16, 2, 32).eval()
    src, tgt = ids(2, 6, high=10, seed=5), ids(2, 7, seed=6)
    logits, (cross,) = model(src, tgt), attnlab.attention_maps(model, src, tgt, where="cross_attn")
    assert logits.shape == (2, 7, VOCAB) and cross.shape == (2, 2, 7, 6)
    changed = tgt.clone()
    changed[:, 4:] = (tgt[:, 4:] + 1) % VOCAB
    assert torch.equal(model(src, changed)[:, :4], logits[:, :4])
    src_changed = src.clone()
    src_changed[:, -1] = (src[:, -1] + 1) % 10
    assert not torch.allclose(model(src_changed, tgt)[:, 0], logits[:, 0])  # step 0 reads it all


def test_every_model_runs_on_the_meta_device():
    """Shapes only, no values: every tensor attnlab makes follows its inputs' device (a tensor
    made on the CPU would raise here)."""
    with torch.device("meta"):
        x = torch.zeros(2, 5, dtype=torch.long)
        assert TinyTransformer(20, positions="rotary")(x).shape == (2, 2)
        assert DecoderOnly(20, positions="sinusoidal", n_kv_heads=1, norm="pre")(x).shape == (
            2, 5, 20)
        assert EncoderDecoder(20, 20)(x, x).shape == (2, 5, 20)
        assert DecoderOnly(20, causal=False)(x).device.type == "meta"


def _float64_weights_digest() -> str:
    """A digest of float64 models' initial weights, in a fresh interpreter whose environment
    decides the kernel path."""
    h = hashlib.sha256()
    torch.manual_seed(0)
    for model in (TinyTransformer(63, dtype=torch.float64), DecoderOnly(12, dtype=torch.float64)):
        for name, p in sorted(model.state_dict().items()):
            h.update(name.encode() + p.detach().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_float64_initial_weights_are_the_same_on_the_portable_kernels():
    """The reason the notebooks train in float64: the same initial weights on any CPU. PyTorch's
    portable kernels (ATEN_CPU_CAPABILITY=default) stand in for another CPU."""
    code = ("import hashlib, torch\nfrom attnlab.core.models import DecoderOnly, TinyTransformer\n"
            "torch.set_num_threads(1)\n" + inspect.getsource(_float64_weights_digest)
            + "print(_float64_weights_digest())")  # the same function, not this test module
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == _float64_weights_digest()


def test_float64_initialisation_has_the_float32_distributions():
    torch.manual_seed(0)
    f32 = TinyTransformer(63, dtype=torch.float32)
    torch.manual_seed(0)
    f64 = TinyTransformer(63, dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in f64.parameters())
    for (name, a), (_, b) in zip(f32.named_parameters(), f64.named_parameters()):
        assert a.shape == b.shape, name
        if a.numel() > 100:  # the spread of each weight matrix agrees within sampling noise
            assert float(b.detach().std()) == pytest.approx(float(a.detach().std()), rel=0.15), name
    assert torch.all(f64.embed.tokens.weight[0] == 0)  # the PAD row stays zero



def test_float64_drawing_refuses_a_module_it_cannot_draw():
    """A float32 draw kept by mistake would differ from CPU to CPU without any error."""
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.ones(3))

    for module in (torch.nn.Conv2d(1, 2, 3), torch.nn.Sequential(torch.nn.Linear(2, 2), Scaled())):
        with pytest.raises(TypeError, match=r"how to draw the weights of (Conv2d|Scaled)"):
            draw_float64(module)
    norm = draw_float64(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2)))
    assert torch.equal(norm[1].weight, torch.ones(2, dtype=torch.float64))

def test_attention_pooling_reads_every_state_that_is_not_all_zeros_and_nothing_else():
    """A row of zeros is no token (padding, [CLS], [SEP]); any other row is one, even with zeros
    among its numbers. The mask is computed at every training step, so it is the cheap form of
    `states.ne(0).any(-1)` and must give the same tokens."""
    head = AttentionPooling(4)
    with torch.no_grad():
        head.query.copy_(torch.tensor([1.0, -2.0, 0.5, 3.0]))
    states = torch.randn(3, 5, 4)  # (N, T, d)
    states[0, 3:] = 0.0  # two padding rows
    states[0, 1, 0] = 0.0  # a real token with a zero among its numbers
    states[1, 2] = torch.tensor([0.0, 0.0, -0.0, 1e-30])
    states[1, 4] = -0.0  # negative zeros: no token either
    states[2] = 0.0  # a text without tokens
    weights = head.weights(states)  # (3, 5)
    real = states.ne(0).any(-1)  # (3, 5)
    assert torch.equal(weights > 0, real)
    assert torch.allclose(weights.sum(-1), torch.tensor([1.0, 1.0, 0.0]))


def test_token_ids_a_model_cannot_read_raise_clear_errors():
    model = TinyTransformer(63)
    raises_each([
        (lambda: model(torch.zeros(2, 3)), TypeError, "int64 tensor"),
        (lambda: TinyTransformer(63, max_len=4)(torch.ones(1, 5, dtype=torch.long)), ValueError,
         "max_len=4"),
        (lambda: model(torch.full((1, 3), 63)), ValueError, r"token ids in 0\.\.62"),
        (lambda: EncoderDecoder(10, 12)(ids(1, 3, high=10), ids(1, 3).float()), TypeError,
         "tgt must be an int64 tensor"),
    ])


# --- attnlab.core.measures and interventions ------------------------------------------------------

def test_target_scores_against_the_uniform_level_and_a_random_token():
    real = torch.tensor([[True, True, True, True], [True, True, False, False]])  # lengths 4, 2
    target = torch.tensor([1, 0])
    w = torch.zeros(2, 2, 4, 4)
    w[0, :, :, :] = 0.25  # head 0 and 1, review 0: uniform over its 4 tokens
    w[1, 0, :, 0] = 1.0  # review 1, head 0: everything on the target
    w[1, 1, :, 1] = 1.0  # review 1, head 1: everything on the other real token
    s = target_scores(w, real, target)
    torch.testing.assert_close(s["weight"], torch.tensor([(0.25 + 1.0) / 2, 0.25 / 2]))
    torch.testing.assert_close(s["times_uniform"], torch.tensor([(1.0 + 2.0) / 2, 0.5]))
    torch.testing.assert_close(s["hit_rate"], torch.tensor([0.5, 0.0]))  # ties go to key 0
    assert s["base_rate"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    with pytest.raises(ValueError, match="real must be"):
        target_scores(w, real[:1], target)


def test_future_and_alignment_shares():
    T = 5
    scores = torch.randn(2, 3, T, T).masked_fill(~attnlab.causal_mask(T), -math.inf)
    assert future_share(torch.softmax(scores, -1)) == 0.0
    uniform = torch.full((T, T), 1.0 / T)
    assert math.isclose(future_share(uniform), (T - 1) / (2 * T), rel_tol=1e-6)  # (T-1-i)/T
    mirrored = torch.eye(T).flip(-1).expand(2, 1, T, T)
    assert alignment_share(mirrored) == 1.0 and alignment_share(torch.eye(4)) == 0.0
    with pytest.raises(ValueError, match="T = S"):
        alignment_share(torch.ones(1, 1, 3, 4))


def test_a_pre_norm_encoder_ends_with_a_layer_norm_and_trains():
    torch.manual_seed(0)
    model = TinyTransformer(63, n_layers=2, norm="pre")
    x, _, _ = batch()
    h = model.encode(x)
    torch.testing.assert_close(h.mean(-1), torch.zeros(h.shape[:2]), atol=1e-5, rtol=0)
    assert TinyTransformer(63).final_norm is None


def test_maps_read_from_many_threads_at_once_are_each_threads_own():
    """A server reads one model's maps in several threads at once (the web app): each call gets
    its own input's maps, as many as the model has layers, and no hook is left behind."""
    torch.manual_seed(0)
    model = TinyTransformer(63, n_layers=2).eval()
    inputs = [ids(1, 3 + k % 5, high=63, seed=k) for k in range(8)]
    alone = [attnlab.run_with_maps(model, x) for x in inputs]
    problems = []

    def reader(k):
        for _ in range(25):
            logits, maps = attnlab.run_with_maps(model, inputs[k])
            if not (torch.equal(logits, alone[k][0]) and len(maps) == 2
                    and all(torch.equal(a, b) for a, b in zip(maps, alone[k][1]))):
                problems.append(k)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems
    assert not any(m.attn.hook_weights.hooked for m in model.blocks)

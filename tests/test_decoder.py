"""attnlab.decoder against PyTorch's decoder layer, the causal promise (no output depends on a
later token), and attnlab.generation's tasks, decoding loop and measures."""
import math

import pytest
import torch

import attnlab
from attnlab import generation as G
from attnlab.attention import EncoderBlock
from attnlab.decoder import DecoderBlock, DecoderOnly, EncoderDecoder


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def ids(*shape, high=G.VOCAB, seed=0):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def copy_mha(ours, ref):
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight, ours.v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias, ours.v.bias]))
        ref.out_proj.weight.copy_(ours.out.weight)
        ref.out_proj.bias.copy_(ours.out.bias)


def test_decoder_block_matches_torch_post_norm_decoder_layer():
    torch.manual_seed(0)
    ours = DecoderBlock(16, 4, 32).eval()
    ref = torch.nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                           norm_first=False).eval()
    copy_mha(ours.self_attn, ref.self_attn)
    copy_mha(ours.cross_attn, ref.multihead_attn)
    for mine, theirs in ((ours.ff[0], ref.linear1), (ours.ff[2], ref.linear2),
                         (ours.norm1, ref.norm1), (ours.norm2, ref.norm2), (ours.norm3, ref.norm3)):
        theirs.load_state_dict(mine.state_dict())
    x, memory = rand(2, 6, 16, seed=1), rand(2, 9, 16, seed=2)
    y, self_w, cross_w = ours(x, memory)
    expected = ref(x, memory, tgt_mask=~attnlab.causal_mask(6))  # torch: True = may not attend
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    assert self_w.shape == (2, 4, 6, 6) and cross_w.shape == (2, 4, 6, 9)
    assert torch.all(self_w[..., ~attnlab.causal_mask(6)] == 0.0)


def test_decoder_block_without_cross_attention_is_an_encoder_block_with_the_causal_mask():
    torch.manual_seed(0)
    ours = DecoderBlock(16, 4, 32, cross=False).eval()
    enc = EncoderBlock(16, 4, 32).eval()
    enc.attn.load_state_dict(ours.self_attn.state_dict())
    enc.norm1.load_state_dict(ours.norm1.state_dict())
    enc.ff.load_state_dict(ours.ff.state_dict())
    enc.norm2.load_state_dict(ours.norm3.state_dict())
    x = rand(2, 5, 16, seed=3)
    y, w, cross = ours(x)
    y_enc, w_enc = enc(x, attnlab.causal_mask(5))
    assert cross is None and torch.equal(y, y_enc) and torch.equal(w, w_enc)
    y_open, w_open, _ = ours(x, causal=False)
    assert torch.equal(y_open, enc(x)[0]) and (w_open[..., ~attnlab.causal_mask(5)] > 0).all()


@pytest.mark.parametrize("call,error,message", [
    (lambda: DecoderBlock(16, 4, 32)(rand(1, 3, 16)), ValueError, "pass context"),
    (lambda: DecoderBlock(16, 4, 32, cross=False)(rand(1, 3, 16), rand(1, 3, 16)), ValueError,
     "no cross-attention"),
    (lambda: DecoderBlock(16, 4, 32, cross="yes"), TypeError, "cross must be True or False"),
    (lambda: DecoderBlock(16, 4, 32)(rand(1, 3, 16), rand(1, 3, 8)), ValueError, "(1, 3, 8)"),
    (lambda: DecoderBlock(16, 4, 32, cross=False)(rand(1, 3, 16), causal=1), TypeError, "causal"),
    (lambda: DecoderOnly(12)(ids(1, 3).float()), TypeError, "int64"),
    (lambda: DecoderOnly(12, max_len=4)(ids(1, 5)), ValueError, "max_len=4"),
    (lambda: DecoderOnly(12)(ids(1, 3) + 12), ValueError, "0..11"),
    (lambda: DecoderOnly(12, n_layers=0), ValueError, "n_layers"),
    (lambda: EncoderDecoder(10, 12)(ids(1, 3, high=10), ids(1, 3).float()), TypeError, "tgt"),
])
def test_errors_say_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_decoder_only_outputs_before_t_are_bit_identical_whatever_comes_from_t_on():
    torch.manual_seed(0)
    model = DecoderOnly(G.VOCAB, 16, 2, 32, n_layers=2).eval()
    x = ids(3, 10, seed=4)
    logits, maps = model(x, return_attention=True)
    for w in maps:
        assert torch.all(w[..., ~attnlab.causal_mask(10)] == 0.0)  # every future key: exactly 0
    for t in range(10):
        changed = x.clone()
        changed[:, t:] = (x[:, t:] + 1 + ids(3, 10 - t, high=G.VOCAB - 1, seed=t)) % G.VOCAB
        assert (changed[:, t:] != x[:, t:]).all()
        assert torch.equal(model(changed)[:, :t], logits[:, :t])
    open_model = DecoderOnly(G.VOCAB, 16, 2, 32, n_layers=2, causal=False).eval()
    open_model.load_state_dict(model.state_dict())
    changed = x.clone()
    changed[:, -1] = (x[:, -1] + 1) % G.VOCAB
    assert not torch.allclose(open_model(changed)[:, 0], open_model(x)[:, 0])  # it sees the future


def test_encoder_decoder_is_causal_in_the_target_and_reads_the_whole_source():
    torch.manual_seed(0)
    model = EncoderDecoder(10, G.VOCAB, 16, 2, 32).eval()
    src, tgt = ids(2, 6, high=10, seed=5), ids(2, 7, seed=6)
    logits, maps = model(src, tgt, return_attention=True)
    assert logits.shape == (2, 7, G.VOCAB) and maps[0].shape == (2, 2, 7, 6)
    changed = tgt.clone()
    changed[:, 4:] = (tgt[:, 4:] + 1) % G.VOCAB
    assert torch.equal(model(src, changed)[:, :4], logits[:, :4])
    src_changed = src.clone()
    src_changed[:, -1] = (src[:, -1] + 1) % 10
    assert not torch.allclose(model(src_changed, tgt)[:, 0], logits[:, 0])  # step 0 reads it all


# --- attnlab.generation ----------------------------------------------------------------------

def test_tasks():
    seqs = G.sort_task(50, seed=3)
    assert seqs.shape == (50, 2 * G.LENGTH + 2) and seqs.dtype == torch.long
    assert (seqs[:, 0] == G.BOS).all() and (seqs[:, G.LENGTH + 1] == G.SEP).all()
    digits, answer = seqs[:, 1:G.LENGTH + 1], seqs[:, G.LENGTH + 2:]
    assert torch.equal(answer, digits.sort(-1).values) and digits.max() < G.DIGITS
    assert torch.equal(G.sort_task(50, seed=3), seqs)
    assert not torch.equal(G.sort_task(50, seed=4), seqs)
    src, tgt = G.reverse_task(20, seed=1)
    assert torch.equal(tgt[:, 1:], src.flip(-1)) and (tgt[:, 0] == G.BOS).all()
    assert G.show(seqs[0, :3]).startswith("BOS ") and "SEP" in G.show(seqs[0])
    assert math.isclose(G.loss_floor(), 6 * math.log(10) / 13)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        G.sort_task(0)


def test_generate_is_the_greedy_loop_and_sampling_is_reproducible():
    torch.manual_seed(0)
    model = DecoderOnly(G.VOCAB, 16, 2, 32).train()
    prompt = G.sort_task(4, seed=2)[:, :G.LENGTH + 2]
    seq = prompt
    with torch.no_grad():
        model.eval()
        for _ in range(3):
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
        model.train()
    out = G.generate(model, prompt, 3)
    assert torch.equal(out, seq) and model.training  # the mode is given back
    draw = [G.generate(model, prompt, 3, temperature=1.0,
                       generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    assert torch.equal(draw[0], draw[1]) and torch.equal(draw[0][:, :prompt.shape[1]], prompt)
    assert torch.equal(G.generate(model, prompt, 0), prompt)
    with pytest.raises(ValueError, match="temperature"):
        G.generate(model, prompt, 3, temperature=-1.0)


def test_generate_with_a_source_encodes_it_once():
    torch.manual_seed(0)
    model = EncoderDecoder(10, G.VOCAB, 16, 1, 32).eval()
    src, tgt = G.reverse_task(3, seed=0)
    out = G.generate(model, tgt[:, :1], G.LENGTH, source=src)
    with torch.no_grad():
        expected = model(src, out[:, :-1]).argmax(-1)  # teacher forcing on its own output
    assert out.shape == (3, G.LENGTH + 1) and torch.equal(out[:, 1:], expected)


def test_measures():
    T = 5
    causal = torch.softmax(rand(2, 3, T, T).masked_fill(~attnlab.causal_mask(T), -math.inf), -1)
    assert G.future_share(causal) == 0.0
    uniform = torch.full((T, T), 1.0 / T)
    assert math.isclose(G.future_share(uniform), (T - 1) / (2 * T), rel_tol=1e-6)  # (T-1-i)/T
    mirrored = torch.eye(T).flip(-1).expand(2, 1, T, T)
    assert G.alignment_share(mirrored) == 1.0 and G.alignment_share(torch.eye(4)) == 0.0
    with pytest.raises(ValueError, match="T = S"):
        G.alignment_share(torch.ones(1, 1, 3, 4))


def test_training_runs_and_recipes_are_checked():
    model, losses = G.train_sorter(causal=True, steps=3, batch_size=8)
    assert len(losses) == 3 and not model.training and model.causal
    assert next(model.parameters()).dtype == G.DTYPE
    result = G.evaluate_sorter(model, G.sort_task(10, seed=9))
    assert set(result) == {"loss", "teacher_forced", "generated", "future"}
    assert result["future"] == 0
    model, losses = G.train_reverser(steps=2, batch_size=8)
    assert len(losses) == 2 and isinstance(model, EncoderDecoder)
    with pytest.raises(TypeError, match="unknown recipe keys"):
        G.train_sorter(epochs=3)
    with pytest.raises(ValueError, match="lr"):
        G.train_reverser(lr=0.0)

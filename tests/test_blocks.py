"""attnlab.core.blocks against PyTorch's Transformer layers, post-norm and pre-norm; the promises of
a block (permutation equivariance without a mask, no output depending on a later token under the
causal mask); positional encodings."""
import math

import torch
from helpers import copy_into_torch_mha, raises_each, rand

import attnlab
from attnlab.core.blocks import DecoderBlock, EncoderBlock, PositionalEncoding, sinusoidal_table


def test_encoder_block_matches_torch_layer_post_and_pre_norm():
    x = rand(2, 5, 16, seed=8)
    for norm in ("post", "pre"):
        torch.manual_seed(0)
        ours = EncoderBlock(16, 4, 32, norm=norm).eval()
        ref = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                               norm_first=norm == "pre").eval()
        copy_into_torch_mha(ours.attn, ref.self_attn)
        for mine, theirs in ((ours.ff[0], ref.linear1), (ours.ff[2], ref.linear2),
                             (ours.norm1, ref.norm1), (ours.norm2, ref.norm2)):
            theirs.load_state_dict(mine.state_dict())
        torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5,
                                   msg=lambda m, norm=norm: f"{norm}-norm: {m}")


def test_decoder_block_matches_torch_decoder_layer_post_and_pre_norm():
    x, memory = rand(2, 6, 16, seed=1), rand(2, 9, 16, seed=2)
    for norm in ("post", "pre"):
        torch.manual_seed(0)
        ours = DecoderBlock(16, 4, 32, norm=norm).eval()
        ref = torch.nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                               norm_first=norm == "pre").eval()
        copy_into_torch_mha(ours.self_attn, ref.self_attn)
        copy_into_torch_mha(ours.cross_attn, ref.multihead_attn)
        for mine, theirs in ((ours.ff[0], ref.linear1), (ours.ff[2], ref.linear2),
                             (ours.norm1, ref.norm1), (ours.norm2, ref.norm2),
                             (ours.norm3, ref.norm3)):
            theirs.load_state_dict(mine.state_dict())
        y, (self_w, cross_w) = attnlab.run_with_maps(ours, x, memory)
        expected = ref(x, memory, tgt_mask=~attnlab.causal_mask(6))  # torch: True = may not
        torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5,
                                   msg=lambda m, norm=norm: f"{norm}-norm: {m}")
        assert self_w.shape == (2, 4, 6, 6) and cross_w.shape == (2, 4, 6, 9), norm
        assert torch.all(self_w[..., ~attnlab.causal_mask(6)] == 0.0), norm


def test_decoder_block_without_cross_attention_is_an_encoder_block_with_the_causal_mask():
    torch.manual_seed(0)
    ours = DecoderBlock(16, 4, 32, cross=False).eval()
    enc = EncoderBlock(16, 4, 32).eval()
    enc.attn.load_state_dict(ours.self_attn.state_dict())
    enc.norm1.load_state_dict(ours.norm1.state_dict())
    enc.ff.load_state_dict(ours.ff.state_dict())
    enc.norm2.load_state_dict(ours.norm3.state_dict())
    x = rand(2, 5, 16, seed=3)
    y, (w,) = attnlab.run_with_maps(ours, x)
    y_enc, (w_enc,) = attnlab.run_with_maps(enc, x, attnlab.causal_mask(5))
    assert torch.equal(y, y_enc) and torch.equal(w, w_enc)
    everything = torch.ones(5, 5, dtype=torch.bool)  # a mask that lifts the causal one
    y_open, (w_open,) = attnlab.run_with_maps(ours, x, mask=everything)
    assert torch.equal(y_open, enc(x)) and (w_open[..., ~attnlab.causal_mask(5)] > 0).all()


def test_without_a_mask_a_block_is_permutation_equivariant():
    torch.manual_seed(0)
    block = EncoderBlock(16, 4, 32).eval()
    x = rand(1, 6, 16, seed=7)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    torch.testing.assert_close(block(x[:, perm]), block(x)[:, perm], atol=1e-5, rtol=1e-5)


def test_under_the_causal_mask_no_output_depends_on_a_later_token():
    x = rand(2, 8, 16, seed=12)
    for norm in ("post", "pre"):
        torch.manual_seed(0)
        block = DecoderBlock(16, 4, 32, norm=norm, cross=False, rotary=True).eval()
        y = block(x)
        for t in range(8):
            changed = x.clone()
            changed[:, t:] = rand(2, 8 - t, 16, seed=100 + t)  # every token from t on is new
            y_changed = block(changed)
            assert torch.equal(y[:, :t], y_changed[:, :t]), (norm, t)  # bit-identical
            assert not torch.allclose(y[:, t:], y_changed[:, t:]), (norm, t)


def test_positional_encodings():
    table = sinusoidal_table(50, 8)
    assert torch.allclose(table[0, 0::2], torch.zeros(4))
    assert torch.allclose(table[0, 1::2], torch.ones(4))
    assert math.isclose(table[3, 0].item(), math.sin(3.0), rel_tol=1e-6)
    assert math.isclose(table[3, 3].item(), math.cos(3.0 / 10000 ** (2 / 8)), rel_tol=1e-5)
    x = torch.zeros(2, 10, 8)
    torch.testing.assert_close(PositionalEncoding(8, 50)(x), table[:10].expand(2, 10, 8))
    learned = PositionalEncoding(8, 50, kind="learned")
    assert learned(x).shape == (2, 10, 8) and learned.table.requires_grad


def test_blocks_say_what_is_wrong():
    raises_each([
        (lambda: PositionalEncoding(8, max_len=4, kind="learned")(torch.zeros(1, 5, 8)),
         "no vector for position 4"),
        (lambda: DecoderBlock(16, 4, 32)(rand(1, 3, 16)), "pass context"),
        (lambda: DecoderBlock(16, 4, 32, cross=False)(rand(1, 3, 16), rand(1, 3, 16)),
         "no cross-attention"),
    ], ValueError)

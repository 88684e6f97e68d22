"""attnlab.lessons.induction (notebook 10): the repeat task's structure, the attention-only model's
shapes and causality, training through the one loop; and the head measurements it uses from
attnlab.core.measures and interventions (the previous-token and induction scores on hand-made maps,
zero_heads)."""
import pytest
import torch
from helpers import raises_each

import attnlab
from attnlab.core import interventions, measures
from attnlab.core.generation import token_losses
from attnlab.core.models import AttentionOnly, AttentionOnlyLayer
from attnlab.lessons import induction as I


def test_the_second_copy_repeats_the_first_at_a_varying_distance():
    batch = I.repeat_task(300, seed=5)
    T = I.LENGTH
    assert batch.tokens.shape == (300, T) and batch.tokens.dtype == torch.long
    assert 0 <= batch.tokens.min() and batch.tokens.max() < I.VOCAB
    low, high = I.REPEAT
    assert ((low <= batch.size) & (batch.size <= high)).all()
    assert (batch.start >= 0).all() and (batch.start + 2 * batch.size <= T).all()
    for tokens, start, size in zip(batch.tokens, batch.start.tolist(), batch.size.tolist()):
        assert torch.equal(tokens[start + size:start + 2 * size], tokens[start:start + size])
    # every length and many starts occur: no fixed distance, no fixed place
    assert set(batch.size.tolist()) == set(range(low, high + 1))
    assert len(set(batch.start.tolist())) > 5
    assert torch.equal(I.repeat_task(300, seed=5).tokens, batch.tokens)
    assert not torch.equal(I.repeat_task(300, seed=6).tokens, batch.tokens)


def test_repeated_marks_the_second_copy_after_its_first_token():
    tokens = torch.arange(12)[None]  # (1, 12)
    batch = I.Repeats(tokens, torch.tensor([2]), torch.tensor([3]))  # copies at 2-4 and 5-7
    # predictions t -> t + 1; targets 6 and 7 are copyable, 5 (the copy's first token) is not
    assert batch.repeated[0].nonzero()[:, 0].tolist() == [5, 6]  # targets 6, 7
    real = I.repeat_task(200, seed=1)
    assert torch.equal(real.repeated.sum(1), real.size - 1)
    assert I.show(I.Repeats(torch.arange(8)[None], torch.tensor([1]), torch.tensor([2])), 0) \
        == " 0 [ 1  2] [ 3  4]  5  6  7"


def test_repeat_task_refuses_repeats_that_do_not_fit_twice():
    raises_each([
        (lambda: I.repeat_task(2, repeat=(6, 13)), "length // 2 = 12"),
        (lambda: I.repeat_task(2, repeat=[6, 8]), "repeat must be a pair"),
        (lambda: I.repeat_task(2, repeat=(7, 6)), "shortest <= longest"),
    ], ValueError)


def test_the_layer_is_x_plus_causal_attention():
    torch.manual_seed(0)
    layer = AttentionOnlyLayer(8, 2)
    x = torch.randn(2, 5, 8)
    out, (weights,) = attnlab.run_with_maps(layer, x)
    expected, expected_weights = layer.attn(x, attnlab.causal_mask(5))
    torch.testing.assert_close(out, x + expected)
    torch.testing.assert_close(weights, expected_weights)


def test_the_model_has_one_map_per_layer_and_never_reads_the_future():
    torch.manual_seed(0)
    model = AttentionOnly(I.VOCAB, I.LENGTH, n_layers=2, dtype=torch.float64)
    x = I.repeat_task(3, seed=2).tokens  # (3, 24)
    logits, maps = attnlab.run_with_maps(model, x)
    assert logits.shape == (3, I.LENGTH, I.VOCAB) and logits.dtype == torch.float64
    assert len(maps) == 2 and all(w.shape == (3, 2, I.LENGTH, I.LENGTH) for w in maps)
    future = ~attnlab.causal_mask(I.LENGTH)
    assert all((w[..., future] == 0).all() for w in maps)
    changed = x.clone()
    changed[:, 10] = (changed[:, 10] + 1) % I.VOCAB  # change token 10 only
    torch.testing.assert_close(model(changed)[:, :10], logits[:, :10].detach())  # the past: same
    assert not torch.allclose(model(changed)[:, 10:], logits[:, 10:])
    with pytest.raises(ValueError, match="max_len"):  # a learned table has no position 24
        model(torch.zeros(1, I.LENGTH + 1, dtype=torch.long))


def test_the_embeddings_start_at_embed_std():
    torch.manual_seed(0)
    model = AttentionOnly(I.VOCAB, 400, d_model=64, embed_std=0.5, dtype=torch.float64)
    assert model.embed.tokens.weight.std().item() == pytest.approx(0.5, rel=0.15)
    assert model.embed.pos.table.std().item() == pytest.approx(0.5, rel=0.05)


def test_training_goes_through_fit_keeps_the_split_losses_and_checkpoints_and_is_cached():
    state = torch.random.get_rng_state()
    run = I.train_induction(2, seed=3, steps=60, batch_size=16)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is left alone
    assert len(run.losses) == len(run.repeated) == len(run.random) == 60
    # the step's loss is the mean over all its predictions: between its two parts
    for total, rep, rand in zip(run.losses, run.repeated, run.random):
        assert min(rep, rand) - 1e-9 <= total <= max(rep, rand) + 1e-9
    assert sorted(run.checkpoints) == [0, 50, 60] and not run.model.training
    first = run.at(0)
    assert first is not run.model
    assert not torch.equal(first.unembed.weight, run.model.unembed.weight)
    assert all(torch.equal(a, b) for a, b in zip(run.at(60).parameters(), run.model.parameters()))
    with pytest.raises(ValueError, match="checkpoints"):
        run.at(7)
    assert I.train_induction(2, seed=3, steps=60, batch_size=16) is run


def test_the_cache_tells_the_series_seeds_apart(monkeypatch):
    run = I.train_induction(1, seed=0, steps=5, batch_size=4)
    monkeypatch.setenv("ATTNLAB_SEED", "1")
    other = I.train_induction(1, seed=0, steps=5, batch_size=4)
    assert other is not run and other.losses != run.losses


def test_evaluate_splits_repeated_and_random_tokens_by_position():
    torch.manual_seed(0)
    model = AttentionOnly(I.VOCAB, I.LENGTH, n_layers=1, dtype=torch.float64)
    batch = I.repeat_task(50, seed=4)
    result = I.evaluate(model, batch)
    losses = token_losses(model, batch.tokens).detach()  # (50, 23)
    assert result["repeated"] == pytest.approx(float(losses[batch.repeated].mean()))
    assert result["random"] == pytest.approx(float(losses[~batch.repeated].mean()))
    by_position = result["by_position"]  # (23, 2)
    assert by_position.shape == (I.LENGTH - 1, 2)
    assert torch.isnan(by_position[:I.REPEAT[0], 0]).all()  # no repeated token that early
    assert not torch.isnan(by_position[:, 1]).any()
    with pytest.raises(TypeError, match="Repeats"):
        I.evaluate(model, batch.tokens)


def test_drop_step_is_where_the_smoothed_loss_first_falls_below_the_level():
    run = I.Induction(None, {}, [], [3.0] * 50 + [1.0] * 50, [], {})
    assert I.drop_step(run, level=2.0, window=10) == 55  # steps 46-55: 4 × 3.0 and 6 × 1.0
    assert I.drop_step(run, level=0.5) is None
    assert torch.allclose(I.smooth([1.0, 2.0, 3.0, 4.0], 2), torch.tensor([1.5, 2.5, 3.5]).double())


# --- the two scores and the ablation, in attnlab.core.measures and interventions -----------------

def uniform_maps(B, H, T):
    causal = attnlab.causal_mask(T).double()
    return (causal / causal.sum(-1, keepdim=True)).expand(B, H, T, T)


def test_previous_token_score_on_hand_made_maps():
    T = 6
    on_previous = torch.eye(T).roll(-1, dims=1).tril().double()  # query t reads key t - 1 ...
    on_previous[0, 0] = 1.0  # ... and query 0, which has nothing before it, itself
    on_itself = torch.eye(T).double()
    weights = torch.stack([on_previous, on_itself, uniform_maps(1, 1, T)[0, 0]])[None]
    scores = measures.previous_token_score(weights)  # (3,)
    expected_uniform = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    torch.testing.assert_close(scores, torch.tensor([1.0, 0.0, expected_uniform]).double())


def test_induction_score_reads_the_key_after_the_last_earlier_occurrence():
    tokens = torch.tensor([[5, 1, 2, 5, 1, 2, 5]])  # 5 at 0, 3, 6; 1 at 1, 4; 2 at 2, 5
    assert measures.previous_occurrence(tokens).tolist() == [[-1, -1, -1, 0, 1, 2, 3]]
    T = tokens.shape[1]
    induction = torch.zeros(T, T).double()
    for t, s in ((3, 0), (4, 1), (5, 2), (6, 3)):
        induction[t, s + 1] = 1.0  # the token after the last earlier occurrence
    for t in range(3):
        induction[t, t] = 1.0  # new tokens: anywhere, not counted
    occurrence = torch.zeros(T, T).double()
    for t, s in ((3, 0), (4, 1), (5, 2), (6, 3)):
        occurrence[t, s] = 1.0  # the previous occurrence itself
    first = induction.clone()
    first[6] = 0.0
    first[6, 1] = 1.0  # query 6 reads after the FIRST 5 (position 0), not the last (3)
    weights = torch.stack([induction, occurrence, first, uniform_maps(1, 1, T)[0, 0]])[None]
    scores = measures.induction_score(weights, tokens)  # (4,)
    uniform = (1 / 4 + 1 / 5 + 1 / 6 + 1 / 7) / 4
    torch.testing.assert_close(scores, torch.tensor([1.0, 0.0, 0.75, uniform]).double())
    only_last = torch.zeros_like(tokens, dtype=torch.bool)
    only_last[0, 6] = True  # a `queries` mask: count query 6 alone
    torch.testing.assert_close(measures.induction_score(weights, tokens, only_last),
                               torch.tensor([1.0, 0.0, 0.0, 1 / 7]).double())
    with pytest.raises(ValueError, match="tokens and queries must be"):
        measures.induction_score(weights, tokens[:, :-1])


def test_zero_heads_removes_one_head_output_and_only_within_the_block():
    torch.manual_seed(0)
    attn = attnlab.MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    before, weights = attn(x)
    q, k, v = attn.project(x)
    heads = weights @ v  # (2, 2, 5, 4)
    heads[:, 1] = 0.0  # head 1 contributes nothing
    with interventions.zero_heads(attn, [1]):
        out, same_weights = attn(x)
    torch.testing.assert_close(out, attn.out(attnlab.core.attention.merge_heads(heads)))
    torch.testing.assert_close(same_weights, weights)  # where it looks is unchanged
    torch.testing.assert_close(attn(x)[0], before)  # and the hook is gone again
    with pytest.raises(ValueError, match="heads must be in 0..1"):
        with interventions.zero_heads(attn, [2]):
            pass
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        with interventions.zero_heads(torch.nn.Linear(2, 2), [0]):
            pass

"""Training: the one loop (its schedule, its mode handling), the recipe checks, and notebook 03's
model: deterministic, accurate, and needing its attention (uniform weights leave it at chance);
plus the plots that draw training results."""
import matplotlib.pyplot as plt
import pytest
import torch

import attnlab
from attnlab.data import NEGATIVE, POSITIVE, Vocab
from attnlab.models import TinyTransformer, eval_mode
from attnlab.plots import accuracy_curves, mean_spread_bars
from attnlab.sentiment import fit_head
from attnlab.train import (
    RECIPE,
    evaluate,
    fit,
    fit_classifier,
    initial_model,
    recipe,
    task_reviews,
    train_classifier,
)


@pytest.fixture(scope="module")
def recipe_model():
    torch.set_num_threads(1)
    return train_classifier()  # notebook 03's model, by RECIPE


def test_notebook_03s_model_is_accurate_and_needs_its_attention(recipe_model):
    h, model = recipe_model.history, recipe_model.model
    assert h["epoch"] == list(range(1, RECIPE["epochs"] + 1))
    assert all(len(v) == RECIPE["epochs"] for v in h.values())
    assert recipe_model.test_accuracy >= 0.97
    x, y, _ = recipe_model.test.tensors(recipe_model.vocab)
    with attnlab.uniform_attention(model):
        assert evaluate(model, x, y)[1] <= 0.65  # the words no longer single each other out
    assert (len(recipe_model.train), len(recipe_model.test)) == (
        RECIPE["n_train"], RECIPE["n_test"])
    block = model.blocks[0]
    assert (block.attn.d_model, block.attn.n_heads) == (RECIPE["d_model"], RECIPE["n_heads"])
    assert not recipe_model.model.training
    x, y, _ = recipe_model.test.tensors(recipe_model.vocab)
    assert evaluate(recipe_model.model, x, y)[1] == recipe_model.test_accuracy


def test_swapping_the_two_sentiment_words_flips_the_prediction(recipe_model):
    vocab, model = recipe_model.vocab, recipe_model.model
    x, y, pos = recipe_model.test.tensors(vocab)
    sentiment = torch.tensor([vocab.stoi[w] for w in (*POSITIVE, *NEGATIVE)])
    first = torch.isin(x, sentiment).int().argmax(1)  # (N,)   the sentiment word before "but"
    rows = torch.arange(len(y))
    swapped = x.clone()
    swapped[rows, first], swapped[rows, pos] = x[rows, pos], x[rows, first]  # "bad but good"
    before = model.predict_proba(x).argmax(-1)
    after = model.predict_proba(swapped).argmax(-1)
    assert float((after != before).float().mean()) >= 0.95


def test_training_is_deterministic():
    rng_before = torch.get_rng_state()
    a = train_classifier("contrast", "learned", seed=3, epochs=2)
    assert torch.equal(torch.get_rng_state(), rng_before), "the caller's RNG state is left alone"
    b = train_classifier("contrast", "learned", seed=3, epochs=2)
    assert a.history == b.history
    for (name, pa), (_, pb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(pa, pb), name
    c = train_classifier("contrast", "learned", seed=4, epochs=2)
    assert c.history != a.history


def test_fit_classifier_stops_at_the_first_epoch_that_reaches_stop_at():
    vocab = Vocab.for_reviews()
    train, test = task_reviews("bag", seed=0)
    data = (*train.tensors(vocab)[:2], *test.tensors(vocab)[:2])
    full = fit_classifier(initial_model(len(vocab), seed=0), *data, epochs=3, seed=0)
    level = full["test_acc"][1]
    stop = next(e for e, a in zip(full["epoch"], full["test_acc"]) if a >= level)
    short = fit_classifier(initial_model(len(vocab), seed=0), *data, epochs=3, seed=0,
                           stop_at=level)
    assert short == {key: values[:stop] for key, values in full.items()}


def test_without_positions_the_contrast_task_stays_at_chance():
    without = train_classifier("contrast", "none", seed=0, epochs=4).test_accuracy
    assert abs(without - 0.5) < 0.08  # 400 test sentences: chance 0.5 +- 0.025 (one s.e.)


def test_fit_warms_up_decays_and_leaves_the_model_in_eval_mode_even_when_a_step_raises():
    # loss = p: a constant gradient of 1, so each Adam step moves p by the step's learning rate
    model = torch.nn.Linear(1, 1, bias=False)
    values = [model.weight.item()]
    losses = fit(model, range(6), lambda m, batch: m.weight.sum(), lr=0.1, warmup=3,
                 decay_steps=6, after_step=lambda step, loss: values.append(model.weight.item()))
    steps = [a - b for a, b in zip(values, values[1:])]
    expected = [0.1 * min(1.0, (s + 1) / 3) * (1 - s / 6) for s in range(6)]
    assert steps == pytest.approx(expected, rel=1e-4) and len(losses) == 6
    assert not model.training

    def boom(m, batch):
        raise RuntimeError("boom")

    model.train()
    with pytest.raises(RuntimeError, match="boom"):
        fit(model, [0], boom, lr=0.1)
    assert not model.training


def test_fit_classifier_prints_one_rounded_line_per_epoch_or_nothing(capsys):
    torch.manual_seed(0)
    x = torch.randint(2, 62, (64, 16))
    y = torch.randint(0, 2, (64,))
    history = fit_classifier(TinyTransformer(62), x, y, x, y, epochs=2, verbose=True)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("epoch  1/2  train loss ")
    assert f"acc {history['test_acc'][1]:.3f}" in lines[1]
    fit_classifier(TinyTransformer(62), x, y, x, y, epochs=1)
    assert capsys.readouterr().out == ""


def test_fit_classifier_wants_as_many_labels_as_inputs():
    x = torch.ones(4, 3, dtype=torch.long)
    y = torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match="same length"):
        fit_classifier(TinyTransformer(62), x, y[:3], x, y)


def test_recipes_refuse_unknown_keys_and_check_the_values_they_override():
    with pytest.raises(TypeError, match="unknown recipe keys"):
        train_classifier(epoch=3)
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        recipe({"steps": 10, "lr": 0.1}, {"steps": 0})


def test_eval_mode_restores_the_mode_even_when_the_body_raises():
    for training in (True, False):
        model = TinyTransformer(62).train(training)
        with eval_mode(model) as inside:
            assert inside is model and not model.training, training
            assert not any(m.training for m in model.modules()), training
        assert model.training is training
        with pytest.raises(RuntimeError, match="boom"), eval_mode(model):
            raise RuntimeError("boom")
        assert model.training is training, training
        assert all(m.training is training for m in model.modules()), training


def test_evaluate_restores_train_mode_when_the_model_raises():
    model = TinyTransformer(62, max_len=4).train()
    x, y = torch.ones(2, 5, dtype=torch.long), torch.zeros(2, dtype=torch.long)  # too long
    with pytest.raises(ValueError, match="max_len"):
        evaluate(model, x, y)
    assert model.training
    for probe in (model.predict_proba, model.attention_maps):
        with pytest.raises(ValueError, match="max_len"):
            probe(x)
        assert model.training

def test_plots_draw_histories_and_repeated_measurements():
    history = {"epoch": [1, 2], "train_loss": [0.7, 0.3], "test_loss": [0.6, 0.4],
               "test_acc": [0.6, 0.8]}
    fig2 = mean_spread_bars({"bag": {"learned": [1.0, 0.99], "none": [1.0, 1.0]},
                             "order": {"learned": [0.9, 0.95], "none": [0.5, 0.48]}}, chance=0.5)
    assert len(fig2.axes[0].patches) == 4
    later = {**history, "test_acc": [0.7, 1.0]}
    fig3 = accuracy_curves({"learned": [history, later], "sinusoidal": [later]}, chance=0.5)
    lines = fig3.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["learned (mean of 2)", "sinusoidal (1 run)",
                                                    "chance"]
    assert list(lines[0].get_ydata()) == pytest.approx([0.65, 0.9])  # the mean per epoch
    plt.close("all")
    with pytest.raises(ValueError, match="groups must be"):
        mean_spread_bars({})


def test_the_sentiment_head_is_seeded_without_touching_the_callers_random_state():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 6, generator=g, dtype=torch.float64), torch.arange(40) % 2
    torch.manual_seed(123)
    before = torch.get_rng_state()
    head, _ = fit_head(x.float(), y, x.float(), y, epochs=1)
    assert torch.equal(torch.get_rng_state(), before)
    again, _ = fit_head(x.float(), y, x.float(), y, epochs=1)
    assert torch.equal(head.weight, again.weight)  # the seed, not the caller, fixes the weights

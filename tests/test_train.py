"""Training: the one loop (its schedule, its mode handling), the recipe checks, and notebook 03's
model: deterministic, accurate, and needing its attention (uniform weights leave it at chance);
plus the plots that draw training results."""
import matplotlib.pyplot as plt
import pytest
import torch
from helpers import ROOT

import attnlab
from attnlab.core import training as module
from attnlab.core.models import TinyTransformer, eval_mode
from attnlab.core.recipes import SORTER, TINY
from attnlab.core.training import evaluate, fit, train
from attnlab.lessons import decoders, induction, scaling, sets
from attnlab.lessons.classifier import fit_classifier, initial_model, task_reviews, train_classifier
from attnlab.lessons.data import NEGATIVE, POSITIVE, Vocab
from attnlab.lessons.sentiment import fit_head
from attnlab.views.plots import accuracy_curves, mean_spread_bars


@pytest.fixture(scope="module")
def recipe_model():
    torch.set_num_threads(1)
    return train_classifier()  # notebook 03's model, by recipes.TINY


def test_notebook_03s_model_is_accurate_and_needs_its_attention(recipe_model):
    h, model = recipe_model.history, recipe_model.model
    assert h["epoch"] == list(range(1, TINY.epochs + 1))
    assert all(len(v) == TINY.epochs for v in h.values())
    assert recipe_model.test_accuracy >= 0.97
    x, y, _ = recipe_model.test.tensors(recipe_model.vocab)
    with attnlab.uniform_attention(model):
        assert evaluate(model, x, y)[1] <= 0.65  # the words no longer single each other out
    assert (len(recipe_model.train), len(recipe_model.test)) == (
        TINY.n_train, TINY.n_test)
    block = model.blocks[0]
    assert (block.attn.d_model, block.attn.n_heads) == (TINY.d_model, TINY.n_heads)
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


def test_undecided_reviews_teach_the_model_to_say_it_cannot_tell():
    """Issue 51: trained with reviews that hold no sentiment word under both labels, a model
    says p near 0.5 where it reads no word it knows, and still reads the words it knows."""
    vocab = Vocab.for_reviews()
    blind = ["the film was long", "What a terrific film, the cast was outstanding!", "",
             "lousy", "東京の映画"]
    x = vocab.encode_batch(blind)  # (5, T)
    known = vocab.encode_batch(["the plot was great", "the cast was dull"])  # (2, T)
    plain = train_classifier("bag", seed=0, epochs=3)
    careful = train_classifier("bag", seed=0, undecided=400)  # the app's recipe
    assert len(careful.train) == len(plain.train) + 800 and careful.test == plain.test
    with torch.no_grad():
        sure = plain.model.predict_proba(x)[:, 1]  # (5,)
        p = careful.model.predict_proba(x)[:, 1]  # (5,)
        read = careful.model.predict_proba(known).argmax(-1)  # (2,)
    assert (sure - 0.5).abs().max() > 0.3  # without them: sure of something it cannot read
    assert (p - 0.5).abs().max() < 0.1, p
    assert read.tolist() == [1, 0] and careful.test_accuracy >= 0.95
    with pytest.raises(ValueError, match="undecided"):
        train_classifier("bag", undecided=-1)


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
        SORTER.but(steps=0)
    with pytest.raises(ValueError, match="lr must be"):
        TINY.but(lr=0.0)
    assert TINY.but(epochs=3).epochs == 3 and TINY.epochs == 12  # a new recipe, TINY unchanged
    assert str(SORTER) == str({"d_model": 32, "n_heads": 2, "d_ff": 64, "lr": 1e-2,
                               "batch_size": 64, "steps": 300})  # what notebook 08 prints


def test_train_cuts_the_data_as_its_recipe_says_and_refuses_data_that_does_not_fit():
    seen = []

    def loss_fn(model, batch):
        x, y = batch
        seen.append(y.tolist())
        return model(x.double()).sum()

    x, y = torch.arange(6.0)[:, None], torch.arange(6)
    by_epochs = TINY.but(epochs=2, batch_size=4)
    model, losses = train(by_epochs, lambda: torch.nn.Linear(1, 1, dtype=torch.float64),
                          loss_fn, (x, y), seed=0)
    assert len(losses) == 4 and [len(b) for b in seen] == [4, 2, 4, 2]
    assert sorted(sum(seen[:2], [])) == list(range(6)) != sum(seen[:2], [])  # shuffled, each once
    assert not model.training
    seen.clear()
    train(SORTER.but(steps=3, batch_size=2), model, loss_fn, (x, y))
    assert seen == [[0, 1], [2, 3], [4, 5]]  # steps: in order, new rows every step
    with pytest.raises(ValueError, match="steps × batch_size = 8 rows"):
        train(SORTER.but(steps=4, batch_size=2), model, loss_fn, (x, y))
    with pytest.raises(ValueError, match="lengths \\[6, 5\\]"):
        train(by_epochs, model, loss_fn, (x, y[:5]))
    with pytest.raises(TypeError, match="recipe must be one of attnlab.core.recipes"):
        train({"lr": 0.1}, model, loss_fn, (x, y))


def test_train_draws_the_weights_from_the_seed_and_leaves_the_callers_rng_alone():
    state = torch.random.get_rng_state()
    a, _ = train(SORTER.but(steps=1, batch_size=1), lambda: torch.nn.Linear(2, 2),
                 lambda m, b: m(b).sum(), torch.ones(1, 2), seed=3)
    b = initial_model(62, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    c, _ = train(SORTER.but(steps=1, batch_size=1), lambda: torch.nn.Linear(2, 2),
                 lambda m, b: m(b).sum(), torch.ones(1, 2), seed=3)
    again = initial_model(62, seed=3)
    assert torch.equal(a.weight, c.weight)
    assert torch.equal(b.embed.tokens.weight, again.embed.tokens.weight)


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
    for probe in (model.predict_proba, lambda x: attnlab.attention_maps(model, x)):
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


def _trainers():
    """Every trainer of the series, each with a recipe small enough for a test."""
    labels = torch.arange(40) % 4
    features = torch.randn(40, 8, generator=torch.Generator().manual_seed(0))
    members, odd = sets.odd_one_out(labels.numpy(), n_sets=16, set_size=4)
    x, y = torch.randn(12, 6), torch.arange(12) % 2
    return {
        "train_classifier": lambda: train_classifier(epochs=1, n_train=64, n_test=16),
        "train_at_scale": lambda: scaling.train_at_scale(epochs=1, d_head=8),
        "train_sorter": lambda: decoders.train_sorter(steps=2),
        "train_reverser": lambda: decoders.train_reverser(steps=2),
        "train_induction": lambda: induction.train_induction(2, seed=5, steps=2),
        "train_odd_one_out": lambda: sets.train_odd_one_out(features, members, odd,
                                                            directions=4, d_model=8),
        "fit_head": lambda: fit_head(x, y, x, y, epochs=1),
    }


@pytest.mark.parametrize("name", list(_trainers()))
def test_every_trainer_trains_through_train_and_leaves_the_callers_rng_alone(name, monkeypatch):
    calls, real_fit = [], module.fit
    monkeypatch.setattr(module, "fit", lambda *a, **kw: calls.append(1) or real_fit(*a, **kw))
    trainer = _trainers()[name]
    state = torch.random.get_rng_state()
    trainer()
    assert torch.equal(torch.random.get_rng_state(), state), f"{name} moved the caller's RNG"
    assert calls == [1], f"{name} must train through attnlab.core.training.train, once"


def test_no_module_but_train_runs_the_loop_or_seeds_torchs_global_rng():
    """One path: `train` is the only caller of `fit`, `seeded` the only seeding of a model's
    weights (exercise fixtures fork the RNG for their example inputs)."""
    for path in sorted((ROOT / "attnlab").rglob("*.py")):
        if path.name in ("training.py", "repro.py") or "exercises" in path.parts:
            continue
        text = path.read_text()
        assert " fit(" not in text and "fit(model" not in text, path
        assert "torch.manual_seed(" not in text, path

"""attnlab.views.widgets.PredictionComparison (notebook 05), tested without a browser: type into the
text field, read back what the widget shows."""
import re

import pytest
import torch

from attnlab.core.models import TinyTransformer
from attnlab.lessons import data
from attnlab.lessons.data import Vocab
from attnlab.views.widgets import PredictionComparison


@pytest.fixture(scope="module")
def compare():
    vocab = Vocab.for_reviews()
    torch.manual_seed(0)
    models = {"with positions": TinyTransformer(len(vocab), positions="sinusoidal"),
              "no positions": TinyTransformer(len(vocab), positions="none")}
    return PredictionComparison(models, vocab, text="the plot was great")


def shown(compare):
    found = re.findall(r'class="attnlab-compare-prob">([0-9.]+)<', compare.table_html.value)
    probs = [float(p) for p in found]
    labels = re.findall(r'class="attnlab-compare-label">(\w+)<', compare.table_html.value)
    return probs, labels


def test_view_matches_the_models_and_the_widget_shows_it(compare):
    v = compare.view()
    assert v["tokens"] == ["the", "plot", "was", "great"] and v["unknown"] == [False] * 4
    x = compare.vocab.encode_batch([v["tokens"]])
    for name, model in compare.models.items():
        p = model.predict_proba(x)[0, 1].item()
        assert v["predictions"][name]["p_positive"] == pytest.approx(p)
        assert v["predictions"][name]["label"] == ("positive" if p >= 0.5 else "negative")
    probs, labels = shown(compare)
    assert probs == [round(p["p_positive"], 3) for p in v["predictions"].values()]
    assert labels == [p["label"] for p in v["predictions"].values()]
    text = compare.text(v)
    assert text.splitlines()[0] == "reads: the plot was great" and len(text.splitlines()) == 3


def test_typing_updates_the_view_and_any_string_is_shown_as_text(compare):
    compare.input.value = "<script>alert(1)</script> zebra GOOD"
    assert "<script>" not in compare.tokens_html.value and "script" in compare.tokens_html.value
    v = compare.view()
    assert v["tokens"] == ["script", "alert", "1", "script", "zebra", "good"]
    assert v["unknown"] == [False, True, True, False, True, False]  # "script" is a filler word
    compare.input.value = ""
    assert "(no words)" in compare.tokens_html.value and len(shown(compare)[0]) == 2
    assert compare.text().startswith("reads: (no words)")
    compare.input.value = "x" * 100_000  # one huge word: shown (escaped), wrapping, marked unknown
    assert 'overflow-wrap:anywhere' in compare.tokens_html.value
    assert compare.view()["unknown"] == [True]
    compare.input.value = "good " * 1000 + "ünïcödé ☃"
    v = compare.view()
    assert len(v["tokens"]) == 64 and v["truncated"]
    assert "cut to the first 64 words" in compare.text(v)
    assert all(0 <= p <= 1 for p in shown(compare)[0])


def test_without_positions_word_order_cannot_change_the_prediction(compare):
    a = compare.view("the acting was great and the ending was awful")["predictions"]
    b = compare.view("the acting was awful and the ending was great")["predictions"]
    assert a["no positions"]["p_positive"] == pytest.approx(b["no positions"]["p_positive"],
                                                            abs=1e-6)


def test_bad_arguments_raise_clear_errors():
    vocab = Vocab.for_reviews()
    with pytest.raises(ValueError, match="models must be a non-empty dict"):
        PredictionComparison({}, vocab)
    with pytest.raises(TypeError, match="predict_proba"):
        PredictionComparison({"m": object()}, vocab)
    with pytest.raises(TypeError, match="vocab must be"):
        PredictionComparison({"m": TinyTransformer(62)}, ["good"])
    with pytest.raises(TypeError, match="display names"):
        PredictionComparison({1: TinyTransformer(62)}, vocab)


def test_a_text_unlike_the_training_reviews_is_not_sure(compare):
    """Issue 51: models trained only on "X but Y" reviews called "the movie was great"
    negative (0.006); with its task the widget says what they were trained on and answers
    "not sure" outside it, with the reason, the probabilities still shown."""
    models, vocab = compare.models, compare.vocab
    contrast = PredictionComparison(models, vocab, text="the movie was great", task="contrast")
    said = contrast.widget.children[0].value
    assert "trained only on reviews with a sentiment word, then" in said
    v = contrast.view()
    assert v["outside"] and {p["label"] for p in v["predictions"].values()} == {"not sure"}
    labels = re.findall(r'class="attnlab-compare-label">([^<]+)<', contrast.table_html.value)
    assert labels == ["not sure"] * 2 and "Not sure: it is not" in contrast.table_html.value
    assert contrast.text(v).splitlines()[-1].startswith("  not sure: it is not")
    inside = contrast.view("the plot was dull but the cast was superb")
    assert inside["outside"] is None
    assert {p["label"] for p in inside["predictions"].values()} <= {"positive", "negative"}
    assert data.outside_task(["the", "plot", "was", "great"], "bag") is None
    assert data.outside_task(["great", "but", "good"], "contrast")  # same polarity twice
    assert compare.view()["outside"] is None  # no task: no judgement
    with pytest.raises(ValueError, match="task must be one of"):
        PredictionComparison(models, vocab, task="sorting")

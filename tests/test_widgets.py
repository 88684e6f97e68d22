"""attnlab.views.widgets, tested without a browser: move the sliders, read back what the widgets
show."""
import math
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from helpers import raises_each

from attnlab import scaled_dot_product_attention
from attnlab.lessons.scaling import softmax_pair
from attnlab.views.widgets import (
    RESTART_NOTE,
    AttentionPlayground,
    NextTokenExplorer,
    Slider,
    SoftmaxScaleExplorer,
)

Q = [1.0, 0.0, 0.0, 0.0]
K = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.7, 0.7, 0.0, 0.0]]
V = [[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]]


def shown_numbers(html_value: str, css_class: str) -> list[float]:
    """The numbers an HTML widget shows inside elements of `css_class` (what a browser test
    reads)."""
    return [float(x) for x in re.findall(rf'class="{css_class}">([-0-9.]+)<', html_value)]


@pytest.fixture
def playground():
    return AttentionPlayground(K, V, query=Q)


def reference(query):
    out, w = scaled_dot_product_attention(torch.tensor([query], dtype=torch.float64),
                                          torch.tensor(K, dtype=torch.float64),
                                          torch.tensor(V, dtype=torch.float64))
    return out[0].numpy(), w[0].numpy()


def test_playground_view_is_the_worked_example(playground):
    v = playground.view()
    np.testing.assert_allclose(v["scores"], [1.0, 0.0, 0.7])
    np.testing.assert_allclose(v["scaled_scores"], [0.5, 0.0, 0.35])
    out, w = reference(Q)
    np.testing.assert_allclose(v["weights"], w)
    np.testing.assert_allclose(v["output"], out)
    assert v["weights"].argmax() == 0 and v["weights"].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(v["output"], v["weights"] @ np.array(V))


def test_playground_shows_the_weights_and_output_as_text(playground):
    v = playground.view()
    assert shown_numbers(playground.weights_html.value, "attnlab-weight-value") == \
        [round(x, 3) for x in v["weights"].tolist()]
    assert shown_numbers(playground.output_html.value, "attnlab-output-value") == \
        [round(x, 3) for x in v["output"].tolist()]
    assert "attnlab-playground-weights" in playground.weights_html._dom_classes
    assert "attnlab-playground-output" in playground.output_html._dom_classes
    assert "attnlab-playground" in playground.widget._dom_classes
    assert [s.description for s in playground.sliders] == [f"query[{i}]" for i in range(4)]
    sliders = playground.sliders
    assert sliders[0].options[0] == -3.0 and sliders[0].labels[-1] == "3.00"
    # Each slider's position (what the browser draws) is the query's coordinate, zeros too.
    assert [s.labels[s.index] for s in sliders] == ["1.00", "0.00", "0.00", "0.00"]
    text = playground.text()
    assert "0.405" in text and "[5.797, 4.203]" in text


def test_moving_a_slider_changes_the_weights(playground):
    before = shown_numbers(playground.weights_html.value, "attnlab-weight-value")
    playground.sliders[0].value = 0.0
    playground.sliders[1].value = 2.0  # point the query at key 1
    after = shown_numbers(playground.weights_html.value, "attnlab-weight-value")
    assert after != before
    v = playground.view()
    np.testing.assert_allclose(v["query"], [0.0, 2.0, 0.0, 0.0])
    out, w = reference([0.0, 2.0, 0.0, 0.0])
    np.testing.assert_allclose(v["weights"], w)
    assert after == [round(x, 3) for x in w.tolist()]
    assert shown_numbers(playground.output_html.value, "attnlab-output-value") == \
        [round(x, 3) for x in out.tolist()]
    assert w.argmax() == 1


def test_set_query_updates_once_and_matches_view(playground):
    calls = []
    original = playground.view
    playground.view = lambda query=None: calls.append(query) or original(query)
    result = playground.set_query([0.0, 0.0, 1.0, 0.0])
    assert len(calls) == 1  # four sliders moved, one recomputation
    np.testing.assert_allclose(result["weights"], 1 / 3)  # orthogonal to every key: uniform
    np.testing.assert_allclose(playground.query, [0.0, 0.0, 1.0, 0.0])


def test_a_longer_query_concentrates_the_weight(playground):
    w0 = [playground.view([c, 0, 0, 0])["weights"][0] for c in (0.5, 1.0, 2.0, 3.0)]
    assert np.all(np.diff(w0) > 0)


def test_labels_are_shown_as_text_not_html():
    labels = ["<b>bold</b>", "", "ключ & 鍵 " + "x" * 500]
    p = AttentionPlayground(K, V, key_labels=labels)
    value = p.weights_html.value
    assert "<b>bold</b>" not in value and "&lt;b&gt;bold&lt;/b&gt;" in value
    assert "ключ &amp; 鍵" in value
    assert "<b>bold</b>" in p.text()  # the plain-text view shows the label as given


def test_long_labels_wrap_instead_of_widening_the_table():
    p = AttentionPlayground(K, V, key_labels=["x" * 5000, "k1", "k2"])
    assert 'overflow-wrap:anywhere">' + "x" * 5000 in p.weights_html.value


def test_default_query_is_the_first_key():
    p = AttentionPlayground(K, V)
    np.testing.assert_allclose(p.query, K[0])


def test_playground_rejects_what_it_cannot_show(playground):
    raises_each([
        (lambda: AttentionPlayground([1.0, 2.0], V), ValueError, "keys must be a 2-D matrix"),
        (lambda: AttentionPlayground(K, V[:2]), ValueError, "values must have 3 rows"),
        (lambda: AttentionPlayground(K, V, query=[1.0, 0.0]), ValueError,
         "query must have 4 columns"),
        (lambda: AttentionPlayground(K, V, query=[9.0, 0, 0, 0]), ValueError, "slider range"),
        (lambda: AttentionPlayground(K, V, key_labels=["a"]), ValueError, "one label per key"),
        (lambda: AttentionPlayground("abc", V), TypeError, "keys must be a matrix of numbers"),
        (lambda: AttentionPlayground([[float("nan")] * 4] * 3, V), ValueError, "finite"),
        (lambda: AttentionPlayground(K, V, query="abc"), TypeError,
         "query must be a matrix of numbers"),
        (lambda: AttentionPlayground(K, V, query=[[1.0, 0, 0, 0], [0, 1.0, 0, 0]]), ValueError,
         "query must be one vector"),
        (lambda: AttentionPlayground(K, V, key_labels="abc"), TypeError,
         "key_labels must be a list"),
        (lambda: AttentionPlayground(K, V, key_labels=3), TypeError, "key_labels must be a list"),
        (lambda: AttentionPlayground(K, V, step=0), ValueError,
         "step must be a finite number > 0 and <= 3.0, got 0"),  # at most the slider limit
        (lambda: AttentionPlayground([[]], [[]]), ValueError, "keys must not be empty"),
        (lambda: playground.view("x"), TypeError, "query must be a matrix of numbers"),
        (lambda: playground.set_query([1.0]), ValueError, "query must have 4 columns"),
    ])


def test_explorer_view_matches_softmax_pair_and_attention():
    e = SoftmaxScaleExplorer(d_ks=[4, 64, 1024], d_k=64)
    v = e.view()
    ref = softmax_pair(64, n_keys=8, seed=0, max_d_k=1024)
    np.testing.assert_array_equal(v["scaled"], ref["scaled"])
    _, w = scaled_dot_product_attention(torch.as_tensor(v["query"])[None],
                                        torch.as_tensor(v["keys"]),
                                        torch.zeros(8, 1, dtype=torch.float64), scale=1.0)
    np.testing.assert_allclose(v["unscaled"], w[0].numpy())
    assert v["max_unscaled"] == pytest.approx(v["unscaled"].max())


def test_a_slider_takes_the_nearest_option_and_moves_by_position():
    """The browser moves `index`; Python code sets `value`: each follows the other, and a value
    between options snaps to the nearest, so what the slider shows is what is computed."""
    s = Slider([0.25, 0.5, 1.0, 2.0], 1.0, "temperature", labels=["0.25", "0.5", "1", "2"])
    assert (s.index, s.value) == (2, 1.0)
    s.index = 0  # a drag to the left end, as the front end sends it
    assert s.value == 0.25
    s.value = 1.7
    assert (s.index, s.value) == (3, 2.0)
    assert s.description == "temperature" and s.labels[s.index] == "2"
    with pytest.raises(ValueError, match="one label per option"):
        Slider([1.0, 2.0], 1.0, "d_k", labels=["1"])
    with pytest.raises(ValueError, match="options must not be empty"):
        Slider([], 0.0, "d_k")


def test_explorer_slider_changes_the_distributions():
    e = SoftmaxScaleExplorer(d_ks=[4, 64, 1024], d_k=4)
    first_png, first_summary = e.png, e.summary.value
    assert first_png.startswith(b"\x89PNG")
    e.slider.value = 1024
    v = e.view()
    assert v["d_k"] == 1024
    assert e.png != first_png and e.summary.value != first_summary
    assert shown_numbers(e.summary.value, "attnlab-max-unscaled") == [round(v["max_unscaled"], 3)]
    assert shown_numbers(e.summary.value, "attnlab-max-scaled") == [round(v["max_scaled"], 3)]
    assert v["max_unscaled"] > 0.99 > 0.5 > v["max_scaled"]  # unscaled one-hot, scaled spread
    assert e.slider.description == "d_k"
    assert "d_k = 1024" in e.text()


def test_explorer_draw_returns_two_panels():
    e = SoftmaxScaleExplorer(d_ks=[4, 16], d_k=16)
    fig = e.draw()
    assert len(fig.axes) == 2 and len(fig.axes[0].patches) == 8
    plt.close(fig)


def test_explorer_offers_only_the_d_ks_it_was_given():
    with pytest.raises(ValueError, match="d_k must be one of 4, 8, got 16"):
        SoftmaxScaleExplorer(d_ks=[4, 8], d_k=16)


def test_every_widget_ends_with_what_to_do_after_a_kernel_restart(playground):
    """After a restart the sliders still move in the browser and nothing answers them: each
    widget's last line says to run its cell again (issue 28, a widget's fallback)."""
    for widget in (playground.widget, SoftmaxScaleExplorer(d_k=8).widget):
        note = widget.children[-1]
        assert "attnlab-restart-note" in note._dom_classes and RESTART_NOTE in note.value


def test_next_token_explorer_shows_the_distribution_under_each_temperature():
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0])
    names = ["<b>", " the", "\n", "é", "x"]
    e = NextTokenExplorer(logits, lambda ids: "".join(names[i] for i in ids), k=3)
    v = e.view()
    exact = torch.softmax(logits.double(), -1)
    assert v["ids"] == [0, 1, 2] and v["tokens"] == ["<b>", " the", "\n"]
    assert abs(v["probs"][0] - exact[0].item()) < 1e-12
    assert abs(v["rest"] - exact[3:].sum().item()) < 1e-12
    cold, hot = e.view(0.5)["probs"][0], e.view(2.0)["probs"][0]
    assert cold > v["probs"][0] > hot  # a lower temperature sharpens, a higher one flattens
    e.slider.value = 2.0  # the widget follows its slider
    assert "temperature 2" in e.table_html.value and f"{hot:.3f}" in e.table_html.value
    assert "&lt;b&gt;" in e.table_html.value and "<b>" not in e.table_html.value  # text as text
    assert "'\\n'" in e.text() and "' the'" in e.text()  # spaces and newlines visible
    assert RESTART_NOTE in e.widget.children[-1].value


def test_next_token_explorer_refuses_bad_input_clearly():
    decode = str
    with pytest.raises(TypeError, match="1-D tensor"):
        NextTokenExplorer(torch.zeros(2, 3), decode)
    with pytest.raises(ValueError, match="finite"):
        NextTokenExplorer(torch.tensor([0.0, math.nan]), decode)
    with pytest.raises(TypeError, match="decode must"):
        NextTokenExplorer(torch.zeros(3), "tokenizer")
    with pytest.raises(ValueError, match="temperature must be one of"):
        NextTokenExplorer(torch.zeros(3), decode, temperature=0.7)

"""Every figure says what it shows, in colours and marks that survive colour blindness (issue 50).

attnlab.views.figure_text writes a figure's text alternative from what the figure draws;
attnlab.views.plots.show_figure displays it with the figure and records the colours drawn. These
tests hold the stored notebooks to both (a figure shown any other way has no alternative and fails
here), and check that the words follow the data, not a template.
"""
import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgb

from attnlab.classroom.series import notebook_paths
from attnlab.views.figure_text import describe, number, styles
from attnlab.views.plots import (
    HATCHES,
    PALETTE,
    accuracy_curves,
    attention_heatmap,
    head_grid,
    mean_spread_bars,
)

# Perceptually uniform maps, grey for pictures, and ColorBrewer's red-blue for signed values
# (a diverging map whose two ends stay apart under every common colour-vision deficiency).
COLORMAPS = {"viridis", "cividis", "magma", "inferno", "plasma", "gray", "Greys", "RdBu_r"}
PLACEHOLDER = "No description has been provided for this image"


def stored_figures():
    """(notebook, cell index, figure output, the output after it) for every stored figure."""
    for path in notebook_paths():
        if not path.exists():
            continue
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            outputs = cell.get("outputs", [])
            for k, output in enumerate(outputs):
                if "image/png" in output.get("data", {}):
                    following = outputs[k + 1] if k + 1 < len(outputs) else {}
                    yield path.name, i, output, following


def neutral(colour: str) -> bool:
    r, g, b = to_rgb(colour)
    return max(r, g, b) - min(r, g, b) < 0.02  # black, a grey or white


def test_every_stored_figure_carries_its_text_and_its_caption():
    figures = list(stored_figures())
    assert len(figures) >= 35, len(figures)
    for name, cell, output, caption in figures:
        alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
        where = f"{name} cell {cell}: draw it through attnlab.views.plots.show_figure"
        assert alt.startswith("Figure") and len(alt.split()) >= 8, where
        assert len(alt.split()) <= 160, f"{where}: {len(alt.split())} words is too long to hear"
        assert "".join(caption.get("data", {}).get("text/plain", [])) == alt, where
        assert 'class="attnlab-figure-text"' in "".join(caption["data"]["text/html"]), where


def test_every_stored_figure_keeps_to_the_palette_and_is_read_without_colour():
    palette = {c.lower() for c in PALETTE}
    for name, cell, output, _ in stored_figures():
        drawn = output["metadata"]["attnlab"]["styles"]
        where = f"{name} cell {cell}"
        for mark in drawn["lines"] + drawn["bars"]:
            assert mark["color"] in palette or neutral(mark["color"]), (where, mark)
        assert set(drawn["colormaps"]) <= COLORMAPS, (where, drawn["colormaps"])
        # Two labelled curves of one panel differ by marker or line style, not by colour alone;
        # so do two series of bars, by hatch.
        for axes in {m["axes"] for m in drawn["lines"]}:
            looks = {}
            for m in drawn["lines"]:
                if m["axes"] == axes and m["label"] and not neutral(m["color"]):
                    looks.setdefault((m["marker"], m["linestyle"]), set()).add(m["label"])
            assert all(len(labels) == 1 for labels in looks.values()), (where, looks)
        series = {}
        for bar in drawn["bars"]:
            series.setdefault((bar["axes"], bar["color"]), set()).add(bar["hatch"])
        hatches = [(axes, frozenset(h)) for (axes, _), h in series.items()]
        assert len(hatches) == len(set(hatches)), (where, series)


def test_a_heatmaps_text_names_the_key_each_query_reads_most():
    weights = torch.tensor([[0.1, 0.8, 0.1], [0.7, 0.2, 0.1]])  # (T_q, T_k)
    ax = attention_heatmap(weights, ["good", "<b>"], ["not", "good", "film"], title="head 1")
    text = describe(ax.figure)
    assert "2 rows (query) by 3 columns (key)" in text.alt
    assert "'good' → 'good' 0.800; '<b>' → 'not' 0.700" in text.alt
    assert text.tables[0].header == ["", "not", "good", "film"]
    assert text.tables[0].rows[1] == ["<b>", "0.700", "0.200", "0.100"]
    assert "&lt;b&gt;" in text.html() and "<b>" not in text.html()  # a token shows as text
    plt.close("all")


def test_a_grid_of_heads_gets_a_sentence_per_panel_and_its_pattern():
    weights = torch.zeros(2, 4, 4)  # (H, T, T)
    weights[0, :, 2] = 1.0  # head 0: every query reads token 2
    weights[1] = torch.eye(4)  # head 1: every query reads itself
    fig = head_grid(weights, ["a", "b", "c", "d"], title="two heads")
    alt = describe(fig).alt
    assert alt.startswith("Figure: two heads.")
    assert "head 0: 4 of 4 rows peak on 'c'" in alt
    assert "head 1: 1 of 4 rows peak on 'a'; largest 'a' → 'a' 1" in alt
    assert "mean of heads:" in alt
    plt.close("all")


def test_curves_say_where_they_start_end_peak_and_cross():
    runs = {"rises": [{"epoch": [1, 2, 3, 4], "test_acc": [0.5, 0.6, 0.8, 0.9]}],
            "falls": [{"epoch": [1, 2, 3, 4], "test_acc": [0.9, 0.8, 0.6, 0.5]}]}
    fig = accuracy_curves(runs, chance=0.5)
    alt = describe(fig).alt
    assert ("rises (1 run): 0.500 at 1 to 0.900 at 4. "
            "falls (1 run): 0.900 at 1 to 0.500 at 4.") in alt
    assert "rises (1 run) and falls (1 run) cross at epoch 2.50." in alt
    assert "Reference: chance at 0.500." in alt
    drawn = styles(fig)["lines"]
    assert drawn[0]["marker"] != drawn[1]["marker"]  # the style cycle marks each curve
    plt.close("all")


def test_bars_give_each_bar_its_group_and_series_and_a_hatch_each():
    fig = mean_spread_bars({"task A": {"x": [0.5, 0.7], "y": [0.9]},
                            "task B": {"x": [0.2], "y": [0.4, 0.6]}})
    alt = describe(fig).alt
    assert "task A (x) 0.600; task B (x) 0.200; task A (y) 0.900; task B (y) 0.500" in alt
    assert [b["hatch"] for b in styles(fig)["bars"]] == [HATCHES[0]] * 2 + [HATCHES[1]] * 2
    plt.close("all")


@pytest.mark.parametrize(("value", "text"), [
    (0.123456, "0.123"), (12.3456, "12.3"), (3.0, "3.00"), (0.0, "0"), (-0.5, "-0.500"),
    (float("nan"), "nan"), (5.123e-57, "5.12e-57"), (301989888, "3.02e+08"),
    (1.0, "1.00"), (0.99999994, "1.00")])  # float32's 1 - ulp: another CPU's 1.0
def test_numbers_keep_three_significant_digits_the_same_on_every_cpu(value, text):
    assert number(value) == text


def test_near_ties_rank_as_printed_so_another_cpu_names_the_same_cell():
    weights = np.array([[0.99999994, 1.0], [0.2, 0.8]])  # (T_q, T_k): row 0 ties as printed
    ax = attention_heatmap(weights, ["a", "b"], ["x", "y"])
    assert "'a' → 'x' 1.00; 'b' → 'y' 0.800" in describe(ax.figure).alt  # the first of a tie
    plt.close("all")


@pytest.mark.parametrize("recording", ["1", "0"])
def test_a_number_on_a_rounding_edge_gets_one_more_digit_recorded_or_not(monkeypatch, recording):
    """The same text while `make notebooks` records and while nbval compares."""
    monkeypatch.setenv("ATTNLAB_RECORDING", recording)
    assert number(0.12350000001) == "0.1235"  # 0.124 or 0.123 on another CPU
    assert number(0.7575000001) == "0.7575"
    assert number(np.float32(0.25)) == "0.250"  # exact: no edge to fear


def test_a_similarity_matrix_is_read_off_its_diagonal():
    similarity = np.array([[1.0, 0.8, 0.1], [0.8, 1.0, 0.3], [0.1, 0.3, 1.0]])  # (n, n)
    ax = attention_heatmap(similarity, ["cat", "kitten", "stock"], ["cat", "kitten", "stock"])
    alt = describe(ax.figure).alt
    assert ("The diagonal is 1.00 throughout. Largest off the diagonal in each row: "
            "'cat' → 'kitten' 0.800; 'kitten' → 'cat' 0.800; 'stock' → 'kitten' 0.300.") in alt
    plt.close("all")

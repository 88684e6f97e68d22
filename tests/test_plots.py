"""attnlab.views.plots: attention pictures stay readable at a notebook's width and reject bad
input."""
import matplotlib.pyplot as plt
import pytest
import torch

from attnlab.views.plots import (
    MAX_WIDTH,
    SCALED_COLOR,
    UNSCALED_COLOR,
    against_d_k,
    attention_heatmap,
    head_grid,
)


def test_head_grid_fits_a_notebook_and_shows_every_head_and_the_mean():
    for T in (3, 6, 7, 15):
        scores = torch.randn(4, T, T, generator=torch.Generator().manual_seed(0))  # (H, T, T)
        weights = torch.softmax(scores, -1)  # (H, T, T)
        fig = head_grid(weights, [f"t{i}" for i in range(T)], title="t", highlight=1)
        heatmaps = [ax for ax in fig.axes if ax.images and ax.get_title()]
        titles = [ax.get_title() for ax in heatmaps]
        assert titles == ["head 0", "head 1", "head 2", "head 3", "mean of heads"], T
        assert fig.get_size_inches()[0] <= MAX_WIDTH, T
        assert all(ax.get_xticklabels()[1].get_color() == "red" for ax in heatmaps), T
        plt.close(fig)


def test_heatmap_rejects_bad_shapes_labels_and_highlights():
    with pytest.raises(ValueError, match="2-D"):
        attention_heatmap(torch.ones(2, 2, 2))
    with pytest.raises(ValueError, match=r"query_labels must have one label per query \(2\)"):
        attention_heatmap(torch.ones(2, 2), ["a"], ["a", "b"])
    with pytest.raises(ValueError, match="highlight must be an int >= 0 and <= 1, got 5"):
        attention_heatmap(torch.ones(2, 2), ["a", "b"], ["a", "b"], highlight=5)
    with pytest.raises(ValueError, match=r"shape \(H, T, T\)"):
        head_grid(torch.ones(2, 2), ["a", "b"])
    plt.close("all")


def test_against_d_k_draws_both_variants_and_a_reference():
    d_ks = [4, 16, 64]
    fig = against_d_k(d_ks, [0.4, 0.7, 0.9], [0.24, 0.24, 0.25], "largest weight", reference=1 / 16,
                      reference_label="uniform", log_y=True)
    ax = fig.axes[0]
    assert [line.get_color() for line in ax.lines[:2]] == [UNSCALED_COLOR, SCALED_COLOR]
    assert list(ax.lines[2].get_ydata()) == [1 / 16] * 3
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="one value per d_k"):
        against_d_k(d_ks, [1.0, 2.0], [1.0, 2.0, 3.0], "y")
    plt.close("all")


def test_head_grid_panel_size_keeps_a_short_sentence_in_one_row():
    weights = torch.full((4, 6, 6), 1 / 6)  # (H, T, T)
    fig = head_grid(weights, list("abcdef"), with_mean=False, panel_size=2.5)
    assert list(fig.get_size_inches()) == [10.0, 2.5]
    plt.close(fig)

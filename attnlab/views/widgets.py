"""Interactive views (ipywidgets) for the notebooks, built so they can be tested without a browser.

Each widget is a class whose `view(...)` computes the numbers it shows (a plain dict, no
widgets involved), `text(...)` formats them for a static, printable view (what nbval compares),
and `update()` pushes the current slider state into the widgets. The notebook prints the static
view first and then displays `.widget`, so that where the widget cannot show (a page reloaded
without its state, a static copy) the numbers are still there as text; the widget's last line
(`restart_note`) says what to do when its numbers stop following the controls. Tests call
`view`, move the sliders and read back what the widgets display.

Any label a caller passes (token, key name) is shown as text: it is HTML-escaped before it goes
into an HTML widget, so "<b>" shows as "<b>" rather than turning text bold.
"""
from __future__ import annotations

import base64
import html
import io
import math

import anywidget
import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
import torch
import traitlets
from matplotlib.figure import Figure

from ..core.attention import scaled_dot_product_attention
from ..lessons.data import LABELS, TASK_READS, outside_task
from ..lessons.scaling import DEFAULT_D_KS, check_d_ks, softmax_pair
from ..plumbing.checks import check_choice, check_int, check_number, check_str
from ..plumbing.report import fmt
from .figure_text import describe
from .plots import SCALED_COLOR, UNSCALED_COLOR


def _vector_text(x, digits: int = 3) -> str:
    """[1.000, 0.000] style, the way the notebooks print small vectors (through `fmt`, whose
    guard refuses a value at a rounding edge while the notebooks are recorded)."""
    return "[" + ", ".join(fmt(v, digits) for v in np.ravel(x)) + "]"


def _as_matrix(name: str, x, rows: int | None = None, cols: int | None = None) -> torch.Tensor:
    """A 2-D float64 tensor from a tensor / array / nested list, with shape checks."""
    if isinstance(x, torch.Tensor):
        t = x.detach().to(torch.float64)
    else:
        try:
            t = torch.as_tensor(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a matrix of numbers, got {type(x).__name__}") from None
    if rows is None and cols is not None and t.dim() <= 1:  # a single vector: one row
        t = t.reshape(1, -1)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix (rows, dims), got shape {tuple(t.shape)}")
    if rows is not None and t.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows, got shape {tuple(t.shape)}")
    if cols is not None and t.shape[1] != cols:
        raise ValueError(f"{name} must have {cols} columns, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must hold finite numbers, got "
                         f"{int((~torch.isfinite(t)).sum())} entries that are nan or inf")
    return t


# Style of a table cell that shows a caller's label: a very long label wraps instead of
# stretching the table past the notebook's width.
_LABEL_STYLE = "max-width:24em;overflow-wrap:anywhere"


UNSURE = "not sure"  # what a widget answers where its models cannot know

RESTART_NOTE = ("If the numbers stop following the controls, the kernel has restarted: run "
                "this cell again.")


def restart_note() -> w.HTML:
    """The last line of every widget of the series: after a kernel restart the controls still
    move in the browser but nothing answers them, which looks like a broken widget."""
    note = w.HTML(f'<small style="color:#555">{html.escape(RESTART_NOTE)}</small>')
    note.add_class("attnlab-restart-note")
    return note


def _bar_html(fraction: float, color: str, width_px: int = 160) -> str:
    """A horizontal bar of `fraction` (0..1) of width_px, as an inline-block div."""
    px = max(0, min(width_px, round(float(fraction) * width_px)))
    return (f'<div style="display:inline-block;width:{width_px}px;background:#eee;height:12px">'
            f'<div style="width:{px}px;background:{color};height:12px"></div></div>')


# The slider's view: a native <input type="range"> with its <label>, so a screen reader
# announces "query[0], slider, 0.50" and the arrow, Page and Home/End keys move it. It moves
# over the positions 0..n-1 of `options`; `labels` say how each position reads.
_SLIDER_ESM = """
let count = 0;
function render({ model, el }) {
  const id = `attnlab-slider-${++count}-${Math.random().toString(36).slice(2, 8)}`;
  const label = document.createElement("label");
  const input = document.createElement("input");
  const readout = document.createElement("output");
  label.htmlFor = id;
  label.className = "attnlab-slider-label";
  input.type = "range";
  input.id = id;
  input.min = "0";
  input.step = "1";
  // The arrow keys move the slider, not JupyterLab's cell selection (Lumino skips its
  // shortcuts for an element with this attribute).
  input.setAttribute("data-lm-suppress-shortcuts", "true");
  readout.htmlFor = id;
  readout.className = "attnlab-slider-readout";
  el.classList.add("attnlab-slider");
  el.append(label, input, readout);
  const show = (i) => {
    const text = model.get("labels")[i] ?? "";
    readout.textContent = text;
    input.setAttribute("aria-valuetext", text);
  };
  const sync = () => {
    label.textContent = model.get("description");
    input.max = String(model.get("options").length - 1);
    input.value = String(model.get("index"));
    show(model.get("index"));
  };
  const send = () => {
    model.set("index", Number(input.value));
    model.save_changes();
  };
  input.addEventListener("input", () => {
    show(Number(input.value));
    if (model.get("continuous_update")) send();
  });
  input.addEventListener("change", send);
  model.on("change", sync);
  sync();
  return () => model.off("change", sync);
}
export default { render };
"""

_SLIDER_CSS = """
.attnlab-slider { display: flex; align-items: center; gap: 8px; margin: 2px 0; }
.attnlab-slider-label { min-width: 7em; text-align: right; }
.attnlab-slider input[type="range"] { flex: 1; max-width: 320px; }
.attnlab-slider-readout { min-width: 4em; font-variant-numeric: tabular-nums; }
"""


class Slider(anywidget.AnyWidget):
    """A slider a screen reader names and a keyboard moves: the series' one slider.

    ipywidgets 8.1 draws its sliders with noUiSlider and gives the handle (role "slider") no
    accessible name, and no Python-side setting adds one (issue 50); this one is a native range
    input with a <label>. It takes one of `options` (numbers, in order), shown as `labels`;
    `value` is the chosen option (setting it picks the nearest one), `index` its position.
    With `continuous_update` the value follows the drag, otherwise it changes on release.
    """

    _esm = _SLIDER_ESM
    _css = _SLIDER_CSS
    description = traitlets.Unicode("").tag(sync=True)
    options = traitlets.List(traitlets.Float()).tag(sync=True)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    value = traitlets.Float(0.0)
    continuous_update = traitlets.Bool(True).tag(sync=True)

    def __init__(self, options, value, description: str, labels=None,
                 continuous_update: bool = True):
        options = [float(o) for o in options]
        if not options:
            raise ValueError(f"{description}: options must not be empty")
        labels = [f"{o:g}" for o in options] if labels is None else [str(x) for x in labels]
        if len(labels) != len(options):
            raise ValueError(f"{description}: one label per option ({len(options)}), "
                             f"got {len(labels)}")
        index = self._nearest(options, value)
        super().__init__(options=options, labels=labels, description=str(description),
                         continuous_update=bool(continuous_update), index=index)
        # Set both: either may equal its trait's default, which would send no change.
        self.value = options[index]

    @staticmethod
    def _nearest(options: list[float], value) -> int:
        return int(np.argmin([abs(o - float(value)) for o in options]))

    @traitlets.validate("value")
    def _nearest_option(self, proposal) -> float:
        return self.options[self._nearest(self.options, proposal["value"])]

    @traitlets.observe("value")
    def _value_moves_index(self, change):
        self.index = self.options.index(change["new"])

    @traitlets.observe("index")
    def _index_moves_value(self, change):
        self.value = self.options[change["new"]]


class AttentionPlayground:
    """Notebook 01: one query against fixed keys and values; sliders move the query.

    keys (T, d_k) and values (T, d_v) stay fixed; the query (d_k,) starts at `query` (default:
    the first key). Every slider change recomputes scores, weights and output with
    `scaled_dot_product_attention` and shows them as bars and numbers.

    In the DOM (for browser tests): the whole box has class `attnlab-playground`; one slider per
    query coordinate, class `attnlab-playground-query`, description `query[i]`; the weights table
    has class `attnlab-playground-weights`, with each weight as text in an element of class
    `attnlab-weight-value` (one per key, in key order); the output vector is in
    `attnlab-playground-output`, its numbers in `attnlab-output-value`.
    """

    def __init__(self, keys, values, query=None, key_labels=None, limit: float = 3.0,
                 step: float = 0.1):
        self.keys = _as_matrix("keys", keys)  # (T, d_k)
        n_keys, d_k = self.keys.shape
        self.values = _as_matrix("values", values, rows=n_keys)  # (T, d_v)
        self.limit = check_number("limit", limit, minimum=0, exclusive_minimum=True)
        step = check_number("step", step, minimum=0, exclusive_minimum=True, maximum=self.limit)
        if key_labels is None:
            key_labels = [f"k{i}" for i in range(n_keys)]
        if isinstance(key_labels, (str, bytes)) or not hasattr(key_labels, "__iter__"):
            raise TypeError(f"key_labels must be a list of labels, one per key, "
                            f"got {type(key_labels).__name__}")
        key_labels = [str(label) for label in key_labels]
        if len(key_labels) != n_keys:
            raise ValueError(f"key_labels must have one label per key ({n_keys}), "
                             f"got {len(key_labels)}")
        self.key_labels = key_labels
        start = self.keys[0] if query is None else self._check_query(query)

        steps = int(math.floor(self.limit / step + 1e-9))
        grid = [round(i * step, 10) for i in range(-steps, steps + 1)]  # -limit..limit
        self.sliders = [Slider(grid, float(start[i]), f"query[{i}]",
                               labels=[f"{g:.2f}" for g in grid])
                        for i in range(d_k)]
        for slider in self.sliders:
            slider.add_class("attnlab-playground-query")
            slider.observe(self.update, names="value")
        self.weights_html = w.HTML()
        self.weights_html.add_class("attnlab-playground-weights")
        self.output_html = w.HTML()
        self.output_html.add_class("attnlab-playground-output")
        self.widget = w.VBox([w.HTML("<b>Move the query:</b>"), *self.sliders,
                              self.weights_html, self.output_html, restart_note()])
        self.widget.add_class("attnlab-playground")
        self._holding = False
        self.update()

    def _check_query(self, query) -> torch.Tensor:
        q = _as_matrix("query", query, cols=self.keys.shape[1])  # (1, d_k)
        if q.shape[0] != 1:
            raise ValueError(f"query must be one vector of {self.keys.shape[1]} numbers, "
                             f"got shape {tuple(q.shape)}")
        q = q[0]  # (d_k,)
        if q.abs().max() > self.limit:
            raise ValueError(f"query coordinates must lie in [-{self.limit}, {self.limit}] "
                             f"(the slider range), got {q.tolist()}")
        return q

    @property
    def query(self) -> np.ndarray:
        """The query the sliders currently show."""
        return np.array([s.value for s in self.sliders], dtype=np.float64)

    def view(self, query=None) -> dict:
        """The numbers shown for `query` (default: the sliders' query), all NumPy arrays:
        query (d_k,), scores q·k (T,), scaled_scores q·k/sqrt(d_k) (T,), weights (T,),
        output (d_v,)."""
        q = torch.as_tensor(self.query) if query is None else self._check_query(query)  # (d_k,)
        out, weights = scaled_dot_product_attention(q[None], self.keys, self.values)
        # out (1, d_v), weights (1, T)
        scores = self.keys @ q  # (T,)   q·k for each key
        return {
            "query": q.numpy().copy(),
            "scores": scores.numpy(),
            "scaled_scores": scores.numpy() / math.sqrt(self.keys.shape[1]),
            "weights": weights[0].numpy(),
            "output": out[0].numpy(),
        }

    def text(self, view: dict | None = None) -> str:
        """The static, printable form of a view: one line per key, then the output."""
        v = self.view() if view is None else view
        width = max(len(label) for label in self.key_labels + ["key"])
        lines = [f"query = {_vector_text(v['query'], 2)}",
                 f"{'key':<{width}}  {'q·k':>7}  {'/√d_k':>7}  {'weight':>7}"]
        for label, s, ss, wt in zip(self.key_labels, v["scores"], v["scaled_scores"], v["weights"]):
            lines.append(f"{label:<{width}}  {fmt(s, 3):>7}  {fmt(ss, 3):>7}  {fmt(wt, 3):>7}  "
                         + "#" * round(wt * 40))
        lines.append(f"output = {_vector_text(v['output'])}")
        return "\n".join(lines)

    def set_query(self, query) -> dict:
        """Move all sliders to `query` at once (one update, as if the user had dragged them)."""
        q = self._check_query(query)
        self._holding = True
        try:
            for slider, value in zip(self.sliders, q.tolist()):
                slider.value = value
        finally:
            self._holding = False
        return self.update()

    def update(self, change=None) -> dict:
        """Recompute from the sliders and refresh the bars and numbers; returns the view."""
        if self._holding:
            return {}
        v = self.view()
        rows = "".join(
            f'<tr><td style="{_LABEL_STYLE}">{html.escape(label)}</td><td>{s:.3f}</td>'
            f'<td>{ss:.3f}</td><td class="attnlab-weight-value">{wt:.3f}</td>'
            f'<td>{_bar_html(wt, "#4c72b0")}</td></tr>'
            for label, s, ss, wt in zip(self.key_labels, v["scores"], v["scaled_scores"],
                                        v["weights"])
        )
        self.weights_html.value = (
            "<table><tr><th>key</th><th>q·k</th><th>/√d_k</th><th>weight</th><th></th></tr>"
            f"{rows}</table>"
        )
        numbers = ", ".join(f'<span class="attnlab-output-value">{x:.3f}</span>'
                            for x in v["output"])
        self.output_html.value = f"<b>output</b> = Σ weight · value = [{numbers}]"
        return v

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


class SoftmaxScaleExplorer:
    """Notebook 02: a d_k slider and the softmax of the same scores, unscaled and scaled.

    The query and keys are the first d_k coordinates of one fixed random draw
    (`attnlab.lessons.scaling.softmax_pair`), so moving the slider only adds dimensions. The two
    distributions are drawn side by side as a PNG, an <img> with its text alternative as alt in
    an HTML widget (no output capture, so executing the notebook headlessly stores no stray
    figures).

    In the DOM: box `attnlab-dk-explorer`, slider description `d_k` (class `attnlab-dk-slider`),
    numbers in `attnlab-dk-summary`, figure in `attnlab-dk-plot`.
    """

    def __init__(self, d_ks=DEFAULT_D_KS, d_k: int | None = None, n_keys: int = 8, seed: int = 0):
        d_ks = check_d_ks(d_ks)
        d_k = d_ks[0] if d_k is None else check_choice("d_k", check_int("d_k", d_k), d_ks)
        n_keys, seed = check_int("n_keys", n_keys, minimum=2), check_int("seed", seed)
        self.d_ks, self.n_keys, self.seed = d_ks, n_keys, seed
        self.slider = Slider(d_ks, d_k, "d_k", labels=d_ks, continuous_update=False)
        self.slider.add_class("attnlab-dk-slider")
        self.slider.observe(self.update, names="value")
        self.summary = w.HTML()
        self.summary.add_class("attnlab-dk-summary")
        # An <img> with an alt (the bars in words): ipywidgets' Image has no alt, and its
        # tooltip, a title, breaks its view in ipywidgets 8.1 ("Failed to create view").
        self.image = w.HTML()
        self.image.add_class("attnlab-dk-plot")
        self.widget = w.VBox([self.slider, self.summary, self.image, restart_note()])
        self.widget.add_class("attnlab-dk-explorer")
        self.update()

    def view(self, d_k: int | None = None) -> dict:
        """softmax_pair for d_k (default: the slider's), plus each distribution's max weight."""
        d_k = int(self.slider.value) if d_k is None else d_k
        v = softmax_pair(d_k, n_keys=self.n_keys, seed=self.seed, max_d_k=max(self.d_ks))
        v["max_unscaled"] = float(v["unscaled"].max())
        v["max_scaled"] = float(v["scaled"].max())
        return v

    def text(self, view: dict | None = None) -> str:
        """Printable form: per key the score and both weights."""
        v = self.view() if view is None else view
        lines = [f"d_k = {v['d_k']}: scores q·k, then softmax(q·k) vs "
                 f"softmax(q·k / sqrt({v['d_k']}))",
                 f"{'key':>4}  {'q·k':>8}  {'unscaled':>8}  {'scaled':>8}"]
        for i, (s, a, b) in enumerate(zip(v["scores"], v["unscaled"], v["scaled"])):
            lines.append(f"{i:>4}  {fmt(s, 2):>8}  {fmt(a, 3):>8}  {fmt(b, 3):>8}")
        lines.append(f"max weight: unscaled {fmt(v['max_unscaled'], 3)}, "
                     f"scaled {fmt(v['max_scaled'], 3)}")
        return "\n".join(lines)

    def draw(self, view: dict | None = None, fig=None):
        """Both distributions as bar charts side by side; returns the Figure.

        Without `fig` this draws with pyplot (the notebook then calls show_figure()); the widget
        passes a bare matplotlib Figure and renders it to PNG itself.
        """
        v = self.view() if view is None else view
        if fig is None:
            fig = plt.figure(figsize=(9, 3))
        axes = fig.subplots(1, 2, sharey=True)
        keys = np.arange(len(v["scores"]))
        panels = ((axes[0], "unscaled", "softmax(q·k)", UNSCALED_COLOR),
                  (axes[1], "scaled", f"softmax(q·k / √{v['d_k']})", SCALED_COLOR))
        for ax, name, title, color in panels:
            ax.bar(keys, v[name], color=color)
            ax.set_title(f"{title}, d_k = {v['d_k']}")
            ax.set_xlabel("key")
            ax.set_xticks(keys)
            ax.set_ylim(0, 1)
        axes[0].set_ylabel("attention weight")
        fig.tight_layout()
        return fig

    def update(self, change=None) -> dict:
        """Recompute for the slider's d_k and refresh the numbers and the picture."""
        v = self.view()
        self.summary.value = (
            f"d_k = {v['d_k']}: largest weight unscaled "
            f'<span class="attnlab-max-unscaled">{v["max_unscaled"]:.3f}</span>, scaled '
            f'<span class="attnlab-max-scaled">{v["max_scaled"]:.3f}</span>'
        )
        fig = self.draw(v, fig=Figure(figsize=(9, 3), dpi=80))
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        self.png = buffer.getvalue()
        data = base64.b64encode(self.png).decode("ascii")
        self.image.value = (f'<img src="data:image/png;base64,{data}" '
                            f'alt="{html.escape(describe(fig).alt)}">')
        return v

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


class PredictionComparison:
    """Notebook 04: type a sentence, see several trained classifiers' predictions side by side
    (e.g. the same TinyTransformer trained with and without positions).

    `models` maps a display name to a classifier whose `predict_proba(x)` gives (B, 2)
    probabilities of (negative, positive), e.g. `attnlab.core.models.TinyTransformer`; `vocab` is
    the `attnlab.lessons.data.Vocab` they were trained with. Any string is valid input: it is
    tokenized with `vocab.tokens`, cut to the models' `max_len`, words outside the vocabulary are
    marked unknown, and all of it is shown as text (HTML-escaped). With `task` ("bag" or "contrast":
    what the models were trained on, `attnlab.lessons.data.TASK_READS`) the widget says so, and a
    text unlike those reviews (`data.outside_task`) gets "not sure" with the reason, beside each
    probability, instead of a label the models cannot know.

    In the DOM: box `attnlab-compare`, text field `attnlab-compare-input`, table
    `attnlab-compare-table` with one row per model: name, P(positive) as text in
    `attnlab-compare-prob` and the predicted label in `attnlab-compare-label`; the tokens the
    models read are in `attnlab-compare-tokens`.
    """

    def __init__(self, models: dict, vocab, text: str = "", task: str | None = None):
        if not isinstance(models, dict):
            raise TypeError(f"models must be a dict {{name: model}}, got {type(models).__name__}")
        if not models:
            raise ValueError("models must be a non-empty dict {name: model}, got {}")
        for name, model in models.items():
            if not isinstance(name, str):
                raise TypeError(f"models must be keyed by display names (str), "
                                f"got {type(name).__name__} {name!r}")
            if not callable(getattr(model, "predict_proba", None)):
                raise TypeError(f"models[{name!r}] must have a predict_proba(x) method, "
                                f"got {type(model).__name__}")
        if not callable(getattr(vocab, "encode_batch", None)):
            raise TypeError(f"vocab must be an attnlab.lessons.data.Vocab, "
                            f"got {type(vocab).__name__}")
        check_str("text", text)
        if task is not None:
            check_choice("task", task, tuple(TASK_READS))
        self.models, self.vocab, self.labels, self.task = dict(models), vocab, LABELS, task
        self.max_len = min(getattr(m, "max_len", 64) for m in self.models.values())
        example = "type a review, e.g. the plot was great and the ending awful"
        self.input = w.Text(value=text, description="review", continuous_update=True,
                            placeholder=example, layout=w.Layout(width="600px"))
        self.input.add_class("attnlab-compare-input")
        self.input.observe(self.update, names="value")
        self.tokens_html = w.HTML()
        self.tokens_html.add_class("attnlab-compare-tokens")
        self.table_html = w.HTML()
        self.table_html.add_class("attnlab-compare-table")
        trained = ([w.HTML(f"<i>These models were trained only on "
                           f"{html.escape(TASK_READS[task])}.</i>")] if task else [])
        self.widget = w.VBox([*trained, self.input, self.tokens_html, self.table_html,
                              restart_note()])
        self.widget.add_class("attnlab-compare")
        self.update()

    def view(self, text: str | None = None) -> dict:
        """What the models make of `text` (default: the text field's): `tokens` they read, which
        of them are `unknown` (bool per token), whether the text was `truncated`, and per model
        name `p_positive` and `label` ("not sure" when the text is `outside` the models'
        training: the reason, or None)."""
        text = self.input.value if text is None else check_str("text", text)
        all_tokens = self.vocab.tokens(text)
        tokens = all_tokens[: self.max_len]
        x = self.vocab.encode_batch([tokens], max_len=self.max_len)  # (1, T)
        outside = outside_task(tokens, self.task) if self.task else None
        predictions = {}
        for name, model in self.models.items():
            p_positive = float(model.predict_proba(x)[0, 1])
            predictions[name] = {"p_positive": p_positive, "label": UNSURE if outside
                                 else self.labels[int(p_positive >= 0.5)]}
        return {"text": text, "tokens": tokens, "unknown": [t not in self.vocab for t in tokens],
                "truncated": len(all_tokens) > len(tokens), "predictions": predictions,
                "outside": outside}

    def text(self, view: dict | None = None) -> str:
        """The static, printable form: the tokens read, then one line per model."""
        v = self.view() if view is None else view
        shown = " ".join(f"{t}(?)" if u else t for t, u in zip(v["tokens"], v["unknown"]))
        cut = f"  [cut to the first {self.max_len} words]" if v["truncated"] else ""
        lines = [f"reads: {shown or '(no words)'}{cut}"]
        width = max(len(name) for name in v["predictions"])
        for name, p in v["predictions"].items():
            lines.append(f"  {name:<{width}}  P(positive) = {p['p_positive']:.3f}  -> {p['label']}")
        if v.get("outside"):
            lines.append(f"  not sure: {v['outside']}")
        return "\n".join(lines)

    def update(self, change=None) -> dict:
        """Recompute for the text field's current text and refresh the tokens and the table."""
        v = self.view()
        words = " ".join(
            f'<span style="color:#999">{html.escape(t)}?</span>' if u else html.escape(t)
            for t, u in zip(v["tokens"], v["unknown"])
        ) or "<i>(no words)</i>"
        note = f" <i>(cut to the first {self.max_len} words)</i>" if v["truncated"] else ""
        self.tokens_html.value = (f'<div style="overflow-wrap:anywhere"><b>the models read:</b> '
                                  f'{words}{note}</div>')
        rows = "".join(
            f'<tr><td style="{_LABEL_STYLE}">{html.escape(name)}</td>'
            f'<td class="attnlab-compare-prob">{p["p_positive"]:.3f}</td>'
            f'<td>{_bar_html(p["p_positive"], "#55a868")}</td>'
            f'<td class="attnlab-compare-label">{html.escape(p["label"])}</td></tr>'
            for name, p in v["predictions"].items()
        )
        why = (f'<div class="attnlab-compare-outside">Not sure: {html.escape(v["outside"])}.'
               f'</div>' if v["outside"] else "")
        self.table_html.value = ("<table><tr><th>model</th><th>P(positive)</th><th></th>"
                                 f"<th>prediction</th></tr>{rows}</table>{why}")
        return v

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


class NextTokenExplorer:
    """Notebook 11: the next-token distribution of a language model after a prompt, under a
    temperature slider: the k most likely tokens with their probabilities, and what the rest
    of the vocabulary holds together.

    `logits` (V,) are the model's scores for the token after the prompt (the notebook computes
    them once; moving the slider only divides them by another temperature, so it is instant);
    `decode` turns a token id into its text. Tokens are shown as Python string literals
    (`repr`), so a leading space or a newline is visible, and HTML-escaped.

    In the DOM: box `attnlab-next`, slider description `temperature` (class
    `attnlab-next-slider`), the table in `attnlab-next-table` (one row per token: its text in
    `attnlab-next-token`, its probability in `attnlab-next-prob`), the rest in `attnlab-next-rest`.
    """

    TEMPERATURES = (0.25, 0.5, 0.8, 1.0, 1.5, 2.0)

    def __init__(self, logits, decode, temperature: float = 1.0, k: int = 10,
                 temperatures=TEMPERATURES):
        if not isinstance(logits, torch.Tensor) or logits.dim() != 1 or not logits.numel():
            raise TypeError("logits must be a 1-D tensor of the vocabulary's scores (V,), e.g. "
                            "model(prompt)[0, -1]")
        if not torch.isfinite(logits).all():
            raise ValueError("logits must be finite numbers")
        if not callable(decode):
            raise TypeError(f"decode must turn a token id into its text, e.g. "
                            f"tokenizer.decode; got {type(decode).__name__}")
        temperatures = tuple(check_number("each temperature", t, minimum=0.0,
                                          exclusive_minimum=True) for t in temperatures)
        temperature = check_choice("temperature", check_number("temperature", temperature),
                                   temperatures)
        self.k = check_int("k", k, minimum=1)
        self.logits, self.decode = logits.detach().double(), decode
        self.slider = Slider(temperatures, temperature, "temperature",
                             labels=[f"{t:g}" for t in temperatures], continuous_update=False)
        self.slider.add_class("attnlab-next-slider")
        self.slider.observe(self.update, names="value")
        self.table_html = w.HTML()
        self.table_html.add_class("attnlab-next-table")
        self.widget = w.VBox([self.slider, self.table_html, restart_note()])
        self.widget.add_class("attnlab-next")
        self.update()

    def view(self, temperature: float | None = None) -> dict:
        """softmax(logits / temperature) (default: the slider's): the k most likely `tokens`
        (their text), `ids` and `probs`, and `rest`, the probability of every other token."""
        t = self.slider.value if temperature is None else check_number(
            "temperature", temperature, minimum=0.0, exclusive_minimum=True)
        probs = torch.softmax(self.logits / t, dim=-1)  # (V,)
        top = probs.topk(min(self.k, probs.numel()))
        ids = top.indices.tolist()
        return {"temperature": t, "ids": ids, "tokens": [self.decode([i]) for i in ids],
                "probs": top.values.tolist(), "rest": float(1.0 - top.values.sum())}

    def text(self, view: dict | None = None) -> str:
        """Printable form: one line per token (as a string literal) and its probability."""
        v = self.view() if view is None else view
        lines = [f"temperature {v['temperature']:g}: the {len(v['ids'])} most likely next tokens"]
        for token, p in zip(v["tokens"], v["probs"]):
            lines.append(f"{token!r:>14} {fmt(p, 3):>6}")
        lines.append(f"{'all others':>14} {fmt(v['rest'], 3):>6}")
        return "\n".join(lines)

    def update(self, change=None) -> dict:
        """Recompute for the slider's temperature and refresh the table."""
        v = self.view()
        rows = "".join(
            f'<tr><td class="attnlab-next-token"><code>{html.escape(repr(token))}</code></td>'
            f'<td class="attnlab-next-prob">{p:.3f}</td>'
            f"<td>{_bar_html(p, SCALED_COLOR)}</td></tr>"
            for token, p in zip(v["tokens"], v["probs"]))
        self.table_html.value = (
            f"<table><caption>next token at temperature {v['temperature']:g}</caption>"
            f"<tr><th>token</th><th>probability</th><th></th></tr>{rows}"
            f'<tr><td>all others</td><td class="attnlab-next-rest">{v["rest"]:.3f}</td>'
            f"<td></td></tr></table>")
        return v

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

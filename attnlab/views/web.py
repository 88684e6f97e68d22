"""The sentiment app as a web app: notebook 07's `SentimentApp` behind a Gradio page.

The page is the same app as the notebook's widget, served over HTTP: a text box and clickable
examples; what each model is, in two lines (its model card), and what the app can read; for each
model (MiniLM with its attention-pooling head, the TinyTransformer) the label, or "not sure",
with its probability, and the tokens with their weight beside each and as its shade; the notes
that say what a model could not read; and that weight is not the whole reason. Every answer
comes from `SentimentApp.respond` (the widget's own path): `handle` only turns its result into
the components' values. Nothing shown is HTML built from the input: the review, the notes and
the tokens go into Textbox, Label and HighlightedText components, which show text as text.

The models are built (or loaded from the app's cache, `attnlab.views.app.cache_dir()`) once, before
the server starts: no request trains anything. `python -m attnlab.views.web` (or `make app`, or
space/app.py on a Hugging Face Space) serves it; gradio is the `space` extra of pyproject.toml.
"""
from __future__ import annotations

import argparse
import html
import os
from typing import NamedTuple

import gradio as gr

from .app import (
    EXAMPLE_REVIEW,
    EXAMPLES,
    MODEL_NAMES,
    SCOPE,
    SHADING,
    UNSURE,
    WEIGHT_IS_NOT_REASON,
    SentimentApp,
    echo,
    token_shades,
)

#: a review longer than this is cut before it is read: both models read only its start anyway
#: (MiniLM 254 word pieces, the TinyTransformer 64 words), and the cut keeps every answer fast
MAX_CHARS = 100_000
CAVEAT = WEIGHT_IS_NOT_REASON
MODELS = tuple(MODEL_NAMES)  # ("minilm", "tiny"): the order of the page's columns
#: a token's score in gr.HighlightedText, times its weight relative to the largest: Gradio
#: shades a negative score purple (a positive one red, which reads as "negative sentiment"),
#: and at 0.85 of its purple black text keeps 5.7:1 (WCAG AA)
SHADE = -0.85


class Answer(NamedTuple):
    """The values of the page's output components, in the order of `OUTPUTS`."""
    message: str          # the notes (what was cut, what a model could not read), or the problem
    review: str           # the review as read, control characters made visible, cut to 300
    minilm_label: dict | str  # {"positive": p, "negative": 1 - p} for gr.Label, "not sure
    #                           (P(positive) = p)" when the model is not sure, {} on a problem
    minilm_tokens: list   # [(token and its weight, SHADE x relative weight)] for gr.HighlightedText
    tiny_label: dict | str
    tiny_tokens: list
    timing: str


OUTPUTS = Answer._fields


def _label(m: dict) -> dict[str, float] | str:
    if m["label"] == UNSURE:
        return f"{UNSURE} (P(positive) = {m['p_positive']:.2f})"
    return {"positive": m["p_positive"], "negative": 1.0 - m["p_positive"]}


def handle(app: SentimentApp, text) -> Answer:
    """The page's answer to `text`: whatever arrives (None, not a string, empty, huge, any
    characters), an Answer, never an exception."""
    if text is None:
        text = ""
    cut = isinstance(text, str) and len(text) > MAX_CHARS
    result, problem, seconds = app.respond(text[:MAX_CHARS] if cut else text)
    timing = f"answered in {seconds * 1000:.0f} ms"
    if result is None:
        return Answer(problem, "", {}, [], {}, [], timing)
    notes = list(result["notes"])
    if cut:
        notes.insert(0, f"Very long review ({len(text):,} characters): only the first "
                        f"{MAX_CHARS:,} were read.")
    # The number beside each token, so that the shade is never the only cue (WCAG 1.4.1).
    tokens = {name: [(f"{token} {weight:.2f}", round(SHADE * relative, 3))
                     for token, weight, relative, _ in token_shades(result["models"][name])]
              for name in MODELS}
    return Answer("\n".join(notes) or "Both models read the whole review.",
                  echo(result["text"]),
                  _label(result["models"]["minilm"]), tokens["minilm"],
                  _label(result["models"]["tiny"]), tokens["tiny"], timing)


def build(app: SentimentApp | None = None, concurrency: int = 4) -> gr.Blocks:
    """The Gradio page around `app` (default: `SentimentApp()`, its models from the cache or
    trained now, before any request). `concurrency`: requests answered at once; the rest wait
    in Gradio's queue."""
    app = app if app is not None else SentimentApp()
    cards = app.model_cards()
    with gr.Blocks(title="attnlab sentiment app", analytics_enabled=False) as page:
        gr.Markdown("# Sentiment app\nType a review and press Enter (or Analyse): two models "
                    "answer, and each token shows how much weight it got.")
        gr.Markdown("\n\n".join(f"**{MODEL_NAMES[name]}**: {html.escape(card)}"
                                 for name, card in cards.items())
                    + f"\n\n*{html.escape(SCOPE)}*", elem_id="model-cards")
        with gr.Row():
            box = gr.Textbox(value=EXAMPLE_REVIEW, label="Review", lines=1, max_lines=8,
                             elem_id="review", scale=4)
            button = gr.Button("Analyse", variant="primary", elem_id="analyse", scale=1)
        message = gr.Textbox(label="Notes", interactive=False, elem_id="notes")
        review = gr.Textbox(label="Review as read", interactive=False, elem_id="echo",
                            max_lines=6)
        outputs = {"message": message, "review": review}
        with gr.Row():
            for name in MODELS:
                with gr.Column():
                    outputs[f"{name}_label"] = gr.Label(label=MODEL_NAMES[name], num_top_classes=2,
                                                        elem_id=f"{name}-label")
                    outputs[f"{name}_tokens"] = gr.HighlightedText(
                        label=f"{MODEL_NAMES[name]}: weight of each token",
                        elem_id=f"{name}-tokens", show_legend=False, show_inline_category=False,
                        combine_adjacent=False, adjacent_separator=" ")
                    gr.Markdown(html.escape(SHADING[name]), elem_id=f"{name}-legend")
        outputs["timing"] = gr.Textbox(label="Time", interactive=False, elem_id="timing")
        gr.Markdown(CAVEAT, elem_id="caveat")
        components = [outputs[name] for name in OUTPUTS]
        answer = lambda text: handle(app, text)
        gr.Examples(examples=[[e] for e in EXAMPLES], inputs=box, outputs=components,
                    fn=answer, run_on_click=True, cache_examples=False, label="Examples")
        for event in (box.submit, button.click):
            event(answer, inputs=box, outputs=components, concurrency_limit=concurrency,
                  api_name="analyse" if event == button.click else False)
        page.load(answer, inputs=box, outputs=components)
    return page


#: WCAG 2.1 AA contrast (DESIGN.md, "Accessible materials"; tests/test_accessibility.py): the
#: shaded tokens' text is black, 5.6:1 or more on the darkest shade (Gradio's dark grey text
#: reached 3.9:1 on it); in the dark theme the shading is laid over white as in the light one,
#: since no one text colour reads on both the dark page and the darkest shade
_TOKENS = ("#minilm-tokens", "#tiny-tokens")
CSS = (", ".join(f"{t} .textspan, {t} .text" for t in _TOKENS) + " { color: #000000; }\n"
       + ", ".join(f".dark {t} .textfield" for t in _TOKENS) + " { background-color: #ffffff; }")


def theme() -> gr.themes.Base:
    """Gradio's default theme with the system's fonts (no font is fetched from the network) and
    a primary button whose white label reads at 5.2:1 on its orange (the default's 2.8:1 fails
    WCAG AA), hovered 7.3:1, in light and dark mode."""
    return gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["monospace"]).set(
        button_primary_background_fill="*primary_700",
        button_primary_background_fill_dark="*primary_700",
        button_primary_background_fill_hover="*primary_800",
        button_primary_background_fill_hover_dark="*primary_800",
        button_primary_text_color="white",
        button_primary_text_color_dark="white")


def launch(page: gr.Blocks, host: str, port: int, block: bool = True):
    """Serve `page` from Gradio's queue on host:port with `theme()` and `CSS`, no server-side
    rendering (no Node.js process)."""
    page.queue(max_size=256)
    return page.launch(server_name=host, server_port=port, prevent_thread_lock=not block,
                       theme=theme(), css=CSS,
                       show_error=False, footer_links=[], ssr_mode=False, quiet=True)


def serve(host: str | None = None, port: int | None = None, app: SentimentApp | None = None):
    """Build the page and serve it (blocking): on `host` (default $GRADIO_SERVER_NAME, else
    127.0.0.1; a Space sets 0.0.0.0) and `port` (default $GRADIO_SERVER_PORT, else 7860)."""
    page = build(app)
    launch(page, host or os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
           port or int(os.environ.get("GRADIO_SERVER_PORT", "7860")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnlab.views.web", description=__doc__.split(
        "\n")[0])
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 7860)")
    args = parser.parse_args(argv)
    serve(args.host, args.port)


if __name__ == "__main__":
    main()

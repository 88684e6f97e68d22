"""The sentiment app: type a review and see what two models make of it and what they read.

Two models answer side by side. The pre-trained one is all-MiniLM-L6-v2 (frozen) with an
attention-pooling head (`attnlab.lessons.sentiment.train_pooling_head`): one learned query attends
over the review's word pieces, so it can read which word comes after "but", which a mean of the
tokens (the linear head of notebook 07) cannot; it was trained on the series' synthetic reviews: one
sentiment word, contrasts joined by "but" or "yet" in both orders, negations. The other is notebook
03's TinyTransformer recipe trained from scratch on one-word reviews (the bag task of notebook 05)
and on reviews with no sentiment word under both labels, so that where it reads no word it knows its
probability is near 0.5 (notebook 07 measures it). Both are attnlab's own attention code. The
comparison is the lesson of notebook 06: the tiny model knows only the few dozen words of its
training reviews, the pre-trained one was trained on a billion sentence pairs and places "terrific"
near "great".

Each answer is a label, or "not sure" when its probability is within NOT_SURE of 0.5 or when the
model read no sentiment word it knows; each token carries a number, shown beside it and as its
shade: for MiniLM the weight the head's query gives it (what the decision read; the weights sum
to 1 over the review), for the TinyTransformer the attention it receives in the last layer.

`SentimentApp()` with no arguments builds its models itself: from a cache in the user's cache
folder when one made by the same recipe exists (`recipe_key`), otherwise by training them
(seconds, not minutes, on 2 cores) and caching the result. Any string is a valid review: empty,
blank, very long (the user is told what was cut), emoji, any script, control characters, HTML
(shown as text, never rendered). `analyze(text)` returns a plain dict; `text(result)` prints it
(what strict nbval compares); `display()` shows the widget.
"""
from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import pickle
import time
import unicodedata
from dataclasses import asdict
from pathlib import Path

import ipywidgets as w
import numpy as np
import platformdirs
import torch
from IPython.display import display
from torch import nn

from ..core import recipes
from ..core.hooks import run_with_maps
from ..core.models import AttentionPooling
from ..lessons import data
from ..lessons.classifier import Trained, initial_model, task_reviews, train_classifier
from ..lessons.data import LABELS, Vocab
from ..lessons.sentiment import (
    check_encoder,
    held_out_contrasts,
    token_states,
    train_pooling_head,
)
from ..plumbing.assets import ASSETS
from ..plumbing.checks import check_bool, check_str
from ..plumbing.repro import series_seed
from ..pretrained.minilm import MiniLM, Tokenized, load_minilm
from .widgets import UNSURE, restart_note

#: what the app shows before the user types anything
EXAMPLE_REVIEW = "What a terrific film, the cast was outstanding!"
MODEL_NAMES = {"minilm": "MiniLM + attention-pooling head",
               "tiny": "TinyTransformer (from scratch)"}
#: examples a newcomer can click: a contrast review in both orders, a negation, unseen words
EXAMPLES = ("the plot was dull but the cast was superb",
            "the cast was superb but the plot was dull",
            "The movie was not good.",
            EXAMPLE_REVIEW,
            "The effects are cheap but the story is charming.")
#: what each model is, in two lines (a model card); {accuracy} is its held-out accuracy
MODEL_CARDS = {
    "minilm": ("all-MiniLM-L6-v2, pre-trained on about a billion sentence pairs and frozen, with "
               "a head whose one learned query attends over the review's word pieces, trained "
               "on synthetic reviews: one sentiment word, two joined by 'but' or 'yet' in either "
               "order, 'not' before one. Held out: {accuracy} right on new contrast reviews and "
               "their swaps. It cannot read irony, or a sentiment carried only by words far from "
               "its training ('wooden')."),
    "tiny": ("notebook 03's TinyTransformer, trained from scratch on 1,600 synthetic reviews "
             "with one sentiment word among about 60 words it knows (every other word is "
             "<unk> to it), and on 400 with none, labelled both ways, so it says p = 0.5 when it "
             "reads no word it knows. Held out: {accuracy} right on new one-word reviews. It "
             "cannot read 'but', 'not', or any word it never saw."),
}
#: what the app reads: both models were trained on short English reviews
SCOPE = ("Short English movie reviews only: a sentence or two. Both models were trained on "
         "made-up reviews; a shaded token is where a model put weight, not the whole reason.")
#: a model whose probability is within this of 0.5 answers "not sure"
NOT_SURE = 0.15
#: the sentiment words the TinyTransformer was trained on: without one it has nothing to read
SENTIMENT_WORDS = frozenset(data.POSITIVE + data.NEGATIVE)
CACHE_FILE = "sentiment-models.pt"
#: how `default_models` calls `train_classifier`: notebook 03's recipe on one-word reviews
TINY_RECIPE = {"task": "bag", "positions": "learned", "seed": 0, "undecided": 400}
#: bump when the training code changes in a way the recipe values do not show (it retrains)
CACHE_FORMAT = 5  # 4: the attention-pooling head; 5: undecided reviews


# -- the app's default models, trained once and cached -------------------------------------------

def cache_dir() -> Path:
    """Where trained weights are cached: $ATTNLAB_CACHE, else the user's cache folder for
    attnlab as platformdirs knows it on this system (~/.cache/attnlab on Linux, honouring
    XDG_CACHE_HOME)."""
    if os.environ.get("ATTNLAB_CACHE"):
        return Path(os.environ["ATTNLAB_CACHE"]).expanduser()
    return Path(platformdirs.user_cache_dir("attnlab", appauthor=False))


def recipe_key() -> str:
    """A fingerprint of what decides the default models' weights: both recipes, the words and
    lengths of the generated reviews, the encoder's published weights, the torch version, the
    series' seed and CACHE_FORMAT. It changes only when one of these does: editing a comment or
    a docstring keeps the cache."""
    recipe = {
        "format": CACHE_FORMAT, "torch": torch.__version__,
        "tiny": {**asdict(recipes.TINY), **TINY_RECIPE}, "head": asdict(recipes.POOLING),
        "reviews": [data.NEUTRAL, data.POSITIVE, data.NEGATIVE, data.CONTRAST, data.MIN_LEN,
                    data.MAX_LEN, "yet", "not"],
        "encoder": ASSETS["minilm/model.safetensors"].sha256,
        "series seed": series_seed(),  # ATTNLAB_SEED moves the data and the weights
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def load_models(file: Path, key: str, encoder: MiniLM):
    """(tiny, head) from a cache file written by `save_models` with the same `key`, or None when
    the file is absent, unreadable (not a torch file, truncated, damaged) or made for another
    recipe: the caller then trains afresh."""
    try:
        saved = torch.load(file, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError):
        return None  # absent or unreadable: OSError; truncated or not a torch file: the others
    parts = ("tiny", "head", "history")
    if not (isinstance(saved, dict) and saved.get("key") == key
            and all(isinstance(saved.get(part), dict) for part in parts)):
        return None
    vocab = Vocab.for_reviews()
    tiny = initial_model(len(vocab), TINY_RECIPE["positions"], TINY_RECIPE["seed"])
    head = AttentionPooling(encoder.config["hidden_size"])
    try:
        tiny.load_state_dict(saved["tiny"])
        head.load_state_dict(saved["head"])
    except RuntimeError:  # weights of another shape: the file does not fit this code
        return None
    train, test = task_reviews(TINY_RECIPE["task"], TINY_RECIPE["seed"],
                               undecided=TINY_RECIPE["undecided"])
    return Trained(tiny.eval(), vocab, saved["history"], train, test), head.eval()


def save_models(file: Path, key: str, tiny, head: nn.Module) -> None:
    """Write the trained weights for `load_models`, atomically (a reader never sees half a
    file); a cache that cannot be written (a read-only home) is skipped: the app still works,
    it just trains next time too."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        partial = file.with_name(f"{file.name}.{os.getpid()}.tmp")
        torch.save({"key": key, "tiny": tiny.model.state_dict(), "head": head.state_dict(),
                    "history": tiny.history}, partial)
        os.replace(partial, file)
    except OSError:
        pass


def default_models(cache: bool = True):
    """(tiny, encoder, head): a TinyTransformer (the `Trained` that
    `train_classifier(**TINY_RECIPE)` returns), the MiniLM encoder and its attention-pooling
    head (`train_pooling_head`), loaded from the cache when it was made by the same recipe, else
    trained (and cached when `cache`)."""
    encoder = load_minilm()
    key, file = recipe_key(), cache_dir() / CACHE_FILE
    loaded = load_models(file, key, encoder) if cache else None
    if loaded is not None:
        tiny, head = loaded
        return tiny, encoder, head
    tiny = train_classifier(**TINY_RECIPE)
    head, _ = train_pooling_head(encoder)
    if cache:
        save_models(file, key, tiny, head)
    return tiny, encoder, head


# -- the analysis of one text ------------------------------------------------------------------

def _reading(p: torch.Tensor, tokens: list[str], weights, unknown, *, knows_a_word: bool = True
             ) -> dict:
    """One model's answer: from p (2,) its label, or "not sure" (within NOT_SURE of 0.5, or no
    sentiment word it knows read), the probability of the likelier label and p_positive; the
    tokens it read and each one's weight (T,), the number its shade shows."""
    k = int(p.argmax())
    sure = knows_a_word and abs(float(p[1]) - 0.5) >= NOT_SURE
    return {"label": LABELS[k] if sure else UNSURE, "probability": float(p[k]),
            "p_positive": float(p[1]), "tokens": list(tokens),
            "weights": np.asarray(weights, dtype=np.float64).reshape(len(tokens)),
            "unknown": sorted(unknown), "knows_a_word": knows_a_word}


@torch.no_grad()
def read_minilm(encoder: MiniLM, head: AttentionPooling, text: str) -> tuple[dict, Tokenized]:
    """The pre-trained model's answer for `text`, with the weight the head's query gives each
    word piece ([CLS] and [SEP] are not read), and the tokenized text (was it cut?)."""
    batch = encoder.tokenize([text])
    states = token_states(encoder, [text])  # (1, T, 384)
    p = torch.softmax(head(states), dim=-1)[0]  # (2,)
    pieces = batch.tokens[0][1:-1]  # the review's word pieces
    weights = head.weights(states)[0, 1:len(pieces) + 1]  # (T - 2,)   they sum to 1
    return _reading(p, pieces, weights.numpy(), {t for t in pieces if t == "[UNK]"}), batch


@torch.no_grad()
def read_tiny(tiny, text: str) -> tuple[dict, list[str]]:
    """The TinyTransformer's answer for `text` on its own word tokens, with the attention each
    receives in the last layer (mean over heads and queries), and all the words."""
    vocab, model = tiny.vocab, tiny.model
    words = vocab.tokens(text)
    kept = words[: model.max_len]
    x = vocab.encode_batch([text], max_len=model.max_len)  # (1, T)
    logits, maps = run_with_maps(model, x)  # one pass: a server's threads take turns here
    p = torch.softmax(logits, dim=-1)[0]  # (2,)
    T = len(kept)
    attention = maps[-1][0].mean(0)[:T, :T]  # (T, T)   mean of the heads
    received = attention.mean(0).numpy() if T else np.zeros(0)  # (T,)   mean over queries
    knows = any(w in SENTIMENT_WORDS for w in kept)
    return _reading(p, kept, received, {w for w in kept if w not in vocab.stoi},
                    knows_a_word=knows), words


def _notes(minilm: dict, tiny: dict, batch: Tokenized, words: list[str], max_len: int,
           empty: bool) -> list[str]:
    """The sentences that tell the user what each model could not read."""
    notes = []
    if empty:
        notes.append("There is nothing to read yet: the text is empty (or only spaces and control "
                     "characters). Both answers below are each model's guess for an empty review.")
    if batch.truncated[0]:
        notes.append(f"Long review: MiniLM read the first {len(minilm['tokens'])} of its "
                     f"{batch.lengths[0] - 2} word pieces; the rest was cut.")
    if len(words) > max_len:
        notes.append(f"Long review: the TinyTransformer read the first {max_len} of its "
                     f"{len(words)} words; the rest was cut.")
    if minilm["unknown"]:
        n = minilm["tokens"].count("[UNK]")
        notes.append(f"MiniLM has no word piece for {n} character group{'s' if n > 1 else ''} "
                     f"(emoji, rare symbols, words over 100 characters): "
                     f"{'they' if n > 1 else 'it'} became [UNK].")
    unknown = tiny["unknown"]
    if unknown and not empty:
        notes.append(f"The TinyTransformer never saw {len(unknown)} of these words in training; "
                     f"it reads them as <unk>: {', '.join(map(_short, unknown[:8]))}"
                     f"{' ...' if len(unknown) > 8 else ''}.")
    if not tiny["knows_a_word"] and not empty:
        notes.append(f"The TinyTransformer read no sentiment word it was trained on, so it is "
                     f"not sure (P(positive) = {tiny['p_positive']:.2f}).")
    return notes


# -- showing an analysis: as text (what strict nbval compares) and as HTML ------------------------

ECHO_CHARS = 300  # how much of the review a result echoes back


def _short(token: str, limit: int = 24) -> str:
    return token if len(token) <= limit else token[: limit - 1] + "…"


def echo(text: str) -> str:
    """The review as shown back: cut at ECHO_CHARS, with control and format characters (NUL,
    escape, zero-width, bidi overrides ...) and lone surrogates replaced by a visible symbol, so
    what is echoed shows what was typed and cannot reorder or hide the rest."""
    echo = "".join("\N{REPLACEMENT CHARACTER}" if unicodedata.category(c) in ("Cc", "Cf", "Cs")
                   and c not in "\t\n\r" else c for c in text)
    return echo if len(echo) <= ECHO_CHARS else echo[:ECHO_CHARS] + " ..."


def result_text(r: dict) -> str:
    """A printable, deterministic summary of an analysis."""
    lines = [f"review ({len(r['text'])} characters): {echo(r['text'])!r}"]
    for name, m in r["models"].items():
        lines.append(f"  {MODEL_NAMES[name]:31s} {m['label']:8s} p = {m['probability']:.3f}")
    for name, m in r["models"].items():
        # By the printed value, then in reading order: a near tie (0.181 and 0.179, both
        # "0.18") keeps its order on every CPU.
        top = sorted(range(len(m["tokens"])), key=lambda i: (-float(f"{m['weights'][i]:.2f}"), i))
        listed = ", ".join(f"{_short(m['tokens'][i])} {m['weights'][i]:.2f}" for i in top[:5])
        lines.append(f"  most weight ({name}): {listed or '-'}")
    lines += [f"  note: {n}" for n in r["notes"]]
    return "\n".join(lines)


def result_html(r: dict, seconds: float | None = None) -> str:
    """An analysis as HTML; every piece of user text is escaped, so it shows as text."""
    esc = html.escape
    parts = [f'<div class="attnlab-sentiment-message" style="color:#8a4b00">{esc(note)}</div>'
             for note in r["notes"]]
    parts.append(f'<div>Review: <span class="attnlab-sentiment-echo" style="white-space:pre-wrap">'
                 f'{esc(echo(r["text"]))}</span></div>')
    for name, m in r["models"].items():
        color = {"positive": "#1a7f37", "negative": "#b42318"}.get(m["label"], "#555555")
        parts.append(
            f'<div class="attnlab-sentiment-model" data-model="{name}" style="margin-top:6px">'
            f'<b>{esc(MODEL_NAMES[name])}</b>: <span class="attnlab-sentiment-label" '
            f'style="color:{color};font-weight:bold">{m["label"]}</span>'
            f' (p = <span class="attnlab-sentiment-probability">{m["probability"]:.3f}</span>)'
            f'<div class="attnlab-sentiment-tokens" style="line-height:1.9">{_token_strip(m)}</div>'
            f'<div class="attnlab-sentiment-legend" style="color:#555;font-size:85%">'
            f'{esc(SHADING[name])}</div></div>')
    if seconds is not None:
        parts.append(f'<div class="attnlab-sentiment-time" style="color:#555;font-size:85%">'
                     f'answered in {seconds * 1000:.0f} ms. {esc(WEIGHT_IS_NOT_REASON)}</div>')
    return "\n".join(parts)


#: what the number after each token, and its shade (darker: more), means, per model: the legend
#: of the widget and the web app
SHADING = {
    "minilm": "Number and shade: the weight the head's query gives each word piece, what the "
              "decision read (they sum to 1; [CLS] and [SEP] are not read).",
    "tiny": "Number and shade: the attention each word receives in the last layer (mean over "
            "heads and queries; they sum to 1).",
}
WEIGHT_IS_NOT_REASON = ("Weight is not the whole reason: a word's state already carries its "
                        "neighbours, and notebook 07 measures a token that takes the most weight "
                        "and carries almost nothing.")


def token_shades(m: dict) -> list[tuple[str, float, float, bool]]:
    """One model's tokens as the app shows them: (token, cut to 24 characters; its weight; that
    weight relative to the largest, 0 to 1; unknown to the model?). The widget's strip and the
    web app's highlighted text both shade by it."""
    if not m["tokens"]:
        return []
    top = float(np.max(m["weights"])) or 1.0
    unknown = set(m.get("unknown", ()))
    return [(_short(token), float(weight), float(weight) / top, token in unknown)
            for token, weight in zip(m["tokens"], m["weights"])]


def _token_strip(m: dict) -> str:
    """Each token on a background as dark as the attention it receives (a 1-D heatmap)."""
    shades = token_shades(m)
    if not shades:
        return '<span style="color:#777">(no tokens)</span>'
    spans = []
    for token, weight, relative, unknown in shades:
        alpha = 0.85 * relative
        cls = "attnlab-sentiment-token" + (" attnlab-sentiment-unknown" if unknown else "")
        title = f"weight {weight:.3f}" + (" (unknown to this model)" if unknown else "")
        style = (f"background:rgba(68,1,84,{alpha:.2f});"
                 f"color:{'white' if alpha > 0.45 else 'black'};padding:1px 3px;margin:1px;"
                 f"border-radius:3px" + (";text-decoration:line-through" if unknown else ""))
        spans.append(f'<span class="{cls}" title="{html.escape(title)}" style="{style}">'
                     f'{html.escape(token)} <small class="attnlab-sentiment-weight">'
                     f'{weight:.2f}</small></span>')
    return " ".join(spans)


def problem_text(error: Exception) -> str:
    """The sentence a user sees instead of a traceback (plain text: escape it for HTML)."""
    return (f"Could not analyse this text ({type(error).__name__}: {error}). Try a shorter or "
            f"different review.")


def _problem_html(problem: str) -> str:
    """What the widget shows instead of a traceback: `problem_text`, escaped."""
    return (f'<div class="attnlab-sentiment-message" style="color:#b42318">'
            f'{html.escape(problem)}</div>')


# -- the app --------------------------------------------------------------------------------------

class SentimentApp:
    """Type a review; both models' labels, probabilities and weights, as text or as a widget.

    tiny: what `attnlab.lessons.classifier.train_classifier()` returns (anything with .model and
    .vocab); encoder: `load_minilm()`; head: the `AttentionPooling` head from
    `attnlab.lessons.sentiment.train_pooling_head`. Give all three or none (then `default_models()`
    builds them, cached).
    """

    def __init__(self, tiny=None, encoder: MiniLM | None = None, head: nn.Module | None = None,
                 *, cache: bool = True):
        given = [x is not None for x in (tiny, encoder, head)]
        if any(given) and not all(given):
            raise TypeError("give tiny, encoder and head together, or none of them for the "
                            "default models")
        check_bool("cache", cache)
        if not any(given):
            tiny, encoder, head = default_models(cache=cache)
        if not (hasattr(tiny, "model") and hasattr(tiny, "vocab")):
            raise TypeError(f"tiny must have .model and .vocab (what train_classifier() returns), "
                            f"got {type(tiny).__name__}")
        check_encoder(encoder)
        if not isinstance(head, AttentionPooling):
            raise TypeError(f"head must be the AttentionPooling head of "
                            f"attnlab.lessons.sentiment.train_pooling_head(encoder), "
                            f"got {type(head).__name__}")
        self.tiny, self.encoder, self.head = tiny, encoder, head.eval()
        self._widget = None
        self.last: dict | None = None

    def analyze(self, text: str) -> dict:
        """What both models make of `text` (any string).

        Returns a dict: `label` ("positive", "negative" or "not sure") and `probability` (of
        the likelier label) from the pre-trained model, `p_positive`; `tokens` (its word pieces,
        without [CLS] and [SEP]) and `weights` (T,): the weight its head's query gives each one;
        `models`: the same for each model by name ("minilm", "tiny"; the TinyTransformer's
        weights are the attention each word receives in its last layer); `empty`, `truncated`,
        `notes` (sentences for the user) and `text`.
        """
        check_str("text", text)
        minilm, batch = read_minilm(self.encoder, self.head, text)
        tiny, words = read_tiny(self.tiny, text)
        max_len = self.tiny.model.max_len
        empty = not minilm["tokens"] and not words  # only [CLS] [SEP]: nothing readable
        result = {
            "text": text, **{k: minilm[k] for k in ("label", "probability", "p_positive",
                                                     "tokens", "weights")},
            "models": {"minilm": minilm, "tiny": tiny}, "empty": empty,
            "truncated": batch.truncated[0] or len(words) > max_len,
            "notes": _notes(minilm, tiny, batch, words, max_len, empty),
        }
        self.last = result
        return result

    def respond(self, text) -> tuple[dict | None, str | None, float]:
        """`analyze(text)` for a user interface: (result, None, seconds) or, when anything at all
        goes wrong, (None, a sentence for the user, seconds); never raises. The widget and the
        web app (`attnlab.views.web`) both answer through it."""
        start = time.perf_counter()
        try:
            result, problem = self.analyze(text), None
        except Exception as e:  # any failure at all: the user sees a sentence, not a traceback
            result, problem = None, problem_text(e)
        return result, problem, time.perf_counter() - start

    @functools.cached_property
    def held_out(self) -> dict[str, float]:
        """Each model's accuracy on reviews it was not trained on: MiniLM + head on
        `held_out_contrasts()` (contrast reviews and their swaps, "but" and "yet"), the
        TinyTransformer on its task's test reviews. Measured once, on first use (about 2 s)."""
        reviews = held_out_contrasts()
        states = token_states(self.encoder, reviews.texts())  # (400, T, 384)
        labels = torch.tensor(reviews.labels)  # (400,)
        with torch.no_grad():
            right = (self.head(states).argmax(-1) == labels).double().mean()
        return {"minilm": float(right), "tiny": float(self.tiny.test_accuracy)}

    def model_cards(self) -> dict[str, str]:
        """What each model is, what it was trained on, its held-out accuracy and what it cannot
        read, in two lines each (`MODEL_CARDS`)."""
        return {name: card.format(accuracy=f"{self.held_out[name]:.0%}")
                for name, card in MODEL_CARDS.items()}

    def _resolve(self, result: dict | None) -> dict:
        """`result`, or the last analysis when it is None."""
        r = result if result is not None else self.last
        if r is None:
            raise ValueError("nothing analysed yet: call analyze(text) first or pass its result")
        if not isinstance(r, dict) or "models" not in r:
            raise TypeError(f"result must be a dict returned by analyze(text), "
                            f"got {type(r).__name__}")
        return r

    def text(self, result: dict | None = None) -> str:
        """A printable summary of `result` (default: the last analysis); the notebook prints it
        for nbval."""
        return result_text(self._resolve(result))

    def html(self, result: dict | None = None, seconds: float | None = None) -> str:
        """`result` (default: the last analysis) as HTML, user text escaped."""
        return result_html(self._resolve(result), seconds)

    # -- the widget --------------------------------------------------------------------------
    def update(self, text: str | None = None) -> dict | None:
        """Analyse `text` (default: what is in the text box) and show it; never raises: an
        unexpected problem is shown as a short message instead of a traceback."""
        _ = self.widget  # built on first use: the text box and the result area
        if text is None:
            text = self._input.value
        result, problem, seconds = self.respond(text)
        self._result.value = (_problem_html(problem) if result is None
                              else result_html(result, seconds=seconds))
        return result

    @property
    def widget(self):
        """The ipywidgets view: a text box, an Analyse button and the result.

        The box sends every keystroke (continuous_update), and the answer follows the text as it
        is typed: the kernel always holds the text in the box, so the button, whose click
        arrives after the keystrokes before it, analyses that text. (With the value sent only on
        Enter or on leaving the box, a click after Enter re-analysed the previous review in 4
        of 21 tries in JupyterLab.)"""
        if self._widget is None:
            title = w.HTML("<b>Sentiment app</b>: type a review; the answer follows as you "
                           "type (or click Analyse).")
            self._input = w.Text(value=EXAMPLE_REVIEW, placeholder="Type a review ...",
                                 description="Review", continuous_update=True,
                                 layout=w.Layout(width="70%"))
            self._input.add_class("attnlab-sentiment-input")
            self._button = w.Button(description="Analyse", button_style="primary")
            self._button.add_class("attnlab-sentiment-button")
            self._result = w.HTML()
            self._result.add_class("attnlab-sentiment-result")
            self._input.observe(lambda change: self.update(change["new"]), names="value")
            self._button.on_click(lambda _: self.update(self._input.value))
            cards = "".join(f"<p><b>{html.escape(MODEL_NAMES[name])}</b>: {html.escape(card)}</p>"
                            for name, card in self.model_cards().items())
            about = w.HTML(f"<details><summary>What the two models are</summary>{cards}"
                           f"<p>{html.escape(SCOPE)}</p></details>")
            self._widget = w.VBox([title, about, w.HBox([self._input, self._button]),
                                   self._result, restart_note()])
            self._widget.add_class("attnlab-sentiment")
            self.update(self._input.value)
        return self._widget

    def display(self):
        """Show the app in the notebook."""
        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

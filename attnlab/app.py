"""The sentiment app: type a review, see what two models make of it and where they looked.

Two models answer side by side. The pre-trained one is all-MiniLM-L6-v2 (`attnlab.pretrained`,
frozen) with a linear sentiment head trained on notebook 03's synthetic reviews; the other is
notebook 03's TinyTransformer, trained from scratch on the same reviews. Both are attnlab's own
attention code. The comparison is the lesson of notebook 06: the tiny model knows only the few
dozen words of its training reviews, the pre-trained one was trained on a billion sentence pairs
and places "terrific" near "great".

`SentimentApp()` with no arguments builds its models itself: from a cache in the user's cache
folder when one made by the same code exists, otherwise by training them (seconds, not minutes,
on 2 cores) and caching the result. Any string is a valid review: empty, blank, very
long (the user is told what was cut), emoji, any script, control characters, HTML (shown as text,
never rendered). `analyze(text)` returns a plain dict; `text(result)` prints it (what strict nbval
compares); `display()` shows the widget.
"""
from __future__ import annotations

import hashlib
import html
import os
import time
import unicodedata
from pathlib import Path

import numpy as np
import torch

from .data import LABELS
from .pretrained import MiniLM, load_minilm, train_head

#: what the app shows before the user types anything
EXAMPLE_REVIEW = "What a terrific film, the cast was outstanding!"
MODEL_NAMES = {"minilm": "MiniLM + sentiment head", "tiny": "TinyTransformer (notebook 03)"}
CACHE_FILE = "sentiment-models.pt"
# the code that decides the trained weights: a change to any of it retrains instead of loading
_RECIPE_MODULES = ("attention", "data", "models", "train", "pretrained")


def cache_dir() -> Path:
    """Where trained weights are cached: $ATTNLAB_CACHE, else $XDG_CACHE_HOME/attnlab, else
    ~/.cache/attnlab."""
    if os.environ.get("ATTNLAB_CACHE"):
        return Path(os.environ["ATTNLAB_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "attnlab"


def _recipe_key() -> str:
    """A fingerprint of everything that determines the trained weights."""
    from importlib import import_module

    h = hashlib.sha256(torch.__version__.encode())
    for name in _RECIPE_MODULES:
        h.update(Path(import_module(f"attnlab.{name}").__file__).read_bytes())
    return h.hexdigest()


class TinyModel:
    """Notebook 03's TinyTransformer with its vocabulary (what `train_classifier` returns has both)."""

    def __init__(self, model, vocab):
        self.model, self.vocab = model, vocab


def default_models(cache: bool = True):
    """(tiny, encoder, head): notebook 03's TinyTransformer (`train_classifier()`), the MiniLM
    encoder and its sentiment head (`train_head`), loaded from the cache when it was made by the
    same code, else trained (and cached when `cache`)."""
    from .models import TinyTransformer
    from .train import RECIPE, train_classifier

    encoder = load_minilm()
    key = _recipe_key()
    file = cache_dir() / CACHE_FILE
    if cache and file.is_file():
        try:
            saved = torch.load(file, map_location="cpu", weights_only=True)
            if saved.get("key") == key:
                from .data import Vocab

                vocab = Vocab.for_reviews()
                tiny = TinyTransformer(len(vocab), RECIPE["d_model"], RECIPE["n_heads"], RECIPE["d_ff"],
                                       positions="learned")
                tiny.load_state_dict(saved["tiny"])
                head = torch.nn.Linear(encoder.config["hidden_size"], 2)
                head.load_state_dict(saved["head"])
                return TinyModel(tiny.eval(), vocab), encoder, head.eval()
        except Exception:  # an unreadable or foreign cache file: train afresh and overwrite it
            pass
    trained = train_classifier()
    head, _ = train_head(encoder, trained.train, trained.test)
    if cache:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            partial = file.with_name(f"{file.name}.{os.getpid()}.tmp")
            torch.save({"key": key, "tiny": trained.model.state_dict(), "head": head.state_dict()}, partial)
            os.replace(partial, file)  # atomic: a reader never sees half a file
        except OSError:
            pass  # a read-only home: the app still works, it just trains next time too
    return TinyModel(trained.model, trained.vocab), encoder, head


def _short(token: str, limit: int = 24) -> str:
    return token if len(token) <= limit else token[: limit - 1] + "…"


def _printable(text: str) -> str:
    """The text with control and format characters (NUL, escape, zero-width, bidi overrides ...)
    and lone surrogates replaced by a visible symbol, so what is echoed back shows what was typed
    and cannot reorder or hide the rest."""
    return "".join("\N{REPLACEMENT CHARACTER}" if unicodedata.category(c) in ("Cc", "Cf", "Cs")
                   and c not in "\t\n\r" else c for c in text)


class SentimentApp:
    """Type a review; both models' labels, probabilities and attention, as text or as a widget.

    tiny: what `attnlab.train.train_classifier()` returns (anything with .model and .vocab);
    encoder: `load_minilm()`; head: the nn.Linear(384, 2) from `attnlab.pretrained.train_head`.
    Give all three or none (then `default_models()` builds them, cached).
    """

    ECHO_CHARS = 300  # how much of the review the result echoes back

    def __init__(self, tiny=None, encoder: MiniLM | None = None, head: torch.nn.Module | None = None,
                 *, cache: bool = True):
        given = [x is not None for x in (tiny, encoder, head)]
        if any(given) and not all(given):
            raise TypeError("give tiny, encoder and head together, or none of them for the default models")
        if not isinstance(cache, bool):
            raise TypeError(f"cache must be True or False, got {cache!r}")
        if not any(given):
            tiny, encoder, head = default_models(cache=cache)
        if not (hasattr(tiny, "model") and hasattr(tiny, "vocab")):
            raise TypeError(f"tiny must have .model and .vocab (what train_classifier() returns), "
                            f"got {type(tiny).__name__}")
        if not isinstance(encoder, MiniLM):
            raise TypeError(f"encoder must be the MiniLM from load_minilm(), got {type(encoder).__name__}")
        if not isinstance(head, torch.nn.Module):
            raise TypeError(f"head must be a torch.nn.Module mapping (N, 384) to (N, 2), got {type(head).__name__}")
        self.tiny, self.encoder, self.head = tiny, encoder, head.eval()
        self._widget = None
        self.last: dict | None = None

    # -- the analysis ------------------------------------------------------------------------
    @torch.no_grad()
    def analyze(self, text: str) -> dict:
        """What both models make of `text` (any string).

        Returns a dict: `label` and `probability` (of that label) from the pre-trained model,
        `p_positive`; `tokens` (its word pieces) and `attention` (its last layer, mean of the heads,
        (T, T) numpy); `received` (T,): the attention each token receives, averaged over queries;
        `models`: the same for each model by name ("minilm", "tiny"); `empty`, `truncated`,
        `notes` (sentences for the user) and `text`.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        notes = []
        # pre-trained encoder + head
        batch = self.encoder.tokenize([text])
        hidden, maps = self.encoder(batch.ids, batch.keep)  # (1, T, 384), L x (1, H, T, T)
        p = torch.softmax(self.head(self.encoder.pool(hidden, batch.keep)), dim=-1)[0]  # (2,)
        attention = maps[-1][0].mean(0).numpy()  # (T, T)   last layer, mean of the heads
        pieces = batch.tokens[0]
        minilm = self._verdict(p, pieces, attention)
        minilm["unknown"] = sorted({t for t in pieces if t == "[UNK]"})
        # the tiny model, on its own word tokens
        vocab, model = self.tiny.vocab, self.tiny.model
        words = vocab.tokens(text)
        kept = words[: model.max_len]
        x = vocab.encode_batch([text], max_len=model.max_len)  # (1, T)
        p_tiny = model.predict_proba(x)[0]  # (2,)
        T = len(kept)
        tiny_attention = model.get_attention_maps(x)[-1][0].mean(0)[:T, :T].numpy()  # (T, T)
        tiny = self._verdict(p_tiny, kept, tiny_attention)
        tiny["unknown"] = sorted({w for w in kept if w not in vocab.stoi})

        empty = len(pieces) == 2 and not words  # nothing but [CLS] [SEP]: no readable character
        truncated = batch.truncated[0] or len(words) > model.max_len
        if empty:
            notes.append("There is nothing to read yet: the text is empty (or only spaces and control "
                         "characters). Both answers below are each model's guess for an empty review.")
        if batch.truncated[0]:
            notes.append(f"Long review: MiniLM read the first {self.encoder.max_length - 2} of its "
                         f"{batch.lengths[0] - 2} word pieces; the rest was cut.")
        if len(words) > model.max_len:
            notes.append(f"Long review: the TinyTransformer read the first {model.max_len} of its "
                         f"{len(words)} words; the rest was cut.")
        if minilm["unknown"]:
            n = pieces.count("[UNK]")
            notes.append(f"MiniLM has no word piece for {n} character group{'s' if n > 1 else ''} "
                         f"(emoji, rare symbols, words over 100 characters): {'they' if n > 1 else 'it'} became [UNK].")
        if tiny["unknown"] and not empty:
            notes.append(f"The TinyTransformer never saw {len(tiny['unknown'])} of these words in "
                         f"training; it reads them as <unk>: {', '.join(map(_short, tiny['unknown'][:8]))}"
                         f"{' ...' if len(tiny['unknown']) > 8 else ''}.")
        result = {
            "text": text,
            "label": minilm["label"], "probability": minilm["probability"], "p_positive": minilm["p_positive"],
            "tokens": minilm["tokens"], "attention": minilm["attention"], "received": minilm["received"],
            "models": {"minilm": minilm, "tiny": tiny},
            "empty": empty, "truncated": truncated, "notes": notes,
        }
        self.last = result
        return result

    @staticmethod
    def _verdict(p: torch.Tensor, tokens: list[str], attention: np.ndarray) -> dict:
        k = int(p.argmax())
        received = attention.mean(axis=0) if len(tokens) else np.zeros(0)  # (T,)  mean over queries
        return {"label": LABELS[k], "probability": float(p[k]), "p_positive": float(p[1]),
                "tokens": list(tokens), "attention": attention, "received": received}

    # -- views -------------------------------------------------------------------------------
    def _resolve(self, result: dict | None) -> dict:
        """`result`, or the last analysis when it is None."""
        r = result if result is not None else self.last
        if r is None:
            raise ValueError("nothing analysed yet: call analyze(text) first or pass its result")
        if not isinstance(r, dict) or "models" not in r:
            raise TypeError(f"result must be a dict returned by analyze(text), got {type(r).__name__}")
        return r

    def _echo(self, text: str) -> str:
        """The review as shown back: control characters made visible, cut at ECHO_CHARS."""
        echo = _printable(text)
        return echo if len(echo) <= self.ECHO_CHARS else echo[: self.ECHO_CHARS] + " ..."

    def text(self, result: dict | None = None) -> str:
        """A printable, deterministic summary of an analysis (the notebook prints it for nbval)."""
        r = self._resolve(result)
        lines = [f"review ({len(r['text'])} characters): {self._echo(r['text'])!r}"]
        for name, m in r["models"].items():
            lines.append(f"  {MODEL_NAMES[name]:31s} {m['label']:8s} p = {m['probability']:.3f}")
        for name, m in r["models"].items():
            top = sorted(zip(m["received"], range(len(m["tokens"]))), reverse=True)[:5]
            listed = ", ".join(f"{_short(m['tokens'][i])} {w:.2f}" for w, i in top)
            lines.append(f"  most attended ({name}): {listed}" if listed else f"  most attended ({name}): -")
        lines += [f"  note: {n}" for n in r["notes"]]
        return "\n".join(lines)

    def html(self, result: dict | None = None, seconds: float | None = None) -> str:
        """The result as HTML; every piece of user text is escaped, so it shows as text."""
        r = self._resolve(result)
        esc = html.escape
        parts = []
        for note in r["notes"]:
            parts.append(f'<div class="attnlab-sentiment-message" style="color:#8a4b00">{esc(note)}</div>')
        parts.append(f'<div>Review: <span class="attnlab-sentiment-echo" style="white-space:pre-wrap">'
                     f'{esc(self._echo(r["text"]))}</span></div>')
        for name, m in r["models"].items():
            color = "#1a7f37" if m["label"] == "positive" else "#b42318"
            parts.append(
                f'<div class="attnlab-sentiment-model" data-model="{name}" style="margin-top:6px">'
                f'<b>{esc(MODEL_NAMES[name])}</b>: '
                f'<span class="attnlab-sentiment-label" style="color:{color};font-weight:bold">{m["label"]}</span>'
                f' (p = <span class="attnlab-sentiment-probability">{m["probability"]:.3f}</span>)'
                f'<div class="attnlab-sentiment-tokens" style="line-height:1.9">{self._token_strip(m)}</div>'
                f'</div>')
        if seconds is not None:
            parts.append(f'<div class="attnlab-sentiment-time" style="color:#777;font-size:85%">'
                         f'answered in {seconds * 1000:.0f} ms; token colour = attention received '
                         f'(last layer, mean of heads and queries)</div>')
        return "\n".join(parts)

    @staticmethod
    def _token_strip(m: dict) -> str:
        """Each token on a background as dark as the attention it receives (a 1-D heatmap)."""
        if not m["tokens"]:
            return '<span style="color:#777">(no tokens)</span>'
        top = float(np.max(m["received"])) or 1.0
        spans = []
        for token, weight in zip(m["tokens"], m["received"]):
            alpha = 0.85 * float(weight) / top
            unknown = token in m.get("unknown", ())
            cls = "attnlab-sentiment-token" + (" attnlab-sentiment-unknown" if unknown else "")
            title = f"attention {float(weight):.3f}" + (" (unknown to this model)" if unknown else "")
            style = (f"background:rgba(68,1,84,{alpha:.2f});color:{'white' if alpha > 0.45 else 'black'};"
                     f"padding:1px 3px;margin:1px;border-radius:3px"
                     + (";text-decoration:line-through" if unknown else ""))
            spans.append(f'<span class="{cls}" title="{html.escape(title)}" style="{style}">'
                         f'{html.escape(_short(token))}</span>')
        return " ".join(spans)

    # -- the widget --------------------------------------------------------------------------
    def update(self, text: str | None = None) -> dict | None:
        """Analyse `text` (default: what is in the text box) and show it; never raises: an
        unexpected problem is shown as a short message instead of a traceback."""
        self.widget  # built on first use: the text box and the result area
        if text is None:
            text = self._input.value
        start = time.perf_counter()
        try:
            result = self.analyze(text)
            self._result.value = self.html(result, seconds=time.perf_counter() - start)
            return result
        except Exception as e:  # the user sees a sentence, not a traceback
            self._result.value = (f'<div class="attnlab-sentiment-message" style="color:#b42318">'
                                  f'Could not analyse this text ({html.escape(type(e).__name__)}: '
                                  f'{html.escape(str(e))}). Try a shorter or different review.</div>')
            return None

    @property
    def widget(self):
        """The ipywidgets view: a text box (Enter analyses), an Analyse button and the result."""
        if self._widget is None:
            import ipywidgets as w

            title = w.HTML("<b>Sentiment app</b>: type a review, press Enter or click Analyse.")
            self._input = w.Text(value=EXAMPLE_REVIEW, placeholder="Type a review ...",
                                 continuous_update=False, layout=w.Layout(width="70%"))
            self._input.add_class("attnlab-sentiment-input")
            self._button = w.Button(description="Analyse", button_style="primary")
            self._button.add_class("attnlab-sentiment-button")
            self._result = w.HTML()
            self._result.add_class("attnlab-sentiment-result")
            self._input.observe(lambda change: self.update(change["new"]), names="value")
            self._button.on_click(lambda _: self.update(self._input.value))
            self._widget = w.VBox([title, w.HBox([self._input, self._button]), self._result])
            self._widget.add_class("attnlab-sentiment")
            self.update(self._input.value)
        return self._widget

    def display(self):
        """Show the app in the notebook."""
        from IPython.display import display

        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

"""attnlab.views.web: the sentiment app as a web page. Every hostile input of issue 31 gets an
answer or a clear message, shown as text; 50 requests from 10 concurrent clients are all answered;
the server keeps serving after a bad request. (In a browser: tests/test_web_browser.py. How long an
answer takes: benchmarks/web_app.py.)"""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import gradio as gr
import pytest
from browser_support import free_port
from gradio_client import Client

import attnlab
from attnlab.views import web
from attnlab.views.app import echo, token_shades

pytestmark = pytest.mark.integration  # make test-all (CI), not make test

HOSTILE = {
    "empty": "",
    "100,000 characters": ("The plot was dull but the acting was brilliant. " * 2100)[:100_000],
    "non-ASCII": "Crème brûlée, naïve café — très bien; 東京の映画は素晴らしい; الفيلم رائع",
    "emoji": "🙂🎉👍🏽 loved it 😍",
    "HTML and script": "<b>x</b><script>alert('hi')</script><img src=x onerror=alert(1)>",
    "only punctuation": "?!... ,;:- ()[]{} !!!",
    "only unknown words": "zorgle blimf quaxx snerp",
    "control characters": "a\x00b\x07c\x1b[31mred\x7f \u202eevil\u202c",
    "lone surrogate": "bad \ud800 film",
}
# No test asserts a time a loaded 2-core machine can miss: the one-second goal is measured by
# benchmarks/web_app.py; this bound catches only a request that hangs.
HANG = 30.0


@pytest.fixture(scope="module")
def app():
    """The app as `make app` builds it: default models, from the app's cache (or trained once)."""
    attnlab.seed_everything(0)
    return attnlab.SentimentApp()


@pytest.fixture(scope="module")
def server(app):
    """The page served by Gradio in this process on a free port of 127.0.0.1, closed after."""
    page = web.build(app)
    port = free_port()
    web.launch(page, "127.0.0.1", port, block=False)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        page.close()


def p_positive(label) -> float:
    """P(positive) from a gr.Label value: {"positive": p, "negative": 1 - p}, or the string
    "not sure (P(positive) = 0.56)"; from the API, {"label": ..., "confidences": [...]}."""
    if isinstance(label, dict) and "confidences" in label:
        label = ({c["label"]: c["confidence"] for c in label["confidences"]}
                 if label["confidences"] else label["label"])
    if isinstance(label, dict):
        assert set(label) == {"positive", "negative"}, label
        assert label["positive"] + label["negative"] == pytest.approx(1.0), label
        return label["positive"]
    match = re.fullmatch(r"not sure \(P\(positive\) = (0\.\d\d|1\.00)\)", label)
    assert match, label
    return float(match.group(1))


def _well_formed(answer: web.Answer, name: str) -> None:
    assert isinstance(answer, web.Answer), name
    for label in (answer.minilm_label, answer.tiny_label):
        assert 0.0 <= p_positive(label) <= 1.0, name
    for tokens in (answer.minilm_tokens, answer.tiny_tokens):
        assert all(isinstance(t, str) and web.SHADE <= w <= 0.0 for t, w in tokens), name
    assert not any(t.startswith(("[CLS] ", "[SEP] ")) for t, _ in answer.minilm_tokens), name
    assert answer.message and "Traceback" not in answer.message, name
    assert answer.timing.startswith("answered in "), name


def test_every_hostile_input_gets_an_answer_shown_as_text(app):
    for name, text in HOSTILE.items():
        start = time.perf_counter()
        answer = web.handle(app, text)
        assert time.perf_counter() - start < HANG, name
        _well_formed(answer, name)
        assert answer.review == echo(text), name  # the review as typed, as text (cut to 300)
    said = {name: web.handle(app, text).message for name, text in HOSTILE.items()}
    assert "nothing to read" in said["empty"]
    assert "MiniLM read the first 254" in said["100,000 characters"]
    assert "TinyTransformer read the first 64" in said["100,000 characters"]
    assert "[UNK]" in said["emoji"] and "[UNK]" in said["non-ASCII"]
    assert "blimf, quaxx, snerp, zorgle" in said["only unknown words"]
    assert said["only punctuation"].startswith("The TinyTransformer read no sentiment word")
    assert web.handle(app, "A dull film.").message == "Both models read the whole review."
    review = web.handle(app, HOSTILE["HTML and script"]).review
    assert review == HOSTILE["HTML and script"]  # verbatim: the page shows it in a text box
    shown = web.handle(app, HOSTILE["control characters"]).review
    assert "\x00" not in shown and "\u202e" not in shown and "\N{REPLACEMENT CHARACTER}" in shown


def test_what_is_not_a_review_gets_a_clear_message(app):
    assert web.handle(app, None).message.startswith("There is nothing to read yet")
    for value in (42, ["a list"], {"a": 1}, b"bytes"):
        answer = web.handle(app, value)
        assert answer.message.startswith("Could not analyse this text (TypeError: text must be")
        assert answer.minilm_label == {} and answer.minilm_tokens == [] and answer.review == ""
    huge = "The acting was great. " * 12_000  # 264,000 characters: the first MAX_CHARS read
    answer = web.handle(app, huge)
    assert answer.message.startswith(f"Very long review (264,000 characters): only the first "
                                     f"{web.MAX_CHARS:,} were read.")
    assert p_positive(answer.minilm_label) > 0.5


def test_the_answers_are_the_widgets(app):
    """One path: the page shows what SentimentApp.analyze says, shaded as the widget shades."""
    text = "What a terrific film, the cast was outstanding!"
    answer, result = web.handle(app, text), app.analyze(text)
    assert p_positive(answer.minilm_label) == pytest.approx(result["models"]["minilm"]
                                                            ["p_positive"])
    tiny = result["models"]["tiny"]["p_positive"]  # it knows no word of it: near 0.5
    assert answer.tiny_label == f"not sure (P(positive) = {tiny:.2f})" and abs(tiny - 0.5) < 0.1
    shades = token_shades(result["models"]["minilm"])
    assert [t for t, _ in answer.minilm_tokens] == [f"{t} {w:.2f}" for t, w, _, _ in shades]
    assert [t.rsplit(" ", 1)[0] for t, _ in answer.minilm_tokens] == result["tokens"]
    assert min(w for _, w in answer.minilm_tokens) == web.SHADE  # the largest weight


def test_a_contrast_review_and_its_swap_get_their_labels_and_not_sure_reads_so(app):
    """Issue 51's headline: the page reads which clause comes after "but"."""
    for text, label in (("the plot was dull but the cast was superb", "positive"),
                        ("the cast was superb but the plot was dull", "negative")):
        p = p_positive(web.handle(app, text).minilm_label)
        assert (p > 0.65) == (label == "positive") and abs(p - 0.5) > 0.15, (text, p)
    empty = web.handle(app, "")
    assert empty.minilm_label.startswith("not sure (P(positive) = 0.")


def test_the_page_builds_no_html_from_the_input(app):
    page = web.build(app)
    kinds = {type(block).__name__ for block in page.blocks.values()}
    assert not kinds & {"HTML", "Chatbot", "Dataframe"}, kinds  # nothing that renders markup
    outputs = [block for block in page.blocks.values()
               if isinstance(block, gr.Textbox | gr.HighlightedText | gr.Label)]
    assert {b.elem_id for b in outputs} >= {"review", "notes", "echo", "minilm-label",
                                            "minilm-tokens", "tiny-label", "tiny-tokens"}
    markdown = [b.value for b in page.blocks.values() if isinstance(b, gr.Markdown)]
    assert any(m == web.CAVEAT for m in markdown)  # weight is not the whole reason
    assert any("Held out: " in m and "TinyTransformer" in m for m in markdown)  # model cards
    examples = [b for b in page.blocks.values() if isinstance(b, gr.Dataset)]
    assert examples and {"the plot was dull but the cast was superb",
                         "the cast was superb but the plot was dull"} <= {
        row[0] for row in examples[0].samples}


def test_fifty_requests_from_ten_clients_are_all_answered(app, server):
    # a lone surrogate cannot travel as UTF-8 (no client can send it): handle() has its test
    texts = [t for name, t in HOSTILE.items() if name != "lone surrogate"]
    texts += ["The acting was superb.", "A dreadful, tedious sequel."]
    expected = {t: p_positive(web.handle(app, t).minilm_label) for t in texts}
    answers, errors = [], []

    def client(k: int):
        try:
            c = Client(server, verbose=False)
            for i in range(5):
                text = texts[(5 * k + i) % len(texts)]
                out = c.predict(text, api_name="/analyse")
                answers.append((text, out))
        except Exception as e:  # noqa: BLE001 - a lost request is the failure reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert len(answers) == 50
    for text, out in answers:
        message, review, minilm_label = out[0], out[1], out[2]
        assert review == echo(text)
        assert p_positive(minilm_label) == pytest.approx(expected[text], abs=1e-5), text
        assert message


def _post(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_server_keeps_serving_after_bad_requests(server):
    call = f"{server}gradio_api/call/analyse"
    assert _post(call, b"{not json") >= 400
    assert _post(call, json.dumps({"data": "not a list"}).encode()) >= 400
    assert _post(call, json.dumps({"data": [1, 2, 3, 4]}).encode()) >= 200  # any answer at all
    assert _post(call, json.dumps({"data": [{"a": 1}]}).encode()) >= 200
    out = Client(server, verbose=False).predict("The acting was superb.", api_name="/analyse")
    assert out[1] == "The acting was superb."
    assert p_positive(out[2]) > 0.65

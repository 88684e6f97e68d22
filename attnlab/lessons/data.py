"""The series' data: synthetic movie reviews whose deciding word is known, their vocabulary, and
Fashion-MNIST (notebook 06).

Real sentiment data cannot tell us which word *should* decide the label. These reviews can:
every sentence is neutral filler plus sentiment words placed at recorded positions, so a model's
attention can be scored against ground truth. Two tasks, both binary (label 1 = positive,
0 = negative, names in `LABELS`), 5-15 tokens each:

- `make_contrast_reviews` (notebook 03's task): a sentiment word, "but", then a sentiment word
  of the other polarity, among filler: "the plot was dull but the cast was superb". The word
  after "but" decides, as in real reviews. Both orders of the same words are equally likely, so
  the bag of words carries no information about the label: a model that cannot relate words to
  each other (a bag of words, or attention made uniform) is at chance.
- `make_reviews` (the bag task): exactly one sentiment word; its polarity is the label. Word
  order does not matter: a bag of words solves it.

Everything is deterministic given `seed`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ..plumbing.assets import fetch, read_idx
from ..plumbing.checks import check_int, check_str
from ..plumbing.repro import seed_of

LABELS = ("negative", "positive")  # LABELS[label]

POSITIVE = (
    "good", "great", "excellent", "wonderful", "brilliant", "superb",
    "delightful", "enjoyable", "fantastic", "lovely", "amazing", "charming",
)
NEGATIVE = (
    "bad", "awful", "terrible", "boring", "dull", "poor",
    "horrible", "dreadful", "weak", "mediocre", "disappointing", "tedious",
)
# Filler: carries no sentiment and no negation ("not" would flip a reader's judgement).
NEUTRAL = (
    "the", "a", "this", "that", "it", "was", "is", "and", "of", "with", "in", "to",
    "movie", "film", "plot", "story", "acting", "actors", "cast", "director", "script",
    "music", "ending", "scenes", "characters", "dialogue", "camera", "sequel", "cinema",
    "really", "quite", "overall", "honestly", "felt", "seemed", "looked",
)
# Sentiment synonyms that never occur in generated training data and are not in the vocabulary
# (they encode to UNK): for testing whether a model generalises beyond the words it was taught.
UNSEEN_POSITIVE = ("terrific", "splendid", "outstanding", "marvelous", "magnificent", "superior")
UNSEEN_NEGATIVE = ("lousy", "dismal", "atrocious", "pathetic", "abysmal", "appalling")

CONTRAST = "but"  # the word that says "what follows is what counts"
MIN_LEN, MAX_LEN = 5, 15

_TOKEN = re.compile(r"\w+(?:'\w+)*")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens of any string ("" gives []); punctuation and spaces are dropped."""
    check_str("text", text)
    return _TOKEN.findall(text.lower())


class Review(NamedTuple):
    """One generated review: its words, its label (0/1) and the index of its decisive word."""

    words: list[str]
    label: int
    position: int


@dataclass(frozen=True)
class Reviews:
    """A set of generated reviews, stored as columns: `sentences` (lists of tokens), `labels`
    (0/1) and `positions` (index of the decisive token in each sentence).

    It behaves like a list of `Review`s: iterating yields `(words, label, position)` one review
    at a time, `reviews[i]` is one `Review`, `len()` counts reviews and a slice `reviews[a:b]`
    is again a `Reviews`. The columns are what the tensors are built from."""

    sentences: list[list[str]]
    labels: list[int]
    positions: list[int]

    def __post_init__(self):
        if not len(self.sentences) == len(self.labels) == len(self.positions):
            raise ValueError(
                f"sentences, labels and positions must have the same length, got "
                f"{len(self.sentences)}, {len(self.labels)}, {len(self.positions)}"
            )

    def __iter__(self):
        return (Review(*r) for r in zip(self.sentences, self.labels, self.positions))

    def __len__(self) -> int:
        return len(self.sentences)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Reviews(self.sentences[index], self.labels[index], self.positions[index])
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"index must be an int or a slice, got {index!r}")
        return Review(self.sentences[index], self.labels[index], self.positions[index])

    def __add__(self, other: Reviews) -> Reviews:
        """Both sets, this one first (as lists add)."""
        if not isinstance(other, Reviews):
            return NotImplemented
        return Reviews(self.sentences + other.sentences, self.labels + other.labels,
                       self.positions + other.positions)

    def texts(self) -> list[str]:
        """The sentences as plain strings (words joined by spaces)."""
        return [" ".join(s) for s in self.sentences]

    def split(self, n_train: int) -> tuple[Reviews, Reviews]:
        """(first n_train reviews, the rest). The reviews are i.i.d., so this is a random split."""
        check_int("n_train", n_train, minimum=1, maximum=len(self) - 1)
        return self[:n_train], self[n_train:]

    def tensors(self, vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(token ids (N, T) padded with PAD, labels (N,), decisive positions (N,)), all int64."""
        x = vocab.encode_batch(self.sentences)  # (N, T)
        y = torch.tensor(self.labels, dtype=torch.long)  # (N,)
        return x, y, torch.tensor(self.positions, dtype=torch.long)


def _check_words(name, words) -> tuple[str, ...]:
    if isinstance(words, str) or not isinstance(words, Iterable):
        raise TypeError(f"{name} must be a sequence of words, got {type(words).__name__}")
    words = tuple(words)
    if not words or not all(isinstance(w, str) and w for w in words):
        raise ValueError(f"{name} must be a non-empty sequence of non-empty words, got {words!r}")
    return words


def _generate(n: int, seed: int, positive, negative, neutral, place) -> Reviews:
    """The loop both tasks share: `n` sentences of MIN_LEN..MAX_LEN random filler words, into
    which `place(rng, words, pos_words, neg_words)` writes the sentiment word(s) in place and
    returns (label, position of the decisive word)."""
    n, seed = check_int("n", n, minimum=1), check_int("seed", seed)
    pos_words, neg_words = _check_words("positive", positive), _check_words("negative", negative)
    filler = _check_words("neutral", neutral)
    rng = np.random.default_rng(seed_of(seed))
    sentences, labels, positions = [], [], []
    for _ in range(n):
        length = int(rng.integers(MIN_LEN, MAX_LEN + 1))
        words = [filler[i] for i in rng.integers(len(filler), size=length)]
        label, where = place(rng, words, pos_words, neg_words)
        sentences.append(words)
        labels.append(label)
        positions.append(where)
    return Reviews(sentences, labels, positions)


def _place_one_word(rng, words, pos_words, neg_words) -> tuple[int, int]:
    """One sentiment word at a uniformly random position; its polarity is the label."""
    label = int(rng.integers(2))
    pool = pos_words if label else neg_words
    where = int(rng.integers(len(words)))
    words[where] = pool[int(rng.integers(len(pool)))]
    return label, where


def _place_contrast(rng, words, pos_words, neg_words, contrast: str = CONTRAST
                    ) -> tuple[int, int]:
    """A sentiment word, "but" (or `contrast`), and a word of the other polarity, at three
    random positions in that order; the label is the polarity of the word after "but"."""
    first, but, second = sorted(int(i) for i in rng.choice(len(words), size=3, replace=False))
    label = int(rng.integers(2))  # 1: the word after "but" is positive
    good = pos_words[int(rng.integers(len(pos_words)))]
    bad = neg_words[int(rng.integers(len(neg_words)))]
    words[first], words[but], words[second] = (bad, contrast, good) if label else (
        good, contrast, bad)
    return label, second


def make_reviews(n: int, seed: int = 0, *, positive: Sequence[str] = POSITIVE,
                 negative: Sequence[str] = NEGATIVE, neutral: Sequence[str] = NEUTRAL) -> Reviews:
    """`n` reviews of 5–15 tokens: neutral filler with exactly one sentiment word at a uniformly
    random position; label 1 if that word is positive, 0 if negative (balanced in expectation).

    Pass other word lists (e.g. `UNSEEN_POSITIVE`, `UNSEEN_NEGATIVE`) to build a test set whose
    decisive words a model has never seen.
    """
    return _generate(n, seed, positive, negative, neutral, _place_one_word)


def make_contrast_reviews(n: int, seed: int = 0, *, positive: Sequence[str] = POSITIVE,
                          negative: Sequence[str] = NEGATIVE, neutral: Sequence[str] = NEUTRAL,
                          contrast: str = CONTRAST) -> Reviews:
    """`n` reviews of 5–15 tokens: filler with a sentiment word, then "but", then a word of the
    other polarity; the label is the polarity of the word after "but", and `positions` records
    that word. `contrast` puts another word where "but" stands ("yet").

    The three positions are a uniform random triple and which polarity comes after "but" is a
    fair coin, independent of everything else: given the bag of words, both labels are exactly
    equally likely. Hence no function of the bag (a model without positions, or whose attention
    is made uniform so that no word can single out another) beats 50 %.
    """
    contrast = check_str("contrast", contrast)
    return _generate(n, seed, positive, negative, neutral,
                     lambda *args: _place_contrast(*args, contrast=contrast))


def make_undecided_reviews(n: int, seed: int = 0, *, neutral: Sequence[str] = NEUTRAL
                           ) -> Reviews:
    """`n` reviews with no sentiment word, each given twice: once labelled negative, once
    positive (so 2n reviews, negatives first; `positions` is -1: no word decides).

    Each is 5–15 filler words of which a random share (uniform in [0, 1) per review) is the
    `<unk>` token, what any word outside the vocabulary becomes. Trained on them beside its
    task, a classifier's loss is least where it gives such a review p = 0.5: it learns to say
    that it cannot tell, instead of answering with whatever its untrained `<unk>` vector
    pushes it to (notebook 07 measures both)."""
    n, seed = check_int("n", n, minimum=1), check_int("seed", seed)
    filler = _check_words("neutral", neutral)
    rng = np.random.default_rng([seed_of(seed), 1])  # a stream apart from make_reviews(seed)
    sentences = []
    for _ in range(n):
        length = int(rng.integers(MIN_LEN, MAX_LEN + 1))
        share = rng.random()
        sentences.append([Vocab.UNK_TOKEN if rng.random() < share else filler[int(i)]
                          for i in rng.integers(len(filler), size=length)])
    return Reviews(sentences + sentences, [0] * n + [1] * n, [-1] * (2 * n))


def swapped(reviews: Reviews, positive: Sequence[str] = POSITIVE,
            negative: Sequence[str] = NEGATIVE) -> Reviews:
    """Contrast reviews with their two sentiment words exchanged: the same bag of words, the
    other label (the decisive word still sits after "but", at the same position)."""
    sentiment = set(positive) | set(negative)
    sentences = []
    for i, (words, _, _) in enumerate(reviews):
        at = [j for j, word in enumerate(words) if word in sentiment]
        if len(at) != 2:
            raise ValueError(f"review {i} must hold two sentiment words to swap (a contrast "
                             f"review), got {len(at)}: {' '.join(words)!r}")
        turned = list(words)
        turned[at[0]], turned[at[1]] = words[at[1]], words[at[0]]
        sentences.append(turned)
    return Reviews(sentences, [1 - label for label in reviews.labels], list(reviews.positions))


def negated(reviews: Reviews, negation: str = "not") -> Reviews:
    """One-word reviews with "not" before their sentiment word, so the other label: "the plot
    was not dull" is positive. `positions` still points at the sentiment word."""
    sentences = [words[:at] + [negation] + words[at:] for words, _, at in reviews]
    return Reviews(sentences, [1 - label for label in reviews.labels],
                   [at + 1 for at in reviews.positions])


#: what a model of each review task was trained on, as a widget says it
TASK_READS = {
    "bag": "reviews with exactly one sentiment word among filler words",
    "contrast": 'reviews with a sentiment word, then "but", then a word of the other polarity',
}


def outside_task(words: Sequence[str], task: str) -> str | None:
    """Why a review (its words) is not like the reviews a model of `task` ("bag", "contrast")
    was trained on, or None when it is: a model asked outside its training answers anyway,
    often with near certainty, and a widget should say "not sure" instead."""
    if task not in TASK_READS:
        raise ValueError(f"task must be one of {', '.join(TASK_READS)}, got {task!r}")
    at = [i for i, w in enumerate(words) if w in POSITIVE or w in NEGATIVE]
    if task == "bag":
        return None if len(at) == 1 else (f"it holds {len(at)} sentiment words the model knows, "
                                          f"its training reviews one")
    buts = [i for i, w in enumerate(words) if w == CONTRAST]
    if (len(at) == 2 and len(buts) == 1 and at[0] < buts[0] < at[1]
            and (words[at[0]] in POSITIVE) != (words[at[1]] in POSITIVE)):
        return None
    return ('it is not "sentiment word ... but ... word of the other polarity" in words the '
            'model knows')


class Vocab:
    """Word <-> id mapping with PAD = 0 and UNK = 1; any other string maps to UNK.

    `encode` takes a string (tokenized with `tokenize`) or a list of tokens; `decode` turns ids
    back into words, dropping PAD.
    """

    PAD, UNK = 0, 1
    PAD_TOKEN, UNK_TOKEN = "<pad>", "<unk>"

    def __init__(self, words: Iterable[str]):
        if isinstance(words, str) or not isinstance(words, Iterable):
            raise TypeError(f"words must be an iterable of words (str), got {type(words).__name__}")
        self.itos: list[str] = [self.PAD_TOKEN, self.UNK_TOKEN]
        self.stoi: dict[str, int] = {self.PAD_TOKEN: 0, self.UNK_TOKEN: 1}
        for w in words:
            check_str("every word", w)
            if w not in self.stoi:
                self.stoi[w] = len(self.itos)
                self.itos.append(w)

    @classmethod
    def for_reviews(cls) -> Vocab:
        """The one vocabulary of both review tasks: PAD, UNK, then neutral, positive and negative
        words in list order, then "but" (so ids never depend on a data sample)."""
        return cls([*NEUTRAL, *POSITIVE, *NEGATIVE, CONTRAST])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word) -> bool:
        return word in self.stoi

    def tokens(self, text) -> list[str]:
        """The tokens of a string, or a list of tokens checked and lower-cased."""
        if isinstance(text, str):
            return tokenize(text)
        if isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
            return [t.lower() for t in text]
        raise TypeError(f"text must be a str or a list of str tokens, got {type(text).__name__}")

    def encode(self, text) -> list[int]:
        """Ids of a string or a token list; unknown words give UNK (1)."""
        return [self.stoi.get(t, self.UNK) for t in self.tokens(text)]

    def decode(self, ids) -> list[str]:
        """Words of a sequence of ids (list or 1-D tensor), PAD dropped."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            i = check_int("each id", i, minimum=0, maximum=len(self.itos) - 1)
            if i != self.PAD:
                out.append(self.itos[i])
        return out

    def encode_batch(self, texts, max_len: int | None = None, min_len: int = 1) -> torch.Tensor:
        """(N, T) int64 ids of N strings or token lists, right-padded with PAD to the longest but
        to at least `min_len` columns (so an empty text is a row of PAD); each text is cut to
        `max_len` tokens if given."""
        if isinstance(texts, str):
            raise TypeError("texts must be a list of texts; wrap a single string in a list")
        if max_len is not None:
            check_int("max_len", max_len, minimum=1)
        check_int("min_len", min_len, minimum=1)
        rows = [self.encode(t)[:max_len] for t in texts]
        width = max([len(r) for r in rows] + [min_len])
        x = torch.full((len(rows), width), self.PAD, dtype=torch.long)  # (N, T)
        for i, r in enumerate(rows):
            x[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        return x


def load_fashion_mnist():
    """((x_train, y_train), (x_test, y_test)) as `keras.datasets.fashion_mnist.load_data()`
    returns them: uint8 images (N, 28, 28), uint8 labels (N,) — from the first verified local
    copy (`attnlab.plumbing.assets` says where it looks), downloaded the way Keras does only when
    there is none anywhere (offline, that fails with an AssetError naming every place looked and the
    fixing command)."""
    def split(name):
        x = read_idx(fetch(f"fashion-mnist/{name}-images"))  # (N, 28, 28) uint8
        y = read_idx(fetch(f"fashion-mnist/{name}-labels"))  # (N,) uint8
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"Fashion-MNIST {name}: {x.shape[0]} images but {y.shape[0]} labels")
        return x, y

    return split("train"), split("t10k")

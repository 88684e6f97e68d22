"""The synthetic reviews: the decisive word decides the label, the contrast task defeats any bag
of words, the vocabulary takes any string."""
from collections import Counter

import pytest
import torch
from helpers import raises_each

from attnlab.lessons.data import (
    MAX_LEN,
    MIN_LEN,
    NEGATIVE,
    NEUTRAL,
    POSITIVE,
    UNSEEN_NEGATIVE,
    UNSEEN_POSITIVE,
    Reviews,
    Vocab,
    make_contrast_reviews,
    make_reviews,
    make_undecided_reviews,
    tokenize,
)

SENTIMENT = set(POSITIVE) | set(NEGATIVE)


def test_word_lists_are_disjoint_and_unseen_words_are_outside_the_vocabulary():
    lists = [POSITIVE, NEGATIVE, NEUTRAL, UNSEEN_POSITIVE, UNSEEN_NEGATIVE]
    words = [w for lst in lists for w in lst]
    assert len(words) == len(set(words))
    vocab = Vocab.for_reviews()
    assert all(w in vocab for w in (*POSITIVE, *NEGATIVE, *NEUTRAL))
    assert all(vocab.encode([w]) == [Vocab.UNK] for w in (*UNSEEN_POSITIVE, *UNSEEN_NEGATIVE))


def test_reviews_have_one_decisive_word_that_decides_the_label():
    r = make_reviews(2000, seed=3)
    sentences, labels, positions = r.sentences, r.labels, r.positions
    for words, label, pos in zip(sentences, labels, positions):
        assert MIN_LEN <= len(words) <= MAX_LEN
        sentiment = [i for i, w in enumerate(words) if w in SENTIMENT]
        assert sentiment == [pos], "exactly one sentiment word, at the recorded position"
        assert (words[pos] in POSITIVE) == (label == 1)
        assert all(w in NEUTRAL for i, w in enumerate(words) if i != pos)
    assert 0.45 < sum(labels) / len(labels) < 0.55
    lengths = Counter(len(s) for s in sentences)
    assert set(lengths) == set(range(MIN_LEN, MAX_LEN + 1))
    assert set(positions) == set(range(MAX_LEN))


def test_generators_are_deterministic_by_seed():
    for make in (make_reviews, make_contrast_reviews):
        assert make(200, seed=7) == make(200, seed=7)
        assert make(200, seed=7).sentences != make(200, seed=8).sentences


def test_undecided_reviews_hold_no_sentiment_word_and_each_sentence_under_both_labels():
    r = make_undecided_reviews(500, seed=2)
    assert len(r) == 1000 and r.labels == [0] * 500 + [1] * 500 and set(r.positions) == {-1}
    assert r.sentences[:500] == r.sentences[500:]
    words = [w for s in r.sentences for w in s]
    assert set(words) <= set(NEUTRAL) | {Vocab.UNK_TOKEN}
    assert all(MIN_LEN <= len(s) <= MAX_LEN for s in r.sentences)
    shares = [s.count(Vocab.UNK_TOKEN) / len(s) for s in r.sentences[:500]]
    assert min(shares) == 0 and max(shares) == 1  # from no <unk> to all <unk>
    assert Vocab.for_reviews().encode([Vocab.UNK_TOKEN]) == [Vocab.UNK]
    assert r == make_undecided_reviews(500, seed=2)
    assert r.sentences[0] != make_reviews(1, seed=2).sentences[0]  # a stream of its own


def test_contrast_label_is_the_word_after_but_and_swapping_the_words_flips_it():
    r = make_contrast_reviews(2000, seed=5)
    assert 0.45 < sum(r.labels) / len(r.labels) < 0.55
    for words, label, pos in r:
        assert MIN_LEN <= len(words) <= MAX_LEN
        where = [i for i, w in enumerate(words) if w in SENTIMENT]
        assert len(where) == 2 and pos == where[1] and words.count("but") == 1
        assert where[0] < words.index("but") < where[1]
        assert (words[pos] in POSITIVE) == (label == 1) != (words[where[0]] in POSITIVE)
        swapped = list(words)
        swapped[where[0]], swapped[where[1]] = words[where[1]], words[where[0]]
        assert Counter(swapped) == Counter(words)  # the same bag of words gets the other label
    assert "but" in Vocab.for_reviews()


def _bag_of_words_accuracy(make, seed=0):
    """Test accuracy of logistic regression on word counts (the best linear bag-of-words model)."""
    vocab = Vocab.for_reviews()
    train, test = make(3000, seed=seed).split(2000)

    def counts(reviews):
        x = torch.zeros(len(reviews), len(vocab))
        for i, ids in enumerate(vocab.encode(s) for s in reviews.sentences):
            x[i].index_add_(0, torch.tensor(ids), torch.ones(len(ids)))
        return x, torch.tensor(reviews.labels)

    (xtr, ytr), (xte, yte) = counts(train), counts(test)
    torch.manual_seed(seed)
    model = torch.nn.Linear(len(vocab), 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(200):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xtr), ytr).backward()
        opt.step()
    return float((model(xte).argmax(-1) == yte).float().mean())


def test_a_bag_of_words_solves_the_bag_task_but_not_the_contrast_task():
    assert _bag_of_words_accuracy(make_reviews) > 0.97
    # 1000 test sentences: chance is 0.5 with a standard error of 0.016
    assert abs(_bag_of_words_accuracy(make_contrast_reviews) - 0.5) < 0.06


def test_other_word_lists_build_an_unseen_synonym_test_set():
    reviews = make_reviews(300, seed=1, positive=UNSEEN_POSITIVE, negative=UNSEEN_NEGATIVE)
    for words, label, pos in reviews:
        assert words[pos] in (UNSEEN_POSITIVE if label else UNSEEN_NEGATIVE)


def test_reviews_container_slices_splits_and_tensors():
    reviews = make_reviews(50, seed=0)
    assert len(reviews) == 50
    train, test = reviews.split(40)
    assert isinstance(train, Reviews) and (len(train), len(test)) == (40, 10)
    assert train.sentences + test.sentences == reviews.sentences
    words = reviews.sentences[3]
    assert reviews.texts()[3] == " ".join(words)
    assert reviews[3] == (words, reviews.labels[3], reviews.positions[3])
    assert reviews[3].words == words and list(reviews)[3] == reviews[3]
    with pytest.raises(TypeError, match="index must be an int or a slice"):
        reviews["3"]
    x, y, p = reviews.tensors(Vocab.for_reviews())
    assert x.dtype == y.dtype == p.dtype == torch.long
    assert x.shape == (50, max(len(s) for s in reviews.sentences))  # padded to the longest
    assert y.tolist() == reviews.labels and p.tolist() == reviews.positions
    assert Vocab.for_reviews().decode(x[3]) == words
    with pytest.raises(ValueError, match="n_train"):
        reviews.split(50)
    with pytest.raises(ValueError, match="same length"):
        Reviews([["a"]], [0, 1], [0])


def test_vocab_pad_unk_round_trip_and_any_string():
    vocab = Vocab.for_reviews()
    assert vocab.PAD == 0 and vocab.UNK == 1 and vocab.itos[:2] == ["<pad>", "<unk>"]
    assert len(vocab) == 2 + len(NEUTRAL) + len(POSITIVE) + len(NEGATIVE) + 1  # + "but"
    ids = vocab.encode("The movie was GREAT, honestly!")
    assert vocab.decode(ids) == ["the", "movie", "was", "great", "honestly"]
    assert vocab.encode(["the", "zebra"]) == [vocab.stoi["the"], Vocab.UNK]
    assert vocab.encode("") == [] and tokenize("  ,;! ") == []
    hostile = "<script>alert('x')</script> café ☃ ünïcode"
    assert vocab.decode(vocab.encode(hostile)).count("<unk>") >= 4
    assert tokenize("don't stop") == ["don't", "stop"]
    assert len(vocab.encode("good " * 100_000)) == 100_000


def test_encode_batch_pads_cuts_and_handles_empty_text():
    vocab = Vocab.for_reviews()
    x = vocab.encode_batch(["", "good film", "bad " * 100], max_len=10)
    assert x.shape == (3, 10) and x.dtype == torch.long
    assert x[0].tolist() == [0] * 10
    assert vocab.decode(x[1]) == ["good", "film"]
    assert vocab.encode_batch([""]).shape == (1, 1)
    assert vocab.encode_batch(["good"], min_len=16).shape == (1, 16)
    with pytest.raises(TypeError, match="list of texts"):
        vocab.encode_batch("good film")


def test_word_lists_and_vocabularies_refuse_what_they_cannot_hold():
    raises_each([
        (lambda: make_contrast_reviews(5, positive=[]), ValueError,
         "positive must be a non-empty"),
        (lambda: make_reviews(5, neutral=["the", ""]), ValueError, "neutral must be a non-empty"),
        (lambda: Vocab.for_reviews().encode(3), TypeError, "text must be a str or a list"),
        (lambda: Vocab.for_reviews().decode([999]), ValueError,
         r"each id must be an int >= 0 and <= \d+, got 999"),
        (lambda: Vocab("abc"), TypeError, "words must be an iterable"),
    ])

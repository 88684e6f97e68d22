"""attnlab.plumbing.checks: the one rule every public function's argument checks follow. A wrong
type is a TypeError, a wrong value a ValueError; the message names the argument, what was given
(short, even for a huge value) and what is expected; the value comes back converted where
harmless."""
import numpy as np
import torch
from helpers import raises_each

from attnlab.plumbing.checks import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_str,
    check_tensor,
)


def test_good_values_come_back_converted():
    assert check_int("n", np.int64(3), minimum=1) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_number("lr", 1, minimum=0, exclusive_minimum=True) == 1.0
    assert check_bool("cache", False) is False and check_str("text", "") == ""
    assert check_choice("norm", "pre", ("post", "pre")) == "pre"
    assert check_tensor("x", torch.zeros(2, 3), min_dim=2, floating=True).shape == (2, 3)


def test_a_wrong_type_is_a_type_error_naming_what_was_given_and_expected():
    raises_each([
        (lambda: check_int("n_heads", 2.0), r"n_heads must be an int, got 2\.0 \(float\)"),
        (lambda: check_int("n", True), r"n must be an int, got True \(bool\)"),
        (lambda: check_number("alpha", "0.35"), "alpha must be a number, got '0.35'"),
        (lambda: check_bool("cache", "no"), "cache must be True or False, got 'no'"),
        (lambda: check_str("text", b"x" * 1000), r"text must be a str, got b'x+\.\.\. \(bytes\)"),
        (lambda: check_tensor("q", [[1.0]]), "q must be a torch.Tensor, got list"),
        (lambda: check_tensor("q", torch.ones(2, dtype=torch.long), floating=True),
         "q must be a floating-point tensor"),
    ], TypeError)


def test_a_wrong_value_is_a_value_error_naming_what_was_given_and_expected():
    raises_each([
        (lambda: check_int("d_model", 0, minimum=1), "d_model must be an int >= 1, got 0"),
        (lambda: check_number("lr", float("nan")), "lr must be a finite number, got nan"),
        (lambda: check_number("lr", 0, minimum=0, exclusive_minimum=True),
         "lr must be a finite number > 0, got 0"),
        (lambda: check_number("p", 1.5, minimum=0.0, maximum=1.0, exclusive_maximum=True),
         r"p must be a finite number >= 0\.0 and < 1\.0, got 1\.5"),
        (lambda: check_choice("kind", "rope", ("learned", "sinusoidal")),
         "kind must be one of 'learned', 'sinusoidal', got 'rope'"),
        (lambda: check_tensor("q", torch.ones(4), min_dim=2),
         r"q must have at least 2 dimensions, got shape \(4,\)"),
    ], ValueError)

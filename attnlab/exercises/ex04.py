"""Notebook 04's exercises: the order task's accuracy without positions (predict), the size of a
sinusoidal position vector (predict), and PE[p + k] as a rotation of PE[p] (implement)."""
from __future__ import annotations

import math

import torch

from . import check_function, check_prediction, exercise


@exercise("predict", args=(0.49,))
def order_without_positions(guess, measured):
    """Predict: the order task's mean test accuracy for the model without positions."""
    return check_prediction(
        guess, measured, name="order task without positions", tolerance=0.05,
        lesson="Both orders of the same words are equally likely and carry opposite labels: a "
               "model that sees only the bag of words is right on one of the two, and wrong on "
               "the other.")


@exercise("predict", args=(4.0,))
def sinusoidal_norm(guess, measured):
    """Predict: the length (L2 norm) of one sinusoidal position vector for d = 32."""
    return check_prediction(
        guess, measured, name="size of a sinusoidal position vector", tolerance=0.05, digits=2,
        lesson="Each (sin, cos) pair has length 1, whatever the position: 16 pairs give "
               "sqrt(16) = 4 for every position.")


def _shift_matrix(omega: float, k: int) -> torch.Tensor:
    """The 2x2 matrix M with M @ (sin ωp, cos ωp) = (sin ω(p+k), cos ω(p+k)) for every p."""
    c, s = math.cos(omega * k), math.sin(omega * k)
    return torch.tensor([[c, s], [-s, c]])  # sin(a+b) = sin a cos b + cos a sin b; cos(a+b) = ...


@exercise("implement")
def shift_matrix(fn):
    """Implement: the rotation that moves a sinusoidal (sin, cos) pair k positions on."""
    cases = [(1.0, 1), (0.5, 3), (0.0316, 7), (1.0, -2), (0.1, 0)]
    return check_function(
        fn, _shift_matrix, cases, name="shift_matrix",
        hint="write sin(ω(p+k)) and cos(ω(p+k)) with the angle-sum formulas: each is "
             "cos(ωk)·(one entry) ± sin(ωk)·(the other). The coefficients are M's rows; return "
             "a float32 tensor of shape (2, 2), e.g. with torch.tensor([[..., ...], [..., ...]]).")

"""Argument checks: one rule, in one place, for every public function in attnlab.

The rule: a value of the wrong *type* raises `TypeError`, a value of the
right type but out of range raises `ValueError`; each message names the argument, what was
given and what is expected. A student who passes `d_model=64.0` or `n_heads=0` reads which
argument was wrong and why, not a traceback from deep inside PyTorch.

Every check returns the value (converted where that is harmless, e.g. a NumPy integer to
`int`), so a caller writes `n = check_int("n", n, minimum=1)`.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable

import torch


def _shown(value) -> str:
    """A short repr for an error message: a huge string or tensor must not flood the screen."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (bool excluded: `True` is not a count) within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {_shown(value)} ({type(value).__name__})")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an int {_range(minimum, maximum)}, got {value!r}")
    return value


def check_number(name: str, value, *, minimum: float | None = None, maximum: float | None = None,
                 exclusive_minimum: bool = False, exclusive_maximum: bool = False) -> float:
    """A finite real number (bool excluded) within the given bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {_shown(value)} ({type(value).__name__})")
    value = float(value)
    low_bad = minimum is not None and (value <= minimum if exclusive_minimum else value < minimum)
    high_bad = maximum is not None and (value >= maximum if exclusive_maximum else value > maximum)
    if value != value or value in (float("inf"), float("-inf")) or low_bad or high_bad:
        expected = _range(minimum, maximum, exclusive_minimum, exclusive_maximum)
        raise ValueError(f"{name} must be a finite number {expected}".rstrip() + f", got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    """True or False (not 0/1, not a string: `cache="no"` would otherwise mean True)."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {_shown(value)} ({type(value).__name__})"
        )
    return value


def check_choice(name: str, value, choices: Iterable):
    """One of a fixed set of values (e.g. activation in ("relu", "gelu"))."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}, got {_shown(value)}"
        )
    return value


def check_str(name: str, value) -> str:
    """Any string, including the empty one; only the type is checked."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {_shown(value)} ({type(value).__name__})")
    return value


def check_tensor(name: str, x, *, min_dim: int = 0, floating: bool = False) -> torch.Tensor:
    """A torch.Tensor with at least `min_dim` dimensions (and a float dtype if `floating`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions, got shape {tuple(x.shape)}"
        )
    return x


def _range(minimum, maximum, exclusive_minimum=False, exclusive_maximum=False) -> str:
    low = f"{'>' if exclusive_minimum else '>='} {minimum}" if minimum is not None else ""
    high = f"{'<' if exclusive_maximum else '<='} {maximum}" if maximum is not None else ""
    return " and ".join(part for part in (low, high) if part)

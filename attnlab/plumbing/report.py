"""Printing measured numbers so that they come back the same on any CPU.

Strict nbval compares printed text. A value computed in float32 can differ in its last bits
between CPUs (other SIMD kernels sum in another order), and when it sits next to a rounding edge
(0.12349996 vs 0.12350004 at 3 decimals) the printed digit flips on somebody else's machine.
`fmt` refuses such a value while the notebooks are being recorded (`make notebooks` sets
ATTNLAB_RECORDING=1), so a fragile output is found when it is written, not on another CI:
print fewer digits, or a quantity that is robust (a count, a verdict).
"""
from __future__ import annotations

import math
import os
from fractions import Fraction

MARGIN = 0.02  # a value must sit at least this fraction of one last digit away from an edge
EXACT_DENOMINATOR = 10**6  # k / n with n up to this is a share of counts: exact on every CPU


class FragileOutput(ValueError):
    """A printed number that another CPU's rounding could change."""


def recording() -> bool:
    """True while `make notebooks` records the stored outputs (fmt's guard is then active)."""
    return os.environ.get("ATTNLAB_RECORDING") == "1"


def exact_fraction(value: float) -> bool:
    """True when `value` is a ratio of two integers k / n (n <= EXACT_DENOMINATOR) to the last
    bit, as an accuracy of 393 / 400 is: one correctly rounded division, the same on every CPU,
    so its printed digits cannot differ however close it sits to a rounding edge."""
    return float(Fraction(value).limit_denominator(EXACT_DENOMINATOR)) == value


def fmt(value, digits: int = 3, *, sign: bool = False, guard: bool = True) -> str:
    """`value` with `digits` decimals, checked to be away from a rounding edge while recording.

    The edge is where the last printed digit changes: x.xxx5 for 3 decimals. Within MARGIN of a
    unit of the last digit (2e-5 for 3 decimals), an ulp-sized change on another CPU could flip
    it, unless the value is a share of counts (`exact_fraction`). `sign=True` prints a leading +
    on positive values. `guard=False` is for the exercise checks, which echo a student's own
    number: it is not a measurement, and what a student types must never raise.
    """
    value = float(value)
    if guard and recording() and math.isfinite(value) and not exact_fraction(value):
        unit = 10.0 ** -digits
        distance = abs((abs(value) / unit) % 1.0 - 0.5)  # 0 at the edge, 0.5 mid-way between
        if distance < MARGIN:
            raise FragileOutput(
                f"{value!r} printed with {digits} decimals sits {distance * unit:.2g} from a "
                f"rounding edge: another CPU could print another last digit. Print {digits - 1} "
                f"or {digits + 1} decimals, or a robust quantity instead")
    text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
    return "0." + "0" * digits if text in ("-0." + "0" * digits,) else text

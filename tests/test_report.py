"""attnlab.plumbing.report.fmt: the guard that finds a fragile printed number when it is
recorded."""
import pytest

from attnlab.plumbing.report import FragileOutput, fmt


def test_fmt_rounds_like_format_and_never_prints_minus_zero():
    assert fmt(0.40512, 3) == "0.405"
    assert fmt(-0.0001, 3) == "0.000"
    assert fmt(2.5, 1, sign=True) == "+2.5"


def test_guard_is_off_unless_recording(monkeypatch):
    monkeypatch.delenv("ATTNLAB_RECORDING", raising=False)
    assert fmt(0.1235, 3) in ("0.123", "0.124")  # silent outside `make notebooks`


def test_guard_refuses_a_value_next_to_a_rounding_edge_while_recording(monkeypatch):
    monkeypatch.setenv("ATTNLAB_RECORDING", "1")
    for value in (0.12350001, 0.1234999, -0.99950000003, 12.345500000007):
        with pytest.raises(FragileOutput, match="rounding edge"):
            fmt(value, 3)
            pytest.fail(f"{value} printed as {fmt(value, 3)}")  # not reached when refused


def test_guard_accepts_values_away_from_an_edge(monkeypatch):
    monkeypatch.setenv("ATTNLAB_RECORDING", "1")
    for value in (0.1232, 0.1238, 1.0, 0.0, -0.4051, float("nan")):
        fmt(value, 3)  # a FragileOutput here fails the test, naming the value in its message


def test_a_share_of_counts_is_exact_on_every_cpu_however_close_to_an_edge(monkeypatch):
    monkeypatch.setenv("ATTNLAB_RECORDING", "1")
    assert fmt(1911 / 2000, 3) == f"{1911 / 2000:.3f}"  # one division: the same bits anywhere
    assert fmt(393 / 400, 3) == "0.983"
    with pytest.raises(FragileOutput):
        fmt(393 / 400 + 1e-13, 3)  # a float that merely sits near 393/400 is not exact

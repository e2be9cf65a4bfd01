"""``timebound.durations``: a wall-clock duration is a whole number with its unit."""

from __future__ import annotations

import pytest

from timebound.durations import MAX_MICROS, format_duration, parse_duration
from timebound.errors import UsageError


@pytest.mark.parametrize(("text", "micros"), [
    ("300us", 300), ("1ms", 1_000), ("250ms", 250_000), ("2s", 2_000_000),
    ("1m", 60_000_000), ("1000000s", MAX_MICROS),
])
def test_each_unit_converts_exactly(text: str, micros: int) -> None:
    assert parse_duration(text, "--tick") == micros
    assert parse_duration(format_duration(micros), "--tick") == micros


@pytest.mark.parametrize(("text", "reason"), [
    ("5", "expected a duration with its unit (300us, 250ms, 2s, 1m), got '5'"),
    ("1.5ms", "expected a duration with its unit (300us, 250ms, 2s, 1m), got '1.5ms'"),
    ("-1ms", "expected a duration with its unit (300us, 250ms, 2s, 1m), got '-1ms'"),
    ("1 ms", "expected a duration with its unit (300us, 250ms, 2s, 1m), got '1 ms'"),
    (5, "expected a duration with its unit (300us, 250ms, 2s, 1m), got 5"),
    ("0us", "must be between 1us and 1000000s, got 0us"),
    ("1000001s", "must be between 1us and 1000000s, got 1000001s"),
])
def test_anything_else_is_one_line_naming_the_option(text: object, reason: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_duration(text, "--tick")
    assert str(raised.value) == f"--tick: {reason}"


def test_format_picks_the_largest_exact_unit() -> None:
    assert [format_duration(v) for v in (1, 1_500, 2_000, 90_000_000, 120_000_000)] == [
        "1us", "1500us", "2ms", "90s", "2m"]


def test_duration_type_takes_units_and_the_deprecated_bare_number() -> None:
    import argparse

    from timebound.durations import duration_help, duration_type

    seconds = duration_type("--timeout", "s", minimum_us=0)
    assert seconds("250ms") == 250_000
    assert seconds("2") == 2_000_000
    assert seconds("0.005") == 5_000
    assert duration_type("--rho", "us")("2000000") == 2_000_000
    assert duration_type("--gap", "ms")("50") == 50_000
    for bad in ("2 s", "-1", "1.5ms", "", "ms"):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="must be between"):
        duration_type("--rho", "us")("0")
    text = duration_help("how long a call waits", 2_000_000, "s")
    assert "default 2s" in text and "bare number is in s, deprecated" in text

"""``timebound.durations``: a wall-clock duration is a whole number with its unit."""

from __future__ import annotations

import argparse

import pytest

from timebound.durations import (
    MAX_MICROS,
    bare_number_reason,
    duration_help,
    duration_type,
    format_duration,
    ms_alias_type,
    parse_duration,
)
from timebound.errors import UsageError


@pytest.mark.parametrize(("text", "micros"), [
    ("300us", 300), ("1ms", 1_000), ("250ms", 250_000), ("2s", 2_000_000),
    ("1m", 60_000_000), ("1h", 3_600_000_000), ("1000000s", MAX_MICROS),
])
def test_each_unit_converts_exactly(text: str, micros: int) -> None:
    assert parse_duration(text, "--tick") == micros
    assert parse_duration(format_duration(micros), "--tick") == micros


SHAPE = "expected a duration with its unit (300us, 250ms, 2s, 1m, 1h), got"


@pytest.mark.parametrize(("text", "reason"), [
    ("5", "a duration needs its unit: 5us, 5ms, 5s, 5m or 5h"),
    ("1.5ms", f"{SHAPE} '1.5ms'"),
    ("-1ms", f"{SHAPE} '-1ms'"),
    ("1 ms", f"{SHAPE} '1 ms'"),
    ("1d", f"{SHAPE} '1d'"),
    (5, f"{SHAPE} 5"),
    ("0us", "must be between 1us and 1000000s, got 0us"),
    ("1000001s", "must be between 1us and 1000000s, got 1000001s"),
])
def test_anything_else_is_one_line_naming_the_option(text: object, reason: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_duration(text, "--tick")
    assert str(raised.value) == f"--tick: {reason}"


def test_format_picks_the_largest_exact_unit() -> None:
    assert [format_duration(v) for v in (1, 1_500, 2_000, 90_000_000, 120_000_000,
                                         7_200_000_000, 5_400_000_000)] == [
        "1us", "1500us", "2ms", "90s", "2m", "2h", "90m"]


@pytest.mark.parametrize(("text", "low", "high", "reason"), [
    ("300", 1, MAX_MICROS, "a duration needs its unit: 300us, 300ms, 300s or 300m"),
    ("1", 1, 3_600_000_000, "a duration needs its unit: 1us, 1ms, 1s, 1m or 1h"),
    ("1.5", 1, 3_600_000_000, "a duration needs its unit: 1500us, 1500ms or 90s"),
    ("20.0", 1, 60_000_000, "a duration needs its unit: 20us, 20ms or 20s"),
    ("0", 1, MAX_MICROS, "a duration needs its unit (us, ms, s, m or h), between 1us "
                         "and 1000000s, got 0"),
])
def test_a_bare_number_is_refused_with_each_unit_in_range(text: str, low: int, high: int,
                                                          reason: str) -> None:
    assert bare_number_reason(text, low, high) == reason


def test_duration_type_takes_units_and_refuses_a_bare_number() -> None:
    timeout = duration_type("--timeout", minimum_us=0, maximum_us=3_600_000_000)
    assert timeout("250ms") == 250_000
    assert timeout("1h") == 3_600_000_000
    assert timeout("0s") == 0
    for bad in ("2", "0.005", "2 s", "-1", "1.5ms", "", "ms", "2h"):
        with pytest.raises(argparse.ArgumentTypeError):
            timeout(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="needs its unit: 2us, 2ms, 2s"):
        timeout("2")
    with pytest.raises(argparse.ArgumentTypeError, match="must be between 0s"):
        timeout("61m")
    text = duration_help("how long a call waits", 2_000_000, maximum_us=3_600_000_000)
    assert "us, ms, s, m or h" in text and "1us..1h" in text and "default 2s" in text


def test_an_old_ms_name_takes_a_bare_number_of_milliseconds() -> None:
    hold = ms_alias_type("--f-hold-ms", minimum_us=0)
    assert (hold("5"), hold("2s"), hold("0")) == (5_000, 2_000_000, 0)
    for bad in ("1.5", "-1", "5x"):
        with pytest.raises(argparse.ArgumentTypeError):
            hold(bad)

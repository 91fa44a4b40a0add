"""Units: what the CLI and configs accept, and how they refuse."""

from __future__ import annotations

import re

import pytest
from storqos.base.errors import InputError
from storqos.base.units import check_seed, parse_bandwidth, parse_duration, parse_percent, parse_rate, parse_size


@pytest.mark.parametrize(
    "text,ns",
    [("10ms", 10_000_000), ("250us", 250_000), ("1.5s", 1_500_000_000), ("2min", 120_000_000_000), ("500ns", 500), ("1h", 3_600_000_000_000)],
)
def test_durations(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


def test_bare_number_uses_default_unit() -> None:
    assert parse_duration("20", default_unit="ms") == 20_000_000
    assert parse_duration(0.5) == 500_000_000


def test_rates_and_sizes() -> None:
    assert parse_rate("1.5k") == 1500.0
    assert parse_rate("200iops") == 200.0
    assert parse_rate("2M") == 2e6
    assert parse_size("4KiB") == 4096
    assert parse_size("64GiB") == 64 * 2**30
    assert parse_size("512B") == 512
    assert parse_bandwidth("200MiB/s") == 200 * 2**20
    assert parse_percent("99.9%") == pytest.approx(0.999)


@pytest.mark.parametrize("bad", ["10xs", "ms", "1..2s", "-5ms", "ten ms"])
def test_malformed_duration_says_what_and_where(bad: str) -> None:
    with pytest.raises(InputError) as e:
        parse_duration(bad, "--deadline")
    assert str(e.value).startswith("--deadline: ")
    assert repr(bad) in str(e.value) or "duration" in str(e.value)


@pytest.mark.parametrize("bad", ["0", "-3", "abc", "1.5x"])
def test_bad_rates(bad: str) -> None:
    with pytest.raises(InputError, match="--capacity"):
        parse_rate(bad, "--capacity")


@pytest.mark.parametrize("bad", ["0", "4XB", "-1KiB"])
def test_bad_sizes(bad: str) -> None:
    with pytest.raises(InputError):
        parse_size(bad)


@pytest.mark.parametrize("bad", ["1e30s", "1e12d", "9223372036854775808ns", "3e8h"])
def test_durations_past_292_years_are_input_errors(bad: str) -> None:
    # They used to come back as ints past u64 and overflow in the core's bindings.
    with pytest.raises(InputError, match=r"^--for: duration .* is too long \(at most 9223372036854775807 ns"):
        parse_duration(bad, "--for")
    assert parse_duration("9223372036s") == 9_223_372_036 * 10**9  # just under the bound


@pytest.mark.parametrize(("bad", "what"), [("1e400", "finite"), ("1e400KiB", "finite"), ("1e30", "too large"),
                                           ("9EiB", "malformed")])
def test_sizes_that_are_not_finite_or_too_large(bad: str, what: str) -> None:
    # "1e400" used to raise OverflowError (int of inf).
    with pytest.raises(InputError, match=f"^--fast-tier: .*{what}"):
        parse_size(bad, "--fast-tier")


@pytest.mark.parametrize("bad", [-1, 2**64, True, 1.5, "1"])
def test_seeds_outside_u64(bad: object) -> None:
    with pytest.raises(InputError, match=r"^--seed: must be an integer in \[0, 2\*\*64\)"):
        check_seed(bad)
    assert check_seed(2**64 - 1) == 2**64 - 1


@pytest.mark.parametrize(
    "text, needle",
    [
        ("5kiops", "a multiplier or 'iops', not both"),
        ("1.5M IOPS", "a multiplier or 'iops', not both"),
        ("2e9", "above 10^9 IOPS"),
        ("1.1G", "above 10^9 IOPS"),
        ("1e400", "above 10^9 IOPS"),  # infinite: once "must be > 0"
        ("5 kilo", "malformed rate"),
    ],
)
def test_rates_with_two_units_or_beyond_one_per_ns_are_errors(text: str, needle: str) -> None:
    with pytest.raises(InputError, match=re.escape(needle)):
        parse_rate(text, "--capacity")


def test_rate_forms_that_are_accepted() -> None:
    assert [parse_rate(t) for t in ("500", "1.5k", "2M", "1G", "200iops", "200 IOPS")] == [
        500.0, 1500.0, 2e6, 1e9, 200.0, 200.0,
    ]


@pytest.mark.parametrize(("ns", "shown"), [(2_069, "2.07 µs"), (17.96e9, "18 s"), (999e9, "999 s"), (3600e9, "3,600 s"),
                                           (12, "12 ns"), (1.5e6, "1.5 ms")])
def test_durations_read_with_their_unit_never_in_exponent_form(ns: float, shown: str) -> None:
    from storqos.base.units import fmt_duration

    assert fmt_duration(ns) == shown

"""Every environment variable and number checked where it is read: garbage, nan, inf, negative or empty is
one line naming the variable or option and what it takes."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invariants import _config, _usercode
from invariants.__main__ import main as cli
from invariants._errors import InvariantsError

# Texts a user may put in a variable: numbers of every kind, words, blanks.
TEXTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**6), 10**6).map(str),
    st.sampled_from(["nan", "inf", "-inf", "abc", "", " ", "1e400", "0", "-0", "sundial", "10s"]),
    st.text(max_size=8),
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _as_seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


@FAST
@given(TEXTS)
def test_ratio_max_seconds_is_a_positive_finite_number_or_one_line(monkeypatch, text):
    if "\x00" in text:
        return  # no environment holds a NUL
    monkeypatch.setenv("INVARIANTS_RATIO_MAX_SECONDS", text)
    want = 10.0 if not text.strip() else _as_seconds(text)
    if want is None:
        with pytest.raises(InvariantsError) as err:
            _config.seconds("INVARIANTS_RATIO_MAX_SECONDS", 10.0)
        said = str(err.value)
        assert said.startswith("INVARIANTS_RATIO_MAX_SECONDS=") and "positive, finite" in said
        assert "\n" not in said.replace(repr(text), "")
    else:
        assert _config.seconds("INVARIANTS_RATIO_MAX_SECONDS", 10.0) == want


@FAST
@given(TEXTS)
def test_user_code_timeout_variable_is_a_positive_finite_number_or_one_line(monkeypatch, text):
    if "\x00" in text:
        return
    monkeypatch.setenv("INVARIANTS_USER_CODE_TIMEOUT", text)
    monkeypatch.setattr(_usercode, "_explicit", None)
    want = _usercode.DEFAULT_TIMEOUT if not text.strip() else _as_seconds(text)
    if want is None:
        with pytest.raises(InvariantsError, match=r"^INVARIANTS_USER_CODE_TIMEOUT "):
            _usercode.timeout()
    else:
        assert _usercode.timeout() == want


@FAST
@given(TEXTS)
def test_clock_is_cpu_or_wall_or_one_line(monkeypatch, text):
    if "\x00" in text:
        return
    monkeypatch.setenv("INVARIANTS_CLOCK", text)
    if not text.strip() or text.strip() in ("cpu", "wall"):
        _config.check_settings()
    else:
        with pytest.raises(InvariantsError, match=r"^INVARIANTS_CLOCK=.*: takes cpu or wall"):
            _config.check_settings()


@pytest.mark.parametrize("text", ["", " ", "\t"])
def test_an_empty_jax_platforms_is_unset(monkeypatch, text):
    monkeypatch.setenv("JAX_PLATFORMS", text)
    assert _config.requested_platforms() == ["cpu"]
    _config.default_platforms()
    import os

    assert os.environ["JAX_PLATFORMS"] == "cpu"


@FAST
@given(st.sampled_from(["--threshold", "--round-seconds", "--parallel-threshold", "--confidence"]),
       st.sampled_from(["inf", "-inf", "nan", "1e400"]))  # fmt: skip
def test_versus_numbers_are_finite(capsys, flag, value):
    status = cli(["versus", "--baseline", "current", "--candidate", "current", f"{flag}={value}"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and flag in err and "finite" in err, err


def test_xla_flags_device_count_zero_is_one_line(monkeypatch):
    import pytest as _pytest

    from invariants.compile import process

    for value in ("0", "-1", "abc", ""):
        monkeypatch.setenv("XLA_FLAGS", f"--xla_force_host_platform_device_count={value}")
        with _pytest.raises(_pytest.UsageError, match="xla_force_host_platform_device_count takes a number"):
            process.check_flags()

"""``python -m invariants gate``'s own parser: the plugin's options it lists in --help reach pytest as given,
a switch alone and an option with its value, wherever it stands among pytest's arguments."""

from __future__ import annotations

import pytest

from invariants.plugin.command import _forwarded, _parser


@pytest.mark.parametrize(
    "argv",
    [
        ["--targets", "cpu", "--cache-dir", "D", "--no-cache", "--snapshot-update"],
        ["--cache-dir=D", "--targets", "cpu", "--snapshot-update", "--no-cache"],
    ],
)
def test_forwarded_options_keep_their_values(argv: list[str]) -> None:
    args, rest = _parser().parse_known_args(argv)
    assert rest == ["--targets", "cpu"]
    assert _forwarded(args) == ["--snapshot-update", "--cache-dir", "D", "--no-cache"]


def test_nothing_given_forwards_nothing() -> None:
    args, _ = _parser().parse_known_args([])
    assert _forwarded(args) == []


def test_help_shows_the_value_an_option_takes() -> None:
    assert "--cache-dir DIR" in _parser().format_help()

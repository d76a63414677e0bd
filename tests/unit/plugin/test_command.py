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


def test_the_session_takes_the_programs_the_check_built(gate_pytester, monkeypatch) -> None:
    """The command builds the project's programs (its code imported and traced) to check them before pytest
    starts, and the session it starts takes those: each declaration is built once, with no memo kept in a
    module for whichever run comes next."""
    from invariants.catalog import downstream

    built: list[str] = []

    def counted(decl, traced=True):
        built.append(decl.name)
        return original(decl, traced)

    original = downstream.build
    monkeypatch.setattr(downstream, "build", counted)
    project = gate_pytester.path
    (project / "oncelib.py").write_text("def take_lookup(table, indices):\n    return table[indices]\n")
    (project / "specs").mkdir()
    (project / "specs" / "once.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "once_take"\nfunction = "oncelib:take_lookup"\n'
        'kind = "forward"\nconfigs = ["f32"]\n'
    )
    proc = gate_pytester.command(
        "gate", "--spec-dir", "specs", "--no-catalog", "--snapshot-dir", "snaps", "--targets", "cpu",
        "--snapshot-update", "--results-json", "r.json", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    assert built == ["once_take"]

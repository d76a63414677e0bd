"""The project's own tests go to xdist's workers a module at a time (tests/conftest.py): what a module makes
once, a cost-model fit or a shared gate run, is made once. A distribution asked for by name is kept."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

ROOT = Path(__file__).parents[2]


def _suite_hook(config: pytest.Config):
    (conftest,) = [
        p for p in config.pluginmanager.get_plugins()
        if getattr(p, "__file__", None) == str(ROOT / "tests" / "conftest.py")
    ]  # fmt: skip
    return conftest.pytest_xdist_make_scheduler


class _Log:
    """xdist's log: every attribute a sub-log, every call a line dropped."""

    def __getattr__(self, name: str) -> _Log:
        return self

    def __call__(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("dist", ["load", "loadscope", "loadgroup", "worksteal"])
def test_the_default_distribution_goes_by_module_and_a_named_one_is_kept(request, dist):
    values = {"tx": ["popen"] * 2, "numprocesses": 2, "maxschedchunk": None}
    fake = types.SimpleNamespace(getoption=lambda name, *a, **k: dist, getvalue=values.get)
    scheduler = _suite_hook(request.config)(fake, log=_Log())
    assert isinstance(scheduler, LoadFileScheduling) if dist == "load" else scheduler is None

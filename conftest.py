"""Wires the gate's pytest plugin into this repository's test runs."""

pytest_plugins = ["invariants.plugin.hooks"]

"""``python -m invariants versus``: two JAX installations timed against each other, paired in one run.

- ``command``: the controller (options, rounds, phases, exit status);
- ``sides``: which interpreter each side is, and its worker processes;
- ``protocol``: the JSON-lines messages between the controller and a worker;
- ``worker``: one installation's worker;
- ``stats``: rounds, intervals and the verdicts, the threads witness of lost parallelism included;
- ``report``: the versus record (owner of its JSON), its markdown and plot.
"""

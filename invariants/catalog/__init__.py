"""What is measured: the programs.

- ``programs``: the catalog of lookup forms (a new canonical program goes here, and only here);
- ``registry``: the programs of this process, the catalog plus a downstream project's;
- ``downstream``: a spec file's ``[[program]]`` entries, built into programs;
- ``project``: a downstream project's folder;
- ``arguments``: the seeded concrete arguments a program is timed and checked on.
"""

"""The suite across JAX releases: one cached environment per release, ``bisect`` and ``matrix``.

- ``environments``: releases and their cached environments;
- ``bisect``: the first release where the selected items change verdict;
- ``matrix``: how each canonical program's structure evolved across releases.
"""

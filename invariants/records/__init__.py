"""The records that one stage writes and later ones read, without JAX.

- ``compiled``: what one compile produced, as text and numbers;
- ``cache``: those records kept on disk between runs (the persistent compile cache);
- ``results``: the results file of a gate run, the one owner of its records.
"""

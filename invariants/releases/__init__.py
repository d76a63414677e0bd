"""The suite across JAX releases, each in a cached environment of its own: ``bisect`` and ``matrix``."""

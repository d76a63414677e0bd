"""A tiny downstream library: two ways to look rows up in an embedding table."""

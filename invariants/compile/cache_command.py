"""``python -m invariants cache``: where the compile cache is, how full, and clearing it (no JAX)."""

from __future__ import annotations

import hashlib

from .._errors import Parser
from .._paths import shown
from ..records.cache import DEFAULT_MAX_BYTES, Store, folder_of, max_bytes
from ..scope.installed import Installed


def installed_key() -> str:
    """A short hash of the compiler's versions: what an unrelated install leaves alone."""
    return hashlib.sha256("\n".join(Installed().compiler()).encode()).hexdigest()[:16]


def main(argv: list[str]) -> int:
    parser = Parser(
        prog="python -m invariants cache",
        description="The compile cache: what each compile gave, kept between runs under a key of everything "
        "that can change it (the lowered module, the compiler's files and versions, the distributions the "
        "traced code ran, XLA_FLAGS and the other variables, JAX's configuration, the target, the host CPU). "
        "A gate run says at its end how many keys it served and how many compiled.",
    )
    parser.add_argument(
        "action",
        nargs="?",
        choices=("info", "where", "clear", "key"),
        default="info",
        help="info (default): the folder, its entries and size; where: the folder alone; "
        "clear: delete every entry (nothing else in the folder); key: a short hash of "
        "the compiler's installed versions, for a CI cache's key (actions/cache)",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="the cache's folder (default: INVARIANTS_CACHE_DIR, else "
        "~/.cache/jax-embedding-invariants/compiled)",
    )
    args = parser.parse_args(argv)
    # INVARIANTS_NO_CACHE turns the cache off for runs; the folder is still there to see and clear.
    store = Store(folder_of(args.cache_dir), max_bytes=max_bytes())
    if args.action == "key":  # CI's key only chooses which folder to restore; each entry has its own key
        print(installed_key())
        return 0
    if args.action == "where":
        print(store.folder)
        return 0
    if args.action == "clear":
        n = store.clear()
        print(f"compile cache: {shown(store.folder)}: {n} files deleted")
        return 0
    stats = store.stats()
    used, bound = stats["bytes"] / 1024**2, store.max_bytes / 1024**2
    print(f"compile cache: {shown(store.folder)}")
    print(f"  {stats['results']} compiles")
    print(
        f"  {used:.1f} MB of {bound:.0f} MB (the least recently used go first; INVARIANTS_CACHE_MAX_MB, "
        f"default {DEFAULT_MAX_BYTES // 1024**2})"
    )
    return 0

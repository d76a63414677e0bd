"""Whether this host has a TPU chip: ``tox -e tpu`` runs it before it installs anything.

A chip is what JAX looks for when it starts its TPU backend (``jax._src.hardware_utils``): a device of
Google's PCI vendor id with one of the TPU device ids below, or the ``/dev/accel*`` device files of the
TPU VMs that expose chips that way. Standard library only: the env has nothing installed yet.

Contract: exit 0 and print nothing where a chip is; otherwise print one line that says so and what to run
instead, and exit 1. ``--root DIR`` reads ``DIR/sys`` and ``DIR/dev`` instead of ``/sys`` and ``/dev``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GOOGLE_PCI_VENDOR = "0x1ae0"
# jax._src.hardware_utils._TPU_PCI_DEVICE_IDS: v3, plc, v4, v5p, v5e, v6e, tpu7x. Google's other PCI
# devices (the gVNIC network card, persistent disks) share the vendor id.
TPU_PCI_DEVICES = {"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076"}

NO_TPU = (
    "tpu: no TPU chip on this host (no TPU device on its PCI bus, no /dev/accel*), so nothing was "
    "installed; tox -e tpu runs the gate on the chip of a TPU VM; here, tox -e cpu compiles for TPU v4, "
    "v5e, v5p and v6e ahead of time"
)


def tpu_chips(root: Path = Path("/")) -> int:
    """The TPU chips of the host whose ``/sys`` and ``/dev`` are below ``root``."""
    chips = 0
    for vendor in (root / "sys" / "bus" / "pci" / "devices").glob("*/vendor"):
        try:
            if vendor.read_text().strip() != GOOGLE_PCI_VENDOR:
                continue
            chips += (vendor.parent / "device").read_text().strip() in TPU_PCI_DEVICES
        except OSError:
            continue
    return chips or len(list((root / "dev").glob("accel[0-9]*")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if tpu_chips(args.root):
        return 0
    print(NO_TPU, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""Command-line options shared by several commands (one definition, one help text)."""

from __future__ import annotations

import argparse

from kgprobe.errors import InputError
from kgprobe.models.devices import DEVICE_CHOICES, check_device_spec


def _device_type(value: str) -> str:
    try:
        return check_device_spec(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_worker_options(parser, *, default=argparse.SUPPRESS) -> None:
    """``--workers N`` and ``--ray-address ADDR``: model replicas on Ray (kgprobe.models.ray_workers)."""
    parser.add_argument(
        "--workers", type=int, default=default, metavar="N",
        help="run N model replicas as Ray actors and split every round across them (answers are identical "
             "to one worker); without --ray-address on a private Ray instance on this machine")
    parser.add_argument(
        "--ray-address", default=default, metavar="ADDR",
        help="put the workers on this running Ray cluster (its head's address, e.g. head:6379); "
             "--workers defaults to one per GPU of the cluster")


def add_device_option(parser, *, default=argparse.SUPPRESS, help_default: str = "auto") -> None:
    """``--device auto|cpu|cuda[:N]`` for local model backends (transformers, vLLM).

    argparse rejects a bad value with a usage message and exit code 2.
    """
    parser.add_argument(
        "--device", type=_device_type, default=default, metavar="DEVICE",
        help=f"where a local model runs: {DEVICE_CHOICES} (default {help_default}: the GPU when "
             "there is one); API backends ignore it",
    )

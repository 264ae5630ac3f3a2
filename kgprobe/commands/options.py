"""Command-line options shared by several commands (one definition, one help text)."""

from __future__ import annotations

import argparse
import sys

from kgprobe.errors import InputError
from kgprobe.models.devices import DEVICE_CHOICES, check_device_spec


def _device_type(value: str) -> str:
    try:
        return check_device_spec(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_device_option(parser, *, default=argparse.SUPPRESS, help_default: str = "auto") -> None:
    """``--device auto|cpu|cuda[:N]`` for local model backends (transformers, vLLM).

    argparse rejects a bad value with a usage message and exit code 2.
    """
    parser.add_argument(
        "--device", type=_device_type, default=default, metavar="DEVICE",
        help=f"where a local model runs: {DEVICE_CHOICES} (default {help_default}: the GPU when "
             "there is one); API backends ignore it",
    )


class RenamedOption(argparse.Action):
    """An old option name kept as an alias: it works, and says what it is called now."""

    def __init__(self, option_strings, dest, new_name: str = "", **kwargs):
        self.new_name = new_name
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"kgprobe: warning: {option_string} is now {self.new_name}; the old name still works for now",
              file=sys.stderr)
        if self.type is None and self.nargs is None and isinstance(values, str) and self.const is not None:
            values = self.const
        setattr(namespace, self.dest, values)

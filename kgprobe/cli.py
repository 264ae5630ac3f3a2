"""The ``kgprobe`` command line.

Each subcommand lives in its own module under ``kgprobe.commands`` and exposes
``register(subparsers)``; this file only wires them together and turns
:class:`~kgprobe.errors.KgprobeError` into a message and an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from kgprobe.errors import KgprobeError

#: Subcommand modules, in the order ``kgprobe --help`` lists them.
COMMANDS = ("run", "resume", "report", "compare", "build", "models", "simulate", "bench", "sweep")

EXIT_CODES = """exit codes:
  0  success
  1  unexpected internal error (a bug: please report it with the traceback)
  2  invalid input: arguments, configuration, KG or run file
  3  a KG source failed: SPARQL endpoint down, rate-limited, malformed answer
  4  a model backend failed: missing weights, server down, API error
  5  the run store cannot be read or written
  130 interrupted (Ctrl-C); an interrupted run is saved and can be resumed
"""


def register_all(subparsers, package: str, names) -> None:
    """Add the subcommands of ``package.NAME`` for each name (each module has ``register``)."""
    for name in names:
        importlib.import_module(f"{package}.{name}").register(subparsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kgprobe",
        description="Measure what a language model knows by probing it on a knowledge graph, "
        "spending as few model queries as possible.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from kgprobe import __version__

    parser.add_argument("--version", action="version", version=f"kgprobe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_all(sub, "kgprobe.commands", COMMANDS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        if args.command is None:
            # `kgprobe` alone runs the main job on the embedded defaults.
            args = parser.parse_args(["run", *(argv or [])])
        else:
            parser.parse_args([args.command, "--help"])
    if hasattr(sys.stdout, "reconfigure"):
        # Progress lines of long commands reach a log file or pipe as they happen, not at exit.
        sys.stdout.reconfigure(line_buffering=True)
    try:
        return int(args.func(args) or 0)
    except KgprobeError as exc:
        print(f"kgprobe: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kgprobe: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``kgprobe`` command line.

Each subcommand lives in its own module under ``kgprobe.commands`` and exposes
``register(subparsers)``; this file only wires them together and turns
:class:`~kgprobe.errors.KgprobeError` into a message and an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys

from kgprobe.commands.options import RenamedOption  # noqa: F401  (re-exported: older imports)
from kgprobe.errors import KgprobeError

#: Subcommand modules, in the order ``kgprobe --help`` lists them.
COMMANDS = ("run", "resume", "report", "compare", "build", "models", "simulate", "bench", "export", "verify",
            "questions", "sweep")

EXIT_CODES = """exit codes:
  0  success
  1  unexpected internal error (a bug: please report it with the traceback)
  2  invalid input: arguments, configuration, KG or run file
  3  a KG source failed: SPARQL endpoint down, rate-limited, malformed answer
  4  a model backend failed: missing weights, server down, API error
  5  the run store cannot be read or written
  130 interrupted (Ctrl-C or SIGTERM); an interrupted run is saved and can be resumed
"""

OVERVIEW = """kgprobe: measure what a language model knows by probing it on a knowledge graph.

Try it (embedded countries KG, the default model SmolLM2-135M-Instruct (GGUF Q4_1,
dequantized), ZP-LKE with 20 examples x 19 distractors, 256 queries; a few minutes on CPU):

  kgprobe run                       probe and write a report under runs/
  kgprobe report RUN [--json]       the Markdown/HTML report, or its data (with the protocol)
  kgprobe export RUN --samples F    every probe as one JSON line (prompt, options, response, verdict)
  kgprobe compare RUN1 RUN2         models side by side (refuses runs with different protocols)
  kgprobe models                    the models kgprobe can load

`kgprobe --help` lists every command; `kgprobe COMMAND --help` its options.
"""


def register_all(subparsers, package: str, names) -> None:
    """Add the subcommands of ``package.NAME`` for each name (each module has ``register``)."""
    for name in names:
        importlib.import_module(f"{package}.{name}").register(subparsers)


class ArgumentParser(argparse.ArgumentParser):
    """A wrong argument is a short error naming it (exit 2), not the command's usage block,
    which for ``kgprobe run`` is longer than the message it would bury."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n  (`{self.prog} --help` lists the options)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """One help style for every command: descriptions keep their line breaks, a default is
    shown only when there is one (never "(default: None)" on a required option or a flag),
    and the reStructuredText double backticks of docstrings become single ones."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" in text or "default" in text.lower() or action.required:
            return text
        default = action.default
        if default is None or default is False or default is True or default == [] \
                or default is argparse.SUPPRESS or action.nargs == 0:
            return text
        if action.option_strings:
            return f"{text} (default: %(default)s)"
        return text

    def _fill_text(self, text, width, indent):
        if "\n" not in text.strip():
            return argparse.HelpFormatter._fill_text(self, text, width, indent)
        return super()._fill_text(text, width, indent)

    def format_help(self):
        return super().format_help().replace("``", "`")


def _style_help(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command the same help formatter."""
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _style_help(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
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
    _style_help(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        if args.command is None:
            # `kgprobe` alone explains itself instead of starting a minutes-long probe.
            print(OVERVIEW, end="")
            return 0
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
    except BrokenPipeError:
        # The reader left (`kgprobe export --samples - | head -1`): stop quietly, as a Unix
        # tool killed by SIGPIPE does; stdout goes to /dev/null so the exit flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except sqlite3.DatabaseError as exc:
        # A safety net: the stores turn SQLite errors into clear errors themselves.
        print(f"kgprobe: error: a run or cache file is damaged or unreadable (SQLite: {exc}); "
              "`kgprobe verify RUN` checks a run file", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

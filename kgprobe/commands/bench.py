"""``kgprobe bench NAME``: benchmarks that print a JSON object as their last line.

Each benchmark is a module ``kgprobe.bench.NAME`` exposing ``register(subparsers)``.
"""

from __future__ import annotations

import importlib

BENCHMARKS = ("sampler", "efficiency", "scoring", "methods", "build")


def register(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="run a benchmark (JSON result on the last line)")
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name in BENCHMARKS:
        importlib.import_module(f"kgprobe.bench.{name}").register(sub)

"""``kgprobe bench NAME``: benchmarks that print a JSON object as their last line.

Each benchmark is a module ``kgprobe.bench.NAME`` exposing ``register(subparsers)``.
"""

from __future__ import annotations

BENCHMARKS = ("sampler", "efficiency", "design", "samplers", "scoring", "methods", "build", "faults", "prior", "compare", "verifier",
              "throughput", "scaleout")


def register(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="run a benchmark (JSON result on the last line)")
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    from kgprobe.cli import register_all

    register_all(sub, "kgprobe.bench", BENCHMARKS)

"""``kgprobe bench sampler --edges N``: the cost of one engine round at scale.

Builds a synthetic graph of N edges with Zipf-skewed degrees
(:mod:`kgprobe.simulation.synthetic`; 10 % dead edges), then times full rounds of
KGLens' Thompson sampling (``kglens-thompson`` with its class defaults: 10 % uniform
design draws + top-n of the Thompson draws; :mod:`kgprobe.sampling.thompson`, exact
threshold draws), answers from a Bernoulli oracle whose error rates cluster by node, and the
update with one-hop propagation (w = 1). ``--warmup`` rounds run first so the state is
no longer all-prior (propagation from hubs spreads it fast), then the median of
``--rounds`` timed rounds is reported.

Memory: the process's peak RSS (``getrusage``) divided by N, read *before* the
baseline runs. The baseline is the same round with a full ``Generator.beta`` draw over
every active edge (what a direct implementation does), timed on a few rounds in the
same process. JSON keys: ``round_ms`` (median), ``round_ms_p90``, ``baseline_round_ms``,
``speedup``, ``bytes_per_edge``, ``peak_rss_mb``.
"""

from __future__ import annotations

import json
import resource
import time

import numpy as np


def register(subparsers) -> None:
    parser = subparsers.add_parser("sampler", help="time one Thompson round (draw, top-n, propagate) at N edges")
    parser.add_argument("--edges", type=float, default=1_000_000, help="number of edges N (e.g. 1e6, 1e7)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds")
    parser.add_argument("--warmup", type=int, default=10, help="untimed rounds before timing")
    parser.add_argument("--baseline-rounds", type=int, default=3, help="rounds of the full-draw baseline (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=handle)


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def handle(args) -> int:
    from kgprobe.errors import InputError
    from kgprobe.kg.parameterized import ParameterizedKG
    from kgprobe.sampling.thompson import KGLensThompsonSampler, top_n_direct
    from kgprobe.simulation.synthetic import skewed_graph

    n_edges = int(args.edges)
    if n_edges < 1 or n_edges != args.edges:
        raise InputError(f"--edges must be a positive whole number, got {args.edges}")
    if args.rounds < 1 or args.warmup < 0 or args.baseline_rounds < 0:
        raise InputError("--rounds must be >= 1 and --warmup, --baseline-rounds >= 0")
    t0 = time.perf_counter()
    heads, tails, active = skewed_graph(n_edges, seed=args.seed)
    pkg = ParameterizedKG(heads, tails, active, propagation_weight=1.0)
    del heads, tails, active  # pkg keeps its own int32 copies (no copy for int32 input)
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(args.seed)
    # Per-node difficulty: errors cluster around nodes, as propagation assumes.
    node_logit = rng.standard_normal(pkg.num_nodes).astype(np.float32) * 2.0 - 0.5
    sampler = KGLensThompsonSampler(direct_limit=0)

    def oracle(edges):
        z = 0.5 * (node_logit[pkg.heads[edges]] + node_logit[pkg.tails[edges]])
        theta = 1.0 / (1.0 + np.exp(-z.astype(np.float64)))
        return rng.random(edges.size) >= theta

    def one_round(select):
        t = time.perf_counter()
        edges = select()
        pkg.update(edges, oracle(edges))
        return (time.perf_counter() - t) * 1000.0

    fast = lambda: sampler.select(pkg, args.batch, rng).edges  # noqa: E731
    for _ in range(args.warmup):
        one_round(fast)
    times = [one_round(fast) for _ in range(args.rounds)]
    peak = _peak_rss_bytes()
    touched = int(np.count_nonzero((pkg.alpha != pkg.prior[0]) | (pkg.beta != pkg.prior[1])))

    def direct():
        return top_n_direct(pkg.alpha, pkg.beta, pkg.active_edges, args.batch, rng)

    base = [one_round(direct) for _ in range(args.baseline_rounds)]
    result = {
        "bench": "sampler",
        "edges": n_edges,
        "active_edges": pkg.num_active,
        "nodes": pkg.num_nodes,
        "max_degree": int(np.diff(pkg.node_ptr).max()),
        "batch": args.batch,
        "warmup_rounds": args.warmup,
        "timed_rounds": args.rounds,
        "edges_off_prior": touched,
        "round_ms": round(float(np.median(times)), 3),
        "round_ms_p90": round(float(np.percentile(times, 90)), 3),
        "baseline_round_ms": round(float(np.median(base)), 3) if base else None,
        "speedup": round(float(np.median(base) / np.median(times)), 2) if base else None,
        "build_s": round(build_s, 2),
        "peak_rss_mb": round(peak / 2**20, 1),
        "bytes_per_edge": round(peak / n_edges, 1),
    }
    print(f"one Thompson round at {n_edges:,} edges: median {result['round_ms']} ms "
          f"(full-draw baseline {result['baseline_round_ms']} ms); peak RSS {result['peak_rss_mb']} MB")
    print(json.dumps(result))
    return 0

"""Accuracy of one model under the paper's and the balanced ZP-LKE rendering, on the same edges.

    python scripts/leak_free_rendering.py --model default --kg countries \
        --edges-from kgprobe/sweeps/default.npz --limit 150

Each edge is probed once per rendering (project defaults: 20 examples, 20 options), with
the same seed per edge for both. Prints per-predicate and overall accuracy, the majority
baseline of both renderings (kgprobe.baselines) and, for a model with a tokenizer, how
often the option with the fewest tokens is the gold (summed log-probabilities favour
short options), as one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def main() -> None:
    from kgprobe.api import resolve_kg, resolve_model
    from kgprobe.baselines import context_majority_rate
    from kgprobe.probes import make_probe
    from kgprobe.settings import probe_option_defaults
    from kgprobe.sweep import load_sweep

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="default")
    ap.add_argument("--kg", default="countries")
    ap.add_argument("--edges-from", help="a sweep file whose edges to probe (default: every active edge)")
    ap.add_argument("--limit", type=int, help="probe only this many of them (a seeded draw)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    kg = resolve_kg(args.kg)
    edges = load_sweep(args.edges_from).edges_in(kg) if args.edges_from else kg.active_edges()
    if args.limit and args.limit < edges.size:
        edges = np.sort(np.random.default_rng(args.seed).choice(edges, size=args.limit, replace=False))
    model, spec = resolve_model(args.model)
    out: dict = {"model": spec, "kg": kg.name, "edges": int(edges.size), "passes": 1}
    for mode in ("paper", "balanced"):
        options = {**probe_option_defaults("zp-lke"), "examples": mode}
        probe = make_probe("zp-lke", **options)
        t0 = time.perf_counter()
        correct, per, fewest = [], {}, []
        tokenizer = getattr(model, "tokenizer", None)
        for i in range(0, edges.size, 16):
            chunk = edges[i:i + 16]
            tasks = [probe.render(kg, int(e), np.random.default_rng([args.seed, int(e)])) for e in chunk]
            for t in tasks:
                if tokenizer is not None:
                    counts = np.asarray([len(tokenizer.encode(r.continuation, add_special_tokens=False))
                                         for r in t.score_requests])
                    shortest = np.flatnonzero(counts == counts.min())
                    fewest.append(float(t.payload["gold_index"] in shortest) / shortest.size)
            scores = model.score([r for t in tasks for r in t.score_requests])
            k = 0
            for t in tasks:
                n = len(t.score_requests)
                v = probe.verify(kg, t, scores[k:k + n], [])
                k += n
                correct.append(v.correct)
                label = kg.predicate_label(kg.triple(t.edge).predicate)
                per.setdefault(label, []).append(v.correct)
        out[mode] = {
            "accuracy": round(float(np.mean(correct)), 4),
            "context_majority": round(context_majority_rate(probe, kg, edges, seed=args.seed), 4),
            "fewest_tokens": round(float(np.mean(fewest)), 4) if fewest else None,
            "by_predicate": {k: [round(float(np.mean(v)), 3), len(v)] for k, v in sorted(per.items())},
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(mode, json.dumps(out[mode]), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

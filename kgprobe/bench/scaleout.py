"""``kgprobe bench scaleout``: the same run on 1 and on 2 (or more) Ray workers.

Each worker count plays the same run (``--model``, default ``tiny-random``; ZP-LKE on the
embedded countries KG, ``--budget`` responses in batches of ``--batch-size``, seed
``--seed``) in memory, on a private Ray instance on 127.0.0.1 with one CPU (one torch
thread) per worker, started before the clock starts. Timed: playing the rounds, with the
models already loaded.

Reported per worker count: responses/s (responses ÷ wall seconds), responses per
CPU-second (÷ the CPU time of the driver and of every worker process while the rounds
ran), the CPU seconds, and ``identical``: whether every probe (edge, verdict, answer,
log-probs) and the final PKG state equal those of the first worker count. ``speedup`` is
responses/s on the last worker count ÷ on the first. The machine's load average is
reported too: on shared cores the wall-clock figures include other processes' work.
The last stdout line is the JSON.
"""

from __future__ import annotations

import json
import os
import time
import warnings


def register(subparsers) -> None:
    from kgprobe.commands.options import add_device_option

    p = subparsers.add_parser("scaleout", help="the same run on 1 and 2 Ray workers: responses/s, per CPU-second, "
                              "speed-up, identical results")
    p.add_argument("--model", default="tiny-random", help="model spec (default tiny-random)")
    p.add_argument("--workers", default="1,2", help="worker counts to compare, comma-separated (default 1,2)")
    p.add_argument("--budget", type=int, default=256, help="responses per run (default 256)")
    p.add_argument("--batch-size", type=int, default=32, help="edges per round (default 32)")
    p.add_argument("--method", default="zp-lke")
    p.add_argument("--seed", type=int, default=0)
    add_device_option(p, default=None)
    p.set_defaults(func=handle)


def _outcome(run) -> dict:
    import numpy as np

    probes = [(p.round, p.pos, p.edge, p.correct, p.answer, p.detail.get("gold_logprob"),
               p.detail.get("best_wrong_logprob")) for p in run.store.probes()]
    return {"probes": probes, "pkg": {k: np.asarray(v).tolist() for k, v in run.pkg.state_dict().items()}}


def measure(model: str, workers: int, *, budget: int, batch_size: int, method: str, seed: int,
            device: str | None) -> tuple[dict, dict]:
    """One run on ``workers`` workers: ``(figures, outcome)``."""
    import kgprobe

    run = kgprobe.probe(model=model, method=method, budget=budget, batch_size=batch_size, seed=seed, store=None,
                        workers=workers, model_options={"device": device} if device else None, lazy=True,
                        report=False, progress=False)
    try:
        ray_model = run.engine.model
        before = ray_model.worker_stats()
        cpu0, t0 = time.process_time(), time.perf_counter()
        run.finish()
        wall, driver_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        after = ray_model.worker_stats()
        worker_cpu = sum(a["process_cpu_seconds"] - b["process_cpu_seconds"] for a, b in zip(after, before))
        responses = run.queries_spent
        figures = {
            "workers": workers, "responses": responses, "rounds": run.rounds_played, "wall_s": round(wall, 3),
            "cpu_s": round(driver_cpu + worker_cpu, 3), "driver_cpu_s": round(driver_cpu, 3),
            "responses_per_s": round(responses / wall, 3),
            "responses_per_cpu_s": round(responses / max(driver_cpu + worker_cpu, 1e-9), 3),
            "units_per_worker": [a["units_answered"] for a in after],
        }
        return figures, _outcome(run)
    finally:
        run.close()


def handle(args) -> int:
    from kgprobe.errors import InputError

    try:
        counts = [int(w) for w in str(args.workers).split(",") if w.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise InputError(f"--workers {args.workers!r}: expected worker counts >= 1, e.g. 1,2")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    warnings.simplefilter("ignore")  # probe warnings (few distractors) would repeat per run
    runs, outcomes = [], []
    for n in counts:
        figures, outcome = measure(args.model, n, budget=args.budget, batch_size=args.batch_size,
                                   method=args.method, seed=args.seed, device=args.device)
        runs.append(figures)
        outcomes.append(outcome)
        print(f"{n} worker(s): {figures['responses']} responses in {figures['wall_s']:.1f} s "
              f"({figures['responses_per_s']:.1f}/s, {figures['responses_per_cpu_s']:.1f} per CPU-second)")
    identical = all(o == outcomes[0] for o in outcomes[1:])
    result = {
        "bench": "scaleout", "model": args.model, "method": args.method, "budget": args.budget,
        "batch_size": args.batch_size, "seed": args.seed, "threads_per_worker": 1,
        "workers": counts,
        "responses_per_s": [r["responses_per_s"] for r in runs],
        "responses_per_cpu_s": [r["responses_per_cpu_s"] for r in runs],
        "wall_s": [r["wall_s"] for r in runs],
        "cpu_s": [r["cpu_s"] for r in runs],
        "speedup": round(runs[-1]["responses_per_s"] / runs[0]["responses_per_s"], 3),
        "identical": identical,
        "runs": runs,
        "cpu_count": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "device": _device_name(),
    }
    print(json.dumps(result))
    return 0


def _device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    return "cpu"

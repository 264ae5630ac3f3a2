"""``kgprobe bench throughput``: how fast a local model scores probes, new path vs old.

Workloads (ZP-LKE multiple choice on the embedded countries KG's ``capital`` facts,
rendered by the ZP-LKE probe itself, so with the separators a real run uses):

* **real-run**: ``--facts`` facts, each with its own ``--examples`` randomly drawn
  examples (as in real runs: every probe draws fresh examples) and ``--options``
  options (gold + distractors). Nothing is shared between facts but the first tokens.
* **shared-context**: the same facts with ``fixed_examples=True``: every fact has the same
  examples, so the example block is one prefix shared by all.
* **end to end**: ``kgprobe.probe`` on the countries KG with ZP-LKE at the real-run
  protocol (``--examples`` × ``--options``) and at the CLI defaults (20 × 20), budget
  ``--e2e-budget`` responses, batch 32 (or the budget if smaller), a run file written as in a real run; responses/s
  = queries answered ÷ wall time (KG loading and model loading excluded).

Every figure is measured twice in the same process, on the same network and device:
with the current scoring path and with the path before the prefix-tree packing
(:mod:`kgprobe.bench.baseline_scoring`: one tokenizer call per request, plans and masks
built in Python loops, logits of every scored token). The old path is timed on the
first ``--baseline-facts`` facts (its facts/s is a rate, so the count only sets the
precision); log-probs of both paths are compared on exactly those facts. The end-to-end
baseline runs the same engine with the old scoring path, so it isolates the scoring
work (engine changes made with it are in both).

Also reported: tokens/s (tokens run through the network ÷ s), effective TFLOP/s
(2 × parameters × tokens run ÷ s, the usual estimate), its share of the GPU's dense
bf16 peak for GPUs in :data:`BF16_PEAK_TFLOPS`, CPU seconds next to wall seconds, and the
load average: the machine may be shared, and a load above the thread count means the
wall-clock figures are slowed by other processes (the CPU-time figures much less so).

How close the path is to the arithmetic bound: ``positions_per_fact`` (distinct
predicting positions the output layer ran, per real-run fact), ``output_layer_gflop_per_fact``
(2 × positions × vocabulary × width), ``output_layer_floor_facts_per_s`` (the backend's own
exact log-sum-exp over the full vocabulary for those positions, in the run's chunks,
timed alone on random hidden states: no scoring path can be faster than this),
``output_layer_gemm_facts_per_s`` (its matrix products alone), ``share_of_floor``
(facts_per_s ÷ the floor) and ``scoring_breakdown`` (shares of the real-run scoring time:
tokenize, plan_and_pack, forward, output_layer; on a GPU the phases end where the host
waits for the device).

``--model tiny-random`` is a random 2-layer, width-64 Llama with the default tokenizer,
built locally: the network costs next to nothing, so the figures measure kgprobe's own
work (tokenization, planning, output layer, engine). The last stdout line is the JSON.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings

#: Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by a substring of
#: ``torch.cuda.get_device_name()``; first match wins.
BF16_PEAK_TFLOPS = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("A10", 125.0),
)

CAPITAL = "P36"


def register(subparsers) -> None:
    from kgprobe.commands.options import add_device_option

    p = subparsers.add_parser("throughput", help="facts/s, tokens/s, TFLOP/s and end-to-end responses/s, "
                              "new scoring path vs the old one")
    p.add_argument("--model", default="tiny-random", help="model spec (default tiny-random: measures kgprobe itself)")
    add_device_option(p, default="auto")
    p.add_argument("--dtype", default="auto", help="auto (float32 on CPU, bfloat16 on GPU), float32, bfloat16")
    p.add_argument("--threads", type=int, default=1, help="torch and tokenizer threads (default 1)")
    p.add_argument("--facts", type=int, default=50)
    p.add_argument("--options", type=int, default=100)
    p.add_argument("--examples", type=int, default=50)
    p.add_argument("--baseline-facts", type=int, default=10, help="facts the old path is timed on")
    p.add_argument("--e2e-budget", type=int, default=128, help="responses per end-to-end run (0: skip)")
    p.add_argument("--e2e-cli-only", action="store_true",
                   help="end to end at the CLI defaults (20 x 20) only, not at the real-run protocol")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baseline", action="store_true", help="skip the old path")
    p.set_defaults(func=handle)


def render_facts(n_facts: int, n_options: int, n_examples: int, seed: int, *, shared: bool):
    """``n_facts`` ZP-LKE tasks on capital facts of the countries KG, rendered by the probe."""
    import numpy as np

    from kgprobe.errors import InputError
    from kgprobe.probes import make_probe
    from kgprobe.sources.embedded import load_embedded_kg

    kg = load_embedded_kg("countries")
    probe = make_probe("zp-lke", num_examples=n_examples, num_distractors=n_options - 1, fixed_examples=shared,
                       example_seed=seed)
    edges = kg.edges_of_predicate(CAPITAL)
    if len(edges) < n_facts:
        raise InputError(f"--facts {n_facts}: the countries KG has only {len(edges)} capital facts.")
    chosen = np.random.default_rng(seed).choice(edges, size=n_facts, replace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [probe.render(kg, int(e), np.random.default_rng([seed, int(e)])) for e in chosen]


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _score_workload(scorer, counter, tasks) -> dict:
    requests = [r for t in tasks for r in t.score_requests]
    scorer.score(tasks[0].score_requests)  # warm-up (allocator, kernels); not counted
    counter.tokens_run = 0
    profiled = hasattr(counter, "phase_seconds")  # the backend counts these; the old path does not
    if profiled:
        counter.positions_run = counter.output_layer_calls = 0
        counter.phase_seconds = dict.fromkeys(counter.phase_seconds, 0.0)
    results, wall, cpu = _timed(lambda: scorer.score(requests))
    return {"results": results, "seconds": wall, "cpu_seconds": cpu, "tokens_run": counter.tokens_run,
            "positions_run": counter.positions_run if profiled else None,
            "output_layer_calls": counter.output_layer_calls if profiled else None,
            "phases": dict(counter.phase_seconds) if profiled else None,
            "facts_per_s": len(tasks) / wall, "facts_per_cpu_s": len(tasks) / cpu}


def _breakdown(phases: dict) -> dict:
    """Shares of the scoring wall time: tokenize, plan_and_pack (everything in ``score`` that
    is neither tokenization nor the network nor the output layer), forward, output_layer."""
    total = phases["total"] or 1.0
    known = phases["tokenize"] + phases["forward"] + phases["output_layer"]
    shares = {"tokenize": phases["tokenize"], "plan_and_pack": max(phases["total"] - known, 0.0),
              "forward": phases["forward"], "output_layer": phases["output_layer"]}
    return {k: round(v / total, 3) for k, v in shares.items()}


def _output_layer_floor(model, positions: int, calls: int, facts: int, repeats: int = 3) -> dict:
    """The output layer alone at the workload's size, timed on its own.

    ``positions`` distinct predicting positions in ``calls`` calls (the real run's count and
    average chunk; random hidden states, the speed does not depend on the values) go
    through the backend's own exact log-sum-exp over the full vocabulary (no argmax
    wanted: the real path finds it only for the few rows that need it), then through the
    matrix products alone (the same vocabulary slices or row chunks, nothing else). Best
    of ``repeats``; returns facts/s of each.
    """
    import torch

    from kgprobe.models import hf_backend

    head = model.model.get_output_embeddings()
    weight = head.weight
    calls = max(calls, 1)
    chunk = max(-(-positions // calls), 1)
    sizes = [chunk] * (positions // chunk) + ([positions % chunk] if positions % chunk else [])
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(chunk, weight.shape[1], generator=generator).to(device=model.device, dtype=model.dtype)
    none = torch.zeros(0, dtype=torch.long, device=model.device)
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    saved = model.positions_run, model.output_layer_calls

    def stats():
        for n in sizes:
            model._position_stats(hidden[:n], (none, none))

    if model._vocab_sliced:
        step = hf_backend.SLICE
        buf = torch.empty((chunk, step), dtype=weight.dtype)

        def gemm():
            for n in sizes:
                for lo in range(0, weight.shape[0], step):
                    w = weight[lo : lo + step]
                    torch.mm(hidden[:n], w.T, out=buf[:n, : w.shape[0]])
    else:
        rows = model._logit_rows

        def gemm():
            for n in sizes:
                for lo in range(0, n, rows):
                    hidden[lo : min(lo + rows, n)] @ weight.T

    out = {}
    with torch.inference_mode():
        for name, fn in (("stats", stats), ("gemm", gemm)):
            fn()  # warm-up
            sync()
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                fn()
                sync()
                best = min(best, time.perf_counter() - start)
            out[name] = facts / best
    model.positions_run, model.output_layer_calls = saved
    return out


def _e2e(model, budget: int, examples: int, options: int, seed: int) -> dict:
    import kgprobe
    from kgprobe.engine import RoundFinished

    rounds = []  # seconds of each round; the engine's own share is what the model did not use
    model_seconds = [0.0]
    score = model.score

    def timed_score(requests):
        start = time.perf_counter()
        try:
            return score(requests)
        finally:
            model_seconds[0] += time.perf_counter() - start

    def listen(event):
        if isinstance(event, RoundFinished):
            rounds.append(event.summary.elapsed)

    model.score = timed_score  # an instance attribute, removed below

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        try:
            run = kgprobe.probe("countries", model, "zp-lke", budget=budget, batch_size=min(32, budget), seed=seed,
                                convergence=False, store=os.path.join(tmp, "bench.kgrun"), listeners=[listen],
                                probe_options={"num_examples": examples, "num_distractors": options - 1})
        finally:
            del model.score
        wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
        spent = run.queries_spent
        run.close()
    elapsed = sum(rounds)
    engine_share = (elapsed - model_seconds[0]) / elapsed if elapsed else 0.0
    return {"responses": spent, "seconds": wall, "responses_per_s": spent / wall, "responses_per_cpu_s": spent / cpu,
            "engine_share": engine_share}


def _peak(device) -> tuple[str, float | None]:
    import torch

    if device.type != "cuda":
        return "cpu", None
    name = torch.cuda.get_device_name(device)
    return name, next((peak for key, peak in BF16_PEAK_TFLOPS if key in name), None)


def handle(args) -> int:
    from kgprobe.errors import InputError

    if args.threads < 1 or args.facts < 1 or args.options < 2 or args.examples < 0 or args.baseline_facts < 1:
        raise InputError("--threads and --facts must be >= 1, --options >= 2, --examples >= 0, --baseline-facts >= 1.")
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))  # the tokenizers' thread pool
    from kgprobe.commands.common import prepare_process_for_models

    prepare_process_for_models()
    import torch

    from kgprobe.bench.baseline_scoring import BaselineScorer
    from kgprobe.models.hf_backend import TransformersModel
    from kgprobe.models.registry import load_model

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    if not isinstance(model, TransformersModel):
        raise InputError(f"bench throughput measures the transformers backend; {args.model!r} is not one "
                         "(use tiny-random, default, a registry name, hf:... or a model directory).")
    parameters = sum(p.numel() for p in model.model.parameters())
    device_name, peak = _peak(model.device)
    real = render_facts(args.facts, args.options, args.examples, args.seed, shared=False)
    shared = render_facts(args.facts, args.options, args.examples, args.seed, shared=True)
    print(f"bench throughput: {model.identity} on {model.device}, {args.facts} facts x {len(real[0].score_requests)} "
          f"options, {args.threads} thread(s)", flush=True)

    new_real = _score_workload(model, model, real)
    new_shared = _score_workload(model, model, shared)
    seconds = new_real["seconds"]
    tokens_per_s = new_real["tokens_run"] / seconds
    tflops = 2 * parameters * new_real["tokens_run"] / seconds / 1e12
    result = {
        "bench": "throughput",
        "model": model.identity,
        "device": device_name,
        "dtype": str(model.dtype).replace("torch.", ""),
        "threads": args.threads,
        "parameters": parameters,
        "facts": args.facts,
        "options_per_fact": len(real[0].score_requests),
        "examples": args.examples,
        "facts_per_s": round(new_real["facts_per_s"], 3),
        "facts_per_cpu_s": round(new_real["facts_per_cpu_s"], 3),
        "shared_facts_per_s": round(new_shared["facts_per_s"], 3),
        "tokens_run_per_fact": round(new_real["tokens_run"] / args.facts, 1),
        "tokens_per_s": round(tokens_per_s, 1),
        "effective_tflops": round(tflops, 6),
        "bf16_peak_share": None if peak is None else round(tflops / peak, 4),
    }
    # How close the path is to the arithmetic bound: the output layer alone (exact
    # log-sum-exp over the full vocabulary, then its matrix products alone) at the real
    # run's distinct predicting positions, and where the real run's time went.
    positions = new_real["positions_run"]
    vocab, width = model.model.get_output_embeddings().weight.shape
    floor = _output_layer_floor(model, positions, new_real["output_layer_calls"], args.facts)
    result.update({
        "positions_per_fact": round(positions / args.facts, 1),
        "output_layer_gflop_per_fact": round(2 * positions * vocab * width / args.facts / 1e9, 3),
        "output_layer_floor_facts_per_s": round(floor["stats"], 3),
        "output_layer_gemm_facts_per_s": round(floor["gemm"], 3),
        "share_of_floor": round(new_real["facts_per_s"] / floor["stats"], 3),
        "scoring_breakdown": _breakdown(new_real["phases"]),
    })
    if peak is None:
        result["bf16_peak_note"] = "no known GPU: the share of bf16 peak applies to GPUs only"
    print(f"  real-run {result['facts_per_s']} facts/s, shared-context {result['shared_facts_per_s']} facts/s",
          flush=True)

    baseline = None if args.no_baseline else BaselineScorer(model)
    if baseline is not None:
        n = min(args.baseline_facts, args.facts)
        old_real = _score_workload(baseline, baseline, real[:n])
        old_shared = _score_workload(baseline, baseline, shared[:n])
        ours = new_real["results"][: sum(len(t.score_requests) for t in real[:n])]
        diff = max(abs(a.logprob - b.logprob) for a, b in zip(ours, old_real["results"]))
        greedy_same = all(a.is_greedy == b.is_greedy for a, b in zip(ours, old_real["results"]))
        result.update({
            "baseline_facts_measured": n,
            "baseline_facts_per_s": round(old_real["facts_per_s"], 3),
            "baseline_facts_per_cpu_s": round(old_real["facts_per_cpu_s"], 3),
            "baseline_shared_facts_per_s": round(old_shared["facts_per_s"], 3),
            "baseline_tokens_run_per_fact": round(old_real["tokens_run"] / n, 1),
            "speedup": round(new_real["facts_per_s"] / old_real["facts_per_s"], 2),
            "speedup_cpu": round(new_real["facts_per_cpu_s"] / old_real["facts_per_cpu_s"], 2),
            "shared_speedup": round(new_shared["facts_per_s"] / old_shared["facts_per_s"], 2),
            "max_abs_logprob_diff_vs_baseline": float(f"{diff:.3g}"),
            "greedy_flags_equal_baseline": greedy_same,
        })
        print(f"  baseline real-run {result['baseline_facts_per_s']} facts/s", flush=True)

    if args.e2e_budget > 0:
        scorers = [("", model)] + ([("baseline_", baseline)] if baseline is not None else [])
        for prefix, scorer in scorers:
            if not args.e2e_cli_only:
                e2e = _e2e(scorer, args.e2e_budget, args.examples, args.options, args.seed)
                result.update({
                    f"{prefix}e2e_responses": e2e["responses"],
                    f"{prefix}e2e_responses_per_s": round(e2e["responses_per_s"], 2),
                    f"{prefix}e2e_responses_per_cpu_s": round(e2e["responses_per_cpu_s"], 2),
                    # Share of the rounds' time outside model.score (render, verify, store,
                    # PKG update, events): the "lean round" figure.
                    f"{prefix}e2e_engine_share": round(e2e["engine_share"], 3),
                })
            cli = _e2e(scorer, args.e2e_budget, 20, 20, args.seed)
            result[f"{prefix}e2e_cli_defaults_responses_per_s"] = round(cli["responses_per_s"], 2)
            result[f"{prefix}e2e_cli_defaults_responses_per_cpu_s"] = round(cli["responses_per_cpu_s"], 2)
        if baseline is not None and not args.e2e_cli_only:
            result["e2e_speedup"] = round(result["e2e_responses_per_s"] / result["baseline_e2e_responses_per_s"], 2)
        if baseline is not None:
            result["e2e_cli_defaults_speedup"] = round(
                result["e2e_cli_defaults_responses_per_s"] / result["baseline_e2e_cli_defaults_responses_per_s"], 2)
    load_after = os.getloadavg()[0]
    result["load_average"] = [round(load_before, 2), round(load_after, 2)]
    result["contended"] = max(load_before, load_after) > (os.cpu_count() or 1)
    print(json.dumps(result))
    return 0

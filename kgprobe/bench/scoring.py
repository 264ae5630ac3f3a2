"""``kgprobe bench scoring``: shared-prefix scoring vs the naive per-option loop.

Workload (ZP-LKE multiple choice, METHODS.md §3): real ``capital`` facts from the
embedded countries KG. 50 example facts form the zero-prompt context
``"x1 y1, x2 y2, …, x50 y50, "``; 50 other test facts each append their subject and
score 100 options (the gold capital + 99 other capitals, none a true object of the
subject) as ``" " + option``. That is 5,000 score requests sharing one ~600-token prefix.

Measured in one run, same model and thread count:

* **shared**: ``TransformersModel.score`` on all 5,000 requests (prefix once, each
  subject once, packed options).
* **naive**: each option scored as its own full sequence (batched with padding, no
  reuse), what the ZP-LKE reference code does. The naive loop is ~100× slower, so it is
  timed on the first ``--naive-facts`` facts (``naive_facts_measured``) and its facts/s
  extrapolated; log-probs are compared on exactly those facts.
* ``token_ratio`` = tokens run by the shared path ÷ the number of nodes of the token
  trie of all sequences (shared prefix once, each fact's own tokens once) — computed
  here independently of the backend's planner. The shared path does not run the trie's
  leaves (an option's last token predicts nothing), so the ratio can be below 1.
* vLLM facts/s when ``kgprobe.models.vllm_backend.bench_vllm_scoring(facts)`` exists.

The last stdout line is the JSON result.
"""

from __future__ import annotations

import json
import time

import numpy as np

from kgprobe.models.packing import trie_size

CAPITAL = "P36"


def register(subparsers) -> None:
    parser = subparsers.add_parser("scoring", help="shared-prefix scoring vs the naive loop (facts/s, exactness)")
    parser.add_argument("--model", default="default", help="model spec (default: the default model)")
    parser.add_argument("--facts", type=int, default=50)
    parser.add_argument("--options", type=int, default=100)
    parser.add_argument("--examples", type=int, default=50)
    parser.add_argument("--naive-facts", type=int, default=1,
                        help="facts the naive loop is timed on (its facts/s is extrapolated)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both paths")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-vllm", action="store_true", help="skip the vLLM measurement")
    parser.set_defaults(func=handle)


def build_facts(n_facts: int, n_options: int, n_examples: int, seed: int) -> list[dict]:
    """ZP-LKE multiple-choice items from the embedded countries KG.

    Each item: ``context`` (shared example prefix + subject), ``options`` (continuations,
    each starting with a space), ``gold`` (index of the true option).
    """
    from kgprobe.sources.embedded import load_embedded_kg

    kg = load_embedded_kg("countries")
    rng = np.random.default_rng(seed)
    pairs = sorted({(kg.label(t.subject), kg.label(t.object), t.subject) for t in kg.triples()
                    if t.predicate == CAPITAL})
    order = rng.permutation(len(pairs))
    if len(pairs) < n_examples + n_facts:
        raise ValueError(f"only {len(pairs)} capital facts; need {n_examples + n_facts}")
    examples = [pairs[i] for i in order[:n_examples]]
    tests = [pairs[i] for i in order[n_examples : n_examples + n_facts]]
    prefix = ", ".join(f"{s} {o}" for s, o, _ in examples) + ", "
    capitals = sorted({o for _, o, _ in pairs})
    facts = []
    for subject, gold, subject_id in tests:
        true = {kg.label(o) for o in kg.true_objects(subject_id, CAPITAL)}
        pool = [c for c in capitals if c not in true]
        distractors = [pool[i] for i in rng.choice(len(pool), size=n_options - 1, replace=False)]
        options = [gold, *distractors]
        rng.shuffle(options)
        facts.append({"context": prefix + subject, "options": [" " + o for o in options],
                      "gold": options.index(gold)})
    return facts


def handle(args) -> int:
    import torch

    from kgprobe.models.base import ScoreRequest
    from kgprobe.models.registry import load_model

    torch.set_num_threads(args.threads)
    facts = build_facts(args.facts, args.options, args.examples, args.seed)
    model = load_model(args.model)
    requests = [ScoreRequest(f["context"], o) for f in facts for o in f["options"]]
    sequences = [model.encode(r.context, r.continuation)[0] for r in requests]
    tokens_min = trie_size(sequences)
    lo, hi = min(sequences), max(sequences)  # the LCP of all = the LCP of the extremes
    shared_prefix_tokens = next((i for i, (a, b) in enumerate(zip(lo, hi)) if a != b), min(len(lo), len(hi)))

    model.score(requests[: args.options])  # warm-up (allocator, kernels); not counted
    model.tokens_run = model.tokens_padded = 0
    start = time.perf_counter()
    shared = model.score(requests)
    shared_s = time.perf_counter() - start
    tokens_run, tokens_padded = model.tokens_run, model.tokens_padded

    n_naive = min(args.naive_facts, len(facts))
    naive_requests = requests[: n_naive * args.options]
    start = time.perf_counter()
    naive = model.score_unshared(naive_requests)
    naive_s = time.perf_counter() - start

    diff_option = max(abs(a.logprob - b.logprob) for a, b in zip(shared, naive))
    diff_token = max(abs(x - y) for a, b in zip(shared, naive) for x, y in zip(a.token_logprobs, b.token_logprobs))
    correct = 0
    for i, fact in enumerate(facts):
        scores = [r.logprob for r in shared[i * args.options : (i + 1) * args.options]]
        best = max(scores)
        correct += int(scores[fact["gold"]] == best and scores.count(best) == 1)

    shared_fps = len(facts) / shared_s
    naive_fps = n_naive / naive_s
    result = {
        "bench": "scoring",
        "model": model.identity,
        "facts": len(facts),
        "options_per_fact": args.options,
        "examples": args.examples,
        "requests": len(requests),
        "threads": args.threads,
        "shared_prefix_tokens": shared_prefix_tokens,
        "mean_sequence_tokens": round(float(np.mean([len(s) for s in sequences])), 1),
        "shared_seconds": round(shared_s, 3),
        "shared_facts_per_s": round(shared_fps, 4),
        "naive_mode": "each option its own full sequence, batched with padding, no reuse",
        "naive_facts_measured": n_naive,
        "naive_seconds": round(naive_s, 3),
        "naive_facts_per_s": round(naive_fps, 5),
        "naive_extrapolated": n_naive < len(facts),
        "speedup": round(shared_fps / naive_fps, 2),
        "max_abs_logprob_diff": float(f"{diff_option:.3g}"),
        "max_abs_token_logprob_diff": float(f"{diff_token:.3g}"),
        "tokens_run": tokens_run,
        "tokens_min": tokens_min,
        "token_ratio": round(tokens_run / tokens_min, 4),
        "tokens_padded": tokens_padded,
        "zp_lke_accuracy": round(correct / len(facts), 4),
    }
    if args.no_vllm:
        result["vllm_note"] = "skipped (--no-vllm)"
    else:
        result.update(_vllm(facts))
    result["bars_met"] = {
        "speedup>=20": result["speedup"] >= 20,
        "max_abs_logprob_diff<=1e-3": result["max_abs_logprob_diff"] <= 1e-3,
        "token_ratio<=1.2": result["token_ratio"] <= 1.2,
    }
    print(json.dumps(result))
    return 0


def _vllm(facts: list[dict]) -> dict:
    """The vLLM side of the same run, from the server engineer's backend.

    Contract: ``bench_vllm_scoring(facts) -> dict`` gets the exact items scored here
    (``{"context": str, "options": [str, ...], "gold": int}``, options start with a
    space) and returns numbers such as ``facts_per_s``; its keys are copied into the
    result with a ``vllm_`` prefix. Unavailable or failing vLLM yields a ``vllm_note``.
    """
    try:
        from kgprobe.models.vllm_backend import bench_vllm_scoring
    except ImportError as exc:
        return {"vllm_note": f"vLLM backend unavailable: {exc}"}
    try:
        out = bench_vllm_scoring(facts)
    except Exception as exc:  # the vLLM run must not lose the transformers result
        return {"vllm_note": f"vLLM run failed: {type(exc).__name__}: {exc}"}
    return {f"vllm_{k}" if not k.startswith("vllm") else k: v for k, v in dict(out).items()}

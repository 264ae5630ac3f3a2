"""``kgprobe bench methods``: the probing methods side by side on real facts.

On the embedded countries KG, for the default model and every optional model that is
installed (``kgprobe models``):

1. **Method table.** ``--facts`` facts (default 4) are drawn per active predicate
   (seeded); each is probed once by ZP-LKE multiple choice (n = 50 examples, k = 99
   distractors), HGP multiple choice, ZP-LKE generation, HGP generation, KGLens yes/no
   (generated answer, first word) and KGLens wh (out-degree < 10, else the fact is left
   out of the wh column). Accuracy per predicate and overall, each with its chance
   level (1 / options for multiple choice — fewer than 100 when a predicate has fewer
   objects —, ½ for yes/no, 0 for free generation).
2. **Accuracy against n.** ZP-LKE multiple choice on ``--sweep-facts`` capital facts
   (P36) for n ∈ {1, 2, 5, 10, 20, 50}, five seeds each (new examples and distractors per
   seed): mean and SD per n, written to ``methods_sweep.json`` and plotted to
   ``methods_sweep.png`` (ZP-LKE Figure 3's shape).
3. **MONITOR per model** on ``--monitor-facts`` facts per predicate (R = 7, M = 5), next
   to the model's mean accuracy over the table; Pearson r between MONITOR and accuracy
   when three or more models are available (against the mean over the six methods and
   against each method). A small MONITOR sample mostly measures which facts happen to
   have a valid anchor, so give it a few facts per predicate.
4. **BELIEF per model** (zero-shot setting, every template × up to 3 subject names) on
   ``--belief-facts`` facts per predicate: accuracy mean, range and SD over resamples,
   consistency, overconfidence and coverage.

Per-model results are written to ``methods_models.json`` as each model finishes, so a
long multi-model run keeps what it finished. ``--no-sweep`` leaves out part 2 (the
costliest part for a larger model) when only the model comparison is wanted.

Every request of a method goes to the model in one ``score`` or ``generate`` call, as the
engine sends a round. Sizes are chosen to finish in about ten minutes on two CPU cores
with the default model. The last stdout line is the JSON result.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

SWEEP_N = (1, 2, 5, 10, 20, 50)
SWEEP_PREDICATE = "P36"
METHODS = ("zp-lke", "hgp", "zp-lke-gen", "hgp-gen", "yes-no", "wh")


def register(subparsers) -> None:
    parser = subparsers.add_parser("methods", help="ZP-LKE / HGP / yes-no / wh accuracy, accuracy vs n, MONITOR")
    parser.add_argument("--facts", type=int, default=4, help="facts per predicate in the method table")
    parser.add_argument("--sweep-facts", type=int, default=8, help="capital facts in the accuracy-vs-n sweep")
    parser.add_argument("--sweep-seeds", type=int, default=5)
    parser.add_argument("--monitor-facts", type=int, default=2, help="facts per predicate for MONITOR")
    parser.add_argument("--belief-facts", type=int, default=1,
                        help="facts per predicate for BELIEF zero-shot (0 leaves BELIEF out)")
    parser.add_argument("--no-sweep", action="store_true", help="leave out the accuracy-vs-n sweep")
    parser.add_argument("--models", default="", help="comma-separated model specs (default: every installed model)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench-methods", help="directory for the sweep JSON and PNG")
    parser.set_defaults(func=handle)


def installed_models() -> list[str]:
    """The default model first, then every optional registry model that is ready."""
    from kgprobe.models.default_model import DEFAULT_MODEL_NAME
    from kgprobe.models.registry import available_models

    specs = ["default"]
    for info in available_models():
        if info.status == "ready" and info.name != DEFAULT_MODEL_NAME:
            specs.append(info.name)
    return specs


def sample_facts(kg, per_predicate: int, rng: np.random.Generator) -> dict[str, list[int]]:
    """Up to ``per_predicate`` active, nameable edges of every active predicate."""
    from kgprobe.probes.common import renderable

    chosen = {}
    for predicate in kg.predicate_ids:
        edges = [int(j) for j in kg.edges_of_predicate(predicate, active_only=True) if renderable(kg, int(j))]
        if edges:
            picks = rng.choice(len(edges), size=min(per_predicate, len(edges)), replace=False)
            chosen[predicate] = [edges[int(i)] for i in sorted(picks)]
    return chosen


def _sampled_edges(kg, per_predicate: int, rng: np.random.Generator) -> list[int]:
    """``sample_facts`` flattened into one edge list (MONITOR and BELIEF take edges)."""
    return [e for edges in sample_facts(kg, per_predicate, rng).values() for e in edges]


def run_probe(kg, model, probe, edges: list[int], seed: int) -> list[tuple[int, bool, float]]:
    """(edge, correct, chance) for every edge, all requests in one score/generate call."""
    tasks = [probe.render(kg, e, np.random.default_rng([seed, e])) for e in edges]
    score_requests = [r for t in tasks for r in t.score_requests]
    generate_requests = [r for t in tasks for r in t.generate_requests]
    scores = model.score(score_requests) if score_requests else []
    generations = model.generate(generate_requests) if generate_requests else []
    out, si, gi = [], 0, 0
    for task in tasks:
        own_scores = scores[si : si + len(task.score_requests)]
        own_gens = generations[gi : gi + len(task.generate_requests)]
        si += len(task.score_requests)
        gi += len(task.generate_requests)
        verdict = probe.verify(kg, task, own_scores, own_gens)
        out.append((task.edge, bool(verdict.correct), float(probe.chance_level(kg, task.edge))))
    return out


def method_table(kg, model, facts: dict[str, list[int]], seed: int) -> dict:
    from kgprobe.probes import make_probe
    from kgprobe.probes.kglens import WH_MAX_OUT_DEGREE

    table: dict[str, dict[str, dict]] = {}
    overall: dict[str, dict] = {}
    verdicts: dict[str, dict[int, bool]] = {}
    timings = {}
    for method in METHODS:
        probe = make_probe(method)
        start = time.perf_counter()
        results = []
        for predicate, edges in facts.items():
            if method == "wh":
                # KGLens asks wh only below out-degree 10; those facts have no wh result.
                edges = [e for e in edges if kg.out_degree(kg.triple(e).subject, predicate) < WH_MAX_OUT_DEGREE]
            results += [(predicate, *r) for r in run_probe(kg, model, probe, edges, seed)] if edges else []
        timings[method] = round(time.perf_counter() - start, 1)
        for predicate in facts:
            own = [r for r in results if r[0] == predicate]
            table.setdefault(predicate, {})[method] = _summary(own)
        overall[method] = _summary(results, interval=True)
        verdicts[method] = {edge: correct for _, edge, correct, _ in results}
    return {"per_predicate": table, "overall": overall, "verdicts": verdicts, "seconds": timings}


def _summary(rows, *, interval: bool = False) -> dict:
    """Accuracy, mean chance level and count of (predicate, edge, correct, chance) rows;
    with ``interval`` also the 95 % Wilson interval of the accuracy."""
    from kgprobe.metrics import wilson_interval

    if not rows:
        return {"accuracy": None, "chance": None, "n": 0, **({"ci95": None} if interval else {})}
    right = sum(bool(r[2]) for r in rows)
    out = {
        "accuracy": round(right / len(rows), 4),
        "chance": round(float(np.mean([r[3] for r in rows])), 4),
        "n": len(rows),
    }
    if interval:
        out["ci95"] = [round(x, 4) for x in wilson_interval(right, len(rows))]
    return out


def paired_comparison(a: dict[int, bool], b: dict[int, bool]) -> dict:
    """Exact McNemar test of two methods on the facts both judged.

    Only discordant facts carry information: ``a_only`` right under ``a`` alone,
    ``b_only`` under ``b`` alone. Under "no difference" each discordant fact is a fair
    coin, so the two-sided p-value is 2·P(Binomial(a_only + b_only, ½) ≤ min), capped at 1.
    """
    common = sorted(set(a) & set(b))
    a_only = sum(a[e] and not b[e] for e in common)
    b_only = sum(b[e] and not a[e] for e in common)
    discordant = a_only + b_only
    tail = sum(math.comb(discordant, k) for k in range(min(a_only, b_only) + 1)) / 2**discordant
    return {"n": len(common), "a_only": a_only, "b_only": b_only, "p_value": round(min(1.0, 2 * tail), 4)}


def n_sweep(kg, model, num_facts: int, seeds: int, seed: int) -> dict:
    from kgprobe.probes import make_probe

    rng = np.random.default_rng([seed, 7])
    edges = [int(j) for j in kg.edges_of_predicate(SWEEP_PREDICATE, active_only=True)]
    edges = [edges[int(i)] for i in sorted(rng.choice(len(edges), size=min(num_facts, len(edges)), replace=False))]
    curve = []
    for n in SWEEP_N:
        accuracies = []
        for s in range(seeds):
            probe = make_probe("zp-lke", num_examples=n)
            rows = run_probe(kg, model, probe, edges, seed=1000 * s + n)
            accuracies.append(float(np.mean([r[1] for r in rows])))
        curve.append(
            {"n": n, "mean": round(float(np.mean(accuracies)), 4), "sd": round(float(np.std(accuracies)), 4),
             "per_seed": [round(a, 4) for a in accuracies]}
        )
    chance = float(np.mean([make_probe("zp-lke").chance_level(kg, e) for e in edges]))
    return {"predicate": SWEEP_PREDICATE, "facts": len(edges), "seeds": seeds, "chance": chance, "curve": curve}


def plot_sweep(sweeps: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, sweep in sweeps.items():
        ns = [p["n"] for p in sweep["curve"]]
        means = np.array([p["mean"] for p in sweep["curve"]])
        sds = np.array([p["sd"] for p in sweep["curve"]])
        ax.errorbar(ns, means, yerr=sds, marker="o", capsize=3, label=name)
        ax.axhline(sweep["chance"], linestyle=":", color="grey")
    ax.set_xscale("log")
    ax.set_xticks(list(SWEEP_N), [str(n) for n in SWEEP_N])
    ax.set_xlabel("in-context examples n")
    ax.set_ylabel("ZP-LKE multiple-choice accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(f"ZP-LKE on {SWEEP_PREDICATE} (capital): mean ± SD over seeds", fontsize=10)
    ax.text(0.99, 0.01, "dotted: chance", transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="grey")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def monitor_for(kg, model, per_predicate: int, seed: int) -> dict:
    from kgprobe.probes.monitor import run_monitor

    edges = _sampled_edges(kg, per_predicate, np.random.default_rng([seed, 11]))
    return run_monitor(kg, model, edges, rng=np.random.default_rng([seed, 12])).as_dict()


def belief_for(kg, model, per_predicate: int, seed: int) -> dict:
    from kgprobe.probes.belief import run_belief

    edges = _sampled_edges(kg, per_predicate, np.random.default_rng([seed, 13]))
    return run_belief(kg, model, edges, setting="zero-shot", rng=np.random.default_rng([seed, 14])).as_dict()


def correlations(per_model: dict) -> dict:
    """Pearson r between MONITOR and accuracy across models: mean accuracy and per method."""
    names = [n for n in per_model if per_model[n]["monitor"]["monitor"] is not None]
    monitor = [per_model[n]["monitor"]["monitor"] for n in names]
    by_method = {}
    for method in METHODS:
        accuracies = [per_model[n]["table"]["overall"][method]["accuracy"] for n in names]
        by_method[method] = None if None in accuracies else pearson(monitor, accuracies)
    r = pearson(monitor, [per_model[n]["mean_accuracy"] for n in names])
    return {
        "models": names,
        "mean_accuracy": r,
        "mean_accuracy_p_value": None if r is None else pearson_p_value(r, len(names)),
        "by_method": by_method,
    }


def pearson_p_value(r: float, n: int) -> float:
    """Two-sided p-value of Pearson r over n points (t-test, n − 2 degrees of freedom).

    With three models there is one degree of freedom: even r = 0.9 is p ≈ 0.29.
    """
    from scipy import stats

    if abs(r) >= 1.0:
        return 0.0
    t = r * math.sqrt((n - 2) / (1 - r * r))
    return float(2 * stats.t.sf(abs(t), n - 2))


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def format_model_table(per_model: dict) -> str:
    """One row per model: overall accuracy per method, their mean, MONITOR and BELIEF."""
    header = "| model | " + " | ".join(METHODS) + " | mean | MONITOR (valid/facts) | BELIEF acc ± SD, consistency |"
    lines = [header, "|" + "---|" * (len(METHODS) + 4)]
    for name, m in per_model.items():
        cells = [
            "—" if m["table"]["overall"][k]["accuracy"] is None else f"{m['table']['overall'][k]['accuracy']:.2f}"
            for k in METHODS
        ]
        mon = m["monitor"]
        belief = m.get("belief")
        belief_cell = "—" if not belief else (
            f"{belief['accuracy_mean']:.2f} ± {belief['accuracy_sd']:.2f}, {belief['consistency']:.2f}"
        )
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {m['mean_accuracy']:.2f} | "
            f"{_fmt(mon['monitor'], '.3f')} ({mon['num_valid']}/{mon['num_facts']}) | {belief_cell} |"
        )
    return "\n".join(lines)


def pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if x.max() == x.min() or y.max() == y.min():
        return None
    return float(np.corrcoef(x, y)[0, 1])


def format_table(kg, table: dict) -> str:
    header = "| predicate | " + " | ".join(METHODS) + " |"
    lines = [header, "|" + "---|" * (len(METHODS) + 1)]
    rows = list(table["per_predicate"].items()) + [("overall", table["overall"])]
    for predicate, cells in rows:
        name = predicate if predicate == "overall" else f"{predicate} {kg.predicate_label(predicate)}"
        parts = []
        for m in METHODS:
            c = cells[m]
            ci = f" [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]" if c.get("ci95") else ""
            parts.append("—" if c["accuracy"] is None else f"{c['accuracy']:.2f}{ci} ({c['chance']:.2f}) n={c['n']}")
        lines.append(f"| {name} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def handle(args) -> int:
    import torch

    from kgprobe.errors import InputError
    from kgprobe.models.registry import load_model
    from kgprobe.sources.embedded import load_embedded_kg

    if min(args.facts, args.sweep_facts, args.sweep_seeds, args.monitor_facts) < 1:
        raise InputError("--facts, --sweep-facts, --sweep-seeds and --monitor-facts must be at least 1")
    if args.belief_facts < 0:
        raise InputError("--belief-facts must be 0 (no BELIEF) or more")
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # fewer-options warnings are expected here and reported as chance levels
    started = time.perf_counter()
    kg = load_embedded_kg("countries")
    facts = sample_facts(kg, args.facts, np.random.default_rng(args.seed))
    specs = [s for s in args.models.split(",") if s] or installed_models()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    per_model, sweeps = {}, {}
    for spec in specs:
        model = load_model(spec)
        t0 = time.perf_counter()
        table = method_table(kg, model, facts, args.seed)
        print(f"{model.name}: method table ({time.perf_counter() - t0:.0f} s)")
        print(format_table(kg, table))
        paired = paired_comparison(table["verdicts"]["zp-lke"], table["verdicts"]["hgp"])
        print(f"{model.name}: ZP-LKE vs HGP multiple choice on the same {paired['n']} facts: only ZP-LKE right on "
              f"{paired['a_only']}, only HGP on {paired['b_only']}, exact McNemar p = {paired['p_value']:.3f}")
        if not args.no_sweep:
            t0 = time.perf_counter()
            sweep = n_sweep(kg, model, args.sweep_facts, args.sweep_seeds, args.seed)
            sweeps[model.name] = sweep
            print(f"{model.name}: accuracy vs n ({time.perf_counter() - t0:.0f} s): "
                  + ", ".join(f"n={p['n']}: {p['mean']:.2f}±{p['sd']:.2f}" for p in sweep["curve"]))
        t0 = time.perf_counter()
        monitor = monitor_for(kg, model, args.monitor_facts, args.seed)
        print(f"{model.name}: MONITOR {_fmt(monitor['monitor'], '.3f')} over {monitor['num_valid']}/{monitor['num_facts']} "
              f"facts with a valid anchor ({time.perf_counter() - t0:.0f} s)")
        belief = None
        if args.belief_facts:
            t0 = time.perf_counter()
            belief = belief_for(kg, model, args.belief_facts, args.seed)
            print(f"{model.name}: BELIEF zero-shot accuracy {belief['accuracy_mean']:.3f} ± {belief['accuracy_sd']:.3f}, "
                  f"consistency {belief['consistency']:.3f}, overconfidence {belief['overconfidence']:.3f} over "
                  f"{belief['num_prompts']} prompts ({time.perf_counter() - t0:.0f} s)")
        accuracies = [c["accuracy"] for c in table["overall"].values() if c["accuracy"] is not None]
        per_model[model.name] = {
            "table": table,
            "monitor": monitor,
            "belief": belief,
            "mean_accuracy": round(float(np.mean(accuracies)), 4),
            "zp_lke_mc_ge_hgp_mc": table["overall"]["zp-lke"]["accuracy"] >= table["overall"]["hgp"]["accuracy"],
            "zp_lke_vs_hgp_mc": paired,
        }
        model.close()
        # Written after every model, so a long multi-model run leaves its finished models' results.
        (out_dir / "methods_models.json").write_text(json.dumps(per_model, indent=1))
        if sweeps:
            (out_dir / "methods_sweep.json").write_text(json.dumps(sweeps, indent=1))
            plot_sweep(sweeps, out_dir / "methods_sweep.png")
    print("models side by side (overall accuracy per method):")
    print(format_model_table(per_model))
    corr = correlations(per_model)
    r = corr["mean_accuracy"]
    result = {
        "bench": "methods",
        "kg": kg.name,
        "facts_per_predicate": args.facts,
        "predicates": len(facts),
        "models": per_model,
        "sweep": sweeps,
        "monitor_accuracy_pearson_r": r,
        "monitor_accuracy_pearson_p": corr["mean_accuracy_p_value"],
        "monitor_pearson_r_by_method": corr["by_method"],
        "pearson_note": None if r is not None else f"needs >= 3 models with a MONITOR score, {len(corr['models'])} available",
        "plot": str(out_dir / "methods_sweep.png") if sweeps else None,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(result, separators=(",", ":")))
    return 0

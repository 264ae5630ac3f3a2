"""``kgprobe simulate``: the KGLens §2.4 sample-efficiency study on a graph, with your θ* or ours.

Writes ``study.json`` (settings, seed-averaged MSE curves, efficiency ratios) and
``study.png`` (MSE over the top-k hardest edges against queries, one curve per sampler,
brute-force epochs marked) into ``--out``, and prints a summary table.

The true error probabilities θ* come from ``--theta FILE`` (``.npy`` array, or a text
file with one number per line, one per edge of the graph in edge order) or, by default,
from the calibrated generator (:mod:`kgprobe.simulation.theta`). The Python entry point
is :func:`kgprobe.simulation.run_study_on_kg`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from kgprobe.errors import InputError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="sample-efficiency study of the samplers on a graph against a simulated model",
        description="Run the KGLens §2.4 study: each sampler probes the graph against a simulated model "
        "with true error probabilities θ*; plot the MSE of the estimated θ over the hardest edges "
        "against the number of queries.",
    )
    from kgprobe.cli import RenamedOption

    parser.add_argument("--kg", default="countries", help="an embedded KG name (countries, geo) or a KG file")
    parser.add_argument("--graph", dest="kg", action=RenamedOption, new_name="--kg")
    parser.add_argument("--theta", metavar="FILE", help="θ* per edge (.npy or one number per line)")
    parser.add_argument("--correlation", choices=("correlated", "none"), default="correlated",
                        help="generated θ*: clustered by neighbours and predicates, or shuffled")
    parser.add_argument("--theta-seed", type=int, default=0, help="seed of the generated θ*")
    parser.add_argument("--runs", type=int, default=3, help="runs per sampler, seeds 0..N-1 (curves are averaged)")
    parser.add_argument("--seeds", dest="runs", type=int, action=RenamedOption, new_name="--runs")
    parser.add_argument("--epochs", type=float, default=5.0, help="query budget, in brute-force epochs")
    parser.add_argument("--batch-size", type=int, default=64, help="edges probed per round")
    parser.add_argument("--batch", dest="batch_size", type=int, action=RenamedOption, new_name="--batch-size")
    parser.add_argument("--top-k", type=int, nargs="+", default=[200, 600], help="hardest-edge sets to score")
    parser.add_argument("--samplers", nargs="+", metavar="LABEL",
                        help="study configurations to run (default: all; see the table for labels)")
    parser.add_argument("--out", default="simulation", help="directory for study.json and study.png")
    parser.set_defaults(func=handle)


def load_theta(path: str, num_edges: int) -> np.ndarray:
    """θ* from a .npy file or a text file with one value per line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"θ* file {path} does not exist")
    try:
        theta = np.load(p) if p.suffix == ".npy" else np.loadtxt(p, ndmin=1)
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot read θ* from {path}: {exc}") from None
    theta = np.asarray(theta, dtype=np.float64).ravel()
    if theta.size != num_edges:
        raise InputError(f"{path} holds {theta.size} θ* values but the graph has {num_edges} edges")
    return theta


def handle(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from kgprobe.simulation.plot import mse_at_epochs, plot_study
    from kgprobe.simulation.study import DEFAULT_SPECS, run_study_on_kg
    from kgprobe.simulation.theta import ThetaSettings, theta_for_kg

    from kgprobe.api import resolve_kg

    kg = resolve_kg(args.kg)
    if kg.num_edges == 0 or kg.num_active == 0:
        raise InputError(f"KG {kg.name!r} has no active edges: nothing to simulate")
    if args.runs < 1:
        raise InputError(f"--runs must be >= 1, got {args.runs}")
    if args.epochs <= 0:
        raise InputError(f"--epochs (the query budget) must be > 0, got {args.epochs}")
    specs = list(DEFAULT_SPECS)
    if args.samplers:
        known = {s.label: s for s in DEFAULT_SPECS}
        unknown = [s for s in args.samplers if s not in known]
        if unknown:
            raise InputError(f"unknown sampler configuration(s) {unknown}; choose from {', '.join(known)}")
        if "brute-force" not in args.samplers:
            args.samplers.insert(0, "brute-force")  # the reference every ratio is measured against
        specs = [known[s] for s in args.samplers]
    if args.theta:
        theta = load_theta(args.theta, kg.num_edges)
        theta_source = str(args.theta)
    else:
        theta = theta_for_kg(kg, ThetaSettings(correlation=args.correlation), seed=args.theta_seed)
        theta_source = f"generated ({args.correlation}, seed {args.theta_seed})"
    top_k = [k for k in args.top_k if k <= kg.num_active] or [kg.num_active]
    result = run_study_on_kg(kg, theta, specs=specs, batch=args.batch_size, epochs=args.epochs,
                             seeds=range(args.runs), top_k=top_k)
    ratio_epochs = min(4.5, args.epochs)  # KGLens' reference point, or the whole budget if smaller
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "graph": kg.name,
        "theta": theta_source,
        "settings": {"batch": args.batch_size, "epochs": args.epochs, "seeds": args.runs, "top_k": top_k},
        **result.to_json(epochs=ratio_epochs),
    }
    json_path = out / "study.json"
    json_path.write_text(json.dumps(payload, allow_nan=False))
    png_path = plot_study(result, out / "study.png", title=f"{kg.name}: θ* {theta_source}")

    k_main = max(top_k)
    ratios = result.ratios(epochs=ratio_epochs, k=k_main)
    marks = sorted({e for e in (1, 2, ratio_epochs) if e <= args.epochs})
    table = Table(title=f"{kg.name}: {result.num_active} active edges, θ* {theta_source}, "
                        f"{args.runs} runs, batch {args.batch_size}")
    table.add_column("sampler", no_wrap=True)
    for e in marks:
        table.add_column(f"top-{k_main} MSE @ {e:g} ep", justify="right")
    table.add_column(f"queries to BF@{ratio_epochs:g}ep MSE (ratio)", justify="right")
    for lab in result.mse:
        vals = mse_at_epochs(result, lab, k_main, marks)
        r = ratios[lab]
        table.add_row(lab, *(f"{v:.4f}" for v in vals), f"{r:.3f}" if math.isfinite(r) else "not reached")
    console = Console()
    console.print(table)
    console.print(f"wrote {json_path} and {png_path}")
    return 0

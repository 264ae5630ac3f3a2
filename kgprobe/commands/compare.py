"""``kgprobe compare RUN1 RUN2 …``: models side by side on the same KG, with subsumption η.

η(A | B) is the share of facts model A knows (more right than wrong answers) that model
B also knows, over the edges both runs probed (ZP-LKE, Table 2).
"""

from __future__ import annotations

import argparse
import json


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="compare runs of several models on the same KG (η subsumption)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="two or more run files")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from kgprobe.api import open_run
    from kgprobe.compare import compare_runs
    from kgprobe.errors import InputError

    if len(args.runs) < 2:
        raise InputError("compare needs at least two run files")
    runs = [open_run(r) for r in args.runs]
    try:
        names = _short_names(runs)
        cmp = compare_runs(runs, names)
    finally:
        for r in runs:
            r.close()
    if args.json:
        print(json.dumps(cmp.to_dict(), indent=1))
        return 0
    out = Console(highlight=False)
    t = Table(title="rates over each run's probed edges", title_justify="left")
    t.add_column("run")
    for col in ("probed", "win", "zero-sense", "all-sense", "KG accuracy (unbiased)"):
        t.add_column(col, justify="right")
    for name, m, est in zip(cmp.names, cmp.metrics, cmp.estimates):
        est_txt = f"{est['estimate']:.1%} [{est['low']:.1%}, {est['high']:.1%}]" if est else "n/a"
        t.add_row(name, str(m["probed_edges"]), f"{m['win_rate']:.1%}", f"{m['zero_sense_rate']:.1%}",
                  f"{m['all_sense_rate']:.1%}", est_txt)
    out.print(t)
    e = Table(title="subsumption η(row | column): share of facts the row knows that the column also knows "
                    "(edges probed by both)", title_justify="left")
    e.add_column("")
    for i, _ in enumerate(cmp.names):
        e.add_column(f"[{i + 1}]", justify="right")
    for i, name in enumerate(cmp.names):
        cells = [
            "–" if i == j else ("n/a" if cmp.eta[i][j] is None else f"{cmp.eta[i][j]:.2f} ({cmp.common[i][j]})")
            for j in range(len(cmp.names))
        ]
        e.add_row(f"[{i + 1}] {name}", *cells)
    out.print(e)
    _print_differences(out, cmp.differences)
    return 0


def _print_differences(out, diffs: dict | None) -> None:
    """Accuracy differences with 95 % intervals; * = significant after Holm's correction."""
    from rich.table import Table

    if not diffs or not diffs["differences"]:
        return
    t = Table(title=f"accuracy difference A − B (95% CI; * significant at family-wise {diffs['alpha']:.0%} "
                    f"after Holm's correction over {diffs['family_size']} tests)", title_justify="left")
    for col in ("A − B", "scope", "difference", "test", "p (Holm)"):
        t.add_column(col, justify="right" if col in ("difference", "p (Holm)") else "left")
    for r in diffs["differences"]:
        pair = f"[{r['pair'][0] + 1}] − [{r['pair'][1] + 1}]"
        if not r["tested"]:
            t.add_row(pair, r["label"], f"n/a ({r['reason']})", "", "")
            continue
        mark = " *" if r["significant"] else ""
        t.add_row(pair, r["label"],
                  f"{r['difference'] * 100:+.1f} pt [{r['low'] * 100:+.1f}, {r['high'] * 100:+.1f}]{mark}",
                  r["test"], f"{r['p_holm']:.3g}")
    out.print(t)


def _short_names(runs) -> list[str]:
    """Model identity plus method; the file name when two runs would look the same."""
    from pathlib import Path

    names = [f"{r.model_name} · {r.config.method}" for r in runs]
    if len(set(names)) < len(names):
        names = [f"{n} · {Path(r.path).name}" for n, r in zip(names, runs)]
    return names

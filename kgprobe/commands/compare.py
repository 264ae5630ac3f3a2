"""``kgprobe compare RUN1 RUN2 …``: models side by side on the same KG, with subsumption η.

η(A | B) is the share of facts model A knows (more right than wrong answers) that model
B also knows, over the edges both runs probed (ZP-LKE, Table 2).

Runs are compared only when they measured the same thing: the same KG (content hash),
method and every probe option, sampler and its options, batch size, propagation weight
and prior (see docs/reports.md, "What exactly was measured"). Otherwise compare exits with
code 2 naming every difference; --allow-different compares anyway under a banner.
"""

from __future__ import annotations

import argparse
import json


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="compare runs of several models on the same KG (η subsumption)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="two or more run files")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--output", metavar="PATH", help="write the JSON comparison to PATH (implies --json)")
    p.add_argument("--allow-different", action="store_true",
                   help="compare runs whose protocols differ (method, probe options, sampler, KG …), "
                   "with a banner naming the differences")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from kgprobe.api import find_run, open_run
    from kgprobe.baselines import baseline_text
    from kgprobe.compare import compare_runs
    from kgprobe.errors import InputError
    from kgprobe.store.transactions import writer_active

    if len(args.runs) < 2:
        raise InputError("compare needs at least two run files")
    # Before any run is opened: the check opens and closes a descriptor of each file, which
    # would drop the locks SQLite holds on a file this process already reads.
    paths = [find_run(r) for r in args.runs]
    being_written = [writer_active(p) for p in paths]
    runs = [open_run(p) for p in paths]
    try:
        differences = check_protocols(runs, args.runs, allow_different=args.allow_different)
    except BaseException:
        for r in runs:
            r.close()
        raise
    try:
        names = _short_names(runs)
        protocols = [r.protocol for r in runs]
        cmp = compare_runs(runs, names, being_written=being_written)
    finally:
        for r in runs:
            r.close()
    if args.json or args.output:
        payload = cmp.to_dict()
        payload["protocols"] = protocols
        payload["protocol_differences"] = [
            {"runs": [i + 1, j + 1], "field": d.field, "values": [d.a, d.b]} for i, j, d in differences
        ]
        text = json.dumps(payload, indent=1, default=str)
        if args.output:
            from kgprobe.commands.report import write_output

            write_output(args.output, text)
        else:
            print(text)
        return 0
    out = Console(highlight=False)
    old = [i + 1 for i, p in enumerate(protocols) if p.get("reconstructed")]
    if old:
        out.print(f"note: run(s) {', '.join(f'[{i}]' for i in old)} predate recorded protocols; theirs were "
                  "rebuilt from their settings with today's probe defaults, which those runs may not have used",
                  markup=False)
    if differences:
        out.print("[bold red]WARNING: these runs measured different things (--allow-different); "
                  "differences below reflect the protocols as much as the models:[/]")
        for i, j, d in differences:
            out.print(f"  [{i + 1}] vs [{j + 1}] {d}", markup=False)
    # Every table names the runs by number; the legend gives each number's model, method
    # (and file, where two would look the same) once, so the tables fit 80 columns.
    out.print("runs:", markup=False)
    for i, name in enumerate(cmp.names):
        out.print(f"  [{i + 1}] {name}", markup=False)
    for line in unfinished_notes(cmp.states or [], args.runs):
        out.print(line, markup=False)
    _print_context(out, cmp.names, protocols)
    t = Table(title="rates over each run's probed edges", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False)
    t.add_column("run", no_wrap=True)
    for col in ("probed\nedges", "win", "zero-\nsense", "all-\nsense", "KG accuracy\n(unbiased, 95% CI)",
                "chance /\nmajority / null"):
        t.add_column(col, justify="right", no_wrap=True)
    baselines = cmp.baselines or [{}] * len(cmp.names)
    for i, (m, est, base) in enumerate(zip(cmp.metrics, cmp.estimates, baselines)):
        est_txt = f"{est['estimate']:.1%} [{est['low']:.1%}, {est['high']:.1%}]" if est else "n/a"
        t.add_row(f"[{i + 1}]", str(m["probed_edges"]), f"{m['win_rate']:.1%}", f"{m['zero_sense_rate']:.1%}",
                  f"{m['all_sense_rate']:.1%}", est_txt, baseline_text((base or {}).get("kg"), digits=0))
    out.print(t)
    # A title is wrapped to its table's width, and this table is narrow: the line goes first.
    out.print("subsumption η(row | column): share of facts the row knows that the column also knows "
              "(edges probed by both)", markup=False)
    e = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    e.add_column("")
    for i, _ in enumerate(cmp.names):
        e.add_column(f"[{i + 1}]", justify="right", no_wrap=True)
    for i, _ in enumerate(cmp.names):
        cells = [
            "–" if i == j else ("n/a" if cmp.eta[i][j] is None else f"{cmp.eta[i][j]:.2f} ({cmp.common[i][j]})")
            for j in range(len(cmp.names))
        ]
        e.add_row(f"[{i + 1}]", *cells)
    out.print(e)
    _print_differences(out, cmp.differences, baselines)
    return 0


#: The table's name for a test whose full name would take a column of its own; the variance
#: line under the tables spells it out.
SHORT_TESTS = {"paired on the shared floor, unpaired on the rest": "part-paired"}


def _print_differences(out, diffs: dict | None, baselines: list[dict] | None = None) -> None:
    """Accuracy differences with 95 % intervals; * = significant after Holm's correction."""
    from rich import box
    from rich.table import Table

    from kgprobe.baselines import baseline_text

    if not diffs or not diffs["differences"]:
        return
    # No vertical rules, one space of padding, the difference with its interval on one line,
    # a short name for the part-paired test, and one table per pair of runs with the pair
    # named above it: each table fits an 80-column terminal with predicate names of up to
    # 15 characters on one line (the report has the baselines with one decimal).
    pairs = sorted({tuple(r["pair"]) for r in diffs["differences"]})
    head = (f"accuracy difference [{pairs[0][0] + 1}] − [{pairs[0][1] + 1}]" if len(pairs) == 1
            else "accuracy differences A − B")
    # A title is wrapped to its table's width: titles are printed as lines of their own.
    out.print(f"{head}, points (95% CI; * significant at family-wise {diffs['alpha']:.0%} after Holm's "
              f"correction over {diffs['family_size']} tests)", markup=False)
    for pair in pairs:
        if len(pairs) > 1:
            out.print(f"[{pair[0] + 1}] − [{pair[1] + 1}]", markup=False)
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
        t.add_column("scope", min_width=10)
        t.add_column("difference", justify="right", no_wrap=True)
        t.add_column("test", no_wrap=True)
        t.add_column("p (Holm)", justify="right", no_wrap=True)
        t.add_column("A's chance /\nmaj. / null", justify="right", no_wrap=True)
        base = (baselines or [{}] * (pair[0] + 1))[pair[0]] or {}
        for r in (r for r in diffs["differences"] if tuple(r["pair"]) == pair):
            scope_base = (base.get("kg") if r["scope"] == "KG"
                          else (base.get("by_predicate") or {}).get(r.get("predicate")))
            if not r["tested"]:
                t.add_row(r["label"], f"n/a ({r['reason']})", "", "", baseline_text(scope_base, digits=0))
                continue
            mark = " *" if r["significant"] else ""
            t.add_row(r["label"],
                      f"{r['difference'] * 100:+.1f} [{r['low'] * 100:+.1f}, {r['high'] * 100:+.1f}]{mark}",
                      SHORT_TESTS.get(r["test"], r["test"]), f"{r['p_holm']:.3g}",
                      baseline_text(scope_base, digits=0))
        out.print(t)
    # Which variance each kind of test used, and where: the KG's and the predicates' unpaired
    # tests use different ones, so each entry says which rows it covers.
    scopes: dict[tuple[str, str], set[str]] = {}
    for r in diffs["differences"]:
        if r["tested"]:
            scopes.setdefault((r["test"], r["variance"]), set()).add("KG" if r["scope"] == "KG" else "predicates")
    variances = []
    for (test, variance), where in sorted(scopes.items()):
        rows = " and ".join(sorted(where))
        short = SHORT_TESTS.get(test)
        variances.append(f"{short} ({rows}; {test}): {variance}" if short else f"{test} ({rows}): {variance}")
    if variances:
        out.print("variance — " + "; ".join(variances), markup=False)
    for r in diffs["differences"]:
        if r["scope"] == "KG" and r["tested"] and r.get("unpaired_reason"):
            out.print(f"[{r['pair'][0] + 1}] and [{r['pair'][1] + 1}] compare unpaired on the KG: "
                      f"{r['unpaired_reason']}", markup=False)


def unfinished_notes(states: list[dict], refs: list[str]) -> list[str]:
    """One line per run that has not finished: how far it got and what to do about it."""
    from kgprobe.runs import run_completion

    lines = []
    for i, (st, ref) in enumerate(zip(states, refs)):
        kind = run_completion(st["status"], st["being_written"])
        if kind in ("finished", "unknown"):  # a file without a status says nothing either way
            continue
        budget = f" of {st['budget']}" if st.get("budget") else ""
        got = f"{st['rounds']} round{'' if st['rounds'] == 1 else 's'}, {st['queries']}{budget} queries"
        if kind == "written now":
            lines.append(f"note: run [{i + 1}] is still being written by another kgprobe process ({got} so far): "
                         "its figures are those of a partial run; compare again when it has finished")
        elif kind == "killed":
            lines.append(f"note: run [{i + 1}] did not finish: its process ended without a final record (it was "
                         f"killed, or its machine stopped) after {got}; its figures are those of a partial run. "
                         f"`kgprobe resume {ref}` plays the rest")
        else:
            lines.append(f"note: run [{i + 1}] did not finish ({st['status']} after {got}); its figures are those "
                         f"of a partial run. `kgprobe resume {ref}` plays the rest")
    return lines


def _short_names(runs) -> list[str]:
    """Model identity plus method; the file name when two runs would look the same."""
    from pathlib import Path

    names = [f"{r.model_name} · {r.config.method}" for r in runs]
    if len(set(names)) < len(names):
        names = [f"{n} · {Path(r.path).name}" for n, r in zip(names, runs)]
    return names


def check_protocols(runs, refs, *, allow_different: bool = False) -> list:
    """``(i, j, Difference)`` between run 1 and every other run; InputError unless allowed."""
    from kgprobe.errors import InputError
    from kgprobe.protocol import protocol_differences

    base = runs[0].protocol
    found = []
    for j, run in enumerate(runs[1:], start=1):
        found += [(0, j, d) for d in protocol_differences(base, run.protocol)]
    if found and not allow_different:
        lines = "\n".join(f"  {refs[0]} vs {refs[j]}: {d}" for _i, j, d in found)
        what = ("these runs were made on different KGs" if any(d.field.startswith("kg.") for _i, _j, d in found)
                else "these runs did not measure the same thing")
        raise InputError(
            f"{what}, so their numbers are not comparable:\n"
            f"{lines}\nre-run one of them with the other's settings, or pass --allow-different to compare "
            "anyway (the output then carries a warning)"
        )
    return found


def _print_context(out, names, protocols) -> None:
    """The protocol fields that may differ between comparable runs (model, dtype, seed …),
    one column per run, only those that do differ."""
    import json

    from rich import box
    from rich.table import Table

    from kgprobe.protocol import CONTEXT_FIELDS, field_at

    rows = []

    def differing(field, values):
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) < 2:
            return
        if all(isinstance(v, dict) for v in values):
            # A group of fields (the design, convergence): the keys that differ, one row each.
            for key in sorted({k for v in values for k in v}):
                differing(f"{field}.{key}", [v.get(key) for v in values])
        else:
            rows.append((field, values))

    for field in CONTEXT_FIELDS:
        differing(field, [field_at(p, field) for p in protocols])
    if not rows:
        return
    out.print("what differs between the runs besides the measurement protocol:", markup=False)
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("field")
    for i, _ in enumerate(names):
        t.add_column(f"[{i + 1}]")
    for field, values in rows:
        t.add_row(field, *["–" if v is None else str(v) for v in values])
    out.print(t)

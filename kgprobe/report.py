"""Reports of one run: JSON for machines, Markdown and a self-contained HTML page for people.

Contents (KGLens §3.4, figs. 6–8):

* the run's settings and the overall win / zero-sense / all-sense rates over probed
  edges, next to the unbiased KG-level accuracy estimate (the probed set is a biased
  sample: Thompson sampling seeks out weak edges);
* metric convergence against model queries;
* zero-sense rate per predicate and per entity group (tables + bar charts);
* a dotted heatmap subject entity × predicate: colour = zero-sense rate, dot size =
  share of the entity's probed edges in that predicate (KGLens fig. 6; here darker
  always means weaker) and a per-entity table (figs. 7–8);
* the weakest facts with every question asked and the model's answers.

The HTML embeds its plots as base64 PNG and needs nothing else; the Markdown links PNG
files written next to it.
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from kgprobe.api import Run
from kgprobe.engine import metrics_to_dict
from kgprobe.errors import StoreError

#: Rows of the entity heatmap and entity table, facts in the weakest list.
TOP_ENTITIES = 20
TOP_WEAKEST = 20


def report_data(run: Run, *, top_entities: int = TOP_ENTITIES, top_weakest: int = TOP_WEAKEST) -> dict:
    """Everything the report shows, as JSON-able data."""
    data = run.summary()
    data["history"] = [
        {k: h[k] for k in ("round", "queries", "queries_spent", "elapsed", "replayed", "converged", "metrics")}
        for h in run.history()
    ]
    data["predicate_active_edges"] = _active_per_predicate(run)
    data["by_entity"] = {
        k: metrics_to_dict(v)
        for k, v in sorted(run.by_entity(min_edges=1).items(), key=lambda kv: (-kv[1].probed_edges, kv[0]))[
            :top_entities
        ]
    }
    data["heatmap"] = _heatmap(run, top_entities)
    data["weakest"] = [asdict(w) for w in run.weakest(top_weakest)]
    data["probes"], data["phrasings"] = _probe_phrasings(run)
    return data


def _probe_phrasings(run: Run) -> tuple[list[dict], dict]:
    """Every probe with the phrasing it used, and a check that no edge was asked the same
    question twice without the repeat being marked (a marked repeat is not new evidence)."""
    rows = []
    asked: dict[int, set[str]] = {}
    edges_probed: dict[int, int] = {}
    repeated = unmarked_identical = 0
    for p in run.store.probes():
        phrasing = p.detail.get("phrasing")
        is_repeat = bool(p.detail.get("repeated", False))
        rows.append({"round": p.round, "pos": p.pos, "edge": p.edge, "correct": p.correct, "question": p.question,
                     "phrasing": phrasing, "repeated": is_repeat})
        if phrasing is None:
            continue  # methods without phrasings (ZP-LKE) vary their prompts by construction
        edges_probed[p.edge] = edges_probed.get(p.edge, 0) + 1
        if is_repeat:
            repeated += 1
        elif p.question in asked.setdefault(p.edge, set()):
            unmarked_identical += 1
        asked[p.edge].add(p.question)
    summary = {
        "probes_with_phrasing": sum(edges_probed.values()),
        "edges_probed_more_than_once": sum(n > 1 for n in edges_probed.values()),
        "repeated_probes": repeated,
        "unmarked_identical_questions": unmarked_identical,
    }
    return rows, summary


def _active_per_predicate(run: Run) -> dict[str, int]:
    kg = run.kg
    counts = np.bincount(kg.predicate_of[kg.active], minlength=len(kg.predicates))
    return {kg.predicates[kg.predicate_id(i)].label: int(c) for i, c in enumerate(counts)}


def _heatmap(run: Run, top: int) -> dict:
    kg = run.kg
    s, f = run.successes, run.failures
    probed = np.flatnonzero((s + f) > 0)
    if probed.size == 0:
        return {"rows": [], "cols": [], "zero_sense": [], "share": []}
    subj, pred = kg.subjects[probed], kg.predicate_of[probed]
    uniq, counts = np.unique(subj, return_counts=True)
    order = np.lexsort((uniq, -counts))[:top]
    rows = uniq[order]
    col_ids = np.unique(pred[np.isin(subj, rows)])
    zs = np.full((len(rows), len(col_ids)), np.nan)
    share = np.zeros_like(zs)
    for i, r in enumerate(rows):
        mine = subj == r
        for c, p in enumerate(col_ids):
            cell = probed[mine & (pred == p)]
            if cell.size:
                zs[i, c] = float(np.mean(s[cell] == 0))
                share[i, c] = cell.size / mine.sum()
    return {
        "rows": [kg.label(kg.entity_id(int(r))) for r in rows],
        "cols": [kg.predicates[kg.predicate_id(int(p))].label for p in col_ids],
        "zero_sense": [[None if np.isnan(v) else float(v) for v in row] for row in zs],
        "share": share.tolist(),
    }


def _plots(data: dict) -> dict[str, bytes]:
    from kgprobe import report_plots as rp

    plots = {}
    if data["history"]:
        plots["convergence"] = rp.convergence_plot(data["history"], data.get("accuracy_estimate"))
    for key, title in (("by_predicate", "Zero-sense rate per predicate"), ("by_group", "Zero-sense rate per entity group")):
        items = sorted(data[key].items(), key=lambda kv: -kv[1]["zero_sense_rate"])
        if items:
            plots[key] = rp.bar_plot(
                [k for k, _ in items], [v["zero_sense_rate"] for _, v in items],
                [v["probed_edges"] for _, v in items], title,
            )
    hm = data["heatmap"]
    if hm["rows"] and hm["cols"]:
        zs = np.array([[np.nan if v is None else v for v in row] for row in hm["zero_sense"]], dtype=float)
        plots["heatmap"] = rp.dot_heatmap(
            hm["rows"], hm["cols"], zs, np.asarray(hm["share"], dtype=float),
            "Zero-sense rate by subject entity and predicate",
        )
    return plots


# -- rendering ------------------------------------------------------------------------------
def _pct(x) -> str:
    return "–" if x is None else f"{x:.1%}"


def _metric_rows(groups: dict, active: dict | None = None) -> list[list[str]]:
    rows = []
    for name, m in sorted(groups.items(), key=lambda kv: (-kv[1]["zero_sense_rate"], kv[0])):
        row = [name, str(m["probed_edges"])]
        if active is not None:
            row.append(str(active.get(name, "")))
        rows += [row + [_pct(m["win_rate"]), _pct(m["zero_sense_rate"]), _pct(m["all_sense_rate"])]]
    return rows


def _sections(data: dict) -> list[tuple[str, str, list[str], list[list[str]], str | None]]:
    """(kind, title, header, rows, plot key) blocks shared by the Markdown and HTML renderers."""
    cfg = data["config"]
    est = data.get("accuracy_estimate")
    m = data["metrics"]
    est_txt = (
        f"{est['estimate']:.1%} (95% CI {est['low']:.1%} – {est['high']:.1%}, n = {est['n']} audit probes)"
        if est else "not available (no uniform audit sample in this run)"
    )
    settings = [
        ["model", data["model"]],
        ["KG", f"{data['kg']['name']} ({data['kg']['active_edges']} active of {data['kg']['edges']} edges)"],
        ["method", cfg["method"]],
        ["sampler", f"{cfg['sampler']} {json.dumps(cfg['sampler_options']) if cfg['sampler_options'] else ''}".strip()],
        ["batch size / seed", f"{cfg['batch_size']} / {cfg['seed']}"],
        ["budget", f"{data['queries_spent']} of {cfg['budget'] or 'unlimited'} queries in {data['rounds']} rounds"],
        ["status", f"{data['status']} ({data['stop_reason'] or '–'})"],
    ]
    overall = [
        ["win rate (probed edges)", _pct(m["win_rate"])],
        ["zero-sense rate (probed edges)", _pct(m["zero_sense_rate"])],
        ["all-sense rate (probed edges)", _pct(m["all_sense_rate"])],
        ["probed edges", str(m["probed_edges"])],
        ["KG-level accuracy, unbiased", est_txt],
    ]
    head = ["", "probed", "win", "zero-sense", "all-sense"]
    sections = [
        ("table", "Run", ["setting", "value"], settings, None),
        ("table", "Results", ["metric", "value"], overall, "convergence"),
        ("table", "Per predicate", ["predicate", "probed", "active", "win", "zero-sense", "all-sense"],
         _metric_rows(data["by_predicate"], data["predicate_active_edges"]), "by_predicate"),
        ("table", "Per entity group (of the subject)", head, _metric_rows(data["by_group"]), "by_group"),
        ("table", f"Per entity (the {len(data['by_entity'])} most-probed subjects)", head,
         _metric_rows(data["by_entity"]), "heatmap"),
    ]
    weak_rows = []
    for w in data["weakest"]:
        answers = "; ".join(
            f"r{a['round']}: {'✔' if a['correct'] else '✘'} {a['answer']!r}" for a in w["answers"][-3:]
        )
        question = _tail(w["answers"][-1]["question"]) if w["answers"] else ""
        weak_rows.append([
            f"({w['subject']}, {w['predicate']}, {w['object']})", f"{w['successes']}/{w['failures']}",
            f"{w['error_estimate']:.2f}", question, answers,
        ])
    sections.append(("table", "Weakest facts", ["fact", "right/wrong", "error", "last question", "answers"],
                     weak_rows, None))
    return sections


_CAPTIONS = {
    "convergence": "Metrics against model queries (dashed: unbiased KG-level accuracy with its 95% interval).",
    "by_predicate": "Zero-sense rate per predicate.",
    "by_group": "Zero-sense rate per entity group.",
    "heatmap": "Dot colour: zero-sense rate of the entity's edges with that predicate (darker = weaker); "
    "dot size: share of the entity's probed edges.",
}


def _tail(text: str, limit: int = 140) -> str:
    """The end of a long question: a zero-prompt context ends with the subject asked about."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _md_cell(text: str, limit: int = 160) -> str:
    text = str(text).replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_markdown(data: dict, plot_files: dict[str, str]) -> str:
    out = [f"# kgprobe report: {data['model']} on {data['kg']['name']}", ""]
    for _, title, header, rows, plot in _sections(data):
        out += [f"## {title}", ""]
        if rows:
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "---|" * len(header))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
        else:
            out.append("(nothing probed yet)")
        out.append("")
        if plot and plot in plot_files:
            out += [f"![{_CAPTIONS[plot]}]({plot_files[plot]})", "", f"*{_CAPTIONS[plot]}*", ""]
    out.append(f"Run file: `{data['run']}`")
    return "\n".join(out) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f0f3f7} td.num{text-align:right} img{max-width:100%} figcaption{color:#555;font-size:.85em}
"""


def render_html(data: dict, plots: dict[str, bytes]) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>kgprobe report: {e(data['model'])} on {e(data['kg']['name'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>kgprobe report: {e(data['model'])} on {e(data['kg']['name'])}</h1>",
    ]
    for _, title, header, rows, plot in _sections(data):
        parts.append(f"<h2>{e(title)}</h2>")
        if rows:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
            for row in rows:
                parts.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>")
            parts.append("</table>")
        else:
            parts.append("<p>(nothing probed yet)</p>")
        if plot and plot in plots:
            b64 = base64.b64encode(plots[plot]).decode()
            parts.append(f"<figure><img alt='{e(_CAPTIONS[plot])}' src='data:image/png;base64,{b64}'>"
                         f"<figcaption>{e(_CAPTIONS[plot])}</figcaption></figure>")
    parts.append(f"<p>Run file: <code>{e(data['run'])}</code></p></body></html>")
    return "\n".join(parts) + "\n"


def write_report(run: Run, out_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Write ``<run>.md``, ``<run>.html`` and ``<run>-plots/*.png``; return their paths."""
    run_path = Path(run.path)
    out = Path(out_dir) if out_dir else run_path.parent
    stem = run_path.name.removesuffix(".kgrun")
    data = report_data(run)
    plots = _plots(data)
    try:
        out.mkdir(parents=True, exist_ok=True)
        plot_dir = out / f"{stem}-plots"
        plot_files = {}
        if plots:
            plot_dir.mkdir(exist_ok=True)
            for name, png in plots.items():
                (plot_dir / f"{name}.png").write_bytes(png)
                plot_files[name] = f"{plot_dir.name}/{name}.png"
        md, page = out / f"{stem}.md", out / f"{stem}.html"
        _atomic_write(md, render_markdown(data, plot_files))
        _atomic_write(page, render_html(data, plots))
    except OSError as exc:
        raise StoreError(f"cannot write the report into {out}: {exc.strerror}; choose another --out") from None
    return {"markdown": str(md), "html": str(page), "plots": str(plot_dir) if plots else ""}


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)

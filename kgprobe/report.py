"""Reports of one run: JSON for machines, Markdown and a self-contained HTML page for people.

Contents (KGLens §3.4, figs. 6–8):

* what exactly was measured: the run's protocol (:mod:`kgprobe.protocol`) — method and
  every probe option, sampler, model with its weights' format, quantization, dtype and
  device, KG name and content hash, seed, library versions, date;
* the overall win / zero-sense / all-sense rates over probed
  edges, next to the unbiased KG-level accuracy estimate (the probed set is a biased
  sample: Thompson sampling seeks out weak edges);
* metrics against model queries, with the unbiased KG estimate's history and its
  95% band (series that coincide are drawn once, and the caption says why);
* accuracy per predicate next to its chance level, and per entity group, ranked the
  same way everywhere (:mod:`kgprobe.ranking`);
* a dotted heatmap subject entity × predicate: colour = zero-sense rate, dot size =
  share of the entity's probed edges in that predicate (KGLens fig. 6; here darker
  always means weaker) and a per-entity table (figs. 7–8);
* the weakest facts with every question asked and the model's answers.

The HTML is rendered from a jinja2 template (``kgprobe/templates/report.html.j2``) and
embeds its plots as base64 PNG, so it needs nothing else; the Markdown links PNG files
written next to it.
"""

from __future__ import annotations

import base64
import html
import time
import os
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np

from kgprobe.runs import Run, run_completion
from kgprobe.engine import metrics_to_dict
from kgprobe.errors import InputError, StoreError

#: Rows of the entity heatmap and entity table, facts in the weakest list.
TOP_ENTITIES = 20
TOP_WEAKEST = 20
#: Probed edges a subject needs to be listed among the most-probed subjects.
MIN_ENTITY_EDGES = 2
#: Lines of a zero-prompt question shown as its "last question" (the asked line last).
QUESTION_LINES = 4


def status_text(data: dict) -> str:
    """The run's status in words; an unfinished run says its figures are partial, and how to go on.

    Short enough for one report cell (160 characters); the report names the run file.
    """
    status, reason = data.get("status"), data.get("stop_reason") or ""
    kind = run_completion(status, data.get("being_written"))
    resume = "`kgprobe resume` on the run file plays the rest"
    if kind == "finished":
        return f"finished ({reason or '–'})"
    if kind == "written now":
        return "running: another kgprobe process is writing it now, so these are a partial run's figures"
    if kind == "killed":
        return ("did not finish: its process ended without a final record (killed, or its machine stopped); "
                f"partial figures, {resume}")
    if kind == "running":
        return f"running, or stopped without a final record: partial figures; {resume}"
    if kind == "unknown":
        return "not recorded"
    return f"did not finish ({status}): partial figures; {resume}"


def report_data(run: Run, *, top_entities: int = TOP_ENTITIES, top_weakest: int = TOP_WEAKEST,
                being_written: bool | None = None) -> dict:
    """Everything the report shows, as JSON-able data.

    ``being_written``: whether another process holds the run's writer lock now
    (:func:`kgprobe.store.transactions.writer_active`, checked by the caller before it
    opened the file); None when not checked. It tells a run still going from one that was
    killed, whose file says ``running`` too.
    """
    from kgprobe.ranking import most_probed

    data = run.summary()
    data["being_written"] = being_written
    data["history"] = [
        {k: h[k] for k in ("round", "queries", "queries_spent", "elapsed", "replayed", "converged", "metrics")}
        for h in run.history()
    ]
    data["accuracy_history"] = _accuracy_history(run)
    data["max_probes_per_edge"] = int((run.successes + run.failures).max()) if run.kg.num_edges else 0
    data["predicate_active_edges"] = _active_per_predicate(run)
    data["predicate_chance"] = _chance_per_predicate(run)
    data.update(_baselines(run))
    # Only subjects with two or more probed edges: when each has one, ranking them by
    # "most probed" would just list names in alphabetical order.
    entities = run.by_entity(min_edges=MIN_ENTITY_EDGES)
    # One definition of "most probed" (most probed edges, ties by label) for table and heatmap.
    top = most_probed({k: v.probed_edges for k, v in entities.items()}, {}, top_entities)
    data["by_entity"] = {k: metrics_to_dict(entities[k]) for k in top}
    data["heatmap"] = _heatmap(run, top)
    data["weakest"] = [asdict(w) for w in run.weakest(top_weakest)]
    data["rates_note"] = RATES_NOTE
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


def run_baselines(run: Run) -> dict:
    """The no-knowledge baselines of a run (:func:`kgprobe.baselines.baselines`) with its
    stored null-model measurement when one matches its protocol; empty when the probe
    cannot be built."""
    import json
    import warnings

    from kgprobe.baselines import baselines

    cfg = run.config
    null = json.loads(run.store.meta(NULL_META) or "null")
    if null and null.get("protocol") != _null_key(run):
        null = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = baselines(run.kg, cfg.method, cfg.probe_options, seed=cfg.seed, null=null)
    except InputError:
        return {}
    found["null_model"] = (null or {}).get("model")
    return found


def _baselines(run: Run) -> dict:
    """``predicate_baseline`` (predicate id -> chance, majority, null, …), ``group_baseline``
    and ``baseline_warnings`` of the run's protocol (:mod:`kgprobe.baselines`)."""
    from kgprobe.baselines import dominated

    found = run_baselines(run)
    if not found:
        return {"predicate_baseline": {}, "group_baseline": {}, "kg_baseline": None, "baseline_warnings": []}
    probed = np.flatnonzero((run.successes + run.failures) > 0)
    probed_predicates = {run.kg.predicate_id(int(i)) for i in np.unique(run.kg.predicate_of[probed])}
    return {
        "predicate_baseline": found["by_predicate"],
        "group_baseline": found["by_group"],
        "kg_baseline": found["kg"],
        "baseline_warnings": dominated({k: v for k, v in found["by_predicate"].items() if k in probed_predicates}),
        "null_model": found["null_model"],
    }


#: Run-file meta key of a measured null-model rate (``kgprobe report RUN --null-model``).
NULL_META = "null_baseline"


def _null_key(run: Run) -> dict:
    """What a null measurement must match to stand for this run: KG, method, probe options."""
    from kgprobe.store import kg_fingerprint

    return {"kg": kg_fingerprint(run.kg), "method": run.config.method,
            "probe_options": dict(run.config.probe_options)}


def measure_null_baseline(path: str, model, spec: str, *, renderings: int | None = None) -> dict:
    """Measure the null model's rate per predicate on the run at ``path`` and store it in the run file."""
    import json

    from kgprobe.baselines import NULL_RENDERINGS, measure_null
    from kgprobe.inputs import find_run
    from kgprobe.store import RunStore

    # Writable from the start: a run being written elsewhere is refused before the measurement, not after it.
    with Run(RunStore.open(find_run(path), writable=True, verify=True)) as run:
        cfg = run.config
        measured = measure_null(model, run.kg, cfg.method, cfg.probe_options, seed=cfg.seed,
                                renderings=renderings or NULL_RENDERINGS)
        measured["model"] = spec
        measured["protocol"] = _null_key(run)
        run.store.set_meta(NULL_META, json.dumps(measured, sort_keys=True))
    return measured


def _active_per_predicate(run: Run) -> dict[str, int]:
    kg = run.kg
    counts = np.bincount(kg.predicate_of[kg.active], minlength=len(kg.predicates))
    return {kg.predicates[kg.predicate_id(i)].label: int(c) for i, c in enumerate(counts)}


def _accuracy_history(run: Run) -> list[dict]:
    """The unbiased KG accuracy estimate as it stood after each round (rounds with design probes)."""
    out = []
    for h in run.history():
        est = run.accuracy_estimate(up_to_round=h["round"])
        if est.n:
            out.append({"round": h["round"], "queries_spent": h["queries_spent"], **metrics_to_dict(est)})
    return out


def _chance_per_predicate(run: Run) -> dict[str, dict]:
    """Chance level of a random guess per predicate, over its probed edges (min, mean, max).

    Multiple-choice facts of one predicate can have fewer options when the predicate has
    few wrong candidates, so the chance level is a property of each edge; generation
    methods have chance 0.
    """
    from kgprobe.probes import make_probe

    cfg = run.config
    try:
        probe = make_probe(cfg.method, **cfg.probe_options)
    except Exception:
        return {}
    kg = run.kg
    probed = np.flatnonzero((run.successes + run.failures) > 0)
    per: dict[str, list[float]] = {}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in probed.tolist():
            label = kg.predicates[kg.predicate_id(int(kg.predicate_of[j]))].label
            per.setdefault(label, []).append(float(probe.chance_level(kg, int(j))))
    return {k: {"min": min(v), "mean": float(np.mean(v)), "max": max(v)}
            for k, v in per.items() if v and not all(np.isnan(v))}


def _heatmap(run: Run, subjects: list[str]) -> dict:
    """Rows: the given subject labels (most probed first), columns: their probed predicates."""
    kg = run.kg
    s, f = run.successes, run.failures
    probed = np.flatnonzero((s + f) > 0)
    if probed.size == 0 or not subjects:
        return {"rows": [], "cols": [], "zero_sense": [], "share": []}
    subj, pred = kg.subjects[probed], kg.predicate_of[probed]
    index_of = {}
    for idx in np.unique(subj).tolist():
        index_of.setdefault(kg.label(kg.entity_id(int(idx))), int(idx))
    rows = np.asarray([index_of[label] for label in subjects if label in index_of], dtype=np.int64)
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

    from kgprobe.ranking import weakest_first

    plots = {}
    if data["history"]:
        plots["convergence"] = rp.convergence_plot(data["history"], data.get("accuracy_history") or [],
                                                   series_groups(data["history"]))
    chance = data.get("predicate_chance") or {}
    for key, title in (("by_predicate", "Win rate per predicate (lowest first)"),
                       ("by_group", "Win rate per entity group (lowest first)")):
        items = weakest_first(data[key].items())
        if items:
            plots[key] = rp.bar_plot(
                [k for k, _ in items], [v["win_rate"] for _, v in items],
                [v["probed_edges"] for _, v in items], title,
                chance=[chance.get(k, {}).get("mean") for k, _ in items] if key == "by_predicate" else None,
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


#: The three rates over probed edges, in the order plots and tables show them.
SERIES = (("win_rate", "win rate"), ("zero_sense_rate", "zero-sense rate"), ("all_sense_rate", "all-sense rate"))


def series_groups(history: list[dict]) -> list[tuple[list[str], str]]:
    """The rate series grouped by identical values over every round: ``[(keys, why)]``.

    Two rates coincide when they say the same thing about the probed edges: with one
    probe per edge, "more right than wrong" (win) and "always right" (all-sense) are the
    same event, and zero-sense is its complement's mirror. Identical lines would hide one
    another, so the plot draws each group once and the caption names the reason.
    """
    groups: list[tuple[list[str], str]] = []
    for key, _ in SERIES:
        values = [h["metrics"][key] for h in history]
        for keys, _why in groups:
            if [h["metrics"][keys[0]] for h in history] == values:
                keys.append(key)
                break
        else:
            groups.append(([key], ""))
    out = []
    for keys, _ in groups:
        why = ""
        if set(keys) >= {"win_rate", "all_sense_rate"}:
            why = ("win rate and all-sense rate coincide: every probed edge so far has all its probes "
                   "answered alike (e.g. one probe per edge), so 'more right than wrong' = 'always right'")
        elif len(keys) > 1:
            why = "these rates are equal at every round"
        out.append((keys, why))
    return out


def _metric_rows(groups: dict, active: dict | None = None, chance: dict | None = None,
                 estimates: dict | None = None, *, ranked: bool = True,
                 baseline: dict | None = None) -> list[list[str]]:
    from kgprobe.estimators import format_estimate
    from kgprobe.ranking import weakest_first

    items = weakest_first(groups.items()) if ranked else list(groups.items())
    rows = []
    for name, m in items:
        row = [name, str(m["probed_edges"])]
        if active is not None:
            row.append(str(active.get(name, "")))
        if chance is not None:
            c = chance.get(name)
            if c is None:
                row.append("–")
            elif abs(c["max"] - c["min"]) < 1e-12:
                row.append(_pct(c["mean"]))
            else:
                row.append(f"{_pct(c['min'])}–{_pct(c['max'])}")
        if baseline is not None:
            b = baseline.get(name) or {}
            if chance is None:
                row.append(_pct(b.get("chance")))
            row += [_pct(b.get("majority")), _pct(b.get("null"))]
        row += [_pct(m["win_rate"]), _pct(m["zero_sense_rate"]), _pct(m["all_sense_rate"])]
        if estimates is not None:
            row.append(format_estimate(estimates.get(name)))
        rows.append(row)
    return rows


def by_label(estimates: dict | None) -> dict:
    """Estimates keyed by display label (predicate entries carry one) instead of id."""
    return {e.get("label", k): e for k, e in (estimates or {}).items()}


def _sections(data: dict) -> list[tuple[str, str, list[str], list[list[str]], str | None]]:
    """(kind, title, header, rows, plot key) blocks shared by the Markdown and HTML renderers."""
    from kgprobe.protocol import protocol_rows

    cfg = data["config"]
    est = data.get("accuracy_estimate")
    m = data["metrics"]
    est_txt = (
        f"{est['estimate']:.1%} (95% CI {est['low']:.1%} – {est['high']:.1%}; {est['basis']}, "
        f"{est['method']}, n = {est['n']} design-based probes)"
        if est else "not available (no design probes in this run)"
    )
    measured = [list(r) for r in protocol_rows(data["protocol"])]
    status = [
        ["budget spent", f"{data['queries_spent']} of {cfg['budget'] or 'unlimited'} queries in {data['rounds']} rounds"],
        ["status", status_text(data)],
    ]
    if data.get("prior"):
        pr = data["prior"]
        status.append(["prior (item response)", f"{', '.join(pr['sources'])} ({pr['shared_edges']} shared edges)"])
        asked = float(cfg.get("prior_design") or 0.0)
        status.append(["design share following the prior",
                       f"{asked * pr['agreement']:.2f} (--prior-design {asked:g} × the sources' agreement "
                       f"{pr['agreement']:.2f}, docs/priors.md)"])
        if pr.get("weight") is not None:
            status.append(["weight of the prior's predictions against the run's own",
                           f"{pr['weight']:.2f} after the last round (0: the run's own answers predict this "
                           "model better than the sources; 1: the prior's do; docs/priors.md)"])
        # One row per source: a note holds a path and would be cut short in a shared cell.
        for note in pr.get("protocol_notes") or []:
            status.append(["prior source with another protocol (valid, may help less)", note])
    kg_base = data.get("kg_baseline") or {}
    overall = [
        ["KG-level accuracy, unbiased (all active edges)", est_txt],
        ["no-knowledge baseline: chance / majority / null (docs/baselines.md)",
         f"{_pct(kg_base.get('chance'))} / {_pct(kg_base.get('majority'))} / {_pct(kg_base.get('null'))}"
         + ("" if kg_base.get("null") is not None else
            " (null not measured: kgprobe report RUN --null-model)")],
        ["win rate (probed edges)", _pct(m["win_rate"])],
        ["zero-sense rate (probed edges)", _pct(m["zero_sense_rate"])],
        ["all-sense rate (probed edges)", _pct(m["all_sense_rate"])],
        ["probed edges", str(m["probed_edges"])],
    ]
    # The three KGLens rates describe the edges probed (chosen by the sampler), not the KG;
    # the accuracy column estimates the whole predicate / group with a 95 % interval.
    head = ["", "probed", "win", "zero-sense", "all-sense", "accuracy (95% CI, basis)"]
    by_pred_est = by_label(data.get("estimates_by_predicate"))
    by_group_est = data.get("estimates_by_group") or {}
    pred_base = by_label(data.get("predicate_baseline"))
    group_base = data.get("group_baseline") or {}
    for warning in data.get("baseline_warnings") or []:
        status.append(["warning", warning])
    sections = [
        ("table", "What exactly was measured", ["field", "value"], measured, None),
        ("table", "Run", ["setting", "value"], status, None),
        ("table", "Results", ["metric", "value"], overall, "convergence"),
        ("table", "Per predicate (lowest win rate first; chance, majority and null: what a model with no "
                  "knowledge of the facts scores under this protocol, see docs/baselines.md)",
         ["predicate", "probed", "active", "chance", "majority", "null", "win", "zero-sense", "all-sense",
          "accuracy (95% CI, basis)"],
         _metric_rows(data["by_predicate"], data["predicate_active_edges"], data.get("predicate_chance") or {},
                      by_pred_est, baseline=pred_base),
         "by_predicate"),
        ("table", "Per entity group (of the subject; lowest win rate first)",
         head[:2] + ["chance", "majority", "null"] + head[2:],
         _metric_rows(data["by_group"], None, None, by_group_est, baseline=group_base), "by_group"),
    ]
    if data["by_entity"]:
        sections.append(
            ("table", f"Per entity (the {len(data['by_entity'])} most-probed subjects with at least "
                      f"{MIN_ENTITY_EDGES} probed edges; ties by name)", head[:5],
             _metric_rows(data["by_entity"], ranked=False), "heatmap"))
    else:
        sections.append(("table", f"Per entity: no subject has {MIN_ENTITY_EDGES} or more probed edges, so none "
                                  "is listed (ranking subjects with one probed edge each would only sort names)",
                         head[:5], [], None))
    weak_rows = []
    for w in data["weakest"]:
        answers = "; ".join(
            f"r{a['round']}: {'✔' if a['correct'] else '✘'} {a['answer']!r}" for a in w["answers"][-3:]
        )
        question = question_tail(w["answers"][-1]["question"]) if w["answers"] else ""
        weak_rows.append([
            f"({w['subject']}, {w['predicate']}, {w['object']})", f"{w['successes']}/{w['failures']}",
            f"{w['error_estimate']:.2f}", question, answers,
        ])
    sections.append(("table", "Weakest facts (answered wrong at least once; highest posterior error first)",
                     ["fact", "right/wrong", "error", "last question", "answers"], weak_rows, None))
    return sections


#: What the numbers of the Results table mean, printed under it.
RATES_NOTE = (
    "Win, zero-sense and all-sense are rates over the edges probed (chosen by the sampler, which seeks weak "
    "edges), not estimates for the KG. The accuracy estimates are for all active edges of the KG, predicate "
    "or group: design-based ones hold whatever the sampler did (the KG's: predictions corrected by the "
    "design-based probes, weighted by their inclusion probabilities; a predicate's or group's: the "
    "weighted share of its design-based probes answered right, always in [0, 1]); a predicate or group "
    "with fewer than two design-based probes gets no number (too few design probes); model-based ones "
    "(runs without design-based probes) assume the probed edges represent the group."
)

_CAPTIONS = {
    "convergence": "Rates over probed edges against model queries; the KG-level accuracy (all active edges, "
    "unbiased, from the design probes) as it stood after each round, with its 95% interval as a band.",
    "by_predicate": "Win rate per predicate, lowest first; black ticks: chance level of a random guess.",
    "by_group": "Win rate per entity group of the subject, lowest first.",
    "heatmap": "The most-probed subjects (same rows as the table). Dot colour: zero-sense rate of the entity's "
    "edges with that predicate (darker = weaker); dot size: share of the entity's probed edges.",
}


def captions(data: dict) -> dict[str, str]:
    """Plot captions, with the reason when rate series were drawn as one."""
    out = dict(_CAPTIONS)
    notes = [why for _keys, why in series_groups(data["history"]) if why] if data.get("history") else []
    if notes:
        out["convergence"] += " Drawn as one line: " + "; ".join(notes) + "."
    return out


def question_tail(text: str, lines: int = QUESTION_LINES, limit: int = 80) -> str:
    """The end of a question with its lines kept: a zero-prompt context is one example per
    line and ends with the subject asked about, so its last lines show what was asked.
    Tabs (between subject and object) become " → " so the pairs stay readable; earlier
    lines are replaced by "…"; each line is cut to ``limit`` characters."""
    rows = [ln for ln in str(text).split("\n")]
    shown = rows[-lines:]
    out = []
    for row in shown:
        row = " → ".join(" ".join(part.split()) for part in row.split("\t"))
        out.append(row if len(row) <= limit else row[: limit - 1] + "…")
    if len(rows) > lines:
        out.insert(0, f"… ({len(rows) - lines} lines before)")
    return "\n".join(out)


def _md_escape(text) -> str:
    """Text from a KG or a model, made inert in Markdown: HTML tags become entities (many
    Markdown viewers render raw HTML, ``<script>`` included) and Markdown punctuation is
    backslash-escaped, so a label can neither inject markup nor break a table row."""
    text = html.escape(" ".join(str(text).split()), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


#: Markdown punctuation that can start markup inside a line or a table cell (with the
#: brackets escaped no link or image can form, so parentheses stay as they are).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def _md_cell(text: str, limit: int = 160) -> str:
    text = str(text)
    if "\n" in text:
        # A table cell is one line: the question's lines are joined by a visible mark instead.
        return " ⏎ ".join(_md_escape(line) for line in text.split("\n"))
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return _md_escape(text)


def render_markdown(data: dict, plot_files: dict[str, str]) -> str:
    out = [f"# kgprobe report: {_md_escape(data['model'])} on {_md_escape(data['kg']['name'])}", ""]
    caps = captions(data)
    for _, title, header, rows, plot in _sections(data):
        out += [f"## {title}", ""]
        if rows:
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "---|" * len(header))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
        else:
            out.append(_empty_text(data))
        out.append("")
        if title == "Results":
            out += [RATES_NOTE, ""]
        if plot and plot in plot_files:
            out += [f"![{caps[plot]}]({plot_files[plot]})", "", f"*{caps[plot]}*", ""]
    out.append(f"Run file: {_md_escape(data['run'])}")
    return "\n".join(out) + "\n"


def _empty_text(data: dict) -> str:
    return "(none)" if data["metrics"]["probed_edges"] else "(nothing probed yet)"


def render_html(data: dict, plots: dict[str, bytes]) -> str:
    """The self-contained HTML page, from the jinja2 template (autoescaped)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kgprobe", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    caps = captions(data)
    sections = [
        {"title": title, "header": header, "rows": rows, "note": RATES_NOTE if title == "Results" else None,
         "plot": ({"caption": caps[plot], "b64": base64.b64encode(plots[plot]).decode()}
                  if plot and plot in plots else None)}
        for _, title, header, rows, plot in _sections(data)
    ]
    return env.get_template("report.html.j2").render(
        title=f"kgprobe report: {data['model']} on {data['kg']['name']}", sections=sections, run=data["run"],
        empty=_empty_text(data),
    )


def write_report(run: Run, out_dir: str | os.PathLike | None = None, *,
                 being_written: bool | None = None) -> dict[str, str]:
    """Write ``<run>.md``, ``<run>.html`` and ``<run>-plots/*.png``; return their paths.

    An in-memory run has no file to sit next to: give ``out_dir`` (the files are named
    after the KG, method and time) or save it first with :meth:`Run.save`.
    ``being_written``: as in :func:`report_data`.
    """
    from kgprobe.inputs import MEMORY

    if run.path == MEMORY:
        if not out_dir:
            raise InputError("this run is in memory, so there is no run file to write the report next to; "
                             "pass a directory (write_report(run, 'reports/')) or save it first with "
                             "run.save('my-run.kgrun')")
        stem = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + "".join(
            c if c.isalnum() or c in "-_" else "-" for c in f"{run.kg.name or 'kg'}-{run.config.method}-report")
        out = Path(out_dir)
    else:
        run_path = Path(run.path)
        out = Path(out_dir) if out_dir else run_path.parent
        stem = run_path.name.removesuffix(".kgrun")
    data = report_data(run, being_written=being_written)
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

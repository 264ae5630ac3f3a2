"""``kgprobe questions``: the yes/no and wh-questions a KGLens run would ask, per predicate.

What a user checks before spending a budget: for a sample of edges of each predicate,
the first questions of each kind (the phrasings later probes of the edge rotate through
come next), where the templates come from (hand-written, grammar, or an LLM), the object
kind the grammar chose its wh-word for, and how many distinct questions an edge has
before it would repeat itself.
"""

from __future__ import annotations

import json

import numpy as np


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "questions",
        help="print the yes/no and wh-questions KGLens probes would ask, for a sample of edges of each predicate",
        description="Render the KGLens questions for a sample of edges of each predicate of a KG: the first "
        "yes/no question (true object), the next one (a wrong candidate), and the first wh-question, with "
        "the template source and how many distinct phrasings each edge has.",
    )
    parser.add_argument("--kg", default="countries", help="a KG file or an embedded KG name (default: countries)")
    parser.add_argument("--predicate", action="append", default=[],
                        help="a predicate id or label to show (repeatable; default: every predicate)")
    parser.add_argument("--n", type=int, default=3, help="edges sampled per predicate (default: 3)")
    parser.add_argument("--attempts", type=int, default=2,
                        help="questions of each kind per edge, as successive probes of it would ask (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the edge sample (default: 0)")
    parser.add_argument("--no-alias", action="store_true", help="do not add the subject's alias to questions")
    parser.add_argument("--json", action="store_true", help="one JSON object per edge instead of text")
    parser.set_defaults(func=handle)


def _predicates(kg, wanted: list[str]) -> list[str]:
    from kgprobe.errors import InputError

    if not wanted:
        return [p for p in kg.predicate_ids if len(kg.edges_of_predicate(p, active_only=True))]
    out = []
    by_label = {kg.predicate_label(p).casefold(): p for p in kg.predicate_ids}
    for w in wanted:
        p = w if w in kg.predicates else by_label.get(w.casefold())
        if p is None:
            known = ", ".join(f"{p} ({kg.predicate_label(p)})" for p in kg.predicate_ids[:20])
            raise InputError(f"--predicate {w!r} is not a predicate of this KG; known: {known}")
        out.append(p)
    return out


def handle(args) -> int:
    from kgprobe.api import resolve_kg
    from kgprobe.errors import InputError
    from kgprobe.probes.common import renderable
    from kgprobe.probes.grammar import grammar_for
    from kgprobe.probes.kglens import KGLensProbe
    from kgprobe.probes.templates import has_templates

    if args.n < 1 or args.attempts < 1:
        raise InputError("--n and --attempts must be at least 1")
    kg = resolve_kg(args.kg)
    probe = KGLensProbe("hard", use_alias=not args.no_alias)
    rng = np.random.default_rng(args.seed)
    for p in _predicates(kg, args.predicate):
        edges = [int(j) for j in kg.edges_of_predicate(p, active_only=True) if renderable(kg, int(j))]
        if not edges:
            continue
        picked = sorted(rng.choice(edges, size=min(args.n, len(edges)), replace=False).tolist())
        source = "hand-written" if has_templates(p) else "grammar"
        g = grammar_for(kg, p)
        if not args.json:
            label = kg.predicate_label(p)
            head = f"{p} ({label})" if label != p else p
            print(f"{head}: {len(kg.edges_of_predicate(p, active_only=True))} edges, templates {source}"
                  + ("" if source == "hand-written" else f", object kind {g.kind}, label read as {g.shape}"
                     + (", symmetric" if g.symmetric else "")))
        for edge in picked:
            t = kg.triple(edge)
            wh_ok = probe._wh_allowed(kg, edge)
            rows = []
            for a in range(args.attempts):
                q = probe.question(kg, edge, rng, wh=False, attempt=a)
                rows.append(("yes/no", q["question"], "yes" if q["expected"] else "no", q["phrasing"]))
            for a in range(args.attempts if wh_ok else 0):
                q = probe.question(kg, edge, rng, wh=True, attempt=a)
                rows.append(("wh", q["question"], kg.label(t.object), q["phrasing"]))
            if args.json:
                print(json.dumps({
                    "predicate": p, "edge": edge, "subject": kg.label(t.subject), "object": kg.label(t.object),
                    "distinct_yes_no": probe.phrasing_count(kg, edge, "yes_no"),
                    "distinct_wh": probe.phrasing_count(kg, edge, "wh") if wh_ok else 0,
                    "questions": [{"kind": k, "question": q, "answer": ans, "source": ph["source"]}
                                  for k, q, ans, ph in rows],
                }, ensure_ascii=False))
                continue
            n_yn = probe.phrasing_count(kg, edge, "yes_no")
            n_wh = probe.phrasing_count(kg, edge, "wh") if wh_ok else 0
            print(f"  edge {edge}: {kg.label(t.subject)} -> {kg.label(t.object)}  "
                  f"({n_yn} distinct yes/no, {n_wh} distinct wh questions)")
            for kind, question, answer, _ in rows:
                print(f"    {kind:<6} {question}  [{answer}]")
    return 0

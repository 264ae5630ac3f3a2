"""What a model with no knowledge of the facts scores under a run's protocol (docs/baselines.md).

An accuracy means little without the score of a model that knows none of the facts
under the very same protocol: a predicate whose objects are mostly one value, shown
in a context that repeats that value, gives the answer away. Per predicate and per
entity group of the subject, over the group's active edges (the population its
accuracy estimate is about):

``chance``
    the mean over the edges of 1 / options (a uniform guess among the options the
    probe shows; yes/no: 1/2; generation: 0).
``majority``
    the accuracy of the rule "answer the option whose object occurs most often among
    the in-context examples' objects; a tie (all options unseen included) is broken
    uniformly at random", on renderings of the edges by the run's own probe and
    options (seeded, :data:`RENDERINGS` per predicate). It is what the context gives
    away. Probes without in-context examples show nothing to count, so the rule is a
    uniform guess and ``majority`` = ``chance``; probes without options have none.
``null``
    a measured null-model rate: the accuracy of a random-weights model (``tiny-random``
    by default; it knows no facts by construction) on renderings of the predicate's
    edges under the run's protocol. It catches what the two rules above do not (e.g.
    summed log-probabilities favouring short options). Measuring it loads and runs a
    model, so it is measured on request (``kgprobe report RUN --null-model``) and
    stored in the run file; until then it is None.

The KG's own baselines weigh the predicates' by their active edges.

``top_object`` / ``top_object_share``: the predicate's most frequent object among its
active edges and its share. A predicate whose share is at least
:data:`DOMINANT_SHARE` (with at least :data:`DOMINANT_MIN_EDGES` active edges) is named in a warning: even a balanced context cannot stop a
model that only learned "the answer is usually X" from scoring that share.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

import numpy as np

from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.probes import make_probe
from kgprobe.probes.base import Probe

#: Renderings per predicate or group for ``majority`` (each edge at least once up to this many edges).
RENDERINGS = 128
#: Renderings per predicate the null model answers.
NULL_RENDERINGS = 16
#: A predicate whose most frequent object is at least this share of its active edges (and
#: that has at least DOMINANT_MIN_EDGES of them: one edge is not a distribution) is named in a warning.
DOMINANT_SHARE = 0.4
DOMINANT_MIN_EDGES = 5


def _sample_edges(edges: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Edges of ``count`` renderings drawn without replacement; with fewer edges, every edge
    equally often (at least ``count`` renderings in all), so each edge weighs the same."""
    if edges.size == 0:
        return edges
    if edges.size >= count:
        return np.sort(np.random.default_rng(seed).choice(edges, size=count, replace=False))
    return np.tile(edges, -(-count // edges.size))


def context_majority(probe: Probe, kg: KnowledgeGraph, edge: int, rng: np.random.Generator) -> float | None:
    """The majority rule's expected accuracy on one rendering of ``edge`` (see the module doc);
    None for a probe without options."""
    rendering = getattr(probe, "rendering", None)
    if rendering is None:
        chance = float(probe.chance_level(kg, edge))
        return None if math.isnan(chance) or chance == 0.0 else chance
    examples, _names, option_ids, gold_index = rendering(kg, edge, rng)
    seen = [kg.entity_id(int(kg.objects[j])) for j in examples]
    counts = np.asarray([seen.count(o) for o in option_ids])
    tied = np.flatnonzero(counts == counts.max())
    return 1.0 / tied.size if gold_index in tied else 0.0


def context_majority_rate(probe: Probe, kg: KnowledgeGraph, edges: np.ndarray, *, seed: int = 0) -> float:
    """Mean of :func:`context_majority` over ``edges`` (one rendering each, seeded per edge and position)."""
    values = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, e in enumerate(np.asarray(edges).tolist()):
            v = context_majority(probe, kg, int(e), np.random.default_rng([seed, int(e), i]))
            if v is not None:
                values.append(v)
    return float(np.mean(values)) if values else float("nan")


def _rates(probe: Probe, kg: KnowledgeGraph, edges: np.ndarray, seed: int) -> dict[str, float | None]:
    picks = _sample_edges(edges, RENDERINGS, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chance = [float(probe.chance_level(kg, int(e))) for e in np.unique(picks)]
    chance_mean = float(np.mean(chance)) if chance and not all(math.isnan(c) for c in chance) else None
    majority = context_majority_rate(probe, kg, picks, seed=seed)
    return {"chance": chance_mean, "majority": None if math.isnan(majority) else majority}


def _top_object(kg: KnowledgeGraph, edges: np.ndarray) -> tuple[str | None, float]:
    if edges.size == 0:
        return None, 0.0
    values, counts = np.unique(kg.objects[edges], return_counts=True)
    best = int(np.argmax(counts))
    return kg.label(kg.entity_id(int(values[best]))), float(counts[best] / edges.size)


def baselines(kg: KnowledgeGraph, method: str, probe_options: Mapping[str, Any], *, seed: int = 0,
              null: Mapping[str, Any] | None = None) -> dict[str, dict]:
    """``{"by_predicate": {predicate id: {...}}, "by_group": {group: {...}}}`` of the protocol
    ``method`` + ``probe_options`` on ``kg``'s active edges; ``null``: a measurement of
    :func:`measure_null` to attach."""
    probe = make_probe(method, **probe_options)
    active = kg.active
    by_predicate: dict[str, dict] = {}
    for pid in kg.predicate_ids:
        row = predicate_baseline(probe, kg, pid, seed=seed, null=null)
        if row is not None:
            by_predicate[pid] = row
    groups = np.asarray([kg.entities[e].group or "(none)" for e in kg.entity_ids], dtype=object)[kg.subjects]
    by_group: dict[str, dict] = {}
    for group in sorted(set(groups[active].tolist())):
        edges = np.flatnonzero(active & (groups == group))
        by_group[group] = _rates(probe, kg, edges, seed)
    return {"kg": kg_level(by_predicate), "by_predicate": by_predicate, "by_group": by_group}


def kg_level(by_predicate: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """The KG's baselines: the predicates' weighted by their active edges (None where one lacks it)."""
    weights = np.asarray([row["active_edges"] for row in by_predicate.values()], dtype=float)
    out: dict[str, float | None] = {}
    for key in ("chance", "majority", "null"):
        values = [row.get(key) for row in by_predicate.values()]
        out[key] = None if not values or any(v is None for v in values) else \
            float(np.dot(weights, values) / weights.sum())
    return out


def predicate_baseline(probe: Probe, kg: KnowledgeGraph, predicate: str, *, seed: int = 0,
                       null: Mapping[str, Any] | None = None) -> dict | None:
    """One predicate's row of :func:`baselines`; None when it has no active edge."""
    edges = kg.edges_of_predicate(predicate)
    edges = edges[kg.active[edges]]
    if edges.size == 0:
        return None
    row = _rates(probe, kg, edges, seed)
    top, share = _top_object(kg, edges)
    measured = ((null or {}).get("by_predicate") or {}).get(predicate)
    row.update({
        "null": measured["rate"] if measured else None,
        "null_n": measured["n"] if measured else 0,
        "top_object": top,
        "top_object_share": share,
        "label": kg.predicate_label(predicate),
        "active_edges": int(edges.size),
    })
    return row


def dominated(by_predicate: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Warnings naming each predicate whose objects are dominated by one value."""
    out = []
    for row in by_predicate.values():
        share = row.get("top_object_share") or 0.0
        if share >= DOMINANT_SHARE and (row.get("active_edges") or 0) >= DOMINANT_MIN_EDGES:
            # The context baselines count what a rendering gives away; a model that learned the
            # predicate's usual answer is not caught by them, so the share is named beside them.
            out.append(f"predicate {row.get('label')!r}: {share:.0%} of its edges have the object "
                       f"{row.get('top_object')!r}; a model that only learned to answer it would score about "
                       f"{share:.0%} (the protocol's baselines: chance {_pct(row.get('chance'))}, context "
                       f"majority {_pct(row.get('majority'))}; `kgprobe report RUN --null-model` measures a "
                       "no-knowledge model)")
    return out


def baseline_text(base: Mapping[str, Any] | None, digits: int = 1) -> str:
    """``chance / majority / null`` as percentages with ``digits`` decimals; – where one is not known."""
    base = base or {}
    return " / ".join("–" if base.get(k) is None else f"{base[k]:.{digits}%}" for k in ("chance", "majority", "null"))


def _pct(x) -> str:
    return "–" if x is None else f"{x:.1%}"


def measure_null(model, kg: KnowledgeGraph, method: str, probe_options: Mapping[str, Any], *, seed: int = 0,
                 renderings: int = NULL_RENDERINGS, batch: int = 16) -> dict[str, Any]:
    """The null model's accuracy per predicate under the protocol: ``renderings`` seeded
    renderings of the predicate's active edges, answered by ``model``."""
    probe = make_probe(method, **probe_options)
    out: dict[str, Any] = {"model": str(getattr(model, "identity", model)), "renderings": renderings,
                           "seed": seed, "by_predicate": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pid in kg.predicate_ids:
            edges = kg.edges_of_predicate(pid)
            edges = edges[kg.active[edges]]
            if edges.size == 0:
                continue
            picks = _sample_edges(edges, renderings, seed)
            right = 0
            for start in range(0, picks.size, batch):
                tasks = [probe.render(kg, int(e), np.random.default_rng([seed, int(e), start + i]))
                         for i, e in enumerate(picks[start:start + batch].tolist())]
                scores = model.score([r for t in tasks for r in t.score_requests]) if probe.needs_scoring else []
                gens = model.generate([r for t in tasks for r in t.generate_requests]) if not probe.needs_scoring \
                    else []
                k = g = 0
                for t in tasks:
                    ns, ng = len(t.score_requests), len(t.generate_requests)
                    right += bool(probe.verify(kg, t, scores[k:k + ns], gens[g:g + ng]).correct)
                    k, g = k + ns, g + ng
            out["by_predicate"][pid] = {"rate": right / picks.size, "n": int(picks.size), "right": right}
    return out

"""Wh-answers checked against the KG: true objects T, candidates C, and every other name.

KGLens verifies a wh-answer against the true objects and their aliases. The KG knows
more: the candidate objects C of the predicate (what a wrong answer usually is) and the
names of every entity (what makes "South Africa" a mention of South Africa rather than
of Africa). :func:`verify_wh` passes all of it to
:func:`kgprobe.probes.verify.match_answer`:

* T = every true object of (s, p), C = the predicate's candidate objects;
* the name index covers every entity of the KG, built once per KG;
* (s, p) with one true object is single-valued: naming another candidate makes the
  answer wrong; with several, it is a precision error recorded in the verdict
  (``wrong_extras``) while the answer stays right, and ``complete`` says whether every
  true object was named.
"""

from __future__ import annotations

import weakref

from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.probes.common import all_names, gold_names
from kgprobe.probes.verify import Match, NameIndex, match_answer

_INDEXES: "weakref.WeakKeyDictionary[KnowledgeGraph, NameIndex]" = weakref.WeakKeyDictionary()


def name_index(kg: KnowledgeGraph) -> NameIndex:
    """Every entity's names, keyed by entity id; built once per KG (a KG never changes)."""
    index = _INDEXES.get(kg)
    if index is None:
        index = NameIndex((eid, all_names(e)) for eid, e in kg.entities.items() if not e.is_literal)
        _INDEXES[kg] = index
    return index


def verify_wh(kg: KnowledgeGraph, edge: int, response: str) -> Match:
    """The verdict on a wh-answer about ``edge``: T, C and the KG's names all used."""
    t = kg.triple(edge)
    true = kg.true_objects(t.subject, t.predicate)
    return match_answer(
        response,
        gold_names(kg, t.subject, t.predicate),
        echoed=all_names(kg.entity(t.subject)),
        index=name_index(kg),
        true_keys=true,
        candidate_keys=kg.candidate_objects(t.predicate),
        single_valued=len(true) == 1,
    )


def wh_detail(match: Match) -> dict:
    """What a researcher reads next to a wh-verdict: which true and wrong candidates were named."""
    detail: dict = {}
    if match.named_true:
        detail["named_true"] = list(match.named_true)
        detail["complete"] = bool(match.complete)
    if match.named_wrong:
        detail["wrong_extras" if match.named_true else "named_wrong"] = list(match.named_wrong)
    return detail

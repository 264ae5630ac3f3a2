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
  true object was named;
* the run's language (the KG's ``lang`` unless the probe is told otherwise) decides which
  names are also common words, and the demonyms the KG holds for a true object in that
  language (Wikidata's P1549, or a predicate labelled "demonym") name that object.
"""

from __future__ import annotations

import weakref
from typing import Sequence

from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.probes.common import all_names, gold_names
from kgprobe.probes.lexicon import base_language
from kgprobe.probes.verify import Match, NameIndex, match_answer

_INDEXES: "weakref.WeakKeyDictionary[KnowledgeGraph, NameIndex]" = weakref.WeakKeyDictionary()
_DEMONYMS: "weakref.WeakKeyDictionary[KnowledgeGraph, dict[str, dict[str, list[str]]]]" = weakref.WeakKeyDictionary()

#: Wikidata's demonym property; any other predicate labelled "demonym" counts too.
DEMONYM_PREDICATES = frozenset({"P1549"})


def name_index(kg: KnowledgeGraph) -> NameIndex:
    """Every entity's names, keyed by entity id; built once per KG (a KG never changes)."""
    index = _INDEXES.get(kg)
    if index is None:
        index = NameIndex((eid, all_names(e)) for eid, e in kg.entities.items() if not e.is_literal)
        _INDEXES[kg] = index
    return index


def run_language(kg: KnowledgeGraph, lang: str | None = None) -> str:
    """The language answers are read in: ``lang`` when given, else the KG's (``kgprobe build
    --lang``), else English."""
    return base_language(lang or kg.metadata.get("lang") or "en")


def demonyms(kg: KnowledgeGraph, lang: str) -> dict[str, list[str]]:
    """Entity id -> its demonyms in ``lang``, from the KG's demonym edges (dead ones too).

    A demonym is a literal object; one tagged with another language ("Brasilianer"@de in
    an English run) is left out, an untagged one kept.
    """
    per_kg = _DEMONYMS.setdefault(kg, {})
    if lang not in per_kg:
        found: dict[str, list[str]] = {}
        predicates = [p for p in kg.predicates if p in DEMONYM_PREDICATES
                      or kg.predicate_label(p).strip().casefold() == "demonym"]
        for p in predicates:
            for j in kg.edges_of_predicate(p, active_only=False):
                t = kg.triple(int(j))
                tag = t.object.rpartition("@")[2] if t.object.startswith('"') and '"@' in t.object else ""
                if tag and base_language(tag) != lang:
                    continue
                names = [n for n in all_names(kg.entity(t.object)) if n]
                found.setdefault(t.subject, []).extend(n for n in names if n not in found.get(t.subject, []))
        per_kg[lang] = found
    return per_kg[lang]


def verify_wh(
    kg: KnowledgeGraph, edge: int, response: str, *, lang: str | None = None, demo_names: Sequence[str] = ()
) -> Match:
    """The verdict on a wh-answer about ``edge``: T, C, the KG's names and demonyms all used.

    ``demo_names``: the names in the prompt's few-shot demonstrations (an answer that
    repeats them is wrong).
    """
    t = kg.triple(edge)
    true = kg.true_objects(t.subject, t.predicate)
    lang = run_language(kg, lang)
    known = demonyms(kg, lang)
    return match_answer(
        response,
        gold_names(kg, t.subject, t.predicate),
        echoed=all_names(kg.entity(t.subject)),
        index=name_index(kg),
        true_keys=true,
        candidate_keys=kg.candidate_objects(t.predicate),
        single_valued=len(true) == 1,
        lang=lang,
        demonyms={o: known[o] for o in true if o in known},
        demo_names=demo_names,
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

"""Per-predicate natural-language templates, loaded from ``data/templates.json``.

Each predicate has four kinds of templates (placeholders ``{subject}``, ``{object}``):

* ``hgp`` — a prefix the object follows after a space ("The capital of {subject} is");
  the human-prompt baseline (ZP-LKE's HGP) scores and generates after it;
* ``wh`` — a question answered by the object (KGLens wh-question, MONITOR base question);
* ``yes_no`` — a question whose answer is yes when ``{object}`` is a true object;
* BELIEF cloze prompts are derived: every ``hgp`` and ``wh`` template with " [MASK]."
  appended.

A predicate missing from the file gets templates from :mod:`kgprobe.probes.grammar`
(natural questions built from its label, aliases, description and the kind of object it
takes), so a KG from any source can be probed; hand-written templates override them and
``has_templates`` tells whether a predicate has them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kgprobe.kg.graph import KnowledgeGraph
from kgprobe.probes.grammar import grammar_for


@dataclass(frozen=True)
class PredicateTemplates:
    predicate: str
    hgp: tuple[str, ...]
    wh: tuple[str, ...]
    yes_no: tuple[str, ...]
    hand_written: bool

    @property
    def cloze(self) -> tuple[str, ...]:
        """BELIEF prompts: each template with the object position marked [MASK]."""
        return tuple(t + " [MASK]." for t in self.hgp) + tuple(t + " [MASK]." for t in self.wh)


@lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    text = resources.files("kgprobe.probes").joinpath("data/templates.json").read_text(encoding="utf-8")
    return json.loads(text)["predicates"]


def has_templates(predicate: str) -> bool:
    return predicate in _table()


def templates_for(kg: KnowledgeGraph, predicate: str) -> PredicateTemplates:
    """The templates of a predicate: hand-written ones, or ones the grammar builds."""
    entry = _table().get(predicate)
    if entry is not None:
        return PredicateTemplates(predicate, tuple(entry["hgp"]), tuple(entry["wh"]), tuple(entry["yes_no"]), True)
    # Not hand-written: a grammar over the label, aliases, description and objects (grammar.py).
    g = grammar_for(kg, predicate)
    return PredicateTemplates(predicate, hgp=g.hgp, wh=g.wh, yes_no=g.yes_no, hand_written=False)


def fill(template: str, subject: str, obj: str | None = None) -> str:
    """Fill a template; uses replace, not str.format, so braces in labels are harmless."""
    text = template.replace("{subject}", subject)
    if obj is not None:
        text = text.replace("{object}", obj)
    return text

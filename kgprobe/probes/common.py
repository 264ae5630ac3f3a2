"""Pieces every probe shares: usable entity names, distractors, multiple-choice scoring.

Entities without a usable name (empty label, or a label that is just the Wikidata id,
which is what Wikidata returns when an item has no English label) fall back to their
first alias; an entity with neither cannot be put into words. Such entities are left
out of example and distractor pools, and probing an edge whose own subject or object
has no name raises :class:`~kgprobe.errors.InputError` (``renderable`` lets a caller
check first), rather than asking the model about "Q12345".
"""

from __future__ import annotations

import math
import re
import warnings
import weakref
from typing import Sequence

import numpy as np

from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph
from kgprobe.models.base import ScoreResult
from kgprobe.probes.base import Verdict
from kgprobe.probes.verify import normalize

_ID_LIKE = re.compile(r"^[QPL]\d+$")


class ProbeWarning(UserWarning):
    """A probe had to do less than asked (fewer examples, fewer options)."""


def display_name(entity: Entity) -> str | None:
    """The label, or the first alias when the label is empty or just an id; else None."""
    label = entity.label.strip()
    if label and not (_ID_LIKE.match(label) and label == entity.id):
        return label
    for alias in entity.aliases:
        if alias.strip():
            return alias.strip()
    return None


def all_names(entity: Entity) -> list[str]:
    """Every usable name of an entity: its display name then its aliases."""
    first = display_name(entity)
    names = [first] if first else []
    names += [a.strip() for a in entity.aliases if a.strip()]
    return list(dict.fromkeys(names))


def name_of(kg: KnowledgeGraph, entity_id: str, *, edge: int, role: str) -> str:
    """The display name of an entity on a probed edge, or an InputError that says what to do."""
    name = display_name(kg.entity(entity_id))
    if name is None:
        raise InputError(
            f"edge {edge}: the {role} {entity_id!r} has no label and no alias, so it cannot be put "
            "into a question; add a label to the KG or mark the edge dead"
        )
    return name


def renderable(kg: KnowledgeGraph, edge: int) -> bool:
    """True when both ends of the edge have a usable name."""
    t = kg.triple(edge)
    return display_name(kg.entity(t.subject)) is not None and display_name(kg.entity(t.object)) is not None


def unnamed_active_edges(kg: KnowledgeGraph) -> np.ndarray:
    """Active edges with an end that has no usable name (see ``display_name``), sorted.

    No probe can ask about such an edge, so a run checks for them before it starts
    instead of failing in the round that first samples one.
    """
    named = np.fromiter((display_name(kg.entity(e)) is not None for e in kg.entity_ids), bool, kg.num_entities)
    return np.flatnonzero(kg.active & ~(named[kg.subjects] & named[kg.objects]))


def gold_names(kg: KnowledgeGraph, subject: str, predicate: str) -> list[str]:
    """Names (labels and aliases) of every true object of (subject, predicate)."""
    names: list[str] = []
    for obj in sorted(kg.true_objects(subject, predicate)):
        names += all_names(kg.entity(obj))
    return list(dict.fromkeys(names))


def negative_pool(kg: KnowledgeGraph, subject: str, predicate: str) -> list[tuple[str, str]]:
    """(entity id, name) of C − T: candidate objects that are not true objects of (s, p).

    Also dropped: candidates without a name, and candidates whose normalized name equals
    the name of a true object (two entities both called "Georgia" would make a
    multiple-choice tie and a yes/no question with no right answer).
    """
    true = kg.true_objects(subject, predicate)
    true_names = {normalize(n) for n in gold_names(kg, subject, predicate)}
    seen: set[str] = set()
    pool = []
    for cand, name, key in _named_candidates(kg, predicate):
        if cand in true or key in true_names or key in seen:
            continue
        seen.add(key)
        pool.append((cand, name))
    return pool


#: Per KG (by identity, checked through a weak reference) and predicate: the candidate
#: objects with a name, as (id, name, normalized name). Normalizing every candidate's
#: name for every probed edge was most of the rendering time of a ZP-LKE round.
_NAMED_CANDIDATES: dict[int, tuple[weakref.ref, dict[str, list[tuple[str, str, str]]]]] = {}


def _named_candidates(kg: KnowledgeGraph, predicate: str) -> list[tuple[str, str, str]]:
    entry = _NAMED_CANDIDATES.get(id(kg))
    if entry is None or entry[0]() is not kg:
        entry = _NAMED_CANDIDATES[id(kg)] = (weakref.ref(kg), {})
    per_predicate = entry[1]
    found = per_predicate.get(predicate)
    if found is None:
        found = []
        for cand in kg.candidate_objects(predicate):
            name = display_name(kg.entity(cand))
            if name is not None:
                found.append((cand, name, normalize(name)))
        per_predicate[predicate] = found
    return found


def sample_distractors(
    kg: KnowledgeGraph, subject: str, predicate: str, k: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    """Up to ``k`` distinct wrong options (entity id, name) drawn without replacement."""
    pool = negative_pool(kg, subject, predicate)
    if k >= len(pool):
        picks = rng.permutation(len(pool))
    else:
        picks = rng.choice(len(pool), size=k, replace=False)
    return [pool[int(i)] for i in picks]


class WarnOnce:
    """Emit each distinct (kind, key) warning once per probe instance, not once per edge."""

    def __init__(self):
        self._seen: set[tuple[str, str]] = set()

    def __call__(self, kind: str, key: str, message: str) -> None:
        if (kind, key) not in self._seen:
            self._seen.add((kind, key))
            warnings.warn(message, ProbeWarning, stacklevel=3)


# -- multiple choice ------------------------------------------------------------------------


def multiple_choice_options(
    kg: KnowledgeGraph, edge: int, num_distractors: int, rng: np.random.Generator, warn: WarnOnce,
    *, with_ids: bool = False,
):
    """The gold object's name and up to ``num_distractors`` wrong ones, shuffled; and the
    gold option's index. Warns (once per predicate) when fewer distractors exist.

    ``with_ids``: (names, entity ids, gold index) instead, from the same draws."""
    t = kg.triple(edge)
    gold = name_of(kg, t.object, edge=edge, role="object")
    distractors = sample_distractors(kg, t.subject, t.predicate, num_distractors, rng)
    if len(distractors) < num_distractors:
        warn(
            "distractors",
            t.predicate,
            f"predicate {t.predicate}: only {len(distractors)} wrong options available for some facts "
            f"(asked for {num_distractors}); those facts get fewer options and a higher chance level",
        )
    names = [gold] + [name for _, name in distractors]
    ids = [t.object] + [cand for cand, _ in distractors]
    order = rng.permutation(len(names))
    gold_index = int(np.flatnonzero(order == 0)[0])
    if with_ids:
        return [names[int(i)] for i in order], [ids[int(i)] for i in order], gold_index
    return [names[int(i)] for i in order], gold_index


def multiple_choice_chance(kg: KnowledgeGraph, edge: int, num_distractors: int) -> float:
    """1 / number of options a multiple-choice probe of ``edge`` actually gets."""
    t = kg.triple(edge)
    return 1.0 / (1 + min(num_distractors, len(negative_pool(kg, t.subject, t.predicate))))


def softmax_logprobs(logprobs: Sequence[float]) -> np.ndarray:
    """Normalized probabilities of options from their summed log-probabilities."""
    x = np.asarray(logprobs, dtype=float)
    x = x - x.max()
    e = np.exp(x)
    return e / e.sum()


def verify_multiple_choice(options: Sequence[str], gold_index: int, scores: Sequence[ScoreResult]) -> Verdict:
    """Argmax of summed option log-probs; a tie for the maximum counts as wrong.

    ``detail`` carries the normalized probability mass on the gold option
    (``gold_prob``), the predicted option's mass (``pred_prob``, used for
    Accuracy@K), the gold rank (1 = best; ties share the worse rank) and the number of
    options (the chance level is 1 / options), the gold option's summed log-prob
    (``gold_logprob``) and the best wrong option's (``best_wrong_logprob``; None when
    there is no wrong option), so studies have a continuous margin as well as the verdict.
    """
    if len(scores) != len(options):
        raise InputError(f"expected {len(options)} option scores, got {len(scores)}")
    logprobs = np.array([s.logprob for s in scores], dtype=float)
    best = logprobs.max()
    winners = np.flatnonzero(logprobs == best)
    predicted = int(winners[0])
    correct = len(winners) == 1 and predicted == gold_index
    probs = softmax_logprobs(logprobs)
    gold_lp = logprobs[gold_index]
    rank = int((logprobs >= gold_lp).sum())
    wrong = np.delete(logprobs, gold_index)
    best_wrong = float(wrong.max()) if wrong.size else None
    return Verdict(
        correct=bool(correct),
        answer=options[predicted],
        detail={
            "gold_prob": float(probs[gold_index]),
            "pred_prob": float(probs[predicted]),
            "gold_rank": rank,
            "num_options": len(options),
            "tie": len(winners) > 1,
            "gold_logprob": float(gold_lp),
            "best_wrong_logprob": best_wrong,
        },
    )


def accuracy_at_k(verdicts: Sequence[Verdict], k: float) -> tuple[float, int]:
    """ZP-LKE Accuracy@K: accuracy among facts whose predicted option has mass ≥ K.

    Returns (accuracy, number of facts kept); accuracy is NaN when none is kept.
    """
    kept = [v for v in verdicts if v.detail.get("pred_prob", 0.0) >= k]
    if not kept:
        return float("nan"), 0
    return sum(v.correct for v in kept) / len(kept), len(kept)


def mean_gold_prob(verdicts: Sequence[Verdict]) -> float:
    """Average normalized probability mass on the gold option."""
    values = [v.detail["gold_prob"] for v in verdicts if "gold_prob" in v.detail]
    return float(np.mean(values)) if values else math.nan

"""The knowledge graph: entities with labels and aliases, predicates, and triples.

A :class:`KnowledgeGraph` is immutable once built. Triples are stored as integer arrays
(subject, predicate, object indices) so that the parameterized KG and the samplers can
work on arrays; the string-level view (labels, aliases, true objects of (s, p),
candidate objects of a predicate) is what the probes need.

Edge ``j`` is the ``j``-th triple everywhere in kgprobe: in the parameterized KG, in
the run store and in reports. Dead edges (``active[j] == False``) are kept for
structure and propagation but never asked about (KGLens §2.1, appendix A.2).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping, Sequence

import numpy as np

from kgprobe.errors import InputError

_WHITESPACE_RUN = re.compile(r"\s+")


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace (tabs, newlines, several spaces) as one space, ends stripped.

    Probes build prompts with tab and newline as structure (ZP-LKE: one fact per line,
    subject and object joined by a tab), so no name may contain either.
    """
    return _WHITESPACE_RUN.sub(" ", text).strip()


@dataclass(frozen=True)
class Entity:
    """A node: a Wikidata item (``Q142``), a minted IRI, or a literal value.

    ``group`` is an optional coarse class used for per-group metrics (for the
    embedded KGs: ``country``, ``city``, ``language``…); empty when unknown.
    """

    id: str
    label: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    is_literal: bool = False
    group: str = ""

    def __post_init__(self):
        # Every loader builds Entity objects, so collapsing here covers them all.
        object.__setattr__(self, "label", collapse_whitespace(self.label))
        object.__setattr__(self, "aliases", tuple(collapse_whitespace(a) for a in self.aliases))

    @property
    def names(self) -> tuple[str, ...]:
        """The label followed by every alias, duplicates removed, order kept."""
        return tuple(dict.fromkeys((self.label, *self.aliases)))


@dataclass(frozen=True)
class Predicate:
    """An edge label: a Wikidata property id (``P36``) with its English label.

    ``description`` is Wikidata's one-line description of the property (empty when the
    source has none, e.g. a TSV file); question rendering uses it to tell what kind of
    object the predicate takes.
    """

    id: str
    label: str
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self):
        object.__setattr__(self, "label", collapse_whitespace(self.label))
        object.__setattr__(self, "aliases", tuple(collapse_whitespace(a) for a in self.aliases))


@dataclass(frozen=True)
class Triple:
    subject: str
    predicate: str
    object: str
    active: bool = True


class KnowledgeGraph:
    """Entities, predicates and triples; edge ``j`` is ``triples[j]``.

    Parameters
    ----------
    entities, predicates:
        Every node and edge label used by a triple must be present.
    triples:
        ``Triple`` objects in edge order.
    candidates:
        Optional explicit candidate objects per predicate id (from SPARQL); when a
        predicate has none, its candidates are the distinct objects it has in the graph.
    name, metadata:
        Free-form provenance recorded in KG files and reports.
    """

    def __init__(
        self,
        entities: Iterable[Entity],
        predicates: Iterable[Predicate],
        triples: Iterable[Triple],
        *,
        candidates: Mapping[str, Sequence[str]] | None = None,
        name: str = "",
        metadata: Mapping[str, object] | None = None,
    ):
        self.name = name
        self.metadata: dict[str, object] = dict(metadata or {})
        self.entities: dict[str, Entity] = {}
        for e in entities:
            self.entities[e.id] = e
        self.predicates: dict[str, Predicate] = {p.id: p for p in predicates}
        self._entity_ids: list[str] = list(self.entities)
        self._entity_index = {eid: i for i, eid in enumerate(self._entity_ids)}
        self._predicate_ids: list[str] = list(self.predicates)
        self._predicate_index = {pid: i for i, pid in enumerate(self._predicate_ids)}
        subj, pred, obj, act = [], [], [], []
        for t in triples:
            try:
                subj.append(self._entity_index[t.subject])
                obj.append(self._entity_index[t.object])
            except KeyError as exc:
                raise InputError(
                    f"triple ({t.subject}, {t.predicate}, {t.object}) names entity {exc.args[0]!r} "
                    "that has no entry in the entity table; add the entity or drop the triple"
                ) from None
            try:
                pred.append(self._predicate_index[t.predicate])
            except KeyError:
                raise InputError(
                    f"triple ({t.subject}, {t.predicate}, {t.object}) uses predicate {t.predicate!r} "
                    "that has no entry in the predicate table"
                ) from None
            act.append(bool(t.active))
        self.subjects = np.asarray(subj, dtype=np.int64)
        self.predicate_of = np.asarray(pred, dtype=np.int64)
        self.objects = np.asarray(obj, dtype=np.int64)
        self.active = np.asarray(act, dtype=bool)
        self._candidates = {p: tuple(c) for p, c in (candidates or {}).items()}

    # -- sizes -------------------------------------------------------------------
    @property
    def num_edges(self) -> int:
        return int(self.subjects.shape[0])

    @property
    def num_active(self) -> int:
        return int(self.active.sum())

    @property
    def num_entities(self) -> int:
        return len(self._entity_ids)

    def __len__(self) -> int:
        return self.num_edges

    def __repr__(self) -> str:
        return (
            f"KnowledgeGraph({self.name!r}: {self.num_entities} entities, "
            f"{self.num_active} active + {self.num_edges - self.num_active} dead edges, "
            f"{len(self.predicates)} predicates)"
        )

    # -- edge access --------------------------------------------------------------
    def triple(self, edge: int) -> Triple:
        return Triple(
            self._entity_ids[self.subjects[edge]],
            self._predicate_ids[self.predicate_of[edge]],
            self._entity_ids[self.objects[edge]],
            bool(self.active[edge]),
        )

    def triples(self) -> list[Triple]:
        return [self.triple(j) for j in range(self.num_edges)]

    def active_edges(self) -> np.ndarray:
        return np.flatnonzero(self.active)

    def entity(self, entity_id: str) -> Entity:
        return self.entities[entity_id]

    def label(self, entity_id: str) -> str:
        return self.entities[entity_id].label

    def predicate_label(self, predicate_id: str) -> str:
        return self.predicates[predicate_id].label

    def entity_index(self, entity_id: str) -> int:
        return self._entity_index[entity_id]

    def entity_id(self, index: int) -> str:
        return self._entity_ids[index]

    def predicate_id(self, index: int) -> str:
        return self._predicate_ids[index]

    @property
    def entity_ids(self) -> list[str]:
        return list(self._entity_ids)

    @property
    def predicate_ids(self) -> list[str]:
        return list(self._predicate_ids)

    # -- the views probes need ------------------------------------------------------
    @cached_property
    def _true_objects(self) -> dict[tuple[int, int], frozenset[str]]:
        out: dict[tuple[int, int], set[str]] = defaultdict(set)
        for s, p, o in zip(self.subjects.tolist(), self.predicate_of.tolist(), self.objects.tolist()):
            out[(s, p)].add(self._entity_ids[o])
        return {k: frozenset(v) for k, v in out.items()}

    def true_objects(self, subject: str, predicate: str) -> frozenset[str]:
        """Every object o with (subject, predicate, o) in the graph (T_j in KGLens)."""
        key = (self._entity_index[subject], self._predicate_index[predicate])
        return self._true_objects.get(key, frozenset())

    def out_degree(self, subject: str, predicate: str) -> int:
        return len(self.true_objects(subject, predicate))

    @cached_property
    def _objects_by_predicate(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, dict[str, None]] = defaultdict(dict)
        for p, o in zip(self.predicate_of.tolist(), self.objects.tolist()):
            out[self._predicate_ids[p]][self._entity_ids[o]] = None
        return {p: tuple(objs) for p, objs in out.items()}

    def candidate_objects(self, predicate: str) -> tuple[str, ...]:
        """C_j in KGLens: the objects a predicate can take, in a stable order."""
        if predicate in self._candidates:
            return self._candidates[predicate]
        return self._objects_by_predicate.get(predicate, ())

    @cached_property
    def _edges_by_predicate(self) -> dict[str, np.ndarray]:
        order = np.argsort(self.predicate_of, kind="stable")
        bounds = np.searchsorted(self.predicate_of[order], np.arange(len(self._predicate_ids) + 1))
        return {
            pid: order[bounds[i] : bounds[i + 1]] for i, pid in enumerate(self._predicate_ids)
        }

    def edges_of_predicate(self, predicate: str, *, active_only: bool = False) -> np.ndarray:
        edges = self._edges_by_predicate.get(predicate, np.empty(0, dtype=np.int64))
        return edges[self.active[edges]] if active_only else edges

    # -- derived graphs -------------------------------------------------------------
    def subgraph(self, edges: Sequence[int] | np.ndarray, *, name: str | None = None) -> "KnowledgeGraph":
        """The graph of the given edges and the entities and predicates they use."""
        edges = np.asarray(edges, dtype=np.int64)
        triples = [self.triple(int(j)) for j in edges]
        used_e = dict.fromkeys(x for t in triples for x in (t.subject, t.object))
        used_p = dict.fromkeys(t.predicate for t in triples)
        return KnowledgeGraph(
            (self.entities[e] for e in used_e),
            (self.predicates[p] for p in used_p),
            triples,
            candidates={p: c for p, c in self._candidates.items() if p in used_p},
            name=self.name if name is None else name,
            metadata=self.metadata,
        )

    def to_networkx(self):
        """A ``networkx.MultiDiGraph``: nodes carry label/aliases, edges predicate/active/edge id."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for e in self.entities.values():
            g.add_node(e.id, label=e.label, aliases=list(e.aliases), literal=e.is_literal, group=e.group)
        for j in range(self.num_edges):
            t = self.triple(j)
            g.add_edge(t.subject, t.object, key=j, predicate=t.predicate, active=t.active, edge=j)
        return g

    @property
    def explicit_candidates(self) -> dict[str, tuple[str, ...]]:
        return dict(self._candidates)

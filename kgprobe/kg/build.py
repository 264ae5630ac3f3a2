"""Build a probe-ready KG from seed entities by forward and backward random walks.

KGLens appendix A.2 / A.7: from human-chosen seed entities, walk ``hops`` steps
forwards (edges leaving the frontier) and backwards (edges arriving at it), keeping at
most ``per_hop_limit`` edges per direction and hop, sampled in a seeded pseudo-random
order; filter out little-known entities; mark edges of uninteresting predicates dead
instead of dropping them; then fetch labels, aliases, descriptions, the full true-object
set of every sampled (subject, predicate) and candidate objects per predicate.

Choices the paper leaves open, made here:

* Random order is ``MD5(subject predicate object salt)`` computed by the endpoint
  (``queries/*_walk.rq``) instead of ``ORDER BY UUID()``, so every endpoint holding the
  same data samples the same edges and the build is reproducible.
* A hop's frontier is sent in chunks of ``chunk_size`` entities; each chunk's top
  ``per_hop_limit`` edges are merged and the overall top ``per_hop_limit`` kept, which
  is the same set one unchunked query would give.
* Only IRIs are walked through; literal objects (calling codes, demonyms) end a walk.
* The next frontier is the entities first reached in this hop that pass the filters
  (seeds always pass). Filters: ``require_aliases`` (KGLens: drop entities without an
  alias; off by default because many real objects — currencies, languages — have
  none), ``min_sitelinks`` (applies where the endpoint has ``wikibase:sitelinks``),
  ``min_languages`` (number of languages the entity has an ``rdfs:label`` in; one extra
  query per chunk, only when set). Literal objects pass every filter.
* True-object completion: for each sampled (s, p), every other object of (s, p) that
  passes the filters is added as an edge (up to ``max_objects_per_pair``), so "no"
  questions never use a true object; these edges get the same active/dead status.
  Filtered entities are dropped everywhere (edges, true objects, candidates).
* Candidates of a predicate: its objects in the built graph, then up to
  ``candidate_limit`` further objects it takes anywhere at the endpoint (seeded order).
* Edges are ordered by (subject, predicate, object) id; entities by first use.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Protocol, Sequence

from kgprobe.errors import InputError, SourceError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.sources.queries import render_query
from kgprobe.sources.rdf import (
    DEAD_PREDICATES,
    LITERAL_GROUP,
    STRUCTURAL_PREDICATES,
    WIKIBASE,
    Term,
    group_of,
    is_literal_id,
    literal_id,
    literal_value,
    predicate_iri,
    sparql_term,
)

#: Wikibase property types whose direct claims become edges.
EDGE_PROPERTY_TYPES = ("WikibaseItem", "String", "Monolingualtext")


class SelectSource(Protocol):
    """What the builder needs from a source: :class:`SparqlClient` or :class:`EmbeddedStore`."""

    endpoint: str
    queries_issued: int

    def select(self, query: str, *, limit: int | None = None) -> list[dict[str, Term]]: ...


@dataclass
class BuildOptions:
    """Every knob of :func:`build_kg` (defaults documented in the module docstring)."""

    hops: int = 2
    per_hop_limit: int = 500
    seed: int = 0
    lang: str = "en"
    require_aliases: bool = False
    min_sitelinks: int = 0
    min_languages: int = 0
    dead_predicates: frozenset[str] = DEAD_PREDICATES
    excluded_predicates: frozenset[str] = STRUCTURAL_PREDICATES
    property_types: tuple[str, ...] = EDGE_PROPERTY_TYPES
    max_objects_per_pair: int = 50
    candidate_limit: int = 200
    chunk_size: int = 500


@dataclass
class _Names:
    label: str | None = None
    aliases: set[str] = field(default_factory=set)
    description: str | None = None
    classes: set[str] = field(default_factory=set)
    sitelinks: int | None = None
    languages: int | None = None


def open_source(source: str) -> SelectSource:
    """``"embedded"`` / ``"embedded:NAME"`` -> in-process store; an http(s) URL -> client."""
    if source == "embedded" or source.startswith("embedded:"):
        from kgprobe.sources.embedded import DEFAULT_EMBEDDED_KG, EmbeddedStore

        return EmbeddedStore(source.partition(":")[2] or DEFAULT_EMBEDDED_KG)
    if source.startswith(("http://", "https://")):
        from kgprobe.sources.sparql import SparqlClient

        return SparqlClient(source)
    raise InputError(f"unknown KG source {source!r}: give 'embedded', 'embedded:countries', or a SPARQL endpoint URL")


class SeedAmbiguityWarning(UserWarning):
    """A seed label matched several entities that label and sitelinks do not tell apart."""


_ID_RE = re.compile(r"^(Q\d+|geonames:\d+|kgprobe:\S+|<[^<>\s]+>)$")


class _Builder:
    def __init__(self, source: SelectSource, options: BuildOptions):
        from kgprobe.sources.validate import check_language_tag

        # Every value that reaches a query is checked here, before the first query.
        check_language_tag(options.lang, "--lang")
        for name in ("hops", "per_hop_limit", "seed", "min_sitelinks", "min_languages", "max_objects_per_pair",
                     "candidate_limit", "chunk_size"):
            value = getattr(options, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"build option {name} must be an integer, not {value!r}")
        if options.chunk_size < 1:
            raise InputError(f"build option chunk_size must be at least 1 (got {options.chunk_size})")
        for p in sorted(options.excluded_predicates) + sorted(options.dead_predicates):
            try:
                predicate_iri(p)
            except ValueError as exc:
                raise InputError(f"predicate {p!r}: {exc}") from None
        self.src = source
        self.o = options
        self.salt = f"kgprobe-{options.seed}"
        self.names: dict[str, _Names] = {}
        self.resolved_labels: dict[str, str] = {}

    # -- query helpers ---------------------------------------------------------------
    def _common(self) -> dict[str, str]:
        return {
            "excluded": ", ".join(f"<{predicate_iri(p)}>" for p in sorted(self.o.excluded_predicates)) or "",
            "property_types": ", ".join(f"<{WIKIBASE}{t}>" for t in self.o.property_types),
            "lang": self.o.lang,
            "salt": self.salt,
        }

    def _chunks(self, items: Sequence[str]) -> Iterable[Sequence[str]]:
        for i in range(0, len(items), self.o.chunk_size):
            yield items[i : i + self.o.chunk_size]

    def walk(self, name: str, var: str, frontier: Sequence[str], limit: int) -> list[tuple[str, str, str, str]]:
        """Top ``limit`` (rank, s, p, o) edges of a forward or backward walk from ``frontier``."""
        out: dict[tuple[str, str, str], str] = {}
        for chunk in self._chunks(frontier):
            q = render_query(name, **{var: " ".join(sparql_term(e) for e in chunk)}, **self._common())
            for row in self.src.select(q, limit=limit):
                try:
                    if row["subject"].kind == "bnode" or row["object"].kind == "bnode":
                        continue  # anonymous nodes cannot be named in a question or a later query
                    key = (row["subject"].id, row["predicate"].id, row["object"].id)
                    out[key] = row["rank"].value
                except KeyError as exc:
                    raise SourceError(f"{self.src.endpoint} answered the {name} query without ?{exc.args[0]}") from None
        ranked = sorted((rank, *key) for key, rank in out.items())
        return ranked[:limit]

    def fetch_names(self, ids: Iterable[str]) -> None:
        todo = sorted({e for e in ids if e not in self.names and not is_literal_id(e)})
        for e in todo:
            self.names[e] = _Names()
        todo = [e for e in todo if _sparql_safe(e)]
        for chunk in self._chunks(todo):
            q = render_query("entity_labels", entities=" ".join(sparql_term(e) for e in chunk), lang=self.o.lang)
            for row in self.src.select(q):
                n = self.names.get(row["entity"].id)
                if n is None:
                    continue
                kind, value = row["kind"].value, row["value"]
                if kind == "label":
                    n.label = value.value if n.label is None else min(n.label, value.value)
                elif kind == "alias":
                    n.aliases.add(value.value)
                elif kind == "description":
                    n.description = value.value if n.description is None else min(n.description, value.value)
                elif kind == "class":
                    n.classes.add(value.id)
                elif kind == "sitelinks":
                    try:
                        n.sitelinks = int(float(value.value))
                    except ValueError:
                        pass
            if self.o.min_languages > 0:
                q = render_query("label_languages", entities=" ".join(sparql_term(e) for e in chunk))
                for row in self.src.select(q):
                    n = self.names.get(row["entity"].id)
                    if n is not None:
                        n.languages = int(row["languages"].value)

    def passes(self, entity: str) -> bool:
        if is_literal_id(entity):
            return True
        n = self.names[entity]
        if n.label is None:
            return False
        if self.o.require_aliases and not (n.aliases - {n.label}):
            return False
        if self.o.min_sitelinks and n.sitelinks is not None and n.sitelinks < self.o.min_sitelinks:
            return False
        if self.o.min_languages and (n.languages or 0) < self.o.min_languages:
            return False
        return True

    # -- seeds -----------------------------------------------------------------------
    def resolve_seeds(self, seeds: Sequence[str]) -> list[str]:
        if not seeds:
            raise InputError("no seed entities given; pass QIDs (Q142) or English labels (France)")
        ids: list[str] = []
        for s in seeds:
            if s.strip().startswith("<") and not _ID_RE.match(s.strip()):
                raise InputError(f"seed {s.strip()!r} looks like an IRI but is not one SPARQL can write (<...> "
                                 "without spaces, quotes or braces)")
        by_label = [s for s in seeds if not _ID_RE.match(s.strip())]
        resolved: dict[str, str] = {}
        if by_label:
            values = " ".join(literal_id(s.strip(), lang=self.o.lang) for s in by_label)
            best: dict[str, tuple] = {}
            tied: dict[str, set[str]] = {}
            for row in self.src.select(render_query("resolve_labels", names=values)):
                name, entity = row["name"].value, row["entity"].id
                sitelinks = int(float(row["sitelinks"].value)) if "sitelinks" in row else -1
                # prefer labels over aliases, then the best-known (sitelinks, on Wikidata)
                key = (row["how"].value != "label", -sitelinks)
                if name not in best or key < best[name]:
                    best[name], tied[name] = key, {entity}
                elif key == best[name]:
                    tied[name].add(entity)
            resolved = self._settle_ties(tied)
        self.resolved_labels = resolved
        for s in seeds:
            s = s.strip()
            if _ID_RE.match(s):
                if not _sparql_safe(s):
                    raise InputError(f"seed {s!r} is not a valid entity id (its IRI has characters SPARQL forbids)")
                ids.append(s)
            elif s in resolved:
                ids.append(resolved[s])
            else:
                raise InputError(
                    f"seed {s!r} matches no entity label or alias in language {self.o.lang!r} at "
                    f"{self.src.endpoint}; check the spelling or give its QID"
                )
        self.fetch_names(ids)
        for s in ids:
            if self.names[s].label is None:
                raise InputError(
                    f"seed {s} is unknown at {self.src.endpoint} (no {self.o.lang!r} label); check the id"
                )
        return list(dict.fromkeys(ids))

    def _settle_ties(self, tied: dict[str, set[str]]) -> dict[str, str]:
        """The entity each seed name stands for, among those it matches equally well.

        Where a label and sitelinks leave several entities (a local server or the embedded
        store have no sitelinks: "Venezuela" is a country and a town in Cuba there), the one
        with the most direct claims, then the lowest id (:func:`_id_order`); the choice is
        named in a warning with the others, so a user who meant another passes its id.
        """
        several = sorted({e for ents in tied.values() if len(ents) > 1 for e in ents if _sparql_safe(e)})
        claims: dict[str, int] = {}
        for chunk in self._chunks(several):
            q = render_query("entity_claims", entities=" ".join(sparql_term(e) for e in chunk))
            for row in self.src.select(q):
                claims[row["entity"].id] = int(float(row["claims"].value))
        out: dict[str, str] = {}
        for name, ents in tied.items():
            ranked = sorted(ents, key=lambda e: (-claims.get(e, 0), _id_order(e)))
            out[name] = ranked[0]
            if len(ranked) > 1:
                why = ("the one with the most claims" if claims.get(ranked[0], 0) > claims.get(ranked[1], 0)
                       else "the lowest id of those with the most claims")
                self.fetch_names(ranked)
                described = [f"{e} ({self.names[e].description or 'no description'}; {claims.get(e, 0)} claims)"
                             for e in ranked]
                for e in ranked[1:]:
                    del self.names[e]  # named for the message only; the walk fetches them again if it meets them
                warnings.warn(f"seed {name!r} matches {len(ranked)} entities equally well at {self.src.endpoint}; "
                              f"using {described[0]}, {why}; the others: {', '.join(described[1:])}; "
                              "pass an id as the seed to choose another",
                              SeedAmbiguityWarning, stacklevel=2)
        return out

    # -- the build -------------------------------------------------------------------
    def run(self, seeds: Sequence[str]) -> KnowledgeGraph:
        o = self.o
        if o.hops < 1:
            raise InputError(f"--hops must be at least 1 (got {o.hops})")
        if o.per_hop_limit < 1:
            raise InputError(f"--per-hop-limit must be at least 1 (got {o.per_hop_limit})")
        seed_ids = self.resolve_seeds(seeds)
        visited = set(seed_ids)
        frontier = list(seed_ids)
        edges: set[tuple[str, str, str]] = set()
        for hop in range(o.hops):
            if not frontier:
                break
            fwd = self.walk("forward_walk", "subjects", frontier, o.per_hop_limit)
            bwd = self.walk("backward_walk", "objects", frontier, o.per_hop_limit)
            if hop == 0:
                self._check_seeds_have_edges(seed_ids, fwd, bwd)
            hop_edges = [(s, p, ob) for _, s, p, ob in fwd + bwd]
            self.fetch_names(x for s, _, ob in hop_edges for x in (s, ob))
            new: list[str] = []
            for s, p, ob in hop_edges:
                if not (self.passes(s) or s in visited) or not (self.passes(ob) or ob in visited):
                    continue
                edges.add((s, p, ob))
                for x in (s, ob):
                    if x not in visited and not is_literal_id(x):
                        visited.add(x)
                        if _sparql_safe(x):  # an IRI SPARQL cannot write stays a leaf
                            new.append(x)
            frontier = sorted(new)
        self._complete_true_objects(edges)
        candidates = self._candidates(edges)
        return self._assemble(seed_ids, edges, candidates)

    def _check_seeds_have_edges(self, seeds, fwd, bwd) -> None:
        touched = {x for _, s, _, ob in fwd + bwd for x in (s, ob)}
        for s in seeds:
            if s in touched:
                continue
            # the hop's limit may have crowded this seed out; ask for one edge of its own
            if self.walk("forward_walk", "subjects", [s], 1) or self.walk("backward_walk", "objects", [s], 1):
                continue
            raise InputError(
                f"seed {s} ({self.names[s].label}) has no edges at {self.src.endpoint} with the allowed "
                "predicates; choose another seed"
            )

    def _complete_true_objects(self, edges: set[tuple[str, str, str]]) -> None:
        pairs = sorted({(s, p) for s, p, _ in edges if _sparql_safe(s)})
        extra: set[tuple[str, str, str]] = set()
        for chunk in self._chunks(pairs):
            values = " ".join(f"({sparql_term(s)} <{predicate_iri(p)}>)" for s, p in chunk)
            rows = self.src.select(render_query("true_objects", pairs=values, lang=self.o.lang))
            per_pair: dict[tuple[str, str], int] = {}
            for row in rows:
                key = (row["subject"].id, row["predicate"].id)
                if per_pair.get(key, 0) >= self.o.max_objects_per_pair:
                    continue
                per_pair[key] = per_pair.get(key, 0) + 1
                extra.add((*key, row["object"].id))
        self.fetch_names(ob for _, _, ob in extra)
        # filtered entities appear nowhere: neither as objects nor as candidates
        edges |= {e for e in extra if self.passes(e[2])}

    def _candidates(self, edges) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for p in sorted({p for _, p, _ in edges}):
            if p in self.o.dead_predicates:
                continue
            in_graph = list(dict.fromkeys(ob for s, pp, ob in sorted(edges) if pp == p))
            more: list[str] = []
            if self.o.candidate_limit > 0:
                q = render_query("candidate_objects", predicate=f"<{predicate_iri(p)}>", lang=self.o.lang, salt=self.salt)
                more = [row["object"].id for row in self.src.select(q, limit=self.o.candidate_limit)]
            self.fetch_names(more)
            seen = set(in_graph)
            out[p] = in_graph + [x for x in more if x not in seen and self.passes(x) and not seen.add(x)]
        return out

    def _predicate_names(self, predicates: Sequence[str]) -> dict[str, Predicate]:
        labels: dict[str, str] = {}
        descriptions: dict[str, str] = {}
        aliases: dict[str, set[str]] = {p: set() for p in predicates}
        for chunk in self._chunks(list(predicates)):
            q = render_query("predicate_labels", predicates=" ".join(f"<{predicate_iri(p)}>" for p in chunk), lang=self.o.lang)
            for row in self.src.select(q):
                pid, kind, value = row["predicate"].id, row["kind"].value, row["value"].value
                if kind == "label":
                    labels[pid] = min(labels.get(pid, value), value)
                elif kind == "alias":
                    aliases.setdefault(pid, set()).add(value)
                elif kind == "description":
                    descriptions[pid] = min(descriptions.get(pid, value), value)
        return {
            p: Predicate(p, labels.get(p, p), tuple(sorted(aliases.get(p, ()))), descriptions.get(p, ""))
            for p in predicates
        }

    def _entity(self, eid: str) -> Entity:
        if is_literal_id(eid):
            return Entity(eid, literal_value(eid), is_literal=True, group=LITERAL_GROUP)
        n = self.names[eid]
        label = n.label or eid
        return Entity(
            eid, label, tuple(sorted(a for a in n.aliases if a != label)), n.description or "",
            group=group_of(n.classes),
        )

    def _assemble(self, seeds, edges, candidates) -> KnowledgeGraph:
        ordered = sorted(edges)
        entity_ids = list(dict.fromkeys(x for s, _, ob in ordered for x in (s, ob)))
        extra = sorted({x for objs in candidates.values() for x in objs} - set(entity_ids))
        predicates = self._predicate_names(sorted({p for _, p, _ in ordered}))
        o = self.o
        return KnowledgeGraph(
            (self._entity(e) for e in entity_ids + extra),
            predicates.values(),
            (Triple(s, p, ob, p not in o.dead_predicates) for s, p, ob in ordered),
            candidates=candidates,
            name="+".join(self.names[s].label or s for s in seeds),
            metadata={
                "source": self.src.endpoint,
                "seeds": list(seeds),
                "resolved_labels": dict(self.resolved_labels),
                "hops": o.hops,
                "per_hop_limit": o.per_hop_limit,
                "seed": o.seed,
                "lang": o.lang,
                "require_aliases": o.require_aliases,
                "min_sitelinks": o.min_sitelinks,
                "min_languages": o.min_languages,
                "dead_predicates": sorted(o.dead_predicates),
                "excluded_predicates": sorted(o.excluded_predicates),
                "candidate_limit": o.candidate_limit,
            },
        )


def _sparql_safe(entity_id: str) -> bool:
    try:
        sparql_term(entity_id)
    except ValueError:
        return False
    return True


def _id_order(entity_id: str) -> tuple:
    """QIDs first, then ids that end in a number (geonames:935225 before geonames:2978771),
    each by that number, then the rest by text."""
    m = re.match(r"^Q(\d+)$", entity_id)
    if m:
        return (0, "", int(m.group(1)), "")
    m = re.match(r"^(.*?)(\d+)$", entity_id)
    return (1, m.group(1), int(m.group(2)), "") if m else (2, "", 0, entity_id)


def build_kg(
    source: str | SelectSource,
    seeds: Sequence[str],
    hops: int = 2,
    **options,
) -> KnowledgeGraph:
    """Build a KG by random walks from ``seeds`` (QIDs or English labels).

    ``source`` is ``"embedded"`` (default embedded data), ``"embedded:countries"``, a
    SPARQL endpoint URL, or an object with ``select`` (:class:`SparqlClient`,
    :class:`EmbeddedStore`). ``options`` are the fields of :class:`BuildOptions`.
    Raises :class:`InputError` for unknown seeds / seeds without edges and
    :class:`SourceError` when the source fails. The number of queries sent is
    ``source.queries_issued`` (also in ``kg.metadata["queries"]``).
    """
    src = open_source(source) if isinstance(source, str) else source
    unknown = set(options) - set(BuildOptions.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown build options: {', '.join(sorted(unknown))}")
    if "dead_predicates" in options:
        options["dead_predicates"] = frozenset(options["dead_predicates"])
    if "excluded_predicates" in options:
        options["excluded_predicates"] = frozenset(options["excluded_predicates"])
    before = src.queries_issued
    try:
        kg = _Builder(src, BuildOptions(hops=hops, **options)).run(list(seeds))
    except (KeyError, AttributeError, TypeError) as exc:
        # An answer of the wrong shape (a variable missing, a literal where an IRI belongs).
        raise SourceError(f"{src.endpoint} answered a query with rows of the wrong shape ({type(exc).__name__}: "
                          f"{str(exc)[:120]}); is it a SPARQL endpoint holding Wikidata-style data?") from None
    kg.metadata["queries"] = src.queries_issued - before
    return kg

"""Wikidata-shaped RDF vocabulary and the mapping between RDF terms and kgprobe ids.

Entity id scheme (stable; used in KG files, run stores and reports):

* a Wikidata item or property IRI ``http://www.wikidata.org/entity/Q142`` -> ``Q142``;
  a direct-claim predicate ``http://www.wikidata.org/prop/direct/P36`` -> ``P36``;
* a GeoNames feature ``https://sws.geonames.org/3017382/`` -> ``geonames:3017382``;
* an IRI minted by kgprobe's embedded data ``urn:kgprobe:language:fra`` -> ``kgprobe:language:fra``;
* any other IRI -> the IRI in angle brackets, ``<http://example.org/x>``;
* a literal -> its N-Triples form: ``"+33"``, ``"French"@en``,
  ``"66987244"^^<http://www.w3.org/2001/XMLSchema#decimal>``. The entity's label is the
  literal's lexical form and ``is_literal`` is true.

Every mapping is reversible (:func:`id_to_term`), so the same id always names the same
RDF term whichever endpoint a KG was built from.
"""

from __future__ import annotations

import re

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
WIKIBASE = "http://wikiba.se/ontology#"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_ALT_LABEL = "http://www.w3.org/2004/02/skos/core#altLabel"
SCHEMA_DESCRIPTION = "http://schema.org/description"
GEONAMES = "https://sws.geonames.org/"
KGPROBE_URN = "urn:kgprobe:"
XSD = "http://www.w3.org/2001/XMLSchema#"

#: Wikidata's English labels and descriptions of every property the embedded KGs use.
#: Schema metadata (not facts), recorded so the embedded store answers the same
#: predicate-label query as Wikidata.
PROPERTIES: dict[str, tuple[str, str, str]] = {
    # id: (label, description, wikibase property type)
    "P17": ("country", "sovereign state that this item is in", "WikibaseItem"),
    "P30": ("continent", "continent of which the subject is a part", "WikibaseItem"),
    "P31": ("instance of", "that class of which this subject is a particular example and member", "WikibaseItem"),
    "P36": ("capital", "seat of government of a country, province, state or other type of administrative territorial entity", "WikibaseItem"),
    "P37": ("official language", "language designated as official by this item", "WikibaseItem"),
    "P38": ("currency", "currency used by item", "WikibaseItem"),
    "P47": ("shares border with", "countries or administrative subdivisions, of equal level, that this item borders", "WikibaseItem"),
    "P78": ("top-level Internet domain", "Internet domain name system top-level code", "WikibaseItem"),
    "P131": ("located in the administrative territorial entity", "the item is located on the territory of the following administrative entity", "WikibaseItem"),
    "P361": ("part of", "object of which the subject is a part", "WikibaseItem"),
    "P421": ("located in time zone", "time zone for this item", "WikibaseItem"),
    "P474": ("country calling code", "telephone number prefix for a country", "String"),
    "P1082": ("population", "number of people inhabiting the place", "Quantity"),
    "P1376": ("capital of", "country, state, department, canton or other administrative division of which the municipality is the governmental seat", "WikibaseItem"),
    "P1549": ("demonym", "demonym (proper noun) for people or things associated with a given place", "Monolingualtext"),
}

_GEONAMES_RE = re.compile(r"^https://sws\.geonames\.org/(\d+)/$")


def iri_to_id(iri: str) -> str:
    """The kgprobe id of an IRI (see the module docstring for the scheme)."""
    if iri.startswith(WD):
        return iri[len(WD):]
    if iri.startswith(WDT):
        return iri[len(WDT):]
    m = _GEONAMES_RE.match(iri)
    if m:
        return f"geonames:{m.group(1)}"
    if iri.startswith(KGPROBE_URN):
        return "kgprobe:" + iri[len(KGPROBE_URN):]
    return f"<{iri}>"


_QID_RE = re.compile(r"^[QPL]\d+$")


def entity_iri(entity_id: str) -> str:
    """The IRI of a non-literal entity id (inverse of :func:`iri_to_id` for nodes)."""
    if _QID_RE.match(entity_id):
        return WD + entity_id
    if entity_id.startswith("geonames:"):
        return f"{GEONAMES}{entity_id[len('geonames:'):]}/"
    if entity_id.startswith("kgprobe:"):
        return KGPROBE_URN + entity_id[len("kgprobe:"):]
    if entity_id.startswith("<") and entity_id.endswith(">"):
        return entity_id[1:-1]
    raise ValueError(f"{entity_id!r} is not an entity id (expected Q123, geonames:N, kgprobe:..., or <IRI>)")


def predicate_iri(predicate_id: str) -> str:
    """The direct-claim IRI of a predicate id: ``P36`` -> ``wdt:P36``; ``<iri>`` -> iri."""
    if re.match(r"^P\d+$", predicate_id):
        return WDT + predicate_id
    if predicate_id.startswith("<") and predicate_id.endswith(">"):
        from kgprobe.sources.validate import check_iri

        return check_iri(predicate_id[1:-1])
    raise ValueError(f"{predicate_id!r} is not a predicate id (expected P123 or <IRI>)")


def _escape_literal(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )


def literal_id(value: str, *, lang: str | None = None, datatype: str | None = None) -> str:
    """The id of a literal: its N-Triples form (plain strings carry no datatype)."""
    body = f'"{_escape_literal(value)}"'
    if lang:
        from kgprobe.sources.validate import check_language_tag

        check_language_tag(lang, "language tag")
        return f"{body}@{lang.lower()}"
    if datatype and datatype != XSD + "string":
        return f"{body}^^<{datatype}>"
    return body


def is_literal_id(entity_id: str) -> bool:
    return entity_id.startswith('"')


def literal_value(entity_id: str) -> str:
    """The lexical form of a literal id (its label)."""
    end = entity_id.rindex('"')
    raw = entity_id[1:end]
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            out.append({"n": "\n", "r": "\r", '"': '"', "\\": "\\"}.get(nxt, nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def sparql_term(entity_id: str) -> str:
    """The SPARQL text of an entity id, usable in a ``VALUES`` block."""
    if is_literal_id(entity_id):
        from kgprobe.sources.validate import check_literal

        return check_literal(entity_id)
    return f"<{entity_id_iri_checked(entity_id)}>"


def entity_id_iri_checked(entity_id: str) -> str:
    iri = entity_iri(entity_id)
    if any(c in iri for c in '<>"{}|^`\\ ') or any(ord(c) <= 0x20 for c in iri):
        raise ValueError(f"entity id {entity_id!r} maps to an IRI with characters SPARQL forbids")
    return iri


# -- predicate policy ----------------------------------------------------------------

#: Predicates whose edges stay in a KG for structure and propagation but are never asked
#: about (KGLens' dead edges): too prevalent or not knowledge a question can test fairly.
#: P421 (time zone) links most places to a few hubs; P1082 (population) is an exact
#: number that changes every year; the Wikidata ones are KGLens' examples and their kin.
DEAD_PREDICATES: frozenset[str] = frozenset(
    {
        "P421",  # located in time zone
        "P1082",  # population
        "P463",  # member of
        "P530",  # diplomatic relation
        "P150",  # contains the administrative territorial entity
        "P1343",  # described by source
        "P910",  # topic's main category
        "P1889",  # different from
        "P460",  # said to be the same as
    }
)

#: ``wdt:P31`` classes of entities that no longer exist (Wikidata's "historical country").
#: Sources often describe them as if current (a dissolved state "borders" today's
#: neighbours), so every edge touching one is dead: kept for structure, never asked about.
DISSOLVED_CLASSES: frozenset[str] = frozenset({"Q3024240"})

#: Predicates never turned into edges: class membership gives an entity its group.
STRUCTURAL_PREDICATES: frozenset[str] = frozenset({"P31", "P279"})

#: ``wdt:P31`` classes -> coarse entity group. Wikidata classes plus the embedded data's.
GROUP_CLASSES: dict[str, str] = {
    "Q6256": "country",
    "Q3624078": "country",  # sovereign state
    "Q515": "city",
    "Q5107": "continent",
    "Q34770": "language",
    "Q8142": "currency",
    "Q12143": "timezone",
    "Q82794": "region",
    "Q1549591": "city",  # big city
    "Q486972": "settlement",  # human settlement
    "Q5": "human",
    "Q3024240": "former country",  # historical country
    "Q11424": "film",
    "kgprobe:class:domain": "domain",
    "kgprobe:class:us-state": "state",
    "kgprobe:class:us-county": "county",
}

#: Group of literal objects.
LITERAL_GROUP = "literal"


class Term(tuple):
    """One RDF term from a query result: ``kind`` is ``uri``, ``literal`` or ``bnode``."""

    __slots__ = ()

    def __new__(cls, kind: str, value: str, lang: str | None = None, datatype: str | None = None):
        return super().__new__(cls, (kind, value, lang or None, datatype or None))

    kind = property(lambda self: self[0])
    value = property(lambda self: self[1])
    lang = property(lambda self: self[2])
    datatype = property(lambda self: self[3])

    @property
    def id(self) -> str:
        """The kgprobe id of this term."""
        if self.kind == "literal":
            return literal_id(self.value, lang=self.lang, datatype=self.datatype)
        if self.kind == "bnode":
            return f"_:{self.value}"
        return iri_to_id(self.value)

    def to_json(self) -> dict:
        out = {"type": self.kind, "value": self.value}
        if self.lang:
            out["xml:lang"] = self.lang
        if self.datatype:
            out["datatype"] = self.datatype
        return out

    @classmethod
    def from_json(cls, binding: dict) -> "Term":
        """A term from a SPARQL 1.1 JSON results binding."""
        kind = binding.get("type")
        if kind == "typed-literal":  # SPARQL 1.0-era servers
            kind = "literal"
        if kind not in ("uri", "literal", "bnode") or "value" not in binding:
            raise ValueError(f"not a SPARQL JSON term: {binding!r}")
        return cls(kind, binding["value"], binding.get("xml:lang"), binding.get("datatype"))

    @classmethod
    def from_oxigraph(cls, term) -> "Term":
        import pyoxigraph as ox

        if isinstance(term, ox.NamedNode):
            return cls("uri", term.value)
        if isinstance(term, ox.Literal):
            dt = term.datatype.value if term.datatype is not None else None
            if term.language or dt in (XSD + "string", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"):
                dt = None
            return cls("literal", term.value, term.language, dt)
        if isinstance(term, ox.BlankNode):
            return cls("bnode", term.value)
        raise ValueError(f"unsupported RDF term {term!r}")


def group_of(class_ids) -> str:
    """The group of an entity from its ``P31`` class ids (first known class, sorted)."""
    for c in sorted(class_ids):
        if c in GROUP_CLASSES:
            return GROUP_CLASSES[c]
    return ""


_ANNOTATIONS = {RDFS_LABEL: "label", SKOS_ALT_LABEL: "alias", SCHEMA_DESCRIPTION: "description"}


def kg_from_rdf(
    triples,
    *,
    name: str = "",
    lang: str = "en",
    dead_predicates=DEAD_PREDICATES,
    metadata=None,
):
    """A :class:`~kgprobe.kg.graph.KnowledgeGraph` from ``(s, p, o)`` :class:`Term` triples.

    ``rdfs:label`` / ``skos:altLabel`` / ``schema:description`` in language ``lang`` (or
    untagged) become entity names; ``wdt:P31`` gives the group; property entities
    (``wikibase:directClaim``) give predicate labels; every other triple whose object is
    an IRI or literal is an edge, dead if its predicate is in ``dead_predicates`` or it
    touches an entity of a :data:`DISSOLVED_CLASSES` class. Edges
    are ordered by (subject, predicate, object) id so the order does not depend on the
    source's.
    """
    from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple

    labels: dict[str, str] = {}
    aliases: dict[str, set[str]] = {}
    descriptions: dict[str, str] = {}
    classes: dict[str, set[str]] = {}
    direct_claim_of: dict[str, str] = {}  # property entity id -> predicate id
    edges: set[tuple[str, str, str]] = set()

    def wanted(term: Term) -> bool:
        return term.kind == "literal" and (term.lang is None or term.lang.lower() == lang.lower())

    for s, p, o in triples:
        if s.kind != "uri" or p.kind != "uri" or o.kind == "bnode":
            continue
        sid = s.id
        kind = _ANNOTATIONS.get(p.value)
        if kind is not None:
            if not wanted(o):
                continue
            if kind == "label":
                # several labels in one language: keep the smallest, so order never matters
                labels[sid] = min(labels.get(sid, o.value), o.value)
            elif kind == "alias":
                aliases.setdefault(sid, set()).add(o.value)
            else:
                descriptions[sid] = min(descriptions.get(sid, o.value), o.value)
            continue
        if p.value == WIKIBASE + "directClaim":
            direct_claim_of[sid] = o.id
            continue
        if p.value.startswith(WIKIBASE):
            continue
        pid = p.id
        if pid in STRUCTURAL_PREDICATES:
            classes.setdefault(sid, set()).add(o.id)
            continue
        edges.add((sid, pid, o.id))

    ordered = sorted(edges)
    entities: dict[str, Entity] = {}
    for s, _, o in ordered:
        for eid in (s, o):
            if eid in entities:
                continue
            if is_literal_id(eid):
                entities[eid] = Entity(eid, literal_value(eid), is_literal=True, group=LITERAL_GROUP)
            else:
                label = labels.get(eid, eid)
                entities[eid] = Entity(
                    eid,
                    label,
                    aliases=tuple(sorted(a for a in aliases.get(eid, ()) if a != label)),
                    description=descriptions.get(eid, ""),
                    group=group_of(classes.get(eid, ())),
                )
    predicate_label = {direct_claim_of[k]: labels[k] for k in direct_claim_of if k in labels}
    predicate_aliases = {direct_claim_of[k]: tuple(sorted(aliases.get(k, ()))) for k in direct_claim_of}
    predicate_description = {direct_claim_of[k]: descriptions[k] for k in direct_claim_of if k in descriptions}
    predicates = [
        Predicate(pid, predicate_label.get(pid, pid), predicate_aliases.get(pid, ()), predicate_description.get(pid, ""))
        for pid in sorted({p for _, p, _ in ordered})
    ]
    dissolved = {eid for eid, cls in classes.items() if cls & DISSOLVED_CLASSES}
    triples_out = [
        Triple(s, p, o, p not in dead_predicates and s not in dissolved and o not in dissolved)
        for s, p, o in ordered
    ]
    return KnowledgeGraph(entities.values(), predicates, triples_out, name=name, metadata=metadata)

"""The real queries/*.rq run over HTTP against a real oxigraph server (through
SPARQLWrapper) and in-process on the embedded store must give the same rows."""

from __future__ import annotations

import hashlib
import math

import pytest

from kgprobe.kg.build import build_kg
from kgprobe.sources.queries import QUERY_NAMES, render_query
from kgprobe.sources.sparql import SparqlClient, cache_dir

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
COMMON = dict(
    excluded=f"<{WDT}P31>, <{WDT}P279>",
    property_types="<http://wikiba.se/ontology#WikibaseItem>, <http://wikiba.se/ontology#String>, "
    "<http://wikiba.se/ontology#Monolingualtext>",
    lang="en",
    salt="kgprobe-0",
)

QUERIES = {
    "forward_walk": dict(subjects=f"<{WD}Q142> <{WD}Q17>", **COMMON),
    "backward_walk": dict(objects=f"<{WD}Q142> <{WD}Q183>", **COMMON),
    "entity_labels": dict(entities=f"<{WD}Q142> <https://sws.geonames.org/2988507/> <urn:kgprobe:currency:EUR>", lang="en"),
    "predicate_labels": dict(predicates=f"<{WDT}P36> <{WDT}P47>", lang="en"),
    "true_objects": dict(pairs=f"(<{WD}Q142> <{WDT}P47>) (<{WD}Q17> <{WDT}P36>)", lang="en"),
    "candidate_objects": dict(predicate=f"<{WDT}P38>", lang="en", salt="kgprobe-0"),
    "resolve_labels": dict(names='"France"@en "Nippon"@en'),
    "entity_claims": dict(entities=f"<{WD}Q142> <{WD}Q183> <urn:kgprobe:currency:EUR>"),
    "label_languages": dict(entities=f"<{WD}Q142> <{WD}Q183>"),
}


def test_every_query_file_is_covered():
    assert set(QUERIES) == set(QUERY_NAMES)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_server_and_embedded_store_agree(name, countries_server, countries_store):
    query = render_query(name, **QUERIES[name])
    client = SparqlClient(countries_server.query_url, cache=False)
    over_http = client.select(query)
    in_process = countries_store.select(query)
    assert over_http == in_process
    assert over_http, f"{name} returned nothing; the comparison would be empty"


def test_forward_walk_order_is_the_md5_rank(countries_store):
    rows = countries_store.select(render_query("forward_walk", **{**QUERIES["forward_walk"], "subjects": f"<{WD}Q142>"}))
    keys = [(r["subject"].value, r["predicate"].value, r["object"].value) for r in rows]
    # the order must be MD5("s p o salt") computed independently here
    expected = sorted(keys, key=lambda k: hashlib.md5(f"{k[0]} {k[1]} {k[2]} kgprobe-0".encode()).hexdigest())
    assert keys == expected
    assert (WD + "Q142", WDT + "P36", "https://sws.geonames.org/2988507/") in keys  # Paris
    assert all(k[1] != WDT + "P31" for k in keys)  # excluded predicate
    assert all(k[1] != WDT + "P1082" for k in keys)  # population is a Quantity: not an edge type


def test_labels_query_gives_each_fact_once(countries_store):
    rows = countries_store.select(render_query("entity_labels", **QUERIES["entity_labels"]))
    facts = {(r["entity"].id, r["kind"].value, r["value"].id) for r in rows}
    assert ("kgprobe:currency:EUR", "label", '"Euro"@en') in facts
    assert ("kgprobe:currency:EUR", "alias", '"EUR"@en') in facts
    assert ("Q142", "class", "Q6256") in facts
    assert len(facts) == len(rows)


def test_resolve_labels_finds_labels_and_aliases(countries_store):
    rows = countries_store.select(render_query("resolve_labels", **QUERIES["resolve_labels"]))
    found = {(r["name"].value, r["entity"].id, r["how"].value) for r in rows}
    assert ("France", "Q142", "label") in found
    assert ("Nippon", "Q17", "alias") in found  # countryinfo's altSpellings of Japan


def test_paging_gives_the_same_rows_in_pages(countries_server):
    query = render_query("backward_walk", **QUERIES["backward_walk"])
    whole = SparqlClient(countries_server.query_url, cache=False, page_size=None)
    paged = SparqlClient(countries_server.query_url, cache=False, page_size=7)
    rows = whole.select(query)
    assert paged.select(query) == rows
    # full pages plus one short (possibly empty) page that tells the client it is done
    assert paged.queries_issued == len(rows) // 7 + 1
    assert math.ceil(len(rows) / 7) <= paged.queries_issued
    assert paged.select(query, limit=10) == rows[:10]


def test_cache_answers_repeated_queries(countries_server, tmp_path):
    query = render_query("predicate_labels", **QUERIES["predicate_labels"])
    client = SparqlClient(countries_server.query_url)
    first = client.select(query)
    assert client.queries_issued == 1 and client.cache_hits == 0
    assert client.select(query) == first
    assert client.queries_issued == 1 and client.cache_hits == 1
    # the conftest points KGPROBE_CACHE_DIR at this test's tmp_path
    assert cache_dir() == tmp_path / "cache"
    assert len(list((tmp_path / "cache" / "sparql").rglob("*.json"))) == 1
    # another endpoint URL is another cache key
    other = SparqlClient(countries_server.query_url + "?")
    other.select(query)
    assert other.queries_issued == 1


def test_same_build_from_server_and_embedded_store_is_identical(countries_server, countries_store):
    seeds = ["Q142", "Japan", "Q183"]
    client = SparqlClient(countries_server.query_url, cache=False)
    a = build_kg(client, seeds, hops=2, per_hop_limit=200)
    b = build_kg(countries_store, seeds, hops=2, per_hop_limit=200)
    assert a.triples() == b.triples()
    assert a.entities == b.entities
    assert a.predicates == b.predicates
    assert a.explicit_candidates == b.explicit_candidates
    assert a.num_edges > 300
    assert a.metadata["queries"] == b.metadata["queries"] == client.queries_issued

"""The KG builder on the embedded countries store, checked against the data itself."""

from __future__ import annotations

import pytest

from kgprobe.errors import InputError
from kgprobe.kg.build import build_kg
from kgprobe.sources.embedded import load_embedded_kg

def one_hop_with_true_objects(kg, entity):
    """What a 1-hop unlimited walk from ``entity`` must give, derived from the full KG
    (parsed from the data file, no SPARQL): every edge with ``entity`` at an end, plus
    every other object of each (subject, predicate) pair among those edges (true-object
    completion). Population is excluded: a Quantity property, not an edge type."""
    triples = [t for t in kg.triples() if t.predicate != "P1082"]
    pairs = {(t.subject, t.predicate) for t in triples if entity in (t.subject, t.object)}
    return sorted((t.subject, t.predicate, t.object, t.active) for t in triples if (t.subject, t.predicate) in pairs)


def test_one_hop_without_limits_is_exactly_the_seeds_neighbourhood(countries_store):
    full = load_embedded_kg("countries")
    kg = build_kg(countries_store, ["Q142"], hops=1, per_hop_limit=10_000, candidate_limit=0)
    got = sorted((t.subject, t.predicate, t.object, t.active) for t in kg.triples())
    # the whole KG parsed from the data file (no SPARQL) gives the expected edges
    assert got == one_hop_with_true_objects(full, "Q142")
    # Germany borders France; completion brings in all of Germany's borders (Poland: Q36)
    assert ("Q183", "P47", "Q36", True) in got
    # P421 time zone edges are dead, P36 capital active
    assert ("Q142", "P421", "kgprobe:timezone:UTC+01:00", False) in got
    assert ("Q142", "P36", "geonames:2988507", True) in got
    assert kg.entity("Q142").group == "country" and kg.label("geonames:2988507") == "Paris"
    # with candidate_limit=0 a predicate's candidates are its objects in the graph
    assert kg.candidate_objects("P38") == ("kgprobe:currency:EUR",)
    assert kg.metadata["seeds"] == ["Q142"] and kg.metadata["hops"] == 1


def test_per_hop_limit_caps_each_direction(countries_store):
    kg = build_kg(countries_store, ["Q142"], hops=1, per_hop_limit=3, candidate_limit=0, max_objects_per_pair=1)
    # 3 forward + 3 backward sampled edges; completion adds at most 1 object per pair
    assert 1 <= kg.num_edges <= 6 + 6
    pairs = {(t.subject, t.predicate) for t in kg.triples()}
    assert len(pairs) <= 6


def test_seed_labels_resolve_to_qids(countries_store):
    kg = build_kg(countries_store, ["France", "Germany"], hops=1, per_hop_limit=5, candidate_limit=0)
    assert kg.metadata["seeds"] == ["Q142", "Q183"]
    assert kg.metadata["resolved_labels"] == {"France": "Q142", "Germany": "Q183"}
    assert kg.name == "France+Germany"


def test_candidates_extend_the_graph_objects(countries_store):
    kg = build_kg(countries_store, ["Q142"], hops=1, per_hop_limit=10_000, candidate_limit=20)
    cands = kg.candidate_objects("P38")
    assert cands[0] == "kgprobe:currency:EUR"  # the graph's own objects come first
    assert len(cands) == 21 and len(set(cands)) == 21
    assert all(kg.entity(c).group == "currency" for c in cands)
    assert "P421" not in kg.explicit_candidates  # dead predicates are never asked about


def test_require_aliases_drops_entities_without_one(countries_store):
    kg = build_kg(countries_store, ["Q142"], hops=1, per_hop_limit=10_000, candidate_limit=0, require_aliases=True)
    objects = {t.object for t in kg.triples() if t.subject == "Q142"}
    # "UTC+01:00" has no alias (its ASCII form is the label itself); "UTC−10:00" has "UTC-10:00"
    assert "kgprobe:timezone:UTC+01:00" not in objects
    assert "kgprobe:timezone:UTC-10:00" in objects
    for e in kg.entities.values():
        assert e.is_literal or e.id == "Q142" or e.aliases, e


def test_min_languages_keeps_only_literal_objects_of_english_only_data(countries_store):
    # every entity of the embedded data is labelled in English only (1 language), so with
    # min_languages=2 only literal objects (which pass every filter) stay: France's
    # calling code and demonym
    kg = build_kg(countries_store, ["Q142"], hops=1, per_hop_limit=10_000, candidate_limit=0, min_languages=2)
    assert [(t.predicate, t.object) for t in kg.triples()] == [("P1549", '"French"@en'), ("P474", '"+33"')]


def test_builds_are_reproducible_and_seeded(countries_store):
    a = build_kg(countries_store, ["Q142"], hops=2, per_hop_limit=20, seed=1)
    b = build_kg(countries_store, ["Q142"], hops=2, per_hop_limit=20, seed=1)
    c = build_kg(countries_store, ["Q142"], hops=2, per_hop_limit=20, seed=2)
    assert a.triples() == b.triples()
    assert a.triples() != c.triples()


def test_unknown_qid(countries_store):
    with pytest.raises(InputError, match="seed Q999999999 is unknown at embedded:countries"):
        build_kg(countries_store, ["Q999999999"])


def test_seed_id_that_cannot_be_written_in_sparql(countries_store):
    with pytest.raises(InputError, match="is not a valid entity id"):
        build_kg(countries_store, ['kgprobe:a"b'])


def test_unknown_label(countries_store):
    with pytest.raises(InputError, match="seed 'Atlantis' matches no entity label"):
        build_kg(countries_store, ["Atlantis"])


def test_seed_with_no_edges(countries_store):
    # the class "country" (Q6256) has a label but only P31 edges, which are never walked
    with pytest.raises(InputError, match=r"seed Q6256 \(country\) has no edges"):
        build_kg(countries_store, ["Q142", "Q6256"])


def test_bad_options(countries_store):
    with pytest.raises(InputError, match="--hops must be at least 1"):
        build_kg(countries_store, ["Q142"], hops=0)
    with pytest.raises(InputError, match="no seed entities"):
        build_kg(countries_store, [])
    with pytest.raises(InputError, match="unknown KG source 'ftp://x'"):
        build_kg("ftp://x", ["Q142"])


def test_a_seed_label_of_several_entities_takes_the_best_described_and_says_so():
    # In the geo data "Venezuela" labels two GeoNames entities and there are no sitelinks to
    # tell them apart: the country (geonames:3625428, 13 direct claims in the data file:
    # P1082, P1549, P30, P31, P361, P36, P37, P421, P474, three P47 and P78) and a town in
    # Cuba (geonames:3534432, 3: P17, P31, P421), which the lower id used to pick. Over the
    # real oxigraph server, as against Wikidata.
    from kgprobe.kg.build import SeedAmbiguityWarning
    from kgprobe.sources.oxigraph_server import OxigraphServer
    from kgprobe.sources.sparql import SparqlClient

    with OxigraphServer("geo") as server:
        with pytest.warns(SeedAmbiguityWarning) as caught:
            kg = build_kg(SparqlClient(server.query_url, cache=False), ["Venezuela", "Q142"], hops=1,
                          per_hop_limit=5, candidate_limit=0)
    assert kg.metadata["resolved_labels"] == {"Venezuela": "geonames:3625428"}
    assert kg.metadata["seeds"] == ["geonames:3625428", "Q142"]
    [w] = caught
    assert str(w.message) == (
        f"seed 'Venezuela' matches 2 entities equally well at {server.query_url}; using geonames:3625428 "
        "(country or territory in Latin America and the Caribbean; 13 claims), the one with the most claims; "
        "the others: geonames:3534432 (city in Cuba; 3 claims); pass an id as the seed to choose another")
    # The town was named for the message only: it is no entity of the KG.
    assert "geonames:3534432" not in kg.entity_ids
    # "Halle": a city in Belgium and one in Germany, 3 direct claims each (P17, P31, P421 in
    # the data file): the lower GeoNames number, compared as a number, and the warning says so.
    with OxigraphServer("geo") as server:
        with pytest.warns(SeedAmbiguityWarning) as caught:
            kg = build_kg(SparqlClient(server.query_url, cache=False), ["Halle"], hops=1, per_hop_limit=5,
                          candidate_limit=0)
    assert kg.metadata["resolved_labels"] == {"Halle": "geonames:2796696"}
    assert str(caught[0].message) == (
        f"seed 'Halle' matches 2 entities equally well at {server.query_url}; using geonames:2796696 "
        "(city in Belgium; 3 claims), the lowest id of those with the most claims; the others: "
        "geonames:2911520 (city in Germany; 3 claims); pass an id as the seed to choose another")


def test_ids_order_qids_first_then_by_their_number():
    from kgprobe.kg.build import _id_order

    ids = ["geonames:2978771", "Q142", "kgprobe:currency:EUR", "geonames:935225", "Q17"]
    assert sorted(ids, key=_id_order) == ["Q17", "Q142", "geonames:935225", "geonames:2978771", "kgprobe:currency:EUR"]

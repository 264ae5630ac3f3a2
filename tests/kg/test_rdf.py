"""The id scheme of RDF terms (kgprobe.sources.rdf)."""

from __future__ import annotations

import pytest

from kgprobe.sources.rdf import Term, entity_iri, iri_to_id, literal_id, literal_value, predicate_iri


@pytest.mark.parametrize(
    "iri, eid",
    [
        ("http://www.wikidata.org/entity/Q142", "Q142"),
        ("https://sws.geonames.org/2988507/", "geonames:2988507"),
        ("urn:kgprobe:language:fra", "kgprobe:language:fra"),
        ("http://example.org/x", "<http://example.org/x>"),
    ],
)
def test_iri_ids_round_trip(iri, eid):
    assert iri_to_id(iri) == eid
    assert entity_iri(eid) == iri


def test_predicate_ids():
    assert iri_to_id("http://www.wikidata.org/prop/direct/P36") == "P36"
    assert predicate_iri("P36") == "http://www.wikidata.org/prop/direct/P36"
    with pytest.raises(ValueError):
        predicate_iri("capital")


def test_literal_ids_are_ntriples_and_reversible():
    assert literal_id("+33") == '"+33"'
    assert literal_id("French", lang="EN") == '"French"@en'
    assert literal_id("5", datatype="http://www.w3.org/2001/XMLSchema#decimal") == '"5"^^<http://www.w3.org/2001/XMLSchema#decimal>'
    tricky = 'say "hi"\\ now\n'
    assert literal_id(tricky) == '"say \\"hi\\"\\\\ now\\n"'
    assert literal_value(literal_id(tricky, lang="en")) == tricky


def test_terms_from_sparql_json():
    t = Term.from_json({"type": "literal", "value": "France", "xml:lang": "en"})
    assert t.id == '"France"@en' and t.to_json() == {"type": "literal", "value": "France", "xml:lang": "en"}
    assert Term.from_json({"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}).id == "Q1"
    with pytest.raises(ValueError):
        Term.from_json({"type": "triple"})

"""The embedded KGs: sizes, hand-checked facts traced to the source packages, id scheme."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from kgprobe.errors import InputError
from kgprobe.sources.embedded import EMBEDDED_KGS, load_embedded_kg


def _package_file(package: str, relative: str) -> Path:
    return Path(__import__(package).__file__).parent / relative


@pytest.fixture(scope="module")
def countries():
    return load_embedded_kg("countries")


def test_countries_kg_meets_the_size_bar(countries):
    active_predicates = {countries.predicate_id(p) for p in countries.predicate_of[countries.active]}
    assert countries.num_active >= 2000
    assert len(active_predicates) >= 8
    # the dead ones are exactly the blocklisted predicates present in the data
    dead_predicates = {countries.predicate_id(p) for p in countries.predicate_of[~countries.active]}
    assert dead_predicates == {"P421", "P1082"}


@pytest.mark.slow
def test_geo_kg_meets_the_size_bar():
    geo = load_embedded_kg("geo")
    assert geo.num_edges >= 20_000
    # geo extends countries: every countries edge is in geo
    countries = {(t.subject, t.predicate, t.object) for t in load_embedded_kg("countries").triples()}
    geo_edges = {(t.subject, t.predicate, t.object) for t in geo.triples()}
    assert countries <= geo_edges


def test_france_facts_match_the_source_packages(countries):
    # France's QID comes from histwardb's crosswalk, not from kgprobe
    with open(_package_file("histwardb", "data/crosswalk.csv"), encoding="utf-8") as fh:
        qid = next(r["country_qid"] for r in csv.DictReader(fh) if r["country"] == "France")
    assert qid == "Q142"
    with open(_package_file("countryinfo", "data/france.json"), encoding="utf-8") as fh:
        info = json.load(fh)
    france = countries.entity("Q142")
    assert france.label == info["name"] == "France"
    assert france.group == "country"
    assert "French Republic" in france.aliases
    capital = [countries.entity(x) for x in countries.true_objects("Q142", "P36")]
    assert [c.label for c in capital] == [info["capital"]] == ["Paris"]
    assert capital[0].group == "city"
    assert [countries.label(x) for x in countries.true_objects("Q142", "P38")] == ["Euro"]
    assert [countries.label(x) for x in countries.true_objects("Q142", "P30")] == ["Europe"]
    assert [countries.label(x) for x in countries.true_objects("Q142", "P37")] == ["French"]
    # Germany's QID is in the crosswalk as Q183; countryinfo lists DEU among France's borders
    assert "DEU" in info["borders"]
    assert "Q183" in countries.true_objects("Q142", "P47")


def test_literal_objects_use_their_ntriples_form_as_id(countries):
    assert countries.true_objects("Q142", "P474") == frozenset({'"+33"'})
    demonym = countries.entity('"French"@en')
    assert demonym.is_literal and demonym.label == "French" and demonym.group == "literal"


def test_borders_are_symmetric(countries):
    borders = {(t.subject, t.object) for t in countries.triples() if t.predicate == "P47"}
    assert borders and all((b, a) in borders for a, b in borders)


def test_predicate_labels_are_wikidata_labels(countries):
    assert countries.predicate_label("P36") == "capital"
    assert countries.predicate_label("P47") == "shares border with"
    assert countries.predicate_label("P421") == "located in time zone"


def test_dead_edges_are_time_zone_and_population(countries):
    groups = Counter((countries.predicate_id(p), bool(a)) for p, a in zip(countries.predicate_of, countries.active))
    assert all(not active for (pid, active) in groups if pid in ("P421", "P1082"))
    assert groups[("P36", True)] == len(countries.edges_of_predicate("P36"))


def test_unknown_embedded_kg_is_an_input_error():
    with pytest.raises(InputError, match="unknown embedded KG 'moon'.*countries, geo"):
        load_embedded_kg("moon")
    assert set(EMBEDDED_KGS) == {"countries", "geo"}

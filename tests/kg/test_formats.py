"""KG files: the kgprobe JSONL format, atomic saves, plain triple files, N-Triples, errors."""

from __future__ import annotations

import gzip
import json

import pytest

import kgprobe.kg.formats as formats
from kgprobe.errors import InputError
from kgprobe.kg.formats import FORMAT_VERSION, load_kg, save_kg
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple


def small_kg() -> KnowledgeGraph:
    return KnowledgeGraph(
        [
            Entity("Q142", "France", ("French Republic",), "country in Europe", group="country"),
            Entity("geonames:2988507", "Paris", (), "capital of France", group="city"),
            Entity('"+33"', "+33", is_literal=True, group="literal"),
            Entity("Q183", "Germany", group="country"),
        ],
        [Predicate("P36", "capital"), Predicate("P474", "country calling code"), Predicate("P421", "located in time zone")],
        [
            Triple("Q142", "P36", "geonames:2988507"),
            Triple("Q142", "P474", '"+33"'),
            Triple("Q142", "P421", "Q183", active=False),
        ],
        candidates={"P36": ["geonames:2988507", "Q183"]},
        name="tiny",
        metadata={"source": "hand-written", "hops": 1},
    )


def same(a: KnowledgeGraph, b: KnowledgeGraph) -> bool:
    return (
        a.triples() == b.triples() and a.entities == b.entities and a.predicates == b.predicates
        and a.explicit_candidates == b.explicit_candidates and a.name == b.name and a.metadata == b.metadata
    )


@pytest.mark.parametrize("name", ["kg.jsonl", "kg.jsonl.gz"])
def test_round_trip_keeps_everything(tmp_path, name):
    kg = small_kg()
    path = save_kg(kg, tmp_path / name)
    back = load_kg(path)
    assert same(kg, back)
    assert back.active.tolist() == [True, True, False]


def test_file_layout_is_the_documented_one(tmp_path):
    path = save_kg(small_kg(), tmp_path / "kg.jsonl")
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    # header, 3 predicates, 4 entities, 3 edges, 1 candidates line, end marker = 13 lines
    assert len(lines) == 13
    assert lines[0] == {
        "kgprobe_kg": 1, "name": "tiny", "metadata": {"source": "hand-written", "hops": 1},
        "counts": {"entities": 4, "predicates": 3, "edges": 3, "candidates": 1},
    }
    assert lines[8] == {"type": "edge", "s": "Q142", "p": "P36", "o": "geonames:2988507", "active": True}
    assert lines[-2] == {"type": "candidates", "predicate": "P36", "objects": ["geonames:2988507", "Q183"]}
    assert lines[-1] == {"type": "end"}


def test_failed_save_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = save_kg(small_kg(), tmp_path / "kg.jsonl")
    before = path.read_bytes()

    def explode(kg, out, candidates):
        out.write('{"kgprobe_kg": 1}\n')
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(formats, "_write_records", explode)
    with pytest.raises(RuntimeError):
        save_kg(small_kg(), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["kg.jsonl"]


def test_truncated_file_is_rejected(tmp_path):
    path = save_kg(small_kg(), tmp_path / "kg.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:9]), encoding="utf-8")
    with pytest.raises(InputError, match="incomplete.*rebuild"):
        load_kg(path)
    path.write_text("".join(lines[:9]) + lines[9][:15], encoding="utf-8")
    with pytest.raises(InputError, match="line 10: not JSON"):
        load_kg(path)


def test_newer_format_version_is_rejected_with_advice(tmp_path):
    path = tmp_path / "kg.jsonl"
    path.write_text(json.dumps({"kgprobe_kg": FORMAT_VERSION + 1}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"format version 2, newer .* upgrade kgprobe"):
        load_kg(path)


def test_header_counts_must_match(tmp_path):
    path = save_kg(small_kg(), tmp_path / "kg.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    del lines[9]  # drop one edge but keep the end marker
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match="header says 3 edges, file has 2"):
        load_kg(path)


def test_edge_naming_a_missing_entity_is_rejected(tmp_path):
    path = save_kg(small_kg(), tmp_path / "kg.jsonl")
    text = path.read_text(encoding="utf-8").replace('"o":"Q183"', '"o":"Q999"')
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="'Q999'"):
        load_kg(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_kg(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="is empty"):
        load_kg(tmp_path / "empty.jsonl")
    (tmp_path / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot read KG file"):
        load_kg(tmp_path / "bad.jsonl.gz")


def test_tsv_triples(tmp_path):
    path = tmp_path / "facts.tsv"
    path.write_text(
        "subject\tpredicate\tobject\n"
        "France\tcapital\tParis\n"
        "# a comment\n"
        "France\tshares border with\tGermany\t0\n"
        "Germany\tcapital\tBerlin\t1\n",
        encoding="utf-8",
    )
    kg = load_kg(path)
    assert [(t.subject, t.predicate, t.object, t.active) for t in kg.triples()] == [
        ("France", "capital", "Paris", True),
        ("France", "shares border with", "Germany", False),
        ("Germany", "capital", "Berlin", True),
    ]
    assert kg.label("Paris") == "Paris"
    assert kg.true_objects("France", "capital") == frozenset({"Paris"})


def test_tsv_with_wrong_columns_names_the_line(tmp_path):
    path = tmp_path / "facts.tsv"
    path.write_text("France\tcapital\tParis\nGermany capital Berlin\n", encoding="utf-8")
    with pytest.raises(InputError, match="facts.tsv, line 2: expected 3 or 4 tab-separated columns"):
        load_kg(path)
    path.write_text("France\tcapital\tParis\tmaybe\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 1: active flag 'maybe'"):
        load_kg(path)


def test_plain_jsonl_triples(tmp_path):
    path = tmp_path / "facts.jsonl"
    path.write_text(
        '{"subject": "France", "predicate": "capital", "object": "Paris"}\n'
        '{"s": "Japan", "p": "capital", "o": "Tokyo", "active": false}\n',
        encoding="utf-8",
    )
    kg = load_kg(path)
    assert [(t.subject, t.object, t.active) for t in kg.triples()] == [("France", "Paris", True), ("Japan", "Tokyo", False)]
    path.write_text('{"subject": "France", "object": "Paris"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 1: triple lacks field 'p'"):
        load_kg(path)


NT = """\
<http://www.wikidata.org/entity/Q142> <http://www.w3.org/2000/01/rdf-schema#label> "France"@en .
<http://www.wikidata.org/entity/Q142> <http://www.w3.org/2000/01/rdf-schema#label> "Frankreich"@de .
<http://www.wikidata.org/entity/Q142> <http://www.w3.org/2004/02/skos/core#altLabel> "French Republic"@en .
<http://www.wikidata.org/entity/Q142> <http://www.wikidata.org/prop/direct/P31> <http://www.wikidata.org/entity/Q6256> .
<http://www.wikidata.org/entity/Q142> <http://www.wikidata.org/prop/direct/P36> <http://www.wikidata.org/entity/Q90> .
<http://www.wikidata.org/entity/Q142> <http://www.wikidata.org/prop/direct/P421> <http://www.wikidata.org/entity/Q25989> .
<http://www.wikidata.org/entity/Q90> <http://www.w3.org/2000/01/rdf-schema#label> "Paris"@en .
<http://www.wikidata.org/entity/P36> <http://wikiba.se/ontology#directClaim> <http://www.wikidata.org/prop/direct/P36> .
<http://www.wikidata.org/entity/P36> <http://www.w3.org/2000/01/rdf-schema#label> "capital"@en .
"""


@pytest.mark.parametrize("gz", [False, True])
def test_ntriples(tmp_path, gz):
    path = tmp_path / ("kg.nt.gz" if gz else "kg.nt")
    path.write_bytes(gzip.compress(NT.encode()) if gz else NT.encode())
    kg = load_kg(path)
    # P31 gives the group and is not an edge; P421 is dead; edges sorted by (s, p, o)
    assert [(t.subject, t.predicate, t.object, t.active) for t in kg.triples()] == [
        ("Q142", "P36", "Q90", True),
        ("Q142", "P421", "Q25989", False),
    ]
    france = kg.entity("Q142")
    assert (france.label, france.aliases, france.group) == ("France", ("French Republic",), "country")
    assert kg.predicate_label("P36") == "capital"
    assert kg.label("Q25989") == "Q25989"  # no label in the file: the id stands in


def test_malformed_ntriples(tmp_path):
    path = tmp_path / "kg.nt"
    path.write_text("<http://a> <http://b> .\n", encoding="utf-8")
    with pytest.raises(InputError, match="malformed N-Triples file"):
        load_kg(path)

"""``kgprobe build`` end to end: offline build, printed size, exit codes, no partial files."""

from __future__ import annotations

import json
import re

from kgprobe.cli import main
from kgprobe.kg.formats import load_kg

from .conftest import SPARQL_JSON


def test_offline_build_writes_a_loadable_kg_and_prints_its_size(tmp_path, capsys):
    out = tmp_path / "countries.kg.jsonl"
    rc = main(["build", "--source", "embedded", "--seed-entities", "Q142", "Q183", "Q17", "--hops", "2", "-o", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    m = re.search(r"(\d+) entities, (\d+) active edges, (\d+) dead edges, (\d+) predicates", printed)
    assert m, printed
    kg = load_kg(out)
    assert [int(x) for x in m.groups()] == [kg.num_entities, kg.num_active, kg.num_edges - kg.num_active, len(kg.predicates)]
    assert kg.num_active > 100
    assert kg.metadata["seeds"] == ["Q142", "Q183", "Q17"]
    assert kg.metadata["source"] == "embedded:geo"


def test_unknown_seed_exits_2(tmp_path, capsys):
    out = tmp_path / "kg.jsonl"
    # --seeds is the old name of --seed-entities: it still works and says what it is called now.
    rc = main(["build", "--source", "embedded:countries", "--seeds", "Q999999999", "-o", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "seed Q999999999 is unknown" in err
    assert "warning: --seeds is now --seed-entities" in err
    assert not out.exists()


def test_endpoint_down_exits_3_and_writes_nothing(tmp_path, capsys):
    from kgprobe.sources.oxigraph_server import free_port

    out = tmp_path / "kg.jsonl"
    rc = main(["build", "--source", f"http://127.0.0.1:{free_port()}/sparql", "--seed-entities", "Q142", "-o", str(out)])
    assert rc == 3
    assert "down or unreachable" in capsys.readouterr().err
    assert not out.exists()


def test_failure_mid_build_keeps_the_previous_file(tmp_path, capsys, bad_server):
    out = tmp_path / "kg.jsonl"
    out.write_text("previous complete KG\n", encoding="utf-8")
    labels = json.dumps({
        "head": {"vars": ["entity", "kind", "value"]},
        "results": {"bindings": [{
            "entity": {"type": "uri", "value": "http://www.wikidata.org/entity/Q142"},
            "kind": {"type": "literal", "value": "label"},
            "value": {"type": "literal", "value": "France", "xml:lang": "en"},
        }]},
    }).encode()
    # the seed's labels come back, then the endpoint starts answering HTML
    bad_server.script = [
        (200, {"Content-Type": SPARQL_JSON}, labels, 0),
        (200, {"Content-Type": "text/html"}, b"<html>maintenance</html>", 0),
    ]
    rc = main(["build", "--source", bad_server.url, "--seed-entities", "Q142", "--no-cache", "-o", str(out)])
    assert rc == 3
    assert "instead of SPARQL JSON" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "previous complete KG\n"
    assert [p.name for p in tmp_path.iterdir()] == ["kg.jsonl"]

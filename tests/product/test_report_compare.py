"""Reports and comparisons on hand-built runs whose every number is computed by hand."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from kgprobe.api import open_run
from kgprobe.compare import compare_runs, subsumption
from kgprobe.engine import EngineConfig
from kgprobe.errors import InputError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.metrics import knowledge_metrics
from kgprobe.report import report_data, write_report
from kgprobe.store import ProbeRecord, RoundRecord, RunStore


def small_kg(name="hand") -> KnowledgeGraph:
    ents = [
        Entity("Q142", "France", group="country"), Entity("Q183", "Germany", group="country"),
        Entity("Q90", "Paris", group="city"), Entity("Q64", "Berlin", group="city"),
        Entity("Q4916", "Euro", group="currency"), Entity("Q150", "French", group="language"),
        Entity("Q188", "German", group="language"),
    ]
    preds = [Predicate("P36", "capital"), Predicate("P38", "currency"), Predicate("P37", "official language"),
             Predicate("P17", "country")]
    triples = [
        Triple("Q142", "P36", "Q90"),    # e0
        Triple("Q183", "P36", "Q64"),    # e1
        Triple("Q142", "P38", "Q4916"),  # e2
        Triple("Q183", "P38", "Q4916"),  # e3
        Triple("Q142", "P37", "Q150"),   # e4
        Triple("Q183", "P37", "Q188"),   # e5
        Triple("Q90", "P17", "Q142"),    # e6
    ]
    return KnowledgeGraph(ents, preds, triples, name=name)


def build_run(path, kg, rounds: list[list[tuple[int, bool, bool]]], model="model-A") -> str:
    """A run file whose round r probed the (edge, correct, design) triples in ``rounds[r-1]``."""
    cfg = EngineConfig(method="hard", sampler="thompson", batch_size=2, budget=100, propagation_weight=0.0)
    store = RunStore.create(path, config=cfg.to_dict(), kg=kg, model_identity=model, model_spec="")
    pkg = ParameterizedKG.from_kg(kg, propagation_weight=0.0)
    spent = 0
    for r, probes in enumerate(rounds, start=1):
        for edge, correct, _ in probes:
            pkg.update(np.array([edge]), np.array([correct]))
        spent += len(probes)
        store.commit_round(RoundRecord(
            round=r, queries=len(probes), queries_spent=spent, num_requests=len(probes), replayed=False,
            started=0.0, elapsed=1.0,
            metrics=knowledge_metrics(pkg.successes, pkg.failures).as_dict(), converged=False,
            pkg_state=pkg.state_dict(), sampler_state={}, convergence_state={},
            probes=[ProbeRecord(r, i, e, a, c, f"Q{r}/{e}?", f"answer {r}/{e}", {}) for i, (e, c, a) in enumerate(probes)],
        ))
    store.set_status("finished", "budget")
    store.close()
    return str(path)


# Per edge (right, wrong): e0 (2,0), e1 (0,2), e2 (1,1), e3 (0,1), e4 (3,1), e5 unprobed, e6 (0,3).
ROUNDS_A = [
    [(0, True, True), (1, False, True), (2, True, False), (3, False, False), (4, True, False), (6, False, False)],
    [(0, True, False), (1, False, False), (2, False, True), (4, True, False), (6, False, False)],
    [(4, True, False), (6, False, False)],
    [(4, False, False)],
]


@pytest.fixture()
def run_a(tmp_path):
    return build_run(tmp_path / "a.kgrun", small_kg(), ROUNDS_A)


def test_report_numbers(run_a):
    with open_run(run_a) as run:
        data = report_data(run)
    m = data["metrics"]
    # 6 probed edges; wins e0, e4; zero-sense e1, e3, e6; all-sense e0.
    assert (m["probed_edges"], m["win_rate"], m["zero_sense_rate"], m["all_sense_rate"]) == (6, 2 / 6, 3 / 6, 1 / 6)
    bp = data["by_predicate"]
    assert set(bp) == {"capital", "currency", "official language", "country"}
    assert (bp["capital"]["win_rate"], bp["capital"]["zero_sense_rate"], bp["capital"]["all_sense_rate"]) == (.5, .5, .5)
    assert (bp["currency"]["win_rate"], bp["currency"]["zero_sense_rate"]) == (0.0, 0.5)
    assert bp["official language"]["probed_edges"] == 1 and bp["official language"]["win_rate"] == 1.0
    assert bp["country"]["zero_sense_rate"] == 1.0
    assert data["predicate_active_edges"] == {"capital": 2, "currency": 2, "official language": 2, "country": 1}
    bg = data["by_group"]  # subject groups: country has e0-e4 probed (5), city has e6
    assert bg["country"] == {"win_rate": 2 / 5, "zero_sense_rate": 2 / 5, "all_sense_rate": 1 / 5, "probed_edges": 5}
    assert bg["city"]["zero_sense_rate"] == 1.0 and bg["city"]["probed_edges"] == 1
    # Design probes: e0 right (round 1), e1 wrong (round 1), e2 wrong (round 2) -> 1/3.
    est = data["accuracy_estimate"]
    assert est["n"] == 3 and est["estimate"] == pytest.approx(1 / 3)
    hm = data["heatmap"]
    # 3 and 2 probed edges; Paris (1 probed edge) is not among the "most probed".
    assert hm["rows"] == ["France", "Germany"] and list(data["by_entity"]) == ["France", "Germany"]
    assert hm["cols"] == ["capital", "currency", "official language"]
    assert hm["zero_sense"] == [[0.0, 0.0, 0.0], [1.0, 1.0, None]]
    assert hm["share"][0] == [1 / 3] * 3 and hm["share"][1][:2] == [0.5, 0.5]
    # Posterior error (n+1)/(m+n+2): e6 4/5, e1 3/4, e3 2/3, e2 2/4, e4 2/6; e0 (2 right,
    # never wrong) is not a weak fact, though the list has room for 20.
    weak = data["weakest"]
    assert [w["edge"] for w in weak] == [6, 1, 3, 2, 4]
    assert weak[0]["error_estimate"] == pytest.approx(0.8)
    assert (weak[0]["subject"], weak[0]["predicate"], weak[0]["object"]) == ("Paris", "country", "France")
    assert [(a["round"], a["answer"], a["correct"]) for a in weak[0]["answers"]] == [
        (1, "answer 1/6", False), (2, "answer 2/6", False), (3, "answer 3/6", False)]
    assert [h["queries_spent"] for h in data["history"]] == [6, 11, 13, 14]
    # The estimate's history: design e0 right + e1 wrong (round 1), e2 wrong (round 2), none after.
    assert [(a["round"], a["n"]) for a in data["accuracy_history"]] == [(1, 2), (2, 3), (3, 3), (4, 3)]
    assert [a["estimate"] for a in data["accuracy_history"]] == pytest.approx([1 / 2, 1 / 3, 1 / 3, 1 / 3])
    # A run file written without a protocol gets one rebuilt from its settings; its probe
    # options are the probe class's defaults, which is what such a run was built with.
    proto = data["protocol"]
    assert proto["reconstructed"] is True and proto["method"] == "hard" and proto["batch_size"] == 2
    assert proto["probe_options"] == {"chat": True, "use_alias": True, "max_tokens_yes_no": 24, "max_tokens_wh": 32,
                                      "lang": None}
    assert proto["model"]["identity"] == "model-A" and proto["kg"]["name"] == "hand"
    # "hard" asks yes/no or wh at random: chance 0.25 on every edge.
    assert data["predicate_chance"]["capital"] == {"min": 0.25, "mean": 0.25, "max": 0.25}
    # No in-context examples to count: the majority rule is a uniform guess (the chance level);
    # the null model was not measured. Each predicate's objects: capital Paris/Berlin (1/2),
    # currency Euro twice (2/2), country France (1/1).
    base = data["predicate_baseline"]
    assert {k: base["P36"][k] for k in ("chance", "majority", "null", "top_object_share")} == \
        {"chance": 0.25, "majority": 0.25, "null": None, "top_object_share": 0.5}
    assert (base["P38"]["top_object"], base["P38"]["top_object_share"]) == ("Euro", 1.0)
    assert data["kg_baseline"] == {"chance": 0.25, "majority": 0.25, "null": None}
    assert data["group_baseline"]["city"] == {"chance": 0.25, "majority": 0.25}
    # Dominated objects are only named for predicates with at least 5 active edges.
    assert data["baseline_warnings"] == []


def test_report_files(run_a, tmp_path):
    with open_run(run_a) as run:
        paths = write_report(run, tmp_path / "out")
    md = open(paths["markdown"]).read()
    # Ranked lowest win rate first, each predicate with its chance level (the "hard" mix: 25%).
    assert "| capital | 2 | 2 | 25.0% | 25.0% | – | 50.0% | 50.0% | 50.0% |" in md
    order = [md.index(f"| {p} |") for p in ("currency", "country", "capital", "official language")]
    assert order == sorted(order)  # win 0% (2 probed), 0% (1 probed), 50%, 100%
    assert md.index("## What exactly was measured") < md.index("## Results")
    assert "| method | hard |" in md
    assert "| country | 5 | 25.0% | 25.0% | – | 40.0% | 40.0% | 20.0% |" in md  # per-group table
    assert "(Paris, country, France) | 0/3 | 0.80 |" in md
    assert "(France, capital, Paris)" not in md  # never answered wrong: not a weak fact
    assert "33.3% (95% CI" in md and "n = 3 design-based probes" in md
    for plot in ("convergence", "by_predicate", "by_group", "heatmap"):
        assert f"a-plots/{plot}.png" in md
        assert (tmp_path / "out" / "a-plots" / f"{plot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = open(paths["html"]).read()
    images = re.findall(r"src=[\"']data:image/png;base64,([A-Za-z0-9+/=]+)[\"']", page)
    assert len(images) == 4 and all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    # Self-contained: no external resources.
    assert not re.search(r"(src|href)=['\"]https?:", page)
    assert "<td>France</td>" in page  # per-entity table


def test_report_json_cli(run_a):
    out = subprocess.run([sys.executable, "-m", "kgprobe.cli", "report", run_a, "--json"], capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout)
    assert data["metrics"]["zero_sense_rate"] == 0.5 and data["rounds"] == 4 and data["queries_spent"] == 14


def test_subsumption_by_hand():
    a = np.array([1, 1, 0, 0, 1], bool)
    b = np.array([1, 0, 1, 0, 1], bool)
    assert subsumption(a, b) == 2 / 3 and subsumption(b, a) == 2 / 3
    assert subsumption(a, b, mask=np.array([1, 1, 1, 1, 0], bool)) == 1 / 2
    assert subsumption(np.zeros(3, bool), b[:3]) is None


def test_compare_runs_eta_over_commonly_probed_edges(run_a, tmp_path):
    # Run B per edge (right, wrong): e0 (0,1), e1 (2,0), e2 (1,0), e4 (1,0), e5 (1,0).
    rounds_b = [[(0, False, False), (1, True, False), (2, True, False), (4, True, False), (5, True, False)],
                [(1, True, False)]]
    run_b = build_run(tmp_path / "b.kgrun", small_kg(), rounds_b, model="model-B")
    runs = [open_run(run_a), open_run(run_b)]
    cmp = compare_runs(runs)
    # Common probed edges {0, 1, 2, 4}; A knows {0, 4} there, B knows {1, 2, 4}.
    assert cmp.common[0][1] == 4
    assert cmp.eta[0][1] == 0.5 and cmp.eta[1][0] == pytest.approx(1 / 3)
    assert cmp.eta[0][0] == 1.0
    assert cmp.names == ["model-A", "model-B"]
    assert cmp.metrics[1]["win_rate"] == 4 / 5
    assert cmp.estimates[1] is None  # B has no design probes
    out = subprocess.run([sys.executable, "-m", "kgprobe.cli", "compare", run_a, run_b, "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["eta"][0][1] == 0.5
    for r in runs:
        r.close()


def test_compare_refuses_runs_on_different_kgs(run_a, tmp_path):
    other = build_run(tmp_path / "c.kgrun", small_kg(name="other"), [[(0, True, False)]])
    with pytest.raises(InputError, match="different KGs"):
        compare_runs([open_run(run_a), open_run(other)])
    proc = subprocess.run([sys.executable, "-m", "kgprobe.cli", "compare", run_a, other], capture_output=True, text=True)
    assert proc.returncode == 2 and "different KGs" in proc.stderr

"""Reports of small runs that do not mislead, baselines in the CLI, and records made before
the balanced ZP-LKE rendering existed; every expected value is worked out by hand."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from kgprobe.api import open_run
from kgprobe.engine import EngineConfig
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.metrics import knowledge_metrics
from kgprobe.report import question_tail, render_markdown, report_data, write_report
from kgprobe.store import ProbeRecord, RoundRecord, RunStore


def three_cities() -> KnowledgeGraph:
    ents = [Entity("Q1", "Aa", group="city"), Entity("Q2", "Bb", group="city"), Entity("Q3", "Cc", group="city"),
            Entity("Q10", "Xland", group="country"), Entity("Q11", "Yland", group="country")]
    triples = [Triple("Q1", "P17", "Q10"), Triple("Q2", "P17", "Q10"), Triple("Q3", "P17", "Q11")]
    return KnowledgeGraph(ents, [Predicate("P17", "country")], triples, name="three")


def write_run(path, kg, rounds, *, method="zp-lke", probe_options=None, question=None) -> str:
    """A run file whose round r probed the (edge, correct) pairs of ``rounds[r-1]``, all design probes."""
    cfg = EngineConfig(method=method, batch_size=4, budget=10_000, propagation_weight=0.0,
                       probe_options=probe_options or {"num_examples": 2, "num_distractors": 1})
    store = RunStore.create(path, config=cfg.to_dict(), kg=kg, model_identity="m", model_spec="")
    pkg = ParameterizedKG.from_kg(kg, propagation_weight=0.0)
    spent = 0
    for r, probes in enumerate(rounds, start=1):
        for edge, correct in probes:
            pkg.update(np.array([edge]), np.array([correct]))
        spent += len(probes)
        store.commit_round(RoundRecord(
            round=r, queries=len(probes), queries_spent=spent, num_requests=len(probes), replayed=False,
            started=0.0, elapsed=1.0, metrics=knowledge_metrics(pkg.successes, pkg.failures).as_dict(),
            converged=False, pkg_state=pkg.state_dict(), sampler_state={}, convergence_state={},
            probes=[ProbeRecord(r, i, e, True, c, question(r, e) if question else f"q{r}/{e}", f"a{r}/{e}", {})
                    for i, (e, c) in enumerate(probes)],
        ))
    store.set_status("finished", "budget")
    store.close()
    return str(path)


def test_weakest_facts_are_only_facts_answered_wrong(tmp_path):
    # Edge 0 right twice, edge 1 right then wrong, edge 2 right: only edge 1 is a weak fact.
    path = write_run(tmp_path / "w.kgrun", three_cities(), [[(0, True), (1, True), (2, True)], [(0, True), (1, False)]])
    with open_run(path) as run:
        data = report_data(run)
    assert [(w["edge"], w["successes"], w["failures"]) for w in data["weakest"]] == [(1, 1, 1)]
    path = write_run(tmp_path / "r.kgrun", three_cities(), [[(0, True), (1, True), (2, True)]])
    with open_run(path) as run:
        data = report_data(run)
    assert data["weakest"] == []
    md = render_markdown(data, {})
    weak = md[md.index("## Weakest facts"):]
    assert weak.splitlines()[2] == "(none)"  # not "nothing probed yet", and no right answers as padding


def test_most_probed_subjects_are_left_out_when_each_has_one_probed_edge(tmp_path):
    path = write_run(tmp_path / "one.kgrun", three_cities(), [[(0, True), (1, False), (2, True)]])
    with open_run(path) as run:
        data = report_data(run)
    assert data["by_entity"] == {} and data["heatmap"]["rows"] == []
    md = render_markdown(data, {})
    assert "## Per entity: no subject has 2 or more probed edges, so none is listed" in md
    # Two probes of Aa's one edge still make one probed edge: left out too.
    path = write_run(tmp_path / "two.kgrun", three_cities(), [[(0, True), (1, False)], [(0, False)]])
    with open_run(path) as run:
        assert report_data(run)["by_entity"] == {}


def test_last_question_keeps_its_lines_and_tabs():
    question = "Aa\tXland\nBb\tXland\nCc\tYland\nDd\tXland\nEe\tZland\nFf\t"
    assert question_tail(question) == "… (2 lines before)\nCc → Yland\nDd → Xland\nEe → Zland\nFf → "
    assert question_tail("Is Paris the capital of France?") == "Is Paris the capital of France?"


def test_report_files_show_the_question_lines(tmp_path):
    def question(r, e):
        return "Bb\tXland\nCc\tYland\nAa\t"

    path = write_run(tmp_path / "q.kgrun", three_cities(), [[(0, False)]], question=question)
    with open_run(path) as run:
        paths = write_report(run, tmp_path / "out")
    md = open(paths["markdown"], encoding="utf-8").read()
    # A Markdown table cell is one line: the question's lines are joined by a visible mark.
    assert "| Bb → Xland ⏎ Cc → Yland ⏎ Aa → | r1: ✘ 'a1/0' |" in md
    page = open(paths["html"], encoding="utf-8").read()
    assert "<td>Bb → Xland\nCc → Yland\nAa → </td>" in page and "white-space:pre-line" in page


def test_convergence_series_cannot_hide_one_another():
    from kgprobe.report_plots import convergence_plot, series_styles

    styles = series_styles(3)
    # Each later line is narrower, drawn above, with its own dash and hollow, smaller markers:
    # where two coincide the earlier shows as a wider band around the later.
    assert [s["lw"] for s in styles] == [4.5, 3.0, 1.5]
    assert [s["zorder"] for s in styles] == [2, 3, 4]
    assert [s["linestyle"] for s in styles] == ["-", "--", ":"] and [s["ms"] for s in styles] == [8, 6, 4]
    assert all(s["mfc"] == "none" for s in styles)
    history = [{"queries_spent": q, "metrics": {"win_rate": w, "zero_sense_rate": z, "all_sense_rate": a}}
               for q, w, z, a in ((4, 0.5, 0.5, 0.5), (8, 0.5, 0.25, 0.25))]
    assert convergence_plot(history)[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_json_has_a_baseline_for_every_probed_predicate(tmp_path, capsys):
    # "country" of three cities: Xland twice, Yland once; ZP-LKE paper rendering, 2 examples,
    # 2 options. Aa -> Xland: examples Bb-Xland, Cc-Yland (tie: 1/2); Bb likewise (1/2);
    # Cc -> Yland: examples Aa-Xland, Bb-Xland, Yland never shown (0). Majority (1/2 + 1/2 + 0) / 3.
    kg = three_cities()
    path = write_run(tmp_path / "b.kgrun", kg, [[(0, True), (2, False)]],
                     probe_options={"num_examples": 2, "num_distractors": 1, "examples": "paper"})
    out = subprocess.run([sys.executable, "-m", "kgprobe.cli", "report", path, "--json"], capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout)
    assert set(data["predicate_baseline"]) == {"P17"}
    row = data["predicate_baseline"]["P17"]
    assert (row["chance"], row["majority"], row["null"]) == (0.5, pytest.approx(1 / 3), None)
    assert (row["top_object"], row["top_object_share"]) == ("Xland", pytest.approx(2 / 3))
    assert data["baseline_warnings"] == []  # 3 edges: too few to call a distribution dominated
    # The table `kgprobe run` prints at the end shows them too.
    from kgprobe.commands.common import print_outcome

    with open_run(path) as run:
        print_outcome(run)
    out = capsys.readouterr().out
    assert re.search(r"no-knowledge baseline \(chance / majority / null\)\s+│\s+50\.0% / 33\.3% / –", out)
    # Edge 0 right once, edge 2 wrong once: the rates are over these two probed edges, and say so.
    assert re.search(r"win rate \(probed edges\)\s+│\s+50\.0%", out)
    assert re.search(r"zero-sense rate \(probed edges\)\s+│\s+50\.0%", out)
    assert re.search(r"all-sense rate \(probed edges\)\s+│\s+50\.0%", out)
    assert re.search(r"│ probed edges\s+│\s+2 │", out)
    # The predicate's accuracy with its interval: this run file has no stored predictions, so
    # it is model-based (marked *): Jeffreys Beta(1/2 + 1, 1/2 + 1) for 1 right of 2, whose
    # 2.5 % and 97.5 % quantiles are 0.061 and 0.939.
    assert re.search(r"country\s+50%\s+50%\s+2\s+50% \[6%, 94%\]\*\s+50% / 33% / –", out)
    assert "*: model-based, from the probed edges alone" in out


def test_null_model_rate_is_measured_stored_and_shown(tmp_path, countries, sim_model):
    import kgprobe
    from kgprobe.report import measure_null_baseline

    run = kgprobe.probe(countries, sim_model, store=tmp_path / "n.kgrun", budget=32, batch_size=16,
                        seed=5, report=False, progress=False)
    path = run.path
    run.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        measured = measure_null_baseline(path, sim_model, "simulated", renderings=4)
    assert measured["renderings"] == 4 and measured["model"] == "simulated"
    assert all(row["n"] == 4 and row["right"] == round(4 * row["rate"]) for row in measured["by_predicate"].values())
    with open_run(path) as run:
        data = report_data(run)
    assert data["null_model"] == "simulated"
    assert {pid: b["null"] for pid, b in data["predicate_baseline"].items()} == \
        {pid: row["rate"] for pid, row in measured["by_predicate"].items()}
    assert data["kg_baseline"]["null"] is not None


def test_null_model_rate_of_a_run_another_process_writes_is_refused_before_asking_the_model(tmp_path, countries,
                                                                                             sim_model):
    import kgprobe
    from kgprobe.errors import StoreError
    from kgprobe.models.base import DelegatingModel
    from kgprobe.report import measure_null_baseline
    from kgprobe.store import RunStore

    class CountingModel(DelegatingModel):
        requests = 0

        def score(self, requests):
            self.requests += len(requests)
            return super().score(requests)

    kgprobe.probe(countries, sim_model, store=tmp_path / "n.kgrun", budget=32, batch_size=16, seed=5, report=False,
                  progress=False).close()
    model = CountingModel(sim_model)
    with RunStore.open(tmp_path / "n.kgrun", writable=True):  # the writer's exclusive lock
        with pytest.raises(StoreError, match="in use by another kgprobe process"):
            measure_null_baseline(str(tmp_path / "n.kgrun"), model, "simulated", renderings=4)
    assert model.requests == 0
    with open_run(tmp_path / "n.kgrun") as run:
        assert report_data(run)["null_model"] is None


def test_export_into_a_closed_pipe_exits_quietly(tmp_path):
    kg = three_cities()
    long_question = "x" * 400
    path = write_run(tmp_path / "e.kgrun", kg, [[(e % 3, bool(e % 2)) for e in range(4)]] * 300,
                     question=lambda r, e: long_question)
    proc = subprocess.run(f"{sys.executable} -m kgprobe.cli export {path} --samples - | head -1",
                          shell=True, capture_output=True, text=True, executable="/bin/bash")
    assert proc.stdout.startswith('{"kgprobe_samples": 1') and proc.stdout.count("\n") == 1
    assert proc.stderr == ""  # no BrokenPipeError traceback, no message


def test_records_without_the_examples_option_read_as_the_paper_rendering(tmp_path, capsys):
    from kgprobe.cli import main
    from kgprobe.probes import make_probe
    from kgprobe.sweep import load_sweep, protocol_difference, resolved_probe_options

    # A run made before the option: its stored probe options lack it, so resuming builds
    # the probe with the class default, the paper's rendering.
    old = EngineConfig.from_dict(EngineConfig(method="zp-lke", probe_options={"num_examples": 20}).to_dict())
    assert make_probe(old.method, **old.probe_options).builder.mode == "paper"
    # The committed sweeps were recorded so: they read as "paper", and extending one without
    # naming the option keeps its rendering (the check before probing passes; --export-now
    # then stops at "nothing recorded yet" instead of probing).
    base = load_sweep("default")
    assert "examples" not in base.probe_options
    assert resolved_probe_options("zp-lke", base.probe_options)["examples"] == "paper"
    assert protocol_difference(base, kg="countries", method="zp-lke",
                               probe_options={**base.probe_options, "examples": "balanced"})[0] == "probe_options"
    common = ["sweep", "--kg", "countries", "--passes", "1", "--edges", "501", "--extend", "default", "--out", str(tmp_path),
              "--export-now", "--quiet"]
    assert main(common) == 2
    assert "no sweep recorded yet" in capsys.readouterr().err
    assert main(common + ["--probe-option", "examples=balanced"]) == 2
    err = capsys.readouterr().err
    assert "--extend: the sweep's probe options" in err and "no sweep recorded yet" not in err

"""What a run records for its estimates, old run files, priors from other runs, comparisons.

The engine runs with the simulated model (fast); the prior errors go through the real
command line (they stop before any model is loaded).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import expit

import kgprobe
from kgprobe.predictions import predicted_right
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.kg.parameterized import ParameterizedKG
from kgprobe.store import ProbeRecord, RoundRecord, RunStore


def kgprobe_cli(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "kgprobe.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_each_probe_records_its_prediction_and_inclusion_probability(tmp_path, countries, sim_model):
    # KGLens' own Thompson sampling with propagation (w = 1): its predictions are the PKG's, checked below.
    run = kgprobe.probe(countries, sim_model, budget=64, batch_size=32, seed=0, store=tmp_path / "a.kgrun",
                        sampler="kglens-thompson", propagation_weight=1.0, design_fraction=0.125, design_tilt=0.5,
                        design="uniform")
    # Strict JSON (no NaN / Infinity) with every estimate labelled.
    summary = json.loads(json.dumps(run.summary(), allow_nan=False))
    assert summary["accuracy_estimate"]["basis"] == "design-based"
    assert {e["basis"] for e in summary["estimates_by_predicate"].values()} <= {"design-based",
                                                                               "too-few-design-probes"}
    run.close()
    with RunStore.open(tmp_path / "a.kgrun") as store:
        probes = store.probe_arrays()
        preds = store.round_predictions()
        r1 = probes["round"] == 1
        # Before round 1 nothing is known: every edge is predicted like its predicate's
        # empty pool, (0 + 1) / (0 + 2) = ½, and so is every group mean (variance ¼).
        assert np.all(probes["predicted"][r1] == 0.5)
        assert preds[1]["predicate"]["P36"] == [0.5, 0.25]
        # Design fraction 1/8 of 32: 4 design draws among the 3,246 active edges. Before round
        # 1 every edge is predicted alike, so the tilted design is uniform: π = 4 / 3,246.
        design = probes["design"]
        assert int(design[r1].sum()) == 4
        assert probes["inclusion"][design & r1] == pytest.approx(4 / countries.num_active)
        assert np.isnan(probes["inclusion"][~design]).all()
        # Round 2 tilts half of the design towards edges predicted wrong: π_j = 4 · w_j with
        # w_j = ½ / N + ½ · θ̂_j / Σ θ̂ (no edge reaches π = 1 here).
        # Round 2's predictions are those of the PKG after round 1.
        pkg = ParameterizedKG.from_kg(countries)
        pkg.load_state_dict(store.pkg_state(1))
        from kgprobe.sampling import make_sampler

        right = predicted_right(pkg, make_sampler("kglens-thompson"))
        r2 = probes["round"] == 2
        assert probes["predicted"][r2] == pytest.approx(right[probes["edge"][r2]])
        err = (1 - right) * countries.active
        w = 0.5 / countries.num_active + 0.5 * err / err.sum()
        a2 = design & r2
        assert probes["inclusion"][a2] == pytest.approx(4 * w[probes["edge"][a2]])


def _downgrade_to_format_1(path):
    con = sqlite3.connect(path)
    with con:
        con.execute("ALTER TABLE probes DROP COLUMN predicted")
        con.execute("ALTER TABLE probes DROP COLUMN inclusion")
        con.execute("ALTER TABLE rounds DROP COLUMN predictions")
        con.execute("UPDATE meta SET value = '1' WHERE key = 'format_version'")
        # Format-1 files predate run-file checksums too.
        con.execute("DROP TABLE IF EXISTS checks")
        con.execute("DELETE FROM meta WHERE key = 'integrity'")
    con.close()


def test_a_format_1_run_file_is_read_and_upgraded_on_resume(tmp_path, countries, sim_model):
    path = tmp_path / "old.kgrun"
    kgprobe.probe(countries, sim_model, budget=64, batch_size=32, seed=0, store=path).close()
    _downgrade_to_format_1(path)
    with kgprobe.open_run(path) as run:
        probes = run.store.probe_arrays()
        est = run.estimates()
    assert "predicted" not in probes
    # Without predictions the KG estimate is the design mean with Wilson's interval.
    k, n = int(probes["correct"][probes["design"]].sum()), int(probes["design"].sum())
    assert est["kg"]["method"] == "design-wilson" and est["kg"]["estimate"] == pytest.approx(k / n)
    assert all(e["basis"] == "model-based" for e in est["by_predicate"].values())
    with RunStore.open(path, writable=True) as store:
        assert store.meta("format_version") == "2"
        assert np.isnan(store.probe_arrays()["predicted"]).all()


def _hand_run(path, name: str, ids: tuple[str, str, str]):
    from kgprobe.engine import EngineConfig

    s, p, o = ids
    kg = KnowledgeGraph([Entity(s, "Atlantis"), Entity(o, "Poseidonia")], [Predicate(p, "capital")],
                        [Triple(s, p, o)], name=name)
    store = RunStore.create(path, config=EngineConfig(sampler="thompson", batch_size=1, prior_design=0.0).to_dict(), kg=kg,
                            model_identity="other-model")
    pkg = ParameterizedKG.from_kg(kg)
    pkg.update(np.array([0]), np.array([True]))
    store.commit_round(RoundRecord(1, 1, 1, 1, False, 0.0, 1.0, {}, False, pkg.state_dict(), {}, {},
                                   [ProbeRecord(1, 0, 0, True, True, "q", "a", {})]))
    store.close()
    return str(path)


def test_a_prior_from_another_kg_is_refused(tmp_path):
    other = _hand_run(tmp_path / "other.kgrun", "atlantis", ("Q1", "P36", "Q2"))
    out = tmp_path / "runs"
    p = kgprobe_cli("run", "--prior", other, "--out", str(out))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"the prior {other!r} was recorded on the KG 'atlantis', but this run probes 'countries'" in p.stderr
    assert not out.exists() or list(out.iterdir()) == []


def test_a_prior_sharing_no_edge_is_refused(tmp_path, countries):
    # Named like the embedded KG, but its only edge is no edge of it.
    other = _hand_run(tmp_path / "other.kgrun", "countries", ("Q999999", "P36", "Q999998"))
    p = kgprobe_cli("run", "--prior", other, "--out", str(tmp_path / "runs"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "shares no edge with the KG 'countries' of this run" in p.stderr
    with pytest.raises(kgprobe.errors.InputError, match="shares no edge"):
        kgprobe.probe(countries, "default", prior=other)


@pytest.mark.slow
def test_a_prior_from_another_model_starts_the_pkg_and_the_predictions(tmp_path, countries, theta):
    from kgprobe.prior import ItemPrior
    from kgprobe.simulation.model import SimulatedModel

    source = tmp_path / "source.kgrun"
    kgprobe.probe(countries, SimulatedModel(countries, theta, seed=5), budget=192, batch_size=64, seed=1,
                  store=source, sampler="uniform").close()
    run = kgprobe.probe(countries, SimulatedModel(countries, theta, seed=11), budget=64, batch_size=32, seed=0,
                        store=tmp_path / "b.kgrun", prior=str(source))
    prior = ItemPrior.from_json(run.store.meta("item_prior"))
    from kgprobe.report import report_data

    assert report_data(run)["prior"]["sources"] == [str(source)]
    run.close()
    assert prior.sources == [str(source)] and prior.shared_edges > 150
    # Source and run were made with the same probe options: nothing to note.
    assert prior.protocol_notes == []
    with RunStore.open(tmp_path / "b.kgrun") as store:
        probes = store.probe_arrays()
    r1 = probes["round"] == 1
    # Before any answer of the new model: σ(ā − b_j), ā the source's ability.
    a = prior.ability_prior[0]
    assert probes["predicted"][r1] == pytest.approx(expit(a - prior.filled_difficulty()[probes["edge"][r1]]))
    # An edge the source got right has a lower difficulty than one it got wrong.
    with RunStore.open(source) as store:
        src = store.probe_arrays()
    right_edges = np.unique(src["edge"][src["correct"]])
    wrong_only = np.setdiff1d(np.unique(src["edge"][~src["correct"]]), right_edges)
    assert prior.difficulty[right_edges].max() < prior.difficulty[wrong_only].min()


def test_a_prior_recorded_with_other_probe_options_is_warned_about_and_reported(tmp_path, countries, theta):
    import warnings

    from kgprobe.prior import ItemPrior
    from kgprobe.prior_sources import PriorProtocolWarning
    from kgprobe.report import _md_escape, render_markdown, report_data
    from kgprobe.simulation.model import SimulatedModel

    # A run file rendered with the paper's ZP-LKE examples, and the packaged sweep of the
    # default model (recorded before the option existed: the paper's examples too), as the
    # prior of a run at today's defaults (balanced examples).
    source = tmp_path / "paper.kgrun"
    kgprobe.probe(countries, SimulatedModel(countries, theta, seed=5), budget=64, batch_size=32, seed=1,
                  store=source, probe_options={"examples": "paper"}).close()
    with pytest.warns(PriorProtocolWarning) as caught:
        run = kgprobe.probe(countries, SimulatedModel(countries, theta, seed=11), budget=32, batch_size=32, seed=0,
                            store=tmp_path / "b.kgrun", prior=[str(source), "default"])
    notes = [f"{str(source)!r} was recorded with examples=\"paper\", this run uses examples=\"balanced\"",
             "'default' was recorded with examples=\"paper\", this run uses examples=\"balanced\""]
    assert [str(w.message) for w in caught if w.category is PriorProtocolWarning] == [
        f"the prior source {n}; its answers may predict this run's less well (the estimates stay valid, the "
        "interval may narrow less)" for n in notes]
    # The notes are stored with the prior, so the report (and a resumed run) shows them.
    assert ItemPrior.from_json(run.store.meta("item_prior")).protocol_notes == notes
    data = report_data(run)
    run.close()
    assert data["prior"]["protocol_notes"] == notes
    markdown = render_markdown(data, {})
    for note in notes:
        assert f"| prior source with another protocol (valid, may help less) | {_md_escape(note)} |" in markdown
    # The packaged Qwen2.5-Coder-1.5B sweep was recorded with balanced examples: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", PriorProtocolWarning)
        run = kgprobe.probe(countries, SimulatedModel(countries, theta, seed=11), budget=32, batch_size=32, seed=0,
                            store=tmp_path / "c.kgrun", prior="qwen2.5-coder-1.5b-instruct")
    assert report_data(run)["prior"]["protocol_notes"] == []
    run.close()


def test_the_command_line_warns_in_one_line_before_any_model_is_loaded(tmp_path):
    # --out is a file, so the run stops at the output check, after the prior's checks.
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "kgprobe.cli", "run", "--prior", "default", "--out", str(blocker)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.splitlines()[0] == (
        "kgprobe: warning: the prior source 'default' was recorded with examples=\"paper\", this run uses "
        "examples=\"balanced\"; its answers may predict this run's less well (the estimates stay valid, the "
        "interval may narrow less)")


@pytest.mark.slow
def test_compare_pairs_runs_with_the_same_design_and_corrects_for_multiplicity(tmp_path, countries, theta):
    from kgprobe.compare import compare_runs
    from kgprobe.simulation.model import SimulatedModel

    paths = []
    for i, seed in enumerate((5, 11)):
        path = tmp_path / f"m{i}.kgrun"
        kgprobe.probe(countries, SimulatedModel(countries, theta, seed=seed), budget=96, batch_size=32, seed=0,
                      store=path, design_fraction=0.5, design="uniform").close()
        paths.append(path)
    runs = [kgprobe.open_run(p) for p in paths]
    try:
        cmp = compare_runs(runs, ["A", "B"])
        est = [r.estimates() for r in runs]
    finally:
        for r in runs:
            r.close()
    diffs = cmp.differences
    assert diffs["correction"] == "holm"
    kg_row = diffs["differences"][0]
    # Same seed, same batch: the design draws do not depend on the answers, so both runs
    # drew the same design edges and the difference is paired.
    # (The uniform design, whose draws are all shared; the adaptive default shares its floor:
    # tests/product/test_design_compare.py.)
    assert kg_row["scope"] == "KG" and kg_row["paired"] and kg_row["test"] == "paired"
    assert kg_row["difference"] == pytest.approx(est[0]["kg"]["estimate"] - est[1]["kg"]["estimate"])
    tested = [r for r in diffs["differences"] if r["tested"]]
    assert diffs["family_size"] == len(tested)
    smallest = min(tested, key=lambda r: r["p"])
    assert smallest["p_holm"] == pytest.approx(min(1.0, len(tested) * smallest["p"]))


@pytest.mark.slow
def test_the_prior_design_draws_with_known_probabilities_and_runs_with_one_prior_pair(tmp_path, countries, theta):
    from kgprobe.compare import compare_runs
    from kgprobe.prior import ItemPrior
    from kgprobe.simulation.model import SimulatedModel

    source = tmp_path / "source.kgrun"
    kgprobe.probe(countries, SimulatedModel(countries, theta, seed=5), budget=192, batch_size=64, seed=1,
                  store=source, sampler="uniform").close()
    paths = []
    for i, seed in enumerate((11, 13)):
        paths.append(tmp_path / f"m{i}.kgrun")
        kgprobe.probe(countries, SimulatedModel(countries, theta, seed=seed), budget=64, batch_size=32, seed=0,
                      store=paths[-1], prior=str(source), design="uniform").close()
    with RunStore.open(paths[0]) as store:
        prior = ItemPrior.from_json(store.meta("item_prior"))
        probes = store.probe_arrays()
        config = store.config
    with RunStore.open(paths[1]) as store:
        other = store.probe_arrays()
    # The run default: half of the design follows the prior's spread. With p_j = σ(ā − b_j)
    # over the N active edges, w_j = ½/N + ½ · sqrt(p_j(1 − p_j)) / Σ sqrt(p(1 − p)), and each
    # round's 32 design draws (design fraction 1) include edge j with π_j = 32 · w_j.
    assert config["prior_design"] == 0.5
    act = np.asarray(countries.active, bool)
    p = expit(prior.ability_prior[0] - prior.filled_difficulty())
    spread = np.where(act, np.sqrt(p * (1 - p)), 0.0)
    w = np.where(act, 0.5 / act.sum(), 0.0) + 0.5 * spread / spread.sum()
    assert probes["design"].all()
    assert probes["inclusion"] == pytest.approx(32 * w[probes["edge"]], rel=1e-9)
    # The weights come from the prior alone: another model with the same prior and seed
    # drew the very same design edges (its answers differ), so the comparison is paired.
    assert np.array_equal(probes["edge"], other["edge"]) and not np.array_equal(probes["correct"], other["correct"])
    runs = [kgprobe.open_run(p) for p in paths]
    try:
        kg_row = compare_runs(runs, ["A", "B"]).differences["differences"][0]
    finally:
        for r in runs:
            r.close()
    assert kg_row["scope"] == "KG" and kg_row["paired"]


def test_a_prior_from_disagreeing_sources_shapes_the_design_less(tmp_path, countries, theta):
    from kgprobe.prior import ItemPrior
    from kgprobe.simulation.model import SimulatedModel

    # Two source models on nearly the same 192 edges (same seed, uniform design): one with
    # the fixture's error rates, one with half of them shuffled over the edges, so they agree in part.
    mixed = 0.5 * theta + 0.5 * np.random.default_rng(7).permutation(theta)
    sources = []
    for i, th in enumerate((theta, mixed)):
        sources.append(tmp_path / f"source{i}.kgrun")
        kgprobe.probe(countries, SimulatedModel(countries, th, seed=5 + i), budget=192, batch_size=64, seed=1,
                      store=sources[-1], sampler="uniform", design="uniform").close()
    shares = []
    for path in sources:
        with RunStore.open(path) as store:
            src = store.probe_arrays()
        total = np.bincount(src["edge"], minlength=countries.num_edges)
        right = np.bincount(src["edge"], weights=src["correct"], minlength=countries.num_edges)
        shares.append((right, total))
    both = (shares[0][1] > 0) & (shares[1][1] > 0)
    assert both.sum() > 150
    r = np.corrcoef(*[(right / np.maximum(total, 1))[both] for right, total in shares])[0, 1]
    run = kgprobe.probe(countries, SimulatedModel(countries, theta, seed=11), budget=64, batch_size=32, seed=0,
                        store=tmp_path / "m.kgrun", prior=[str(p) for p in sources], design="uniform")
    from kgprobe.report import render_markdown, report_data

    data = report_data(run)
    run.close()
    agreement = data["prior"]["agreement"]
    assert (f"| design share following the prior | {0.5 * agreement:.2f} (--prior-design 0.5 × the sources' "
            f"agreement {agreement:.2f}, docs/priors.md) |") in render_markdown(data, {})
    with RunStore.open(tmp_path / "m.kgrun") as store:
        prior = ItemPrior.from_json(store.meta("item_prior"))
        probes = store.probe_arrays()
        assert store.config["prior_design"] == 0.5
    assert prior.agreement == agreement == round(max(r, 0.0), 4) and 0.1 < prior.agreement < 0.9
    # The design follows the prior at ½ × the agreement: w_j = (1 − λ)/N + λ·σ_j/Σσ.
    lam = 0.5 * prior.agreement
    act = np.asarray(countries.active, bool)
    p = expit(prior.ability_prior[0] - prior.filled_difficulty())
    spread = np.where(act, np.sqrt(p * (1 - p)), 0.0)
    w = np.where(act, (1 - lam) / act.sum(), 0.0) + lam * spread / spread.sum()
    assert probes["inclusion"] == pytest.approx(32 * w[probes["edge"]], rel=1e-9)


@pytest.mark.slow
def test_the_report_shows_how_much_the_prior_counted_against_the_runs_own_predictions(tmp_path, countries, theta):
    from kgprobe.report import render_markdown, report_data
    from kgprobe.simulation.model import SimulatedModel

    # A model that answers without noise: right exactly on the edges with θ ≤ ½. Two sources
    # probed every active edge once, one answering as this model does, one the reverse.
    # The first predicts each of the run's answers (its difficulties split the edges as the
    # model does), so the stacking's likelihood is highest with the prior alone, w = 1; the
    # reversed one predicts each answer wrong, so any weight on it lowers the likelihood, w = 0.
    known = (theta > 0.5).astype(float)
    expected = {"same": 1.0, "reversed": 0.0}
    for name, th in (("same", known), ("reversed", 1.0 - known)):
        source = tmp_path / f"{name}.kgrun"
        kgprobe.probe(countries, SimulatedModel(countries, th, seed=5), budget=countries.num_active, batch_size=64,
                      seed=1, store=source, sampler="uniform", design="uniform", convergence=False,
                      progress=False).close()
        path = tmp_path / f"m-{name}.kgrun"
        run = kgprobe.probe(countries, SimulatedModel(countries, known, seed=11), budget=64, batch_size=32, seed=0,
                            store=path, prior=str(source), progress=False)
        live = run.prior_weight
        run.close()
        # A stored run rebuilds the sampler's state from the file and gets the same weight.
        stored = kgprobe.open_run(path)
        try:
            assert live == stored.prior_weight == expected[name]
            text = render_markdown(report_data(stored), {})
        finally:
            stored.close()
        assert (f"| weight of the prior's predictions against the run's own | {expected[name]:.2f} after the last "
                "round (0: the run's own answers predict this model better than the sources; 1: the prior's do; "
                "docs/priors.md) |") in text
    # Without a prior there is no weight and no row.
    plain = kgprobe.probe(countries, SimulatedModel(countries, known, seed=11), budget=32, batch_size=32, seed=0,
                          store=tmp_path / "plain.kgrun", progress=False)
    try:
        assert plain.prior_weight is None
        assert "weight of the prior" not in render_markdown(report_data(plain), {})
    finally:
        plain.close()

"""θ* generator calibration, the simulated model, the study's ratio, estimator coverage, CLI."""

import json

import numpy as np
import pytest
from scipy.special import expit

from kgprobe.cli import main
from kgprobe.errors import InputError, ModelError
from kgprobe.kg.graph import Entity, KnowledgeGraph, Predicate, Triple
from kgprobe.models.base import GenerateRequest, ScoreRequest
from kgprobe.simulation.model import SimulatedModel
from kgprobe.simulation.study import (
    SamplerSpec,
    StudyResult,
    _crossing,
    efficiency_ratio,
    ratio_intervals,
    estimator_coverage,
    run_study,
)
from kgprobe.simulation.synthetic import skewed_graph
from kgprobe.simulation.theta import (
    DEFAULT_MEAN_LOGIT,
    DEFAULT_SCALE,
    ThetaSettings,
    calibration_rates,
    generate_theta,
)


def test_default_calibration_hits_the_documented_targets():
    # Independent check of the quadrature by Monte Carlo: zero-sense = E[θ^10],
    # all-sense = E[(1-θ)^10] for θ = expit(μ + σZ).
    z = np.random.default_rng(0).standard_normal(400_000)
    th = expit(DEFAULT_MEAN_LOGIT + DEFAULT_SCALE * z)
    mc_zero, mc_all = np.mean(th**10), np.mean((1 - th) ** 10)
    q_zero, q_all = calibration_rates(DEFAULT_MEAN_LOGIT, DEFAULT_SCALE)
    assert q_zero == pytest.approx(0.20, abs=0.002) and q_all == pytest.approx(0.50, abs=0.002)
    assert mc_zero == pytest.approx(q_zero, abs=0.003) and mc_all == pytest.approx(q_all, abs=0.003)
    # Inside KGLens' ranges: zero-sense 5-50 %, all-sense 25-80 %.
    assert 0.05 <= q_zero <= 0.50 and 0.25 <= q_all <= 0.80


def _neighbour_gap(theta, heads, tails):
    # Mean |Δ logit θ| over pairs of edges sharing a head node vs random pairs.
    order = np.argsort(heads, kind="stable")
    same = heads[order][1:] == heads[order][:-1]
    lt = np.log(theta / (1 - theta))
    adj = np.abs(lt[order][1:] - lt[order][:-1])[same].mean()
    rnd = np.abs(lt - np.random.default_rng(1).permutation(lt)).mean()
    return adj / rnd


def test_correlated_vs_uncorrelated_theta():
    heads, tails, active = skewed_graph(20_000, seed=1, dead_fraction=0.0)
    preds = np.random.default_rng(2).integers(0, 20, heads.size)
    cor = generate_theta(heads, tails, preds, active, seed=0)
    none = generate_theta(heads, tails, preds, active, ThetaSettings(correlation="none"), seed=0)
    # Same marginal, by construction (a shuffle).
    np.testing.assert_allclose(np.sort(cor), np.sort(none))
    # Two edges with the same head share z_node[head] (ρ_e/2 = 0.175 of the logit
    # variance) and, with probability 1/20, the predicate (0.25/20): correlation
    # ρ = 0.1875. For Gaussian logits E|X − Y| ∝ sqrt(1 − ρ), so the neighbour gap
    # relative to random pairs is sqrt(0.8125) = 0.901; shuffled, it is 1.
    assert _neighbour_gap(cor, heads, tails) == pytest.approx(0.901, abs=0.03)
    assert _neighbour_gap(none, heads, tails) == pytest.approx(1.0, abs=0.03)
    with pytest.raises(InputError, match="sum to at most 1"):
        generate_theta(heads, tails, preds, active, ThetaSettings(predicate_share=0.7, entity_share=0.5))


def tiny_kg():
    ents = [Entity("FR", "France"), Entity("DE", "Germany"), Entity("PAR", "Paris", ("Lutetia",)),
            Entity("BER", "Berlin"), Entity("ROM", "Rome")]
    preds = [Predicate("P36", "capital")]
    return KnowledgeGraph(ents, preds, [Triple("FR", "P36", "PAR"), Triple("DE", "P36", "BER")],
                          candidates={"P36": ("PAR", "BER", "ROM")}, name="tiny")


def test_simulated_model_knows_or_not():
    kg = tiny_kg()
    ctx = "Question: What is the capital of France?\nAnswer:"
    options = [ScoreRequest(ctx, " Paris", edge=0), ScoreRequest(ctx, " Rome", edge=0),
               ScoreRequest(ctx, " Berlin", edge=0)]
    sure = SimulatedModel(kg, np.array([0.0, 0.0]))
    res = sure.score(options)
    assert [r.logprob for r in res][0] == -0.1 and [r.is_greedy for r in res] == [True, False, False]
    assert sure.generate([GenerateRequest(ctx, edge=0)]) == ["Paris"]
    yn_true = "Question: Is Paris the capital of France?\nAnswer:"
    yn_false = "Question: Is Rome the capital of France?\nAnswer:"
    assert sure.generate([GenerateRequest(yn_true, edge=0), GenerateRequest(yn_false, edge=0)]) == ["Yes.", "No."]
    clueless = SimulatedModel(kg, np.array([1.0, 1.0]))
    res = clueless.score(options)
    assert res[0].logprob == -6.0 and not res[0].is_greedy
    assert clueless.generate([GenerateRequest(ctx, edge=0)]) in (["Rome"], ["Berlin"])
    assert clueless.generate([GenerateRequest(yn_true, edge=0)]) == ["No."]
    yes, no = clueless.score([ScoreRequest(yn_false, " Yes", edge=0), ScoreRequest(yn_false, " No", edge=0)])
    assert yes.logprob > no.logprob  # wrongly says yes to a false question
    with pytest.raises(ModelError, match="request.edge"):
        sure.score([ScoreRequest(ctx, " Paris")])


def test_simulated_model_knows_with_probability_one_minus_theta():
    kg = tiny_kg()
    m = SimulatedModel(kg, np.array([0.3, 0.9]), seed=4)
    ctxs = [f"Question {i}: What is the capital of France?" for i in range(3000)]
    freq = np.mean([m.knows(0, c) for c in ctxs])
    assert abs(freq - 0.7) < 0.03  # sd 0.0084
    assert m.knows(0, ctxs[5]) == m.knows(0, ctxs[5])  # deterministic per (edge, context)
    assert SimulatedModel(kg, np.array([0.3, 0.9]), seed=4).identity == m.identity


def test_crossing_and_ratio_by_hand():
    q = np.array([100.0, 200.0, 300.0, 400.0])
    # Falls from 0.5 to 0.3 between 200 and 300: 0.4 is crossed halfway, at 250.
    assert _crossing(q, np.array([0.8, 0.5, 0.3, 0.2]), 0.4) == pytest.approx(250.0)
    assert _crossing(q, np.array([0.8, 0.7, 0.6, 0.5]), 0.4) == float("inf")
    res = StudyResult(queries=q, num_active=80, batch=100, top_k=(1,), seeds=(0,))
    res.mse["brute-force"] = {1: np.array([[0.8, 0.6, 0.4, 0.2]])}
    res.mse["fast"] = {1: np.array([[0.5, 0.3, 0.1, 0.05]])}
    # Reference at 4.5 epochs = 360 queries: interp 0.4 → 0.2 at 360 = 0.28.
    # "fast" reaches 0.28 between 200 (0.3) and 300 (0.1): 200 + 100·0.02/0.2 = 210 → 210/360.
    assert efficiency_ratio(res, "fast", epochs=4.5, k=1) == pytest.approx(210 / 360)
    assert efficiency_ratio(res, "brute-force", epochs=4.5, k=1) == pytest.approx(1.0)


def test_ratio_intervals_by_hand():
    q = np.array([100.0, 200.0, 300.0, 400.0])
    res = StudyResult(queries=q, num_active=80, batch=100, top_k=(1,), seeds=(0, 1, 2))
    res.mse["brute-force"] = {1: np.tile([0.8, 0.6, 0.4, 0.2], (3, 1))}  # target 0.28 at 360 queries
    fast, slow = [0.5, 0.3, 0.1, 0.05], [0.6, 0.5, 0.3, 0.1]
    res.mse["mixed"] = {1: np.array([fast, fast, slow])}
    res.mse["stuck"] = {1: np.array([fast, fast, [0.8, 0.7, 0.6, 0.5]])}
    iv = ratio_intervals(res, epochs=4.5, k=1)
    # Resamples of only seeds 0/1 (8/27 of them) give "fast" alone: 210/360, the lowest a
    # mixture can be; only seed 2 three times (1/27 > 2.5 %) gives "slow" alone, which
    # reaches 0.28 at 300 + 100·0.02/0.2 = 310 queries, the highest.
    assert iv["mixed"] == pytest.approx((210 / 360, 310 / 360))
    # The same, but seed 2's curve never gets there: its 1/27 of resamples are inf.
    assert iv["stuck"] == (pytest.approx(210 / 360), float("inf"))
    assert iv["brute-force"] == (1.0, 1.0)  # the reference on the same seeds, always
    with pytest.raises(InputError, match="at least 3 seeds"):
        ratio_intervals(StudyResult(queries=q, num_active=80, batch=100, top_k=(1,), seeds=(0, 1)))


def test_study_bad_inputs():
    heads, tails, active = skewed_graph(300, seed=0)
    theta = np.full(300, 0.5)
    with pytest.raises(InputError, match="one per edge"):
        run_study(heads, tails, active, theta[:10])
    with pytest.raises(InputError, match="epochs"):
        run_study(heads, tails, active, theta, epochs=0)
    with pytest.raises(InputError, match="larger than"):
        run_study(heads, tails, active, theta, batch=10_000)
    bad = theta.copy()
    bad[0] = np.nan
    with pytest.raises(InputError, match="probabilities"):
        run_study(heads, tails, active, bad)


@pytest.mark.slow
def test_design_interval_coverage_small_simulation():
    # 600-edge skewed graph, calibrated θ*, focus sampler with 10 % design draws for one epoch:
    # the 95 % interval must cover 1 - mean θ* in most of 60 runs (≥ 0.85 allows for
    # binomial noise: at true coverage 0.95, P(≤ 51/60) < 0.01).
    heads, tails, active = skewed_graph(600, seed=5, dead_fraction=0.0)
    preds = np.random.default_rng(0).integers(0, 8, heads.size)
    theta = generate_theta(heads, tails, preds, active, seed=5)
    out = estimator_coverage(heads, tails, active, theta, predicates=preds,
                             sampler=SamplerSpec("focus", "focus", 1.0), batch=30, epochs=1.0, seeds=range(60))
    assert out["runs"] == 60 and out["truth"] == pytest.approx(1 - theta.mean())
    assert out["coverage"] >= 0.85


@pytest.mark.slow
def test_focus_beats_brute_force_on_a_small_study():
    heads, tails, active = skewed_graph(800, seed=2, dead_fraction=0.1)
    preds = np.random.default_rng(3).integers(0, 8, heads.size)
    theta = generate_theta(heads, tails, preds, active, seed=2)
    specs = [SamplerSpec("brute-force", "brute-force", 0.0), SamplerSpec("focus", "focus", 1.0)]
    res = run_study(heads, tails, active, theta, predicates=preds, specs=specs, batch=32, epochs=4.6,
                    seeds=range(2), top_k=(50, 150))
    assert efficiency_ratio(res, "focus", epochs=4.5, k=150) < 0.6


def test_cli_simulate_bad_input_exit_2(tmp_path, capsys):
    assert main(["simulate", "--epochs", "0", "--out", str(tmp_path)]) == 2
    assert "epochs" in capsys.readouterr().err
    bad = tmp_path / "theta.txt"
    bad.write_text("0.1\n0.2\n")
    assert main(["simulate", "--theta", str(bad), "--out", str(tmp_path)]) == 2
    assert "2 θ* values" in capsys.readouterr().err
    assert main(["simulate", "--samplers", "annealing", "--out", str(tmp_path)]) == 2


def test_cli_simulate_bad_graphs_exit_2(tmp_path, capsys):
    from kgprobe.kg.formats import save_kg

    kg = tiny_kg()
    dead = KnowledgeGraph(kg.entities.values(), kg.predicates.values(),
                          [Triple(t.subject, t.predicate, t.object, active=False) for t in kg.triples()],
                          name="dead")
    assert main(["simulate", "--kg", str(save_kg(dead, tmp_path / "dead.jsonl")), "--out", str(tmp_path)]) == 2
    assert "no active edges" in capsys.readouterr().err
    path = str(save_kg(kg, tmp_path / "tiny.jsonl"))
    assert main(["simulate", "--kg", path, "--batch", "3", "--out", str(tmp_path)]) == 2
    assert "larger than the graph's 2 active edges" in capsys.readouterr().err
    assert main(["simulate", "--kg", path, "--runs", "0", "--out", str(tmp_path)]) == 2
    assert "--runs must be >= 1" in capsys.readouterr().err
    # Old names (--seeds for the number of runs, --batch) still work, with a warning.
    assert main(["simulate", "--kg", path, "--seeds", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "warning: --seeds is now --runs" in err and "--runs must be >= 1" in err


@pytest.mark.slow
def test_cli_simulate_writes_json_and_png(tmp_path):
    kg = tiny_kg()
    from kgprobe.kg.formats import save_kg

    path = save_kg(kg, tmp_path / "tiny.jsonl")
    theta = tmp_path / "theta.npy"
    np.save(theta, np.array([0.9, 0.1]))
    rc = main(["simulate", "--kg", str(path), "--theta", str(theta), "--runs", "2", "--epochs", "5",
               "--batch-size", "1", "--top-k", "1", "--samplers", "uniform", "focus", "--out", str(tmp_path / "o")])
    assert rc == 0
    data = json.loads((tmp_path / "o" / "study.json").read_text())
    assert data["num_active_edges"] == 2 and data["top_k"] == [1]
    assert set(data["mse_mean"]) == {"brute-force", "uniform", "focus"}
    assert len(data["queries"]) == 10  # 5 epochs of 2 edges, one edge per round
    assert (tmp_path / "o" / "study.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

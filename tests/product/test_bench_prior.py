"""``kgprobe bench prior``: the floors by hand, and the leave-one-model-out study on hand-made sweeps."""

from __future__ import annotations

import json

import numpy as np

from kgprobe.bench.prior import design_floors
from kgprobe.cli import main
from kgprobe.sources.embedded import load_embedded_kg
from kgprobe.sweep import Sweep, save_sweep


def test_design_floors_by_hand():
    # Four edges always right (θ = 0: no Bernoulli noise), four right half the time
    # (θ(1 − θ) = ¼): mean v = 0.125, mean sd = 0.25; 32 design draws.
    # uniform: sd = sqrt(0.125 / 32) = 0.0625, P(|Z| ≤ 0.03 / 0.0625) = erf(0.33941) = 0.369;
    # neyman (π ∝ sd): variance (mean sd)² = 0.0625, erf(0.48) = 0.503;
    # prior design, share ½: the uncertain edges get π = ½/8 + ½ · 0.5/2 = 1.5/8, the
    # certain ones ½/8; variance Σ v / (N² π) = 4 · ¼ / (64 · 1.5/8) = 1/12, erf(0.41569) = 0.443.
    theta = np.array([0.0] * 4 + [0.5] * 4)
    assert design_floors(theta, 32, 0.5) == {"uniform": 0.369, "neyman": 0.503, "prior_design": 0.443}
    # Every edge certain: nothing is left to estimate.
    assert design_floors(np.array([0.0, 1.0]), 32, 0.5) == {"uniform": 1.0, "neyman": 1.0, "prior_design": 1.0}


def _sweep(path, model, edges, correct, probe_options=None):
    save_sweep(Sweep(kg="countries", kg_hash="x", method="zp-lke", probe_options=probe_options or {}, model=model,
                     passes=correct.shape[1], seed=0, edges=edges, correct=correct, gold_logprob=None,
                     best_wrong_logprob=None, made_by="test"), path)
    return str(path)


def test_leave_one_model_out_on_hand_made_sweeps(tmp_path, capsys):
    kg = load_embedded_kg("countries")
    edges = np.flatnonzero(kg.active)[:40]
    # a: the first 20 edges always right, the rest right in 2 of 4 passes (truth 0.75);
    # b: the first 20 always wrong, the rest always right (truth 0.5);
    # c: only the first 20 edges, right in 1 of 2 passes (truth 0.5).
    a = np.zeros((40, 4), bool)
    a[:20] = True
    a[20:, :2] = True
    b = np.zeros((40, 4), bool)
    b[20:] = True
    c = np.zeros((20, 2), bool)
    c[:, 0] = True
    paths = [_sweep(tmp_path / "a.npz", "a", edges, a), _sweep(tmp_path / "b.npz", "b", edges, b),
             _sweep(tmp_path / "c.npz", "c", edges[:20], c)]
    assert main(["bench", "prior", "--truth", *paths, "--runs", "2", "--budget", "32", "--batch", "16"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["sweeps"] == paths and out["budget"] == 32 and out["prior_design"] == 0.5
    per = out["per_model"]
    assert [per[p]["truth"] for p in paths] == [0.75, 0.5, 0.5]
    # a's θ: 20 edges at 0, 20 at ½ — the hand-checked floors above, at 32 draws.
    assert per[paths[0]]["floor_within_3pt"] == {"uniform": 0.369, "neyman": 0.503, "prior_design": 0.443}
    # b never varies: nothing to estimate, every floor is 1.
    assert per[paths[1]]["floor_within_3pt"] == {"uniform": 1.0, "neyman": 1.0, "prior_design": 1.0}
    # c's prior comes from a and b, which cover all 40 edges; a's from b and c.
    assert per[paths[2]]["shared_edges"] == 40 and per[paths[0]]["shared_edges"] == 40
    # The own-passes prior: the first half of the passes against the second.
    assert [per[p]["split_half"]["passes"] for p in paths] == [[2, 2], [2, 2], [1, 1]]
    # b against the others: a and c found the first 20 edges the easier ones, b gets exactly
    # those wrong — the prior predicts b backwards and ends with weight 0. b's own first two
    # passes say exactly what its last two do: weight 1.
    assert (per[paths[1]]["prior_weight"], per[paths[1]]["split_half"]["prior_weight"]) == (0.0, 1.0)
    # a's first two passes were right everywhere: they tell no edge from another, weight 0.
    assert per[paths[0]]["split_half"]["prior_weight"] == 0.0
    # Each held-out model's two sources disagree on which edges are hard, so none of the
    # designs follows its prior: on the 20 edges they share, b (for a) and a (for b) answer
    # every edge alike, which orders no difficulty; for c, a and b are exact opposites (r = −1).
    assert [(per[p]["source_agreement"], per[p]["prior_design_share"]) for p in paths] == [(0.0, 0.0)] * 3
    for key in ("uniform_design", "no_prior", "split_half"):
        assert set(out[key]) >= {"abs_error", "within_3pt", "coverage", "ci_halfwidth"}
    # All three were recorded alike (before the examples option: the paper's examples).
    assert out["mixed_protocols"] is False and [per[p]["protocol_notes"] for p in paths] == [[]] * 3


def test_sources_recorded_with_other_probe_options_are_named(tmp_path, capsys):
    kg = load_embedded_kg("countries")
    edges = np.flatnonzero(kg.active)[:20]
    right = np.zeros((20, 2), bool)
    right[:10] = True
    # a predates the examples option (the paper's examples); b was rendered with balanced ones.
    a = _sweep(tmp_path / "a.npz", "a", edges, right)
    b = _sweep(tmp_path / "b.npz", "b", edges, right, {"examples": "balanced", "num_examples": 20})
    assert main(["bench", "prior", "--truth", a, b, "--runs", "1", "--budget", "16", "--batch", "8"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    out = json.loads(lines[-1])
    assert out["mixed_protocols"] is True
    # Each held-out sweep's source differs from it in the one option, named both ways round.
    assert out["per_model"][a]["protocol_notes"] == [
        f"{b!r} was recorded with examples=\"balanced\", this run uses examples=\"paper\""]
    assert out["per_model"][b]["protocol_notes"] == [
        f"{a!r} was recorded with examples=\"paper\", this run uses examples=\"balanced\""]
    assert lines[0].startswith(f"held out {a}: ") and "(sources recorded otherwise: 1 of 1)" in lines[0]


def test_one_sweep_is_not_enough(tmp_path, capsys):
    one = _sweep(tmp_path / "a.npz", "a", np.array([0, 1]), np.ones((2, 2), bool))
    assert main(["bench", "prior", "--truth", one]) == 2
    err = capsys.readouterr().err
    assert "leave-one-model-out needs at least two sweeps" in err and "Traceback" not in err

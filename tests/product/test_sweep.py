"""``kgprobe sweep`` and ``kgprobe bench efficiency --truth``: recording, kill -9 + resume, bad truths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kgprobe.cli import main
from kgprobe.errors import InputError
from kgprobe.sweep import Sweep, load_sweep, save_sweep


def kgprobe(*args, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "kgprobe.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def sweep_args(kg_file, out, export):
    return ["sweep", "--kg", str(kg_file), "--passes", "3", "--batch-size", "2", "--seed", "4",
            "--probe-option", "num_examples=3", "--probe-option", "num_distractors=3",
            "--out", str(out), "--export", str(export), "--quiet"]


@pytest.mark.slow
def test_a_killed_sweep_resumes_to_the_same_data(tmp_path, capitals8_file):
    from kgprobe.store import RunStore

    ref = kgprobe(*sweep_args(capitals8_file, tmp_path / "ref", tmp_path / "ref.npz"))
    out, err = ref.communicate(timeout=600)
    assert ref.returncode == 0, err
    reference = load_sweep(str(tmp_path / "ref.npz"))
    # 8 edges x 3 passes, every pass probes every edge once; scoring: both log-probs everywhere
    assert reference.correct.shape == (8, 3) and reference.passes == 3 and reference.kg == "capitals8"
    assert np.isfinite(reference.gold_logprob).all() and np.isfinite(reference.best_wrong_logprob).all()
    # the verdict is the argmax: right exactly when the gold option beats the best wrong one
    assert np.array_equal(reference.correct, reference.gold_logprob > reference.best_wrong_logprob)
    assert reference.made_by.startswith("kgprobe sweep --kg ") and "--passes 3" in reference.made_by

    # Kill -9 once two of the 12 rounds are committed, then run the same command again.
    child = kgprobe(*sweep_args(capitals8_file, tmp_path / "killed", tmp_path / "killed.npz"))
    deadline = time.time() + 600
    committed = 0
    while time.time() < deadline and child.poll() is None:
        runs = list((tmp_path / "killed").glob("*.kgrun"))
        if runs:
            try:
                with RunStore.open(runs[0]) as ro:
                    committed = ro.last_round()
            except InputError:  # caught between creating the file and writing its first table
                pass
            if committed >= 2:
                break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert 2 <= committed < 12, f"the kill landed after round {committed}"
    assert not (tmp_path / "killed.npz").exists()
    again = kgprobe(*sweep_args(capitals8_file, tmp_path / "killed", tmp_path / "killed.npz"))
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert "continuing the sweep" in err
    resumed = load_sweep(str(tmp_path / "killed.npz"))
    assert resumed.edges.tolist() == reference.edges.tolist()
    assert np.array_equal(resumed.correct, reference.correct)
    np.testing.assert_array_equal(resumed.gold_logprob, reference.gold_logprob)
    np.testing.assert_array_equal(resumed.best_wrong_logprob, reference.best_wrong_logprob)


def fake_sweep(path: Path, **kw) -> Path:
    fields = dict(kg="countries", kg_hash="x", method="zp-lke", probe_options={}, model="m", passes=2, seed=0,
                  edges=np.array([0, 1]), correct=np.array([[True, False], [True, True]]), gold_logprob=None,
                  best_wrong_logprob=None, made_by="test")
    fields.update(kw)
    save_sweep(Sweep(**fields), path)
    return path


def test_truth_of_another_kg_or_method_is_exit_2(tmp_path, capsys):
    other_kg = fake_sweep(tmp_path / "kg.npz", kg="nba", kg_hash="0123456789abcdef")
    assert main(["bench", "efficiency", "--truth", str(other_kg)]) == 2
    err = capsys.readouterr().err
    assert "recorded on the KG 'nba' (content hash 0123456789ab…), which is neither embedded in kgprobe nor one of its committed built KGs" in err
    assert "pass --graph with the file of the KG 'nba'" in err and "Traceback" not in err
    assert main(["bench", "efficiency", "--truth", str(other_kg), "--graph", "countries"]) == 2
    err = capsys.readouterr().err
    assert "recorded on the KG 'nba' (content hash 0123456789ab…), but the graph given is 'countries'" in err
    other_method = fake_sweep(tmp_path / "m.npz", method="hgp")
    assert main(["bench", "efficiency", "--truth", str(other_method)]) == 2
    assert "recorded with the method 'hgp', but this study is about 'zp-lke'" in capsys.readouterr().err
    assert main(["bench", "efficiency", "--truth", str(tmp_path / "missing.npz")]) == 2
    assert "no sweep" in capsys.readouterr().err
    assert main(["bench", "efficiency", "--truth", "default", "--coverage-runs", "0"]) == 2
    assert "--coverage-runs must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_the_real_data_study_runs_from_the_repository(capsys):
    import json

    from kgprobe.simulation.replay import scaled
    from kgprobe.sweep import packaged_sweeps

    assert {"default", "gemma3-270m", "qwen2.5-coder-0.5b-instruct"} <= set(packaged_sweeps())
    truth = load_sweep("default")
    assert truth.kg == "countries" and truth.method == "zp-lke" and truth.model.startswith("smollm2-135m-instruct@")
    # the CLI defaults (the file also records the options resolved at their defaults)
    assert {"num_examples": 20, "num_distractors": 19, "subject_object_sep": "\t", "pair_sep": "\n"}.items() \
        <= truth.probe_options.items()
    # grown from the first 100-edge recording with `sweep --extend` (kgprobe/sweeps/README.md)
    assert (truth.num_edges, truth.passes, truth.info["extends"]["edges"]) == (500, 20, 100)
    assert main(["bench", "efficiency", "--truth", "default", "--seeds", "1", "--coverage-runs", "40"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["coverage_study"]["runs"] == 40  # the bench's own default is 1,000 replays
    assert out["ratio_intervals"] is None  # a seed bootstrap needs 3 seeds or more
    assert out["passes"] == truth.passes and out["edges"] == truth.num_edges
    assert out["k"] == scaled(600, truth.num_edges) and out["accuracy"] == round(truth.accuracy(), 4)
    assert {"thompson", "kglens-thompson", "kglens-thompson+prop", "brute-force", "focus"} <= set(out["ratios"])
    # brute force reaches its own reference at 4.5 epochs (or, on a bumpy curve, a little earlier)
    assert 0.9 <= out["ratios"]["brute-force"] <= 1.0
    assert out["ratio_best"] == min(r for lab, r in out["ratios"].items() if lab != "brute-force" and r is not None)
    assert out["replacement_draws"] == sum(out["replacement_draws_by_sampler"].values()) > 0
    # The informed references (told θ*) are reported beside the samplers, never among them.
    floors = out["informed_ratios"]
    assert set(floors) == {"informed top-k", "screen once, then informed"} and not set(floors) & set(out["ratios"])
    assert floors["informed top-k"] < floors["screen once, then informed"] < 1


@pytest.fixture(scope="module")
def built_sweeps(tmp_path_factory):
    """A KG built around Iceland from the embedded geo store (14 active edges) and two
    tiny-random sweeps of 6 of its edges x 2 passes (seeds 0 and 1)."""
    tmp = tmp_path_factory.mktemp("built")
    kg_file = tmp / "iceland.jsonl"
    assert main(["build", "--source", "embedded:geo", "--seed-entities", "Iceland", "--hops", "1",
                 "--per-hop-limit", "8", "-o", str(kg_file)]) == 0
    sweeps = []
    for seed in (0, 1):
        path = tmp / f"iceland-s{seed}.npz"
        assert main(["sweep", "--kg", str(kg_file), "--model", "tiny-random", "--passes", "2", "--edges", "6",
                     "--batch-size", "6", "--seed", str(seed), "--probe-option", "num_examples=3",
                     "--probe-option", "num_distractors=3", "--out", str(tmp / "runs"), "--export", str(path),
                     "--quiet"]) == 0
        sweeps.append(path)
    return kg_file, sweeps


def test_a_sweep_of_a_built_kg_replays_through_the_cli(built_sweeps, capsys):
    import json

    kg_file, (sweep_file, other_file) = built_sweeps
    capsys.readouterr()
    recorded = load_sweep(str(sweep_file))
    assert recorded.kg == "Iceland" and recorded.correct.shape == (6, 2)
    # without --graph the error names the KG file the sweep was recorded with
    assert main(["bench", "efficiency", "--truth", str(sweep_file)]) == 2
    err = capsys.readouterr().err
    assert f"recorded on the KG 'Iceland' (content hash {recorded.kg_hash[:12]}…), which is neither embedded in kgprobe nor one of its committed built KGs" in err
    assert f"pass --graph {kg_file} (the KG file the sweep was recorded with)" in err

    assert main(["bench", "efficiency", "--truth", str(sweep_file), "--graph", str(kg_file), "--seeds", "3",
                 "--coverage-runs", "200"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    out = json.loads(printed[-1])
    right = recorded.correct
    # Each sampler's ratio comes with the seed bootstrap of the same study (same seeds, specs, scaling).
    from kgprobe.simulation.informed import informed_specs
    from kgprobe.simulation.replay import replay_truth, run_replay_study, sweep_graph
    from kgprobe.simulation.study import DEFAULT_SPECS, ratio_intervals

    kg, sw = sweep_graph(recorded, str(kg_file))
    _, active, truth = replay_truth(kg, sw)
    again = run_replay_study(kg, sw, specs=[*DEFAULT_SPECS, *informed_specs(truth, active, 1)], seeds=range(3),
                             batch=1, top_k=[1])
    expected = ratio_intervals(again, k=1)
    assert set(out["ratio_intervals"]) == set(out["ratios"])
    for lab, (lo, hi) in out["ratio_intervals"].items():
        assert [lo, hi] == [None if x == float("inf") else round(x, 4) for x in expected[lab]]
    assert any(line.strip().startswith("focus ") and "ratio top-1 " in line and "[" in line for line in printed)
    assert (out["graph"], out["edges"], out["passes"]) == ("Iceland", 6, 2)
    assert out["accuracy"] == round(float(right.sum()) / 12, 4)
    assert out["always_right"] == round(float(right.all(axis=1).sum()) / 6, 4)
    assert out["always_wrong"] == round(float((~right).all(axis=1).sum()) / 6, 4)
    # top-k and batch scale with the 6 edges: round(600 * 6 / 3246) = 1, round(64 * 6 / 3246) = 0 -> 1
    assert (out["k"], out["batch"]) == (1, 1)
    assert out["coverage_study"]["truth"] == out["accuracy"]
    # the ideal frontier of the sweep's own truth at 256 queries (hand-checked in tests/engine/test_design.py)
    from kgprobe.simulation.coverage import weak_share_frontier

    assert out["ideal_frontier"] == weak_share_frontier(1.0 - right.mean(axis=1), 256)

    assert main(["bench", "prior", "--truth", str(sweep_file), str(other_file), "--graph", str(kg_file),
                 "--runs", "3"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    other = load_sweep(str(other_file))
    assert out["per_model"][str(sweep_file)]["truth"] == round(recorded.accuracy(), 4)
    assert out["per_model"][str(other_file)]["truth"] == round(other.accuracy(), 4)


def test_a_built_kg_that_differs_is_exit_2_naming_what_differs(built_sweeps, tmp_path, capsys):
    kg_file, (sweep_file, _) = built_sweeps
    recorded = load_sweep(str(sweep_file))
    norway = tmp_path / "norway.jsonl"
    assert main(["build", "--source", "embedded:geo", "--seed-entities", "Norway", "--hops", "1",
                 "--per-hop-limit", "8", "-o", str(norway)]) == 0
    capsys.readouterr()
    assert main(["bench", "efficiency", "--truth", str(sweep_file), "--graph", str(norway)]) == 2
    err = capsys.readouterr().err
    assert "recorded on the KG 'Iceland'" in err and "but the graph given is 'Norway'" in err
    assert f"pass --graph {kg_file}" in err and "Traceback" not in err
    # the same seed with fewer edges per hop: the same name, another content, edges missing
    smaller = tmp_path / "iceland-small.jsonl"
    assert main(["build", "--source", "embedded:geo", "--seed-entities", "Iceland", "--hops", "1",
                 "--per-hop-limit", "2", "-o", str(smaller)]) == 0
    capsys.readouterr()
    assert main(["bench", "prior", "--truth", str(sweep_file), str(sweep_file), "--graph", str(smaller)]) == 2
    err = capsys.readouterr().err
    assert "is not in the KG 'Iceland'" in err and f"the sweep's KG content hash {recorded.kg_hash[:12]}…" in err

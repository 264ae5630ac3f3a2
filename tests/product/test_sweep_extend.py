"""``kgprobe sweep --extend``: grow a recorded sweep with the real default model, probing only new edges."""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.cli import main
from kgprobe.sweep import load_sweep


def args(kg_file, out, export, *more):
    return ["sweep", "--kg", str(kg_file), "--passes", "2", "--batch-size", "4", "--seed", "0",
            "--probe-option", "num_examples=3", "--probe-option", "num_distractors=3",
            "--out", str(out), "--export", str(export), "--quiet", *more]


@pytest.mark.slow
def test_extend_probes_only_the_new_edges_and_exports_all(tmp_path, capitals8_file, capsys):
    from kgprobe.store import RunStore

    assert main(args(capitals8_file, tmp_path / "runs", tmp_path / "base.npz", "--edges", "3")) == 0
    base = load_sweep(str(tmp_path / "base.npz"))
    assert base.num_edges == 3 and base.passes == 2
    capsys.readouterr()

    grown = args(capitals8_file, tmp_path / "runs", tmp_path / "grown.npz", "--edges", "5",
                 "--extend", str(tmp_path / "base.npz"))
    assert main(grown) == 0
    merged = load_sweep(str(tmp_path / "grown.npz"))
    assert merged.num_edges == 5 and merged.passes == 2
    assert set(base.edges.tolist()) < set(merged.edges.tolist())
    # the base's answers are carried over as recorded
    rows = np.searchsorted(merged.edges, base.edges)
    assert np.array_equal(merged.correct[rows], base.correct)
    np.testing.assert_array_equal(merged.gold_logprob[rows], base.gold_logprob)
    assert merged.info["extends"]["edges"] == 3 and "--extend" in merged.made_by
    # ... and only the two new edges were probed, twice each
    runs = sorted((tmp_path / "runs").glob("*2e-2p*.kgrun"))
    assert len(runs) == 1
    with RunStore.open(runs[0]) as ro:
        probed = ro.probe_arrays()["edge"]
    new_edges = np.setdiff1d(merged.edges, base.edges)
    assert sorted(probed.tolist()) == sorted(new_edges.tolist() * 2)

    # A second model would grow its own 3-edge sweep onto the grown sweep's edges with
    # --edges-from; with the same model that is the same sweep again (nothing new to probe).
    again = args(capitals8_file, tmp_path / "runs", tmp_path / "again.npz", "--edges", "5",
                 "--extend", str(tmp_path / "base.npz"), "--edges-from", str(tmp_path / "grown.npz"))
    assert main(again) == 0
    assert load_sweep(str(tmp_path / "again.npz")).edges.tolist() == merged.edges.tolist()
    assert len(list((tmp_path / "runs").glob("*.kgrun"))) == 2


def test_extend_with_another_protocol_is_exit_2_before_probing(tmp_path, capitals8_file, capsys):
    from kgprobe.sweep import Sweep, save_sweep

    base = Sweep(kg="capitals8", kg_hash="x", method="zp-lke", probe_options={"num_examples": 7}, model="m", passes=2,
                 seed=0, edges=np.array([0]), correct=np.array([[True, False]]), gold_logprob=None,
                 best_wrong_logprob=None, made_by="test", keys=np.array([["a", "b", "c"]]))
    save_sweep(base, tmp_path / "base.npz")
    code = main(args(capitals8_file, tmp_path / "runs", tmp_path / "grown.npz", "--edges", "4",
                     "--extend", str(tmp_path / "base.npz")))
    err = capsys.readouterr().err
    assert code == 2 and "--extend: the sweep's probe options" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*.kgrun"))
    assert main(args(capitals8_file, tmp_path / "runs", tmp_path / "g.npz", "--extend", str(tmp_path / "base.npz"))) == 2
    assert "--extend needs --edges N" in capsys.readouterr().err

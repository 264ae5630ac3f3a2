"""``kgprobe sweep --shard I/N`` and ``kgprobe sweep merge``: shards joined equal the unsharded sweep."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kgprobe.cli import main
from kgprobe.sweep import first_passes, load_sweep, save_sweep


def sweep(kg_file, out, export, *extra):
    # 10 edges x 2 passes in rounds of 4 edges: 5 rounds, each mixing the shards' edges.
    return main(["sweep", "--kg", str(kg_file), "--model", "tiny-random", "--passes", "2", "--batch-size", "4",
                 "--seed", "3", "--probe-option", "num_examples=3", "--probe-option", "num_distractors=3",
                 "--out", str(out), "--export", str(export), "--quiet", *extra])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, capitals10_file):
    tmp = tmp_path_factory.mktemp("shards")
    assert sweep(capitals10_file, tmp / "runs", tmp / "all.npz") == 0
    for i in (1, 2, 3):
        assert sweep(capitals10_file, tmp / "runs", tmp / f"shard{i}.npz", "--shard", f"{i}/3") == 0
    return tmp


def test_merged_shards_equal_the_unsharded_sweep(recorded, capsys):
    tmp = recorded
    shards = [load_sweep(tmp / f"shard{i}.npz") for i in (1, 2, 3)]
    # Edges 0..9 of the sorted sweep edges, dealt 0,3,6,9 / 1,4,7 / 2,5,8.
    whole = load_sweep(tmp / "all.npz")
    assert [s.num_edges for s in shards] == [4, 3, 3]
    assert np.array_equal(shards[1].edges, whole.edges[1::3])
    assert sum(s.num_edges for s in shards) == whole.num_edges == 10
    assert main(["sweep", "merge", *(str(tmp / f"shard{i}.npz") for i in (3, 1, 2)),
                 "--export", str(tmp / "merged.npz")]) == 0
    assert "joined from 3 shards" in capsys.readouterr().out
    merged = load_sweep(tmp / "merged.npz")
    for name in ("edges", "keys", "correct", "gold_logprob", "best_wrong_logprob"):
        assert np.array_equal(getattr(merged, name), getattr(whole, name)), name
    for name in ("kg", "kg_hash", "method", "probe_options", "model", "passes", "seed", "made_by"):
        assert getattr(merged, name) == getattr(whole, name), name
    assert "--shard" not in merged.made_by and shards[0].made_by == whole.made_by + " --shard 1/3"
    # tiny-random's answers are not all alike: the comparison is not of constant arrays.
    assert 0 < whole.correct.sum() < whole.correct.size


def test_merge_refuses_missing_repeated_and_foreign_shards(recorded, capsys):
    tmp = recorded
    s1, s2 = str(tmp / "shard1.npz"), str(tmp / "shard2.npz")
    assert main(["sweep", "merge", s1, s2, "--export", str(tmp / "x.npz")]) == 2
    assert "the sweep has 3 shards; missing 3/3" in capsys.readouterr().err
    assert main(["sweep", "merge", s1, s2, s2, "--export", str(tmp / "x.npz")]) == 2
    assert "missing 3/3; given twice 2/3" in capsys.readouterr().err
    # A shard recorded with other probe options (another protocol) is refused, naming it.
    other = dataclasses.replace(load_sweep(tmp / "shard3.npz"), probe_options={"num_examples": 5,
                                                                             "num_distractors": 3})
    save_sweep(other, tmp / "other3.npz")
    assert main(["sweep", "merge", s1, s2, str(tmp / "other3.npz"), "--export", str(tmp / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert "other3.npz is not a shard of the same sweep" in err and "probe_options" in err
    assert main(["sweep", "merge", s1, str(tmp / "all.npz"), "--export", str(tmp / "x.npz")]) == 2
    assert "all.npz is not a shard (recorded without --shard I/N)" in capsys.readouterr().err
    assert not (tmp / "x.npz").exists()


def test_bad_shard_specs_are_refused(capitals10_file, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--kg", str(capitals10_file), "--passes", "1", "--shard", "3/2"])
    assert exit_.value.code == 2 and "expected I/N with 1 <= I <= N" in capsys.readouterr().err
    assert main(["sweep", "--kg", str(capitals10_file), "--model", "tiny-random", "--passes", "1",
                 "--shard", "11/11", "--out", str(tmp_path)]) == 2
    assert "only 10 edges, so shard 11 would be empty" in capsys.readouterr().err


def test_shards_stopped_after_different_passes_join_on_their_first_k(recorded, capitals10_file, capsys):
    # A time box stops shards after different numbers of complete passes. Passes run in
    # order, so a shard's first pass is what a recording of one pass writes: shard 2
    # recorded with --passes 1 equals the first column of its two-pass recording.
    tmp = recorded
    assert sweep(capitals10_file, tmp / "runs1", tmp / "one2.npz", "--shard", "2/3", "--passes", "1") == 0
    one, two = load_sweep(tmp / "one2.npz"), load_sweep(tmp / "shard2.npz")
    assert one.passes == 1 and two.passes == 2
    for name in ("correct", "gold_logprob", "best_wrong_logprob"):
        assert np.array_equal(getattr(one, name), getattr(two, name)[:, :1]), name
    # The stopped shard as `--export-now` writes it: the same recording, its first pass.
    save_sweep(first_passes(two, 1), tmp / "stopped2.npz")
    names = [str(tmp / "shard1.npz"), str(tmp / "stopped2.npz"), str(tmp / "shard3.npz")]
    assert main(["sweep", "merge", *names, "--export", str(tmp / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert "different numbers of passes" in err and "stopped2.npz 1" in err and "with --passes 1" in err
    assert not (tmp / "x.npz").exists()
    assert main(["sweep", "merge", *names, "--passes", "2", "--export", str(tmp / "x.npz")]) == 2
    assert "cannot keep the first 2 passes of sweep merge: " in capsys.readouterr().err
    assert main(["sweep", "merge", *names, "--passes", "1", "--export", str(tmp / "first.npz")]) == 0
    merged, whole = load_sweep(tmp / "first.npz"), load_sweep(tmp / "all.npz")
    assert merged.passes == 1 and merged.info["first_passes"] == {"kept": 1}
    assert [s.get("first_passes") for s in merged.info["shards"]] == [{"kept": 1, "recorded": 2}] * 3
    for name in ("correct", "gold_logprob", "best_wrong_logprob"):
        assert np.array_equal(getattr(merged, name), getattr(whole, name)[:, :1]), name
    assert np.array_equal(merged.edges, whole.edges)

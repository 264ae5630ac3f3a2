"""``kgprobe sweep append``: more passes of a sweep, recorded with another seed, put after its own."""

from __future__ import annotations

import numpy as np

from kgprobe.cli import main
from kgprobe.sweep import load_sweep, pass_seeds


def record(kg_file, tmp, name, seed, passes, *extra):
    return main(["sweep", "--kg", str(kg_file), "--model", "tiny-random", "--passes", str(passes), "--batch-size",
                 "4", "--seed", str(seed), "--probe-option", "num_examples=3", "--probe-option", "num_distractors=3",
                 "--out", str(tmp / "runs"), "--export", str(tmp / name), "--quiet", *extra])


def test_cli_appends_a_recording_of_the_same_edges_with_another_seed(capitals10_file, tmp_path, capsys):
    assert record(capitals10_file, tmp_path, "base.npz", 3, 2) == 0
    base_file = str(tmp_path / "base.npz")
    assert record(capitals10_file, tmp_path, "more.npz", 4, 1, "--edges-from", base_file, "--edges", "10") == 0
    assert main(["sweep", "append", base_file, str(tmp_path / "more.npz"), "--export",
                 str(tmp_path / "longer.npz")]) == 0
    assert "2 passes of" in capsys.readouterr().out
    base, more, longer = (load_sweep(tmp_path / f) for f in ("base.npz", "more.npz", "longer.npz"))
    assert longer.passes == 3 and np.array_equal(longer.keys, base.keys)
    assert np.array_equal(longer.gold_logprob[:, :2], base.gold_logprob)
    assert np.array_equal(longer.gold_logprob[:, 2], more.gold_logprob[:, 0])
    # seed 4's probes are other questions (other examples and distractors), not seed 3's again
    assert not np.allclose(more.gold_logprob[:, 0], base.gold_logprob[:, 0])
    assert pass_seeds(longer) == [3, 3, 4] and longer.made_by.startswith("kgprobe sweep append ")
    # the same seed again, or a recording of other edges: exit 2, nothing written
    assert record(capitals10_file, tmp_path, "same.npz", 3, 1) == 0
    assert main(["sweep", "append", base_file, str(tmp_path / "same.npz"), "--export",
                 str(tmp_path / "bad.npz")]) == 2
    assert "another --seed" in capsys.readouterr().err and not (tmp_path / "bad.npz").exists()
    assert record(capitals10_file, tmp_path, "few.npz", 5, 1, "--edges", "4") == 0
    assert main(["sweep", "append", base_file, str(tmp_path / "few.npz"), "--export",
                 str(tmp_path / "bad.npz")]) == 2
    assert "not on the same edges" in capsys.readouterr().err and not (tmp_path / "bad.npz").exists()

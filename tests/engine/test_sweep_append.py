"""More passes of a recorded sweep: ``append_passes`` (the CLI: tests/distributed/test_sweep_append_cli.py)."""

from __future__ import annotations

import numpy as np
import pytest

from kgprobe.errors import InputError
from kgprobe.sweep import append_passes, merge_sweeps, pass_seeds

from .test_sweep_extend import sweep


def test_append_puts_the_new_passes_after_the_old_for_every_edge():
    base = sweep([1, 4], [[1, 0, 1], [0, 0, 1]], 3, gold=np.array([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]]),
                 kg_hash="old", seed=0)
    more = sweep([1, 4], [[0, 0], [1, 1]], 2, gold=np.array([[-7.0, -8.0], [-9.0, -10.0]]), seed=3)
    longer = append_passes(base, more, made_by="kgprobe sweep append a b --export c")
    assert longer.passes == 5 and longer.edges.tolist() == [1, 4]
    assert longer.correct.tolist() == [[True, False, True, False, False], [False, False, True, True, True]]
    assert longer.gold_logprob.tolist() == [[-1.0, -2.0, -3.0, -7.0, -8.0], [-4.0, -5.0, -6.0, -9.0, -10.0]]
    # theta of edge 1: 3 wrong of 5; of edge 4: 2 of 5
    assert longer.theta().tolist() == [0.6, 0.4]
    assert longer.seed == 0 and longer.kg_hash == "h" and pass_seeds(longer) == [0, 0, 0, 3, 3]
    assert longer.info["appends_to"]["passes"] == 3 and longer.info["appends_to"]["kg_hash"] == "old"
    assert longer.info["appended"]["passes"] == 2 and longer.info["appended"]["seed"] == 3
    # a second append must use a third seed; the file's seeds are every pass's
    with pytest.raises(InputError, match=r"recorded with seed\(s\) \[0, 3\]"):
        append_passes(longer, sweep([1, 4], [[1], [1]], 1, gold=np.zeros((2, 1)), seed=3), made_by="x")
    again = append_passes(longer, sweep([1, 4], [[1], [0]], 1, gold=np.zeros((2, 1)), seed=7), made_by="x")
    assert pass_seeds(again) == [0, 0, 0, 3, 3, 7] and again.correct[:, 5].tolist() == [True, False]
    # log-probs missing on one side: the longer file has verdicts only
    assert append_passes(base, sweep([1, 4], [[0], [1]], 1, seed=5), made_by="x").gold_logprob is None


def test_append_refuses_other_edges_the_same_seed_or_another_protocol():
    base = sweep([1, 4], [[1, 0], [0, 0]], 2)
    with pytest.raises(InputError, match=r"not on the same edges as the sweep \(2 edges in only one"):
        append_passes(base, sweep([1, 5], [[1], [1]], 1, seed=2), made_by="x")
    with pytest.raises(InputError, match="record the new passes with another --seed"):
        append_passes(base, sweep([1, 4], [[1], [1]], 1, seed=0), made_by="x")
    with pytest.raises(InputError, match="its model is 'm@1'"):
        append_passes(base, sweep([1, 4], [[1], [1]], 1, seed=2, model="other@2"), made_by="x")


def test_edges_added_after_an_append_keep_the_old_edges_pass_seeds():
    base = append_passes(sweep([1], [[1, 0]], 2, seed=0), sweep([1], [[1]], 1, seed=4), made_by="x")
    grown = merge_sweeps(base, sweep([2], [[0, 0, 1]], 3, seed=6), made_by="x")
    assert grown.seed == 6 and pass_seeds(grown) == [0, 0, 4]
    # 0 and 4 (the old edge's passes) and 6 (the new edge's) are all taken
    for used in (0, 4, 6):
        with pytest.raises(InputError, match="another --seed"):
            append_passes(grown, sweep([1, 2], [[1], [1]], 1, seed=used), made_by="x")

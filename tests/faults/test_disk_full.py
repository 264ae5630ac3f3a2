"""A full disk in the middle of a run (the store's fault-injecting write hook): a clear
error, everything before that round kept, and the resume ends where an unbroken run ends."""

from __future__ import annotations

import numpy as np
import pytest

import kgprobe
from kgprobe.errors import StoreError
from kgprobe.store import DISK_FULL_ENV

from .conftest import SETTINGS


def test_a_disk_full_mid_run_stops_cleanly_and_the_resume_loses_nothing(tmp_path, countries, sim_model,
                                                                         finished_run, monkeypatch):
    path = tmp_path / "full.kgrun"
    monkeypatch.setenv(DISK_FULL_ENV, "3")
    with pytest.raises(StoreError, match="the disk is full") as info:
        kgprobe.probe(countries, sim_model, store=path, **SETTINGS)
    assert info.value.exit_code == 5
    monkeypatch.delenv(DISK_FULL_ENV)
    with kgprobe.open_run(path) as run:
        assert run.rounds_played == 2  # rounds 1 and 2 committed, round 3 not
    resumed = kgprobe.resume(path, sim_model)
    reference = kgprobe.open_run(finished_run)
    try:
        assert resumed.rounds_played == reference.rounds_played == 4
        # Round 3's answers were logged before its commit failed: the resume replays them.
        assert [h["replayed"] for h in resumed.history()] == [False, False, True, False]
        assert np.array_equal(resumed.successes, reference.successes)
        assert np.array_equal(resumed.failures, reference.failures)
        assert [h["metrics"] for h in resumed.history()] == [h["metrics"] for h in reference.history()]
    finally:
        resumed.close()
        reference.close()

"""Model replicas on Ray: identical answers on 1 and 2 workers, a killed worker loses nothing.

Everything runs on a private Ray instance bound to 127.0.0.1 (``local_ray``, conftest).
The reference for every comparison is an in-process run that asks the model one probe
per call (``UnitCalls``), which is what each worker does.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import kgprobe
from kgprobe.models.registry import load_model
from kgprobe.models.units import UnitCalls

pytestmark = pytest.mark.timeout(600)

SETTINGS = dict(kg="countries", method="zp-lke", budget=48, batch_size=16, seed=5,
                probe_options={"num_examples": 3, "num_distractors": 5}, progress=False, report=False)


def outcome(run) -> dict:
    """What must be identical: every probe (round, position, edge, verdict, answer, log-probs)
    and the final PKG state."""
    probes = [(p.round, p.pos, p.edge, p.correct, p.answer, p.detail.get("gold_logprob"),
               p.detail.get("best_wrong_logprob")) for p in run.store.probes()]
    return {"probes": probes, "pkg": {k: np.asarray(v).tolist() for k, v in run.pkg.state_dict().items()},
            "queries": run.queries_spent, "rounds": run.rounds_played}


@pytest.fixture(scope="module")
def reference():
    import torch

    # Floats depend on the thread count (parallel sums): the workers run 1 thread each.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _unit_calls_outcome()
    finally:
        torch.set_num_threads(threads)


def _unit_calls_outcome() -> dict:
    with kgprobe.probe(model=UnitCalls(load_model("tiny-random")), store=None, **SETTINGS) as run:
        return outcome(run)


def test_one_and_two_workers_answer_as_one_process(local_ray, reference):
    assert reference["queries"] == 48 and reference["rounds"] == 3
    # tiny-random is wrong on most facts but not all: the comparison is not of constants.
    verdicts = [p[3] for p in reference["probes"]]
    assert len(verdicts) == 48 and 0 < sum(verdicts) < 48
    for workers in (1, 2):
        run = kgprobe.probe(model="tiny-random", store=None, workers=workers, lazy=True, **SETTINGS)
        try:
            run.finish()
            stats = run.engine.model.worker_stats()
            assert outcome(run) == reference, f"{workers} workers"
        finally:
            run.close()
        assert len(stats) == workers and all(s["units_answered"] > 0 for s in stats)
        assert sum(s["units_answered"] for s in stats) == 48  # one unit per probe


def test_a_worker_killed_mid_round_loses_and_repeats_nothing(local_ray, reference):
    run = kgprobe.probe(model="tiny-random", store=None, workers=2, lazy=True, **SETTINGS)
    model = run.engine.model
    victim = model.worker_pids()[1]
    killed = []

    def kill_once():
        # Round 2's blocks are sent: worker 2 dies holding its share of them.
        if run.engine.round == 1 and not killed:
            os.kill(victim, signal.SIGKILL)
            killed.append(time.perf_counter())

    model.after_send = kill_once
    try:
        run.finish()
        assert killed and model.replaced == 1
        pids = model.worker_pids()
        assert victim not in pids and len(set(pids)) == 2
        assert outcome(run) == reference
    finally:
        run.close()


@pytest.mark.slow
def test_default_model_on_one_and_two_workers(local_ray):
    settings = {**SETTINGS, "budget": 16, "batch_size": 8}
    results = []
    for workers in (1, 2):
        with kgprobe.probe(model="default", store=None, workers=workers, **settings) as run:
            results.append(outcome(run))
    assert results[0] == results[1]
    assert results[0]["queries"] == 16 and len(results[0]["probes"]) == 16
    # The real model gets some of these facts right and some wrong.
    assert 0 < sum(p[3] for p in results[0]["probes"]) < 16

"""SIGKILL at a random moment, then resume: the same final PKG and metrics as an unbroken run.

A child process probes the embedded countries KG with the simulated model (fast and
deterministic, so the only thing under test is the engine and the store) and is killed
with SIGKILL after a uniformly random delay within the run's duration; the run is then
resumed and compared with an unbroken run of the same seed: PKG arrays bit for bit,
metric history, every probe's edge, design flag, verdict, question and answer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kgprobe
from kgprobe.store import RunStore

# 40 rounds: long enough (about a second) that a random kill lands inside the run, not
# in the scheduler's noise around its end.
ROUNDS = 40
SETTINGS = dict(method="zp-lke", batch_size=32, budget=32 * ROUNDS, seed=21, convergence=False,
                probe_options={"num_examples": 5, "num_distractors": 4})

CHILD = f"""
import sys, warnings
warnings.simplefilter("ignore")
import kgprobe
from kgprobe.sources.embedded import load_embedded_kg
from kgprobe.simulation import theta_for_kg
from kgprobe.simulation.model import SimulatedModel
kg = load_embedded_kg("countries")
model = SimulatedModel(kg, theta_for_kg(kg, seed=3), seed=11)
run = kgprobe.probe(kg, model, store=sys.argv[1], lazy=True, progress=False, **{SETTINGS!r})
print("ready", flush=True)
run.finish()
print("done", flush=True)
"""


def snapshot(run):
    state = {k: np.asarray(v).copy() for k, v in run.pkg.state_dict().items()}
    probes = [(p.round, p.pos, p.edge, p.design, p.correct, p.question, p.answer, p.detail) for p in run.store.probes()]
    history = [(h["round"], h["queries_spent"], h["metrics"], h["converged"]) for h in run.history()]
    return state, probes, history


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_equals_unbroken(tmp_path, countries, sim_model):
    # The same work as the child's run.finish(): no progress output, no report at the end.
    reference = kgprobe.probe(countries, sim_model, store=tmp_path / "ref.kgrun", report=False, progress=False,
                              **SETTINGS)
    ref_state, ref_probes, ref_history = snapshot(reference)
    assert len(ref_history) == ROUNDS

    env = dict(os.environ, OMP_NUM_THREADS="1")
    # The kill window is the child's own time from "ready" to "done", measured on an
    # unkilled child: the in-process reference also pays for setup the child does before
    # "ready", and a window sized by it sent kills past the end of the child's run.
    timing = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "timing.kgrun")], stdout=subprocess.PIPE,
                              text=True, env=env)
    assert timing.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    assert timing.stdout.readline().strip() == "done"
    duration = time.perf_counter() - t0
    timing.wait()

    rng = np.random.default_rng(2026)
    interrupted, half_rounds = 0, 0
    for attempt in range(10):
        path = tmp_path / f"killed-{attempt}.kgrun"
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, duration))
        child.send_signal(signal.SIGKILL)
        child.wait()
        with RunStore.open(path) as ro:
            committed = ro.last_round()
            interrupted += committed < ROUNDS
            half_rounds += ro.logged_responses(committed + 1, "score") is not None
        resumed = kgprobe.resume(path, sim_model)
        state, probes, history = snapshot(resumed)
        resumed.close()
        assert state.keys() == ref_state.keys()
        for key in state:
            assert np.array_equal(state[key], ref_state[key]), (attempt, key)
        assert history == ref_history, attempt
        assert probes == ref_probes, attempt
    # The kills must have landed inside runs, not after them, for the test to mean anything.
    assert interrupted >= 7, f"only {interrupted} of 10 kills interrupted a run"
    print(f"{interrupted}/10 kills interrupted the run; {half_rounds} left a round answered but not committed; "
          f"the child's run took {duration:.2f} s after ready")

"""SIGTERM ends a `kgprobe run` like Ctrl-C: the run is marked interrupted and resumes to
the same result as an unbroken run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import kgprobe
from kgprobe.store import RunStore

SETTINGS = dict(method="zp-lke", batch_size=32, budget=32 * 6, seed=21, convergence=False,
                probe_options={"num_examples": 5, "num_distractors": 4})

# The CLI's own play() (live view, interrupt handling) around a simulated model that is slowed
# down, so the signal arrives while the run still has rounds to play.
CHILD = f"""
import sys, time, warnings
warnings.simplefilter("ignore")
import kgprobe
from kgprobe.commands.run import play
from kgprobe.engine import RoundFinished
from kgprobe.sources.embedded import load_embedded_kg
from kgprobe.simulation import theta_for_kg
from kgprobe.simulation.model import SimulatedModel

class Slow(SimulatedModel):
    def score(self, requests):
        time.sleep(0.5)
        return super().score(requests)

kg = load_embedded_kg("countries")
model = Slow(kg, theta_for_kg(kg, seed=3), seed=11)
run = kgprobe.probe(kg, model, store=sys.argv[1], lazy=True, **{SETTINGS!r})

def tell(event):
    if isinstance(event, RoundFinished):
        print(f"round {{event.summary.round}}", flush=True)

run.subscribe(tell)
sys.exit(play(run, {{"quiet": True, "report": False}}))
"""


def test_sigterm_marks_the_run_interrupted_and_resumable(tmp_path, countries, sim_model):
    reference = kgprobe.probe(countries, sim_model, store=None, progress=False, **SETTINGS)
    path = tmp_path / "term.kgrun"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout.readline().strip() == "round 1"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130
    assert "interrupted after round" in err and f"kgprobe resume {path}" in err
    with RunStore.open(path) as ro:
        assert ro.status == "interrupted" and 1 <= ro.last_round() < 6
    resumed = kgprobe.resume(path, sim_model, progress=False)
    assert resumed.status == "finished" and resumed.rounds_played == 6
    for key, value in reference.pkg.state_dict().items():
        assert np.array_equal(np.asarray(resumed.pkg.state_dict()[key]), np.asarray(value)), key
    assert [h["metrics"] for h in resumed.history()] == [h["metrics"] for h in reference.history()]
    resumed.close()


def test_an_interrupt_between_rounds_marks_the_run_interrupted(tmp_path, countries, sim_model):
    # Ctrl-C or SIGTERM can land while the caller holds control between two rounds, after
    # one was handed out and before the next is asked for. Thrown into the loop there (what
    # kgprobe.engine.play_out does with one raised in its own frame), it must reach the
    # engine's loop and mark the run interrupted, not leave it merely "stopped".
    path = tmp_path / "between.kgrun"
    run = kgprobe.probe(countries, sim_model, store=path, lazy=True, **SETTINGS)
    rounds = run.rounds()
    assert next(rounds).round == 1
    with pytest.raises(KeyboardInterrupt):
        rounds.throw(KeyboardInterrupt())
    run.close()
    with RunStore.open(path) as ro:
        assert (ro.status, ro.last_round()) == ("interrupted", 1)

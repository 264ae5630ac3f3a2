"""Two runs writing into the same directory at once do not corrupt each other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kgprobe
from kgprobe.api import open_run

SETTINGS = dict(method="zp-lke", batch_size=32, budget=32 * 8, convergence=False,
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
run = kgprobe.probe(kg, model, store=sys.argv[1], seed=int(sys.argv[2]), **{SETTINGS!r})
print(run.path, flush=True)
"""


@pytest.mark.slow
def test_two_concurrent_runs_in_one_directory(tmp_path, countries, sim_model):
    out = tmp_path / "runs"
    out.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(seed)], stdout=subprocess.PIPE,
                                 text=True, env=env) for seed in (1, 2)]
    paths = [c.communicate(timeout=600)[0].strip() for c in children]
    assert [c.returncode for c in children] == [0, 0]
    # Started in the same second, the files still get distinct names.
    assert len(set(paths)) == 2 and all(Path(p).parent == out for p in paths)
    for seed, path in zip((1, 2), paths):
        reference = kgprobe.probe(countries, sim_model, seed=seed, store=None, **SETTINGS)
        with open_run(path) as run:
            assert run.status == "finished" and run.rounds_played == 8
            for key, value in reference.pkg.state_dict().items():
                assert np.array_equal(np.asarray(run.pkg.state_dict()[key]), np.asarray(value)), (seed, key)
            assert [h["metrics"] for h in run.history()] == [h["metrics"] for h in reference.history()]
            integrity = run.store._conn.execute("PRAGMA integrity_check").fetchone()[0]
            assert integrity == "ok"

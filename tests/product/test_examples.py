"""The scripts in examples/ run as documented (real default model, tiny budgets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore")


def run(cmd, cwd, env=ENV):
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.slow
def test_probe_api_example(tmp_path):
    out = run([sys.executable, str(REPO / "examples" / "probe_api.py"), "--budget", "16", "--batch-size", "16"], tmp_path)
    assert "1 rounds, 16 queries, 16 edges probed" in out
    assert "KG-level accuracy (unbiased)" in out and "weakest facts:" in out
    assert len(list((tmp_path / "runs").glob("*.kgrun"))) == 1


@pytest.mark.slow
def test_early_stop_example(tmp_path):
    out = run([sys.executable, str(REPO / "examples" / "early_stop.py"), "--budget", "16", "--batch-size", "8",
               "--stop-after", "1"], tmp_path)
    assert "round 1: 8 queries" in out and "stopping early; the run is saved" in out
    # Resumed with twice the budget: 32 queries in rounds of 8.
    assert "resumed and finished: 4 rounds, 32 queries (budget)" in out


@pytest.mark.slow
def test_cli_tour(tmp_path):
    env = dict(ENV, BUDGET="16", BATCH="16", OUT="tour", KGPROBE=f"{sys.executable} -m kgprobe.cli")
    out = run(["bash", str(REPO / "examples" / "cli_tour.sh")], tmp_path, env=env)
    assert out.count("run: ") == 2 and "wrote " in out and "subsumption η" in out
    assert "WARNING: these runs measured different things" in out
    data = json.loads((tmp_path / "tour" / "first.json").read_text())
    assert data["queries_spent"] == 16 and data["config"]["method"] == "zp-lke"
    assert data["protocol"]["probe_options"]["num_distractors"] == 19
    samples = (tmp_path / "tour" / "first-samples.jsonl").read_text().splitlines()
    assert len(samples) == 1 + 16  # the header, then one line per probe
    assert len(list((tmp_path / "tour").glob("*.html"))) == 1

"""`kgprobe run` with the real default model: SIGKILL and Ctrl-C, then `kgprobe resume`.

Both interrupted runs must end in the same PKG and metrics as an unbroken run.
Small settings (yes/no log-prob probes, 4 rounds of 8 edges) keep it to a few minutes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kgprobe.api import open_run
from kgprobe.store import RunStore

ARGS = ["--method", "yes-no-logprob", "--batch-size", "8", "--budget", "32", "--no-convergence-stop",
        "--plain", "--no-report"]
ENV = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore")


def like_a_terminal():
    """In the child before exec: SIGINT at its default, not blocked. Ignored or blocked signals
    are inherited across exec, and a long test session may have changed them in pytest's
    own process; a Ctrl-C from a terminal reaches a process in the default state."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def cli(*args):
    return [sys.executable, "-m", "kgprobe.cli", *args]


def only_run(directory: Path) -> str:
    (path,) = directory.glob("*.kgrun")
    return str(path)


def wait_for_round(directory: Path, round_: int, proc, timeout=900):
    deadline = time.time() + timeout
    while time.time() < deadline:
        files = list(directory.glob("*.kgrun"))
        if files:
            try:
                with RunStore.open(files[0]) as ro:
                    if ro.last_round() >= round_:
                        return
            except Exception:  # the file is being created
                pass
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.2)
    raise AssertionError("timed out waiting for a round")


def state_of(path):
    with open_run(path) as run:
        return ({k: np.asarray(v).copy() for k, v in run.pkg.state_dict().items()},
                [h["metrics"] for h in run.history()],
                [(p.edge, p.correct, p.answer) for p in run.store.probes()])


def assert_same(a, b):
    assert a[0].keys() == b[0].keys()
    for k in a[0]:
        assert np.array_equal(a[0][k], b[0][k]), k
    assert a[1] == b[1] and a[2] == b[2]


@pytest.mark.slow
def test_sigkill_and_ctrl_c_then_resume_equal_an_unbroken_run(tmp_path):
    ref_dir, kill_dir, int_dir = tmp_path / "ref", tmp_path / "kill", tmp_path / "int"
    p = subprocess.run(cli("run", *ARGS, "--out", str(ref_dir)), env=ENV, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    reference = state_of(only_run(ref_dir))
    assert len(reference[1]) == 4

    # Rounds of 8 yes/no probes take about a second now, less than polling the run file can
    # be relied on to notice: the interrupted runs wait 4 s in round 2 before its commit
    # (the store's test hook), so each signal lands inside the run, not after it ended.
    slow_round_2 = dict(ENV, KGPROBE_TEST_PAUSE_BEFORE_COMMIT="4@2")

    # SIGKILL in the middle of round 2 (after round 1 is committed, plus a random delay).
    proc = subprocess.Popen(cli("run", *ARGS, "--out", str(kill_dir)), env=slow_round_2, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for_round(kill_dir, 1, proc)
    time.sleep(np.random.default_rng().uniform(0, 3))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with RunStore.open(only_run(kill_dir)) as ro:
        assert ro.last_round() < 4 and ro.status == "running"  # nothing had a chance to mark it
    p = subprocess.run(cli("resume", only_run(kill_dir), "--plain", "--no-report"), env=ENV, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert_same(reference, state_of(only_run(kill_dir)))

    # Ctrl-C: exit 130, a message saying how to resume, and the run resumes to the same end.
    proc = subprocess.Popen(cli("run", *ARGS, "--out", str(int_dir)), env=slow_round_2, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=like_a_terminal)
    wait_for_round(int_dir, 1, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err
    path = only_run(int_dir)
    assert f"everything up to it is saved in {path}" in err and f"kgprobe resume {path}" in err
    with RunStore.open(path) as ro:
        assert ro.status == "interrupted" and 1 <= ro.last_round() < 4
    p = subprocess.run(cli("resume", path, "--plain", "--no-report"), env=ENV, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert_same(reference, state_of(path))


@pytest.mark.slow
def test_run_builds_from_an_endpoint_then_probes(tmp_path):
    # "embedded" is the in-process SPARQL store: the same queries a Wikidata URL gets, offline.
    p = subprocess.run(cli("run", "--endpoint", "embedded", "--seed-entities", "Q142", "--hops", "1", "--method",
                           "yes-no-logprob", "--batch-size", "8", "--budget", "8", "--out", str(tmp_path),
                           "--plain", "--no-report"), env=ENV, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open_run(only_run(tmp_path)) as run:
        # The KG was built by one-hop walks from France (Q142), not the whole embedded graph.
        assert run.kg.name == "France" and run.kg.metadata["seeds"] == ["Q142"] and run.kg.metadata["hops"] == 1
        assert "Q142" in run.kg.entities and run.queries_spent == 8

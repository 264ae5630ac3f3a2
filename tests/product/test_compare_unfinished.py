"""`kgprobe compare` and `kgprobe report` on runs that have not finished, with the real default model.

A run that is still being written, was stopped, or was killed is compared as far as it
got, and the comparison says so; its KG difference cannot be paired with a finished run of
the same seed (fewer design draws), and the output says why. Resumed to the end, the same
run pairs again. Small settings (yes/no log-prob probes, rounds of 8 edges) keep it short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

import kgprobe
from kgprobe.cli import main
from kgprobe.store.transactions import writer_active

SETTINGS = dict(model="default", method="yes-no-logprob", batch_size=8, budget=32, seed=0, convergence=False,
                progress=False, report=False)

#: A second process that holds the run's writer lock as a running kgprobe does (the engine
#: marks the run "running" when it starts playing), until it is told to go or killed.
HOLDER = """
import sys
from kgprobe.store import RunStore
store = RunStore.open(sys.argv[1], writable=True)
store.set_status("running")
print("holding", flush=True)
sys.stdin.readline()
store.close()
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A finished run and the same one stopped after 2 of its 4 rounds."""
    tmp = tmp_path_factory.mktemp("unfinished")
    full = kgprobe.probe(store=tmp / "full.kgrun", **SETTINGS)
    full.close()
    part = kgprobe.probe(store=tmp / "part.kgrun", lazy=True, **SETTINGS)
    for played, _ in enumerate(part.rounds(), start=1):
        if played == 2:
            break
    part.close()
    return tmp / "full.kgrun", tmp / "part.kgrun"


def compare_json(a, b) -> dict:
    from kgprobe.api import open_run
    from kgprobe.compare import compare_runs

    opened = [open_run(a), open_run(b)]
    try:
        return compare_runs(opened).to_dict()
    finally:
        for r in opened:
            r.close()


@pytest.mark.slow
def test_a_stopped_run_is_compared_as_far_as_it_got_and_says_so(runs, capsys):
    full, part = runs
    out = compare_json(full, part)
    assert [s["finished"] for s in out["run_states"]] == [True, False]
    assert out["run_states"][1] == {"status": "stopped", "stop_reason": "stopped", "finished": False,
                                    "being_written": False, "rounds": 2, "queries": 16, "budget": 32}
    kg = next(r for r in out["accuracy_differences"]["differences"] if r["scope"] == "KG")
    # 32 design draws against 16: no shared floor, so the two variances add.
    assert not kg["paired"] and kg["test"] == "unpaired"
    assert kg["unpaired_reason"] == ("their design draws differ in number (32 and 16): a run is unfinished, or "
                                     "their budgets or batch sizes differ")
    capsys.readouterr()
    assert main(["compare", str(full), str(part)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (f"note: run [2] did not finish (stopped after 2 rounds, 16 of 32 queries); its figures are those of a "
            f"partial run. `kgprobe resume {part}` plays the rest") in text
    assert "note: run [1]" not in text
    from kgprobe.api import open_run
    from kgprobe.report import report_data, status_text

    with open_run(part) as run:
        data = report_data(run, being_written=False)
    assert status_text(data) == "did not finish (stopped): partial figures; `kgprobe resume` on the run file plays the rest"
    with open_run(full) as run:
        assert status_text(report_data(run)) == "finished (budget)"
    assert ("[1] and [2] compare unpaired on the KG: their design draws differ in number (32 and 16)") in text


@pytest.mark.slow
def test_a_run_being_written_and_a_killed_one_are_told_apart(runs, capsys):
    full, part = runs
    assert not writer_active(str(part))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(part)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert writer_active(str(part))
        capsys.readouterr()
        assert main(["compare", "--json", str(full), str(part)]) == 0
        state = json.loads(capsys.readouterr().out)["run_states"][1]
        assert (state["status"], state["being_written"], state["queries"]) == ("running", True, 16)
        assert main(["compare", str(full), str(part)]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert ("note: run [2] is still being written by another kgprobe process (2 rounds, 16 of 32 queries so "
                "far): its figures are those of a partial run; compare again when it has finished") in text
        assert main(["report", "--json", str(part)]) == 0
        data = json.loads(capsys.readouterr().out)
        assert (data["status"], data["being_written"], data["queries_spent"]) == ("running", True, 16)
        assert main(["report", str(part), "--out", str(part.parent / "live")]) == 0
        capsys.readouterr()
        md = (part.parent / "live" / "part.md").read_text()
        assert ("| status | running: another kgprobe process is writing it now, so these are a partial run's "
                "figures |") in md
    finally:
        # kill -9: the process leaves the file marked "running" and its lock with it.
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    assert not writer_active(str(part))
    assert main(["compare", str(full), str(part)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("note: run [2] did not finish: its process ended without a final record (it was killed, or its "
            f"machine stopped) after 2 rounds, 16 of 32 queries; its figures are those of a partial run. "
            f"`kgprobe resume {part}` plays the rest") in text
    assert main(["report", str(part), "--out", str(part.parent / "killed")]) == 0
    capsys.readouterr()
    md = (part.parent / "killed" / "part.md").read_text()
    assert ("| status | did not finish: its process ended without a final record (killed, or its machine stopped); "
            r"partial figures, \`kgprobe resume\` on the run file plays the rest |") in md


@pytest.mark.slow
def test_resumed_to_the_end_the_run_pairs_again(runs, tmp_path, capsys):
    import shutil

    full, part = runs
    copy = tmp_path / "resumed.kgrun"
    shutil.copy(part, copy)
    kgprobe.resume(copy, progress=False).close()
    out = compare_json(full, copy)
    assert [s["finished"] for s in out["run_states"]] == [True, True]
    kg = next(r for r in out["accuracy_differences"]["differences"] if r["scope"] == "KG")
    # The same model, seed and settings, and a resume plays what the run would have played:
    # the same draws and the same deterministic yes/no log-probabilities, so the two
    # estimates are equal, and paired on the shared floor again.
    assert kg["paired"] and "unpaired_reason" not in kg
    assert kg["test"] == "paired on the shared floor, unpaired on the rest"
    assert (kg["difference"], kg["p"]) == (0.0, 1.0)
    capsys.readouterr()
    assert main(["compare", str(full), str(copy)]) == 0
    text = capsys.readouterr().out
    assert "note: run" not in text and "compare unpaired" not in text

"""A real KGLens run: each probe of an edge a new question, repeats marked and not counted.

Two edges with three wh-phrasings each ("Who is the author of X?", "Who wrote X?", "Who
is X's author?"), brute force over 5 rounds: every edge is asked 5 times, the last two
repeat an earlier question, are marked ``repeated`` and add no evidence to the PKG (so
the edge's probe count stays at 3 and both repeats ask the first phrasing again).
Real default model (SmolLM2-135M-Instruct), 10 generations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kgprobe.api import open_run

ENV = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore")


@pytest.mark.slow
def test_run_report_carries_phrasings_and_marks_repeats(tmp_path):
    kg = tmp_path / "books.tsv"
    kg.write_text("Hamlet\tauthor\tWilliam Shakespeare\nDon Quixote\tauthor\tMiguel de Cervantes\n")
    out = tmp_path / "runs"
    subprocess.run(
        [sys.executable, "-m", "kgprobe.cli", "run", "--kg", str(kg), "--method", "wh",
         "--sampler", "brute-force", "--batch-size", "2", "--budget", "10", "--design-fraction", "0",
         "--no-convergence-stop", "--plain", "--no-report", "--quiet", "--out", str(out)],
        check=True, env=ENV, capture_output=True, text=True,
    )
    (run_file,) = out.glob("*.kgrun")
    report = subprocess.run([sys.executable, "-m", "kgprobe.cli", "report", str(run_file), "--json"],
                            check=True, env=ENV, capture_output=True, text=True)
    data = json.loads(report.stdout)
    probes = data["probes"]
    assert len(probes) == 10
    for edge, subject in ((0, "Hamlet"), (1, "Don Quixote")):
        mine = [p for p in probes if p["edge"] == edge]
        assert [p["question"] for p in mine] == [
            f"Who is the author of {subject}?", f"Who wrote {subject}?", f"Who is {subject}'s author?",
            f"Who is the author of {subject}?", f"Who is the author of {subject}?",
        ]
        assert [p["repeated"] for p in mine] == [False, False, False, True, True]
        assert [p["phrasing"]["source"] for p in mine] == ["grammar"] * 5
    assert data["phrasings"] == {"probes_with_phrasing": 10, "edges_probed_more_than_once": 2,
                                 "repeated_probes": 4, "unmarked_identical_questions": 0}
    with open_run(str(run_file)) as run:
        # only the three distinct questions of each edge are evidence
        assert (run.successes + run.failures).tolist() == [3, 3]

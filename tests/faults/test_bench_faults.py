"""The bench's cases against the real CLI (slow: each runs ``kgprobe`` in a child process).

``kgprobe bench faults`` runs all of them; here a kill -9 inside the replay window (the
test hook ``KGPROBE_TEST_PAUSE_BEFORE_COMMIT``) and a damaged metric in a finished run,
each checked against an unbroken reference run made by the same bench.
"""

from __future__ import annotations

import pytest

from kgprobe.bench.faults import run_bench


@pytest.mark.slow
def test_kill_in_the_replay_window_and_a_damaged_metric(tmp_path):
    result = run_bench(kills=0, only="replay-window-0", root=tmp_path, quiet=True)
    assert result["cases"] == 1 and result["not_ok"] == []
    assert (result["failed"], result["silent_wrong"], result["lost_probes"]) == (0, 0, 0)
    assert result["identical_resumes"] == 1 == result["kill_cases"]


@pytest.mark.slow
def test_the_case_list_has_every_fault_class():
    from kgprobe.bench.faults import all_cases

    names = [name for name, _ in all_cases(kills=10)]
    assert len(names) >= 60 and len(set(names)) == len(names)
    for needle in ("sparql:html", "sparql:malformed", "sparql:truncated", "sparql:wrongshape", "sparql:r429",
                   "sparql:s500", "sparql:hang", "sparql:reset", "sparql:oversized", "sparql:ignorelimit",
                   "model:r429", "model:kept-answers", "model:round-deadline", "kill:replay-window-0",
                   "damage:flip-0", "damage:truncate-0", "damage:wal-0", "damage:cache-0", "disk-full:tmpfs",
                   "lost-file:delete", "config:seed-bool", "input:markdown-labels", "inject:lang-filter"):
        assert needle in names

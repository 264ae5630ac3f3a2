"""``kgprobe bench scaleout``: the JSON line, its arithmetic and ``identical: true``."""

from __future__ import annotations

import importlib.util
import json

import pytest

from kgprobe.cli import main


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_scaleout_reports_both_worker_counts_and_identical_results(capsys):
    if importlib.util.find_spec("ray") is None:  # not imported here: kgprobe imports it as it needs
        pytest.skip("Ray is not installed")
    assert main(["bench", "scaleout", "--budget", "64", "--batch-size", "16"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    print(json.dumps(result))
    assert result["workers"] == [1, 2] and result["identical"] is True
    one, two = result["runs"]
    assert one["responses"] == two["responses"] == 64 and one["rounds"] == two["rounds"] == 4
    # One unit per ZP-LKE probe: 64 on the single worker, shared by the two.
    assert one["units_per_worker"] == [64]
    assert sum(two["units_per_worker"]) == 64 and min(two["units_per_worker"]) > 0
    assert result["speedup"] == round(two["responses_per_s"] / one["responses_per_s"], 3)
    for run in result["runs"]:
        # responses/s is computed from the unrounded wall time; wall_s is rounded to 1 ms.
        assert abs(run["responses_per_s"] - 64 / run["wall_s"]) <= 0.01 * run["responses_per_s"]

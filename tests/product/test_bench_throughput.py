"""``kgprobe bench throughput`` on tiny sizes: its JSON line, both paths agreeing.
(Speed is not asserted: tests are not timed; the bench prints the figures.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_bench_throughput_reports_both_paths_which_agree():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    p = subprocess.run(
        [sys.executable, "-m", "kgprobe.cli", "bench", "throughput", "--model", "tiny-random", "--device", "cpu",
         "--facts", "3", "--options", "5", "--examples", "4", "--baseline-facts", "2", "--e2e-budget", "8"],
        capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["bench"] == "throughput" and result["device"] == "cpu" and result["dtype"] == "float32"
    assert (result["facts"], result["options_per_fact"], result["examples"]) == (3, 5, 4)
    assert result["baseline_facts_measured"] == 2
    # Same network, same requests: the two scoring paths agree to float rounding.
    assert result["max_abs_logprob_diff_vs_baseline"] <= 1e-5
    assert result["greedy_flags_equal_baseline"] is True
    # The prefix tree never runs more tokens than the old per-option segments.
    assert result["tokens_run_per_fact"] <= result["baseline_tokens_run_per_fact"]
    assert result["bf16_peak_share"] is None  # CPU: no bf16 peak to compare with
    assert result["e2e_responses"] == 8
    for key in ("facts_per_s", "shared_facts_per_s", "tokens_per_s", "effective_tflops", "e2e_responses_per_s",
                "baseline_facts_per_s", "baseline_e2e_responses_per_s", "e2e_cli_defaults_responses_per_s",
                "output_layer_floor_facts_per_s", "output_layer_gemm_facts_per_s"):
        assert result[key] > 0, key
    # The floor: the output layer alone at the run's distinct predicting positions (every
    # one a token that was run; at least one per fact), 2 x positions x vocabulary x width.
    assert 1 <= result["positions_per_fact"] <= result["tokens_run_per_fact"]
    assert result["output_layer_gflop_per_fact"] == pytest.approx(
        2 * result["positions_per_fact"] * 49152 * 64 / 1e9, rel=0.01)
    assert result["share_of_floor"] == pytest.approx(
        result["facts_per_s"] / result["output_layer_floor_facts_per_s"], rel=0.01, abs=0.002)
    breakdown = result["scoring_breakdown"]
    assert set(breakdown) == {"tokenize", "plan_and_pack", "forward", "output_layer"}
    assert all(0 <= v <= 1 for v in breakdown.values())
    assert sum(breakdown.values()) == pytest.approx(1, abs=0.01)

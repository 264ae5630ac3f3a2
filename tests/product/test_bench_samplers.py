"""``kgprobe bench samplers``: the samplers' ratios on every committed sweep at once."""

from __future__ import annotations

import json
import math

import pytest

from kgprobe.bench.samplers import summarize
from kgprobe.cli import main

SKEW = ["--truth", "geo-skew-default"]


def _row(best, **ratios):
    return {"ratios": ratios, "best_sampler": best, "ratio_best": ratios[best],
            "screen_once_then_informed": 0.2 if best == "margin-focus" else 0.45}


def test_summary_by_hand():
    rows = {"a": _row("margin-focus", thompson=0.36, **{"margin-focus": 0.25}),
            "b": _row("margin-focus", thompson=None, **{"margin-focus": 0.64}),
            "c": _row("thompson", thompson=0.5, **{"margin-focus": 1.0})}
    out = summarize(rows, ["thompson", "margin-focus"], "margin-focus")
    mf, th = out["samplers"]["margin-focus"], out["samplers"]["thompson"]
    # (0.25 · 0.64 · 1.0)^(1/3) = 0.16^(1/3); thompson's never-reached ratio on b counts as 5/4.5.
    assert mf["geometric_mean"] == round(0.16 ** (1 / 3), 4) == 0.5429
    assert th["geometric_mean"] == round((0.36 * (5 / 4.5) * 0.5) ** (1 / 3), 4) == 0.5848
    assert (mf["median"], th["median"]) == (0.64, 0.5)
    assert mf["worst"] == {"value": 1.0, "sweep": "c"} and th["worst"] == {"value": None, "sweep": "b"}
    assert (mf["best_on"], th["best_on"], mf["not_reached"], th["not_reached"]) == (2, 1, 0, 1)
    # Paired on each sweep: (0.36/0.25 · (5/4.5)/0.64 · 0.5/1.0)^(1/3) = 1.25^(1/3).
    assert th["relative_to_default"] == round(1.25 ** (1 / 3), 4) == 1.0772 and mf["relative_to_default"] == 1.0
    # Bars: best <= 0.30 on a only; thompson <= 0.40 on a only (b never reached, c 0.5).
    assert out["met"] == {"best": 1, "thompson": 1}
    assert out["screen_once_then_informed_geometric_mean"] == round((0.2 * 0.2 * 0.45) ** (1 / 3), 4)
    assert (out["sweeps"], out["not_reached_counts_as"]) == (3, 1.1111)


def test_bars_read_through_the_seed_intervals_by_hand():
    rows = {"a": _row("margin-focus", thompson=0.36, **{"margin-focus": 0.25}),
            "b": _row("margin-focus", thompson=None, **{"margin-focus": 0.29}),
            "c": _row("thompson", thompson=0.41, **{"margin-focus": 0.5})}
    rows["a"]["ratio_intervals"] = {"thompson": [0.33, 0.39], "margin-focus": [0.22, 0.29]}  # both whole under
    rows["b"]["ratio_intervals"] = {"thompson": [0.9, None], "margin-focus": [0.26, 0.33]}  # mf straddles 0.30
    rows["c"]["ratio_intervals"] = {"thompson": [0.38, 0.45], "margin-focus": [0.4, 0.6]}  # thompson straddles 0.40
    out = summarize(rows, ["thompson", "margin-focus"], "margin-focus")
    # best: a's and b's margin-focus, c's thompson; upper ends 0.29, 0.33, 0.45 -> 1 under 0.30;
    # lower ends 0.22, 0.26, 0.38 -> 2. thompson: upper 0.39, never, 0.45 -> 1 under 0.40; lower 0.33, 0.9, 0.38 -> 2.
    assert out["met"] == {"best": 2, "thompson": 1}
    assert out["met_by_interval"] == {"best": {"upper_end_under": 1, "lower_end_under": 2},
                                      "thompson": {"upper_end_under": 1, "lower_end_under": 2}}
    # Under 3 seeds a row has no intervals, and the summary no interval counts.
    rows["c"]["ratio_intervals"] = None
    assert "met_by_interval" not in summarize(rows, ["thompson", "margin-focus"], "margin-focus")


@pytest.mark.slow
def test_a_sweeps_row_is_bench_efficiencys_ratio_for_the_same_seeds(capsys):
    # Each sampler replays on the random stream it has in bench efficiency's study of all
    # of them, so its ratio is that bench's to the digit, and so is the informed reference's.
    argv = ["bench", "samplers", *SKEW, "--seeds", "3", "--samplers", "focus (no propagation),margin-focus"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "replaying 1 sweeps (0 skipped), replay seeds 0–2, 1 at once"
    assert lines[1].startswith("[1/1] geo-skew-default (311 edges × 4 passes, top-57): focus (no propagation) ")
    row = json.loads(lines[-1])["sweeps"]["geo-skew-default"]
    assert main(["bench", "efficiency", *SKEW, "--seeds", "3", "--coverage-runs", "1", "--no-patterns"]) == 0
    eff = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (row["k"], row["batch"]) == (eff["k"], eff["batch"]) == (57, 6)  # 600 and 64 scaled by 311/3,246
    for label in ("focus (no propagation)", "margin-focus"):
        assert row["ratios"][label] == eff["ratios"][label]
        # and so is its seed-bootstrap interval, printed beside it
        assert row["ratio_intervals"][label] == eff["ratio_intervals"][label]
        lo, hi = row["ratio_intervals"][label]
        assert lo <= row["ratios"][label] <= hi
        assert f"{label} {row['ratios'][label]:.3f} [{lo:.3f}, {hi:.3f}]" in lines[1]
    assert row["screen_once_then_informed"] == eff["informed_ratios"]["screen once, then informed"]
    assert row["ratio_best"] == min(row["ratios"].values())


@pytest.mark.slow
def test_fresh_seeds_and_processes(capsys):
    argv = ["bench", "samplers", "--truth", "geo-skew-default", "geo-skew-gemma3-270m", "geo-skew-qwen2.5-coder-0.5b-instruct",
            "--seeds", "1", "--samplers", "focus (no propagation)", "--min-passes", "4"]
    assert main(argv) == 0
    one = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # Qwen2.5-Coder-0.5B's geo-skew sweep has 3 passes: under --min-passes 4.
    assert one["skipped"] == ["geo-skew-qwen2.5-coder-0.5b-instruct"]
    assert list(one["sweeps"]) == ["geo-skew-default", "geo-skew-gemma3-270m"]
    assert main([*argv, "--jobs", "2"]) == 0
    two = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert two["sweeps"].keys() == one["sweeps"].keys()
    for name in one["sweeps"]:
        assert two["sweeps"][name]["ratios"] == one["sweeps"][name]["ratios"]
    assert main([*argv, "--first-seed", "1"]) == 0
    fresh = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert fresh["seeds"] == [1, 1]
    assert fresh["sweeps"]["geo-skew-default"]["ratios"] != one["sweeps"]["geo-skew-default"]["ratios"]
    assert math.isclose(one["summary"]["samplers"]["focus (no propagation)"]["geometric_mean"], round(math.sqrt(
        math.prod(one["sweeps"][n]["ratios"]["focus (no propagation)"] for n in one["sweeps"])), 4))


@pytest.mark.parametrize("argv, message", [
    (["--samplers", "bogus"], "--samplers: 'bogus' is not one of the study's labels; choose from: brute-force,"),
    (["--samplers", "brute-force"], "--samplers: name at least one sampler besides brute-force, the reference"),
    (["--seeds", "0"], "--seeds must be at least 1 (got 0)"),
    (["--jobs", "0"], "--jobs must be at least 1 (got 0)"),
    (["--first-seed", "-1"], "--first-seed must be 0 or more (got -1)"),
    ([*SKEW, "--min-passes", "5"], "no sweep has at least 5 passes (--min-passes) and 100 edges"),
    (["--truth", "no-such-sweep"], "no sweep 'no-such-sweep'"),
])
def test_bad_input_is_a_clear_error(argv, message, capsys):
    assert main(["bench", "samplers", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err

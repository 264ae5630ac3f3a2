"""``kgprobe bench compare``: compare's KG difference replayed on recorded answers, and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kgprobe.bench.compare import split_passes
from kgprobe.cli import main
from kgprobe.sweep import load_sweep


def test_split_passes_keeps_each_half_of_the_answers_and_margins():
    sweep = load_sweep("default")
    first, second = split_passes(sweep)
    assert (first.passes, second.passes) == (10, 10)
    assert np.array_equal(first.correct, sweep.correct[:, :10]) and np.array_equal(second.correct, sweep.correct[:, 10:])
    assert np.array_equal(second.gold_logprob, sweep.gold_logprob[:, 10:])
    # 2,597 and 2,542 right answers of 5,000 in each half (counted here from the file).
    assert (int(first.correct.sum()), int(second.correct.sum())) == (2597, 2542)


def test_one_model_twice_pairs_every_draw(capsys):
    assert main(["bench", "compare", "--split-passes", "--runs", "4"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # (2,597 − 2,542) / 5,000: the two halves' shares of right answers.
    assert out["truth"] == pytest.approx(0.011) and out["sweeps"] == ["default"] and out["split_passes"]
    assert out["paired_share"] == 1.0
    assert out["paired"]["tests"] == ["paired"] and out["paired"]["tested"] == 4
    assert out["floor_only"]["tests"] == ["paired on the shared floor, unpaired on the rest"]
    assert out["unpaired"]["tests"] == ["unpaired"]
    # Pairing never widens the variance estimate of these replays: all paired < floor only < unpaired.
    assert out["paired"]["ci_halfwidth"] < out["floor_only"]["ci_halfwidth"] < out["unpaired"]["ci_halfwidth"]
    # The embedded KG's 11 predicates, each with a difference paired and one unpaired.
    preds = out["predicates"]
    assert preds["paired"]["predicates"] == preds["unpaired"]["predicates"] == 11
    assert preds["paired"]["ci_halfwidth"] < preds["unpaired"]["ci_halfwidth"]


@pytest.mark.parametrize("argv, message", [
    (["--truth", "default", "qwen2.5-coder-0.5b-instruct"], "hold different edges"),
    (["--truth", "default"], "--truth takes 2 sweeps, got 1"),
    (["--split-passes", "--truth", "default", "gemma3-270m"], "--truth takes 1 sweep with --split-passes, got 2"),
    (["--runs", "1"], "--runs must be at least 2"),
])
def test_bad_input_is_a_clear_error(argv, message, capsys):
    assert main(["bench", "compare", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err

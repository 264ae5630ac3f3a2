"""MarginDonorOracle: simulated verdicts with margins borrowed from recorded answers."""

import numpy as np
import pytest

from kgprobe.cli import main
from kgprobe.errors import InputError
from kgprobe.simulation.margins import MarginDonorOracle
from kgprobe.simulation.study import bernoulli_oracle
from kgprobe.sweep import Sweep, save_sweep


class Recorded:
    """Three recorded edges x 4 passes: always right (θ 0), half (θ 0.5), always wrong (θ 1)."""

    def margin(self):
        return np.array([[2.0, 3.0, 4.0, 5.0], [1.0, -1.0, 2.0, -2.0], [-1.0, -2.0, -3.0, -4.0]])


# Nearest recorded error share: 0 -> A, 0.4 -> B (0.1 away, A 0.4), 0.9 and 1 -> C, 0.2 -> A (B 0.3 away).
THETA = np.array([0.0, 0.4, 0.9, 1.0, 0.2])
ALLOWED = {
    # edge: (margins when right, margins when wrong)
    0: ({2.0, 3.0, 4.0, 5.0}, set()),
    1: ({1.0, 2.0}, {-1.0, -2.0}),
    # donor C has no positive margin: the nearest share with one is B's 0.5 (A's 0 is 0.9 away)
    2: ({1.0, 2.0}, {-1.0, -2.0, -3.0, -4.0}),
    3: (set(), {-1.0, -2.0, -3.0, -4.0}),
    # donor A has no negative margin: the nearest share with one is B's 0.5 (C's 1 is 0.8 away)
    4: ({2.0, 3.0, 4.0, 5.0}, {-1.0, -2.0}),
}


def test_verdicts_are_the_bernoulli_oracles_and_margins_come_from_the_donor():
    oracle = MarginDonorOracle(THETA, Recorded(), seed=3)
    stream = np.random.default_rng([3, 1])
    seen = {e: (set(), set()) for e in ALLOWED}
    for _ in range(400):
        edges = np.array([0, 1, 2, 3, 4, 4, 2])
        verdicts = oracle.answer(edges)
        np.testing.assert_array_equal(verdicts, bernoulli_oracle(THETA, edges, stream))
        assert np.array_equal(oracle.last_margins > 0, verdicts)
        for e, right, m in zip(edges.tolist(), verdicts.tolist(), oracle.last_margins.tolist()):
            seen[e][0 if right else 1].add(m)
    assert seen == ALLOWED  # every allowed margin drawn in 400 rounds, nothing else
    assert oracle.draws == 2800 and oracle.replacement_draws == 0


def test_seeded_and_donors_fixed_per_edge():
    a, b = MarginDonorOracle(THETA, Recorded(), seed=7), MarginDonorOracle(THETA, Recorded(), seed=7)
    edges = np.array([1, 2, 4, 0])
    for _ in range(5):
        np.testing.assert_array_equal(a.answer(edges), b.answer(edges))
        np.testing.assert_array_equal(a.last_margins, b.last_margins)


def test_ties_between_donors_draw_among_them():
    class Two:
        def margin(self):  # two always-right donors of different scale
            return np.array([[1.0, 1.0], [9.0, 9.0]])

    theta = np.zeros(200)
    oracle = MarginDonorOracle(theta, Two(), seed=0)
    oracle.answer(np.arange(200))
    # each edge keeps one donor: a second answer has the first's margin
    first = oracle.last_margins.copy()
    oracle.answer(np.arange(200))
    np.testing.assert_array_equal(oracle.last_margins, first)
    assert 70 < int(np.sum(first == 1.0)) < 130 and set(first.tolist()) == {1.0, 9.0}


def test_a_sweep_without_log_probs_is_refused(tmp_path, capsys):
    class NoLogProbs:
        def margin(self):
            return None

    with pytest.raises(InputError, match="recorded with log-probs"):
        MarginDonorOracle(THETA, NoLogProbs(), seed=0)
    path = tmp_path / "plain.npz"
    save_sweep(Sweep(kg="countries", kg_hash="x", method="zp-lke", probe_options={}, model="m", passes=2, seed=0,
                     edges=np.array([0, 1]), correct=np.array([[True, False], [True, True]]), gold_logprob=None,
                     best_wrong_logprob=None, made_by="test"), path)
    assert main(["bench", "efficiency", "--margin-donors", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the sweep has no log-probs to take margins from" in err and "Traceback" not in err

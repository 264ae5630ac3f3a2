"""The KG interval where a normal interval or a fixed-length run would be doubted.

Near 100 % right: replayed runs of a strong model keep their coverage. And under the run's
default stop on convergence, a stopping time that depends on the answers.

The committed default-model sweep with each recorded wrong answer turned right with
probability 0.95 (seeded) is a model right 97.5 % of the time on the same 500 edges and
predicates. A normal interval ``p ± 1.96·se`` misses most where it looks surest (an
estimate near 1 with a small ``se``); the run's Wilson interval at the effective sample
size does not (:func:`kgprobe.metrics.effective_wilson`).
"""

from __future__ import annotations


import numpy as np
import pytest

from kgprobe.estimators import kg_estimate
from kgprobe.simulation.coverage import replay_setup, simulate_default_run
from kgprobe.simulation.replay import sweep_graph
from kgprobe.sweep import load_sweep

from .conftest import turned_right

RUNS = 200


@pytest.fixture(scope="module")
def strong_runs():
    base = load_sweep("default")
    strong = turned_right(base, 0.95, np.random.default_rng(1))
    kg, sweep = sweep_graph(strong, None)
    setup = replay_setup(sweep, kg)
    estimates = [kg_estimate(simulate_default_run(setup, sweep, seed=r)) for r in range(RUNS)]
    return setup["truth"]["kg"], estimates, float(strong.correct.mean())


def test_strong_model_replays_keep_the_kg_interval_coverage(strong_runs):
    truth, estimates, accuracy = strong_runs
    # The truth is the sweep's share of right answers over its 500 edges × 20 passes.
    assert truth == pytest.approx(accuracy) and truth == pytest.approx(0.9753, abs=1e-4)
    covered = np.mean([e.low <= truth <= e.high for e in estimates])
    normal = np.mean([e.raw - 1.959964 * e.se <= truth <= e.raw + 1.959964 * e.se for e in estimates])
    # Same runs, same standard errors: only the interval's shape differs.
    assert covered >= 0.95
    assert normal <= 0.92
    # Every interval is proper: inside [0, 1], low <= estimate <= high.
    assert all(0.0 <= e.low <= e.estimate <= e.high <= 1.0 for e in estimates)


def test_kg_interval_covers_when_the_run_stops_on_convergence():
    # The run default stops once the win, zero-sense and all-sense rates over the probed
    # edges stop moving (window 5, tolerance 0.01): a stopping time that depends on the
    # answers. With a budget of 4,096 queries every replay of the committed default-model
    # sweep stops that way, long before the budget, and the interval still covers.
    from kgprobe.settings import RUN_DEFAULTS

    sweep = load_sweep("default")
    kg, sweep = sweep_graph(sweep, None)
    setup = replay_setup(sweep, kg)
    convergence = (RUN_DEFAULTS["convergence_window"], RUN_DEFAULTS["convergence_tolerance"])
    assert convergence == (5, 0.01) and RUN_DEFAULTS["stop_on_convergence"] is True
    truth = setup["truth"]["kg"]
    covered, spent = [], []
    for r in range(150):
        table = simulate_default_run(setup, sweep, seed=r, budget=4096, convergence=convergence)
        est = kg_estimate(table)
        covered.append(est.low <= truth <= est.high)
        spent.append(table.correct.size)
    assert max(spent) < 4096  # every replay stopped on convergence
    assert np.mean(covered) >= 0.94

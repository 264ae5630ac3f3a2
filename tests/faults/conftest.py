"""Fixtures of the fault-injection suite: loopback servers, a simulated model, and
finished run files to damage.

The servers (:mod:`kgprobe.bench.fault_servers`) listen on 127.0.0.1 only, answer a
bounded number of requests and stop by themselves; ``kgprobe bench faults`` runs the
same kinds of cases (and more) against the real CLI.
"""

from __future__ import annotations

import pytest

import kgprobe

SETTINGS = dict(method="zp-lke", batch_size=16, budget=16 * 4, seed=5, convergence=False,
                probe_options={"num_examples": 3, "num_distractors": 3})


@pytest.fixture(scope="session")
def countries():
    from kgprobe.sources.embedded import load_embedded_kg

    return load_embedded_kg("countries")


@pytest.fixture()
def sim_model(countries):
    from kgprobe.simulation import theta_for_kg
    from kgprobe.simulation.model import SimulatedModel

    return SimulatedModel(countries, theta_for_kg(countries, seed=3), seed=11)


@pytest.fixture()
def finished_run(tmp_path, countries, sim_model):
    """A finished 4-round run file of the simulated model."""
    path = tmp_path / "ref.kgrun"
    run = kgprobe.probe(countries, sim_model, store=path, **SETTINGS)
    run.close()
    return path


@pytest.fixture(scope="module")
def fake_openai():
    from kgprobe.bench.fault_servers import openai_server

    with openai_server(max_requests=5000, lifetime=300) as server:
        yield server


@pytest.fixture(scope="module")
def fake_sparql():
    from kgprobe.bench.fault_servers import sparql_server

    with sparql_server(max_requests=500, lifetime=300) as server:
        yield server

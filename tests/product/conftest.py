"""Shared fixtures of the product tests: the embedded countries KG and a simulated model.

The simulated model (``kgprobe.simulation.model.SimulatedModel``) answers edge j right
with probability 1 − θ*[j], deterministically per (seed, edge, context). It makes the
engine, store and resume tests run in seconds; feature tests of the CLI use the real
default model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def countries():
    from kgprobe.sources.embedded import load_embedded_kg

    return load_embedded_kg("countries")


@pytest.fixture(scope="session")
def theta(countries):
    from kgprobe.simulation import theta_for_kg

    return theta_for_kg(countries, seed=3)


@pytest.fixture()
def sim_model(countries, theta):
    from kgprobe.simulation.model import SimulatedModel

    return SimulatedModel(countries, theta, seed=11)


@pytest.fixture(scope="session")
def capitals8_file(tmp_path_factory, countries):
    """Eight capitals of the embedded countries KG (8 active edges, KG name ``capitals8``) as a
    KG file: a sweep of the real default model over it takes seconds."""
    from kgprobe.kg.formats import save_kg

    edges = countries.edges_of_predicate("P36", active_only=True)[:8]
    path = tmp_path_factory.mktemp("kg") / "capitals8.jsonl"
    save_kg(countries.subgraph(edges, name="capitals8"), path)
    return path

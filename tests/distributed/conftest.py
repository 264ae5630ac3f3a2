"""Fixtures of the distributed tests: a small KG file and a local Ray instance on loopback.

The Ray instance (2 CPUs, no dashboard, every service on 127.0.0.1) is started once per
module and shut down after it; ``RayModel`` finds it running and leaves it alone. Every
test that starts Ray itself (a CLI subprocess) stops it again.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def capitals10_file(tmp_path_factory):
    """Ten capitals of the embedded countries KG (KG name ``capitals10``) as a KG file."""
    from kgprobe.kg.formats import save_kg
    from kgprobe.sources.embedded import load_embedded_kg

    countries = load_embedded_kg("countries")
    edges = countries.edges_of_predicate("P36", active_only=True)[:10]
    path = tmp_path_factory.mktemp("kg") / "capitals10.jsonl"
    save_kg(countries.subgraph(edges, name="capitals10"), path)
    return path


@pytest.fixture(scope="module")
def local_ray():
    """A private Ray instance with 2 CPUs bound to 127.0.0.1, shut down after the module."""
    if "ray" not in sys.modules:
        # Ray reads this when imported: node address 127.0.0.1 instead of the machine's.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = pytest.importorskip("ray")

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        addresses = [node["NodeManagerAddress"] for node in ray.nodes()]
        assert addresses == ["127.0.0.1"], addresses
        yield ray
    finally:
        ray.shutdown()

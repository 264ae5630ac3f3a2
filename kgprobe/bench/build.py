"""``kgprobe bench build``: time a ≥ 20,000-edge KG build from a local oxigraph server.

Starts the real ``oxigraph`` server on 127.0.0.1 with the embedded ``geo`` data, builds
over HTTP with the SPARQL client (cache off), then runs the same build on the in-process
embedded store as the baseline and checks both give the identical KG. Prints a JSON
object as the last line.
"""

from __future__ import annotations

import json
import os
import time

DEFAULT_SEEDS = ("Q142", "Q183", "Q30")


def register(subparsers) -> None:
    parser = subparsers.add_parser("build", help="time a >= 20,000-edge build from a local SPARQL server")
    parser.add_argument("--seeds", nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--per-hop-limit", type=int, default=10_000)
    parser.add_argument("--min-edges", type=int, default=20_000,
                        help="fail (exit 1) if the build is smaller than this")
    parser.set_defaults(func=handle)


def _same(a, b) -> bool:
    return (
        a.triples() == b.triples()
        and a.entities == b.entities
        and a.predicates == b.predicates
        and a.explicit_candidates == b.explicit_candidates
    )


def handle(args) -> int:
    from kgprobe.kg.build import build_kg
    from kgprobe.sources.embedded import EmbeddedStore
    from kgprobe.sources.oxigraph_server import OxigraphServer
    from kgprobe.sources.sparql import SparqlClient

    opts = dict(hops=args.hops, per_hop_limit=args.per_hop_limit)
    with OxigraphServer("geo") as server:
        client = SparqlClient(server.query_url, cache=False)
        t0 = time.perf_counter()
        kg_server = build_kg(client, args.seeds, **opts)
        server_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store = EmbeddedStore("geo")
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kg_embedded = build_kg(store, args.seeds, **opts)
    embedded_s = time.perf_counter() - t0
    result = {
        "bench": "build",
        "seeds": list(args.seeds),
        "hops": args.hops,
        "per_hop_limit": args.per_hop_limit,
        "edges": kg_server.num_edges,
        "active_edges": kg_server.num_active,
        "entities": kg_server.num_entities,
        "predicates": len(kg_server.predicates),
        "server_seconds": round(server_s, 3),
        "server_http_requests": client.queries_issued,
        "server_queries": kg_server.metadata["queries"],
        "embedded_seconds": round(embedded_s, 3),
        "embedded_load_seconds": round(load_s, 3),
        "embedded_queries": kg_embedded.metadata["queries"],
        "identical_kg": _same(kg_server, kg_embedded),
        "cpu_threads": os.cpu_count(),
    }
    print(f"server build: {kg_server}", flush=True)
    print(json.dumps(result))
    return 0 if result["identical_kg"] and kg_server.num_edges >= args.min_edges else 1

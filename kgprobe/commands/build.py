"""``kgprobe build``: build a probe-ready KG from seed entities and write a KG file."""

from __future__ import annotations


from kgprobe.sources.rdf import DEAD_PREDICATES

DEFAULT_OUTPUT = "kg.jsonl"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "build",
        help="build a KG by random walks from seed entities (Wikidata, any SPARQL endpoint, or offline)",
        description="Walk forwards and backwards from seed entities (KGLens A.2/A.7), fetch labels, "
        "aliases, descriptions, true objects and candidates, and write a kgprobe KG file. "
        "The default source is the embedded store: no network needed.",
    )
    parser.add_argument(
        "--source", default="embedded",
        help="'embedded' (geo data shipped with kgprobe), 'embedded:countries', or a SPARQL "
        "endpoint URL such as https://query.wikidata.org/sparql",
    )
    from kgprobe.cli import RenamedOption

    parser.add_argument("--seed-entities", dest="seeds", nargs="+", metavar="ENTITY",
                        help="seed entities: QIDs (Q142) or English labels (France); required")
    parser.add_argument("--seeds", dest="seeds", nargs="+", action=RenamedOption, new_name="--seed-entities")
    parser.add_argument("--hops", type=int, default=2, help="random-walk steps from the seeds")
    parser.add_argument("--per-hop-limit", type=int, default=500,
                        help="edges kept per hop and direction (forward, backward)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the walk order")
    parser.add_argument("--lang", default="en", help="language of labels, aliases, descriptions")
    parser.add_argument("--require-aliases", action="store_true",
                        help="drop entities without an alias (KGLens A.2.3)")
    parser.add_argument("--min-sitelinks", type=int, default=0,
                        help="drop entities with fewer Wikipedia sitelinks (where the endpoint has them)")
    parser.add_argument("--min-languages", type=int, default=0,
                        help="drop entities labelled in fewer languages (KGLens A.2.3)")
    parser.add_argument("--dead", default=",".join(sorted(DEAD_PREDICATES)), metavar="P1,P2",
                        help="predicates whose edges are kept but never asked about")
    parser.add_argument("--candidate-limit", type=int, default=200,
                        help="extra candidate objects fetched per predicate (0: only the graph's)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per SPARQL request")
    parser.add_argument("--retries", type=int, default=4, help="retries of 429/5xx/timeouts")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the query cache")
    parser.add_argument("--max-rows", type=int, default=None,
                        help="rows accepted from the endpoint in the whole build (default 2,000,000)")
    parser.add_argument("--max-mb", type=float, default=None,
                        help="MiB accepted from the endpoint in the whole build (default 1024)")
    parser.add_argument("--max-response-mb", type=float, default=None,
                        help="MiB accepted in one answer of the endpoint (default 64)")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT,
                        help="KG file to write (kgprobe JSONL; add .gz to compress)")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    if not args.seeds:
        from kgprobe.errors import InputError

        raise InputError("kgprobe build needs --seed-entities (QIDs such as Q142 or labels such as France)")
    from kgprobe.kg.build import build_kg, open_source
    from kgprobe.kg.formats import save_kg
    from kgprobe.commands.common import short_warnings
    from kgprobe.errors import InputError
    from kgprobe.sources.sparql import SparqlClient

    short_warnings()

    if args.source.startswith(("http://", "https://")):
        for name in ("max_rows", "max_mb", "max_response_mb"):
            value = getattr(args, name)
            if value is not None and value <= 0:
                raise InputError(f"--{name.replace('_', '-')} must be > 0 (got {value:g})")
        mib = 1 << 20
        source = SparqlClient(
            args.source, timeout=args.timeout, retries=args.retries, cache=not args.no_cache,
            max_rows=args.max_rows, max_bytes=int(args.max_mb * mib) if args.max_mb else None,
            max_response_bytes=int(args.max_response_mb * mib) if args.max_response_mb else None,
        )
    else:
        source = open_source(args.source)
    dead = frozenset(p.strip() for p in args.dead.split(",") if p.strip())
    kg = build_kg(
        source, args.seeds, hops=args.hops, per_hop_limit=args.per_hop_limit, seed=args.seed,
        lang=args.lang, require_aliases=args.require_aliases, min_sitelinks=args.min_sitelinks,
        min_languages=args.min_languages,
        dead_predicates=dead, candidate_limit=args.candidate_limit,
    )
    path = save_kg(kg, args.output)
    dead_edges = kg.num_edges - kg.num_active
    print(
        f"wrote {path}: {kg.num_entities} entities, {kg.num_active} active edges, "
        f"{dead_edges} dead edges, {len(kg.predicates)} predicates "
        f"({kg.metadata['queries']} queries to {source.endpoint})"
    )
    return 0

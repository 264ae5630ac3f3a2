"""``kgprobe sweep``: record K brute-force passes of a model over a KG's edges (a recorded sweep).

    kgprobe sweep --kg countries --model default --method zp-lke --passes 20 --edges 1000 --seed 0

probes every active edge — or, with ``--edges N``, a stratified sample of N edges (every
predicate in proportion, seeded by ``--seed``; with ``--edges-from SWEEP`` the sample is
drawn from that sweep's edges, so a second model answers on the same edges) — K times.
``--extend SWEEP --edges N`` grows a recorded sweep of the same model into a stratified
sample of N edges that contains it: only the new edges are probed, and the exported file
holds both (the first K answers of the old edges and the K new ones). With
``--edges-from OTHER`` as well, the new edges come from OTHER's: e.g. a second model's
sweep grown onto the edges of a grown default-model sweep.
Each pass is its own seeded random order (the ``brute-force`` sampler with propagation
off), and every probe draws fresh examples, distractors and phrasings from its own seeded
generator, so the K answers of an edge are K different questions about the same fact.

The sweep is an ordinary run in the run store (``--out``, default ``runs/``), named after
its settings: killed at any point, ``kgprobe resume RUN`` or the same ``kgprobe sweep``
command again continues it, and the answers equal those of an unbroken sweep. When all
passes are done, the compact sweep file (:mod:`kgprobe.sweep`: verdicts and, for scoring
methods, the gold and best wrong option's log-probs) is written to ``--export`` (default:
the run file's name with ``.npz``). A finished sweep is not probed again; the command
then only exports.

Model, backend and probe options are those of ``kgprobe run`` (``--workers N`` spreads
every round over N model replicas on Ray with the same answers). The model is asked one
probe per call (:mod:`kgprobe.models.units`), so an answer never depends on which other
edges share its round: a sweep's file is the same on any number of workers or shards.

Sweeps across machines: ``--shard I/N`` records shard I of N (the sweep's sorted edges
``I-1, I-1+N, I-1+2N, ...``): every shard plays the whole sweep's schedule and asks the
model only about its own edges, so its answers are exactly those the unsharded sweep
gives these edges. ``kgprobe sweep merge S1.npz ... SN.npz --export ALL.npz`` joins the N
shard files (refusing another KG, method, probe options, model, seed or a missing shard)
into the sweep one unsharded run records: the same edges, verdicts and log-probs. Shards
stopped in one time box after different numbers of passes join with ``--passes K`` (each
shard's first K passes).

More passes of a recorded sweep: record the same edges again with another seed
(``--edges-from BASE.npz --edges N --seed S``), then ``kgprobe sweep append BASE.npz
MORE.npz --export LONGER.npz`` puts MORE's passes after BASE's for every edge (refusing
other edges, another model or protocol, or a seed BASE's passes used).
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

from kgprobe.commands.options import add_setting_arguments
from kgprobe.errors import InputError

DEFAULT_OUT = "runs"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="record K brute-force passes of a model over (a stratified sample of) a KG's edges",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--passes", type=int, metavar="K", help="answers to record per edge (required)")
    p.add_argument("--edges", type=int, metavar="N",
                   help="a stratified sample of N edges (every predicate in proportion); default: every active edge")
    p.add_argument("--edges-from", metavar="SWEEP",
                   help="draw the edges from this recorded sweep's edges (a name or a .npz path)")
    p.add_argument("--extend", metavar="SWEEP",
                   help="grow this recorded sweep (same model, method and probe options) to --edges N edges: "
                   "probe only the edges it lacks; the export holds all N")
    p.add_argument("--export", metavar="PATH", help="where to write the sweep file (default: the run file's name "
                   "with .npz)")
    p.add_argument("--shard", metavar="I/N", type=_shard_type,
                   help="record only shard I of N of the sweep's edges (on N machines); join the N exported "
                   "files with `kgprobe sweep merge`")
    p.add_argument("--export-now", action="store_true",
                   help="probe nothing: export the passes completed so far (fewer than --passes when the sweep is "
                   "unfinished; the file says so) — works while the sweep runs in another process")
    # The run settings a sweep takes (model, backend, probe, output); it always uses the
    # brute-force sampler without propagation, a fixed number of passes and no report.
    add_setting_arguments(p, "sweep")
    p.set_defaults(func=handle)
    sub = p.add_subparsers(dest="sweep_command", metavar="merge|append", required=False)
    m = sub.add_parser("merge", help="join the N shard files of a sweep (`--shard I/N`) into one sweep file",
                       description="Join the shard files of one sweep, recorded with `kgprobe sweep ... --shard I/N`, "
                       "into the file one unsharded sweep writes. Refuses shards of another sweep (KG, method, probe "
                       "options, model, passes, seed, edges) and a missing or repeated shard. Shards stopped in one "
                       "time box after different numbers of passes join with --passes K: each shard's first K.")
    m.add_argument("shards", nargs="+", metavar="SHARD", help="the shard files (.npz), all N of them")
    m.add_argument("--export", required=True, metavar="PATH", help="where to write the joined sweep file")
    m.add_argument("--passes", type=int, metavar="K", help="join each shard's first K passes (shards stopped in "
                   "one time box after different numbers of passes; every shard must hold K)")
    m.set_defaults(func=handle_merge)
    a = sub.add_parser("append", help="append the passes of another recording of the same edges (another --seed) "
                       "to a sweep", description="Append to BASE the passes of MORE: a sweep of exactly BASE's edges "
                       "(`--edges-from BASE --edges N`), by the same model with the same method and probe options, "
                       "recorded with a --seed none of BASE's passes used, so its probes are new questions. The "
                       "file written has BASE's passes and then MORE's for every edge.")
    a.add_argument("base", metavar="BASE", help="the sweep file (.npz) to append to")
    a.add_argument("more", metavar="MORE", help="the sweep file (.npz) whose passes are appended")
    a.add_argument("--export", required=True, metavar="PATH", help="where to write the longer sweep file")
    a.set_defaults(func=handle_append)


def _shard_type(value: str) -> tuple[int, int]:
    index, sep, count = value.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not (1 <= i <= n):
        raise argparse.ArgumentTypeError(f"--shard {value!r}: expected I/N with 1 <= I <= N, e.g. 1/2")
    return i, n


def handle_merge(args: argparse.Namespace) -> int:
    from kgprobe.sweep import load_sweep, merge_shards, save_sweep

    sweeps = [load_sweep(path) for path in args.shards]
    merged = merge_shards(sweeps, names=list(args.shards), passes=args.passes)
    save_sweep(merged, args.export)
    print(f"sweep: {args.export} ({merged.describe()}), joined from {len(sweeps)} shards")
    return 0


def handle_append(args: argparse.Namespace) -> int:
    from kgprobe.sweep import append_passes, load_sweep, save_sweep

    base, more = load_sweep(args.base), load_sweep(args.more)
    made_by = shlex.join(["kgprobe", "sweep", "append", args.base, args.more, "--export", args.export])
    longer = append_passes(base, more, made_by=made_by)
    save_sweep(longer, args.export)
    print(f"sweep: {args.export} ({longer.describe()}): {base.passes} passes of {args.base}, then "
          f"{more.passes} of {args.more}")
    return 0


def _sweep_settings(settings: dict, kg_name: str, edges) -> dict:
    """What identifies a sweep: equal settings, same run file, and it resumes."""
    return {
        "kg": kg_name, "model": settings["model"], "method": settings["method"],
        "probe_options": settings["probe_options"], "passes": settings["passes"], "seed": settings["seed"],
        "batch_size": settings["batch_size"], "edges": [int(e) for e in edges],
        **({"extends": settings["extend_made_by"]} if settings.get("extend") else {}),
        **({"shard": list(settings["shard"])} if settings.get("shard") else {}),
    }


def _run_path(out: Path, kg_name: str, settings: dict, num_edges: int, all_edges: bool) -> Path:
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    shard = f"-shard{settings['shard'][0]}of{settings['shard'][1]}" if settings.get("shard") else ""
    name = f"sweep-{kg_name}-{settings['method']}-{settings['model']}-{'all' if all_edges else num_edges}e-" \
           f"{settings['passes']}p-s{settings['seed']}{shard}-{digest}"
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return out / f"{safe}.kgrun"


def _command_line(settings: dict, n) -> str:
    """The sweep command with every setting that shapes the answers spelled out."""
    import json

    parts = ["kgprobe", "sweep", "--kg", str(settings["kg"]), "--model", str(settings["model"]),
             "--method", settings["method"], "--passes", str(settings["passes"])]
    if n is not None:
        parts += ["--edges", str(n)]
    if settings.get("edges_from"):
        parts += ["--edges-from", str(settings["edges_from"])]
    if settings.get("extend"):
        parts += ["--extend", str(settings["extend"])]
    parts += ["--seed", str(settings["seed"]), "--batch-size", str(settings["batch_size"])]
    for key, value in sorted(settings["probe_options"].items()):
        parts += ["--probe-option", f"{key}={json.dumps(value)}"]
    for key, value in sorted(settings["model_options"].items()):
        parts += ["--model-option", f"{key}={json.dumps(value)}"]
    return shlex.join(parts)


def restricted_kg(kg, edges):
    """``kg`` with only ``edges`` active; every other edge stays as (dead) structure."""
    import numpy as np

    from kgprobe.kg.graph import KnowledgeGraph, Triple

    keep = np.zeros(kg.num_edges, dtype=bool)
    keep[np.asarray(edges, dtype=np.int64)] = True
    triples = [Triple(t.subject, t.predicate, t.object, bool(keep[j])) for j, t in enumerate(kg.triples())]
    return KnowledgeGraph(kg.entities.values(), kg.predicates.values(), triples, candidates=kg.explicit_candidates,
                          name=kg.name, metadata=kg.metadata)


#: Options of ``kgprobe sweep`` that ``kgprobe run`` does not have.
SWEEP_OPTIONS = ("passes", "edges", "edges_from", "extend", "export", "export_now", "shard")


def handle(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from kgprobe.api import resume
    from kgprobe.commands.common import (
        check_out_dir, load_model_setting, play, prepare_process_for_models, resolve_kg_setting, settings_from_args,
        short_warnings,
    )
    from kgprobe.engine import EngineConfig
    from kgprobe.start import check_model, check_run, start_run
    from kgprobe.store import RunStore, kg_fingerprint
    from kgprobe.sweep import extension_edges, load_sweep, stratified_edges

    prepare_process_for_models()
    short_warnings()
    # The sweep's own options are not run settings: resolve the shared ones as `run` does.
    own = {k: vars(args).pop(k) for k in SWEEP_OPTIONS if k in vars(args)}
    vars(args).pop("sweep_command", None)
    explicit = _explicit_probe_options(args)
    settings = settings_from_args(args)
    settings.update(own)
    settings.setdefault("out", DEFAULT_OUT)
    passes = settings["passes"]
    if passes is None:
        raise InputError("kgprobe sweep needs --passes K (answers to record per edge), or `kgprobe sweep merge` "
                         "to join shard files")
    if settings.get("shard") and settings.get("extend"):
        raise InputError("--shard cannot be combined with --extend: extend the merged sweep instead")
    if passes < 1:
        raise InputError(f"--passes must be >= 1, got {passes}")
    kg = resolve_kg_setting(settings)
    population = kg.active_edges()
    if settings.get("edges_from"):
        source = load_sweep(settings["edges_from"])
        population = source.edges_in(kg)
        outside = population[~kg.active[population]]
        if outside.size:
            # e.g. edges of a state that has since been dissolved: no model is asked about them again
            print(f"kgprobe: warning: {outside.size} edges of the sweep {settings['edges_from']!r} are no longer "
                  f"active in the KG {kg.name!r}; they are left out", file=sys.stderr)
            population = population[kg.active[population]]
            if population.size == 0:
                raise InputError(f"no edge of the sweep {settings['edges_from']!r} is active in the KG {kg.name!r}")
    n = settings.get("edges")
    base = None
    if settings.get("extend"):
        if n is None:
            raise InputError("--extend needs --edges N (the size of the grown sample, including the sweep's own "
                             "edges)")
        base = load_sweep(settings["extend"])
        _inherit_recorded_options(base, settings, explicit)
        _check_extendable(base, settings, kg)
        settings["extend_made_by"] = base.made_by
        edges = extension_edges(kg, population, n, settings["seed"], base.edges_in(kg))
    else:
        edges = population if n is None else stratified_edges(kg, population, n, settings["seed"])
    edges = np.sort(np.asarray(edges, dtype=np.int64))
    sweep_kg = restricted_kg(kg, edges)
    batch = settings["batch_size"]
    config = EngineConfig(
        method=settings["method"], sampler="brute-force", batch_size=min(batch, edges.size), budget=None,
        # Each pass probes every edge once; the last round may run into pass K + 1, whose
        # answers the export leaves out.
        max_rounds=math.ceil(passes * edges.size / min(batch, edges.size)), seed=settings["seed"],
        propagation_weight=0.0, stop_on_convergence=False, probe_options=dict(settings["probe_options"]),
        sampler_options={},
    )
    check_run(sweep_kg, config)
    identity = _sweep_settings(settings, kg.name, edges)
    out = Path(settings["out"])
    check_out_dir(out)
    path = _run_path(out, kg.name, identity, edges.size, n is None and not settings.get("edges_from"))
    made_by = _command_line(settings, n)
    mine = edges
    if settings.get("shard"):
        index, count = settings["shard"]
        mine = edges[index - 1::count]
        if mine.size == 0:
            raise InputError(f"--shard {index}/{count}: the sweep has only {edges.size} edges, so shard {index} "
                             "would be empty; use fewer shards")
    if settings.get("export_now"):
        return _export(path, settings, edges, kg, made_by, passes=None, mine=mine)
    # One probe per backend call: the answers do not depend on which edges share a round,
    # so shards and worker counts record the same sweep (kgprobe.models.units).
    model = load_model_setting(settings["model"], settings["cache"], settings["model_options"], settings["device"],
                               settings["workers"], settings["ray_address"], unit_calls=True)
    check_model(config, model)
    if base is not None and base.info.get("model_identity") not in (None, model.identity):
        raise InputError(f"--extend: {settings['extend']} was recorded with {base.info['model_identity']}, this "
                         f"model is {model.identity}; extend it with the same model and model options")
    if path.exists():
        with RunStore.open(path) as ro:
            recorded = json.loads(ro.meta("sweep") or "null")
        if recorded != identity:
            raise InputError(f"{path} holds another sweep (different settings); choose another --out")
        print(f"kgprobe: continuing the sweep in {path}", file=sys.stderr)
        run = resume(path, model, lazy=True)
    else:
        run = start_run(sweep_kg, config, model, spec=settings["model"], store=path,
                        model_options=settings["model_options"], device=settings["device"], meta={
                            "sweep": json.dumps(identity, sort_keys=True),
                            "sweep_kg_fingerprint": kg_fingerprint(kg),
                            "sweep_made_by": made_by,
                            **({"probe_only": json.dumps([int(e) for e in mine])} if settings.get("shard") else {}),
                        })
    code = play(run, {"quiet": settings.get("quiet", False), "plain": settings.get("plain", False),
                                "report": False})
    if code != 0:
        return code
    with RunStore.open(path) as ro:
        if ro.status != "finished":
            print(f"kgprobe: the sweep stopped early ({ro.stop_reason}); continue it with the same command",
                  file=sys.stderr)
            return 1
    return _export(path, settings, edges, kg, made_by, passes=passes, mine=mine)


def _explicit_probe_options(args: argparse.Namespace) -> set[str]:
    """Names of the probe options the command line or its config file sets."""
    from kgprobe.commands.common import load_config_file, parse_kv

    given = vars(args).get("probe_options")
    keys = set(parse_kv(given, "--probe-option")) if isinstance(given, list) else set()
    if getattr(args, "config", None):
        keys |= set(load_config_file(args.config).get("probe_options") or {})
    return keys


def _inherit_recorded_options(base, settings: dict, explicit: set[str]) -> None:
    """Probe options added since ``base`` was recorded take the value it was recorded with,
    unless the command sets them: extending a sweep continues its protocol."""
    from kgprobe.settings import RECORDED_WITHOUT
    from kgprobe.sweep import resolved_probe_options

    if base.method != settings["method"]:
        return
    recorded = resolved_probe_options(base.method, base.probe_options)
    for key in RECORDED_WITHOUT.get(base.method, {}):
        if key not in explicit and key in recorded:
            settings["probe_options"][key] = recorded[key]


def _check_extendable(base, settings: dict, kg) -> None:
    """Refuse, before any probing, to extend a sweep the new answers could not be merged with."""
    from kgprobe.sweep import protocol_difference

    diff = protocol_difference(base, kg=kg.name, method=settings["method"], probe_options=settings["probe_options"])
    if diff is not None:
        name, ours, theirs = diff
        raise InputError({
            "kg": f"--extend: the sweep was recorded on the KG {ours!r}, not {theirs!r}",
            "method": f"--extend: the sweep was recorded with --method {ours}, not {theirs}",
            "probe_options": f"--extend: the sweep's probe options are {ours}, these are {theirs}; use the same "
                             "--probe-option values",
        }[name])
    if base.passes < settings["passes"]:
        raise InputError(f"--extend: the sweep has {base.passes} passes, fewer than the --passes "
                         f"{settings['passes']} asked for")


def _export(path: Path, settings: dict, edges, kg, made_by: str, *, passes: int | None, mine=None) -> int:
    """Write the sweep file of the run at ``path``: ``passes`` passes, or every completed one.

    ``mine``: a shard's own edges (of the sweep's ``edges``); the file holds only those."""
    import hashlib

    import numpy as np

    sweep_edges = edges
    if mine is not None:
        edges = mine
    from kgprobe.store import RunStore
    from kgprobe.sweep import completed_passes, save_sweep, sweep_from_store

    if not path.exists():
        raise InputError(f"no sweep recorded yet at {path}; run the same command without --export-now first")
    with RunStore.open(path) as ro:
        done = completed_passes(ro, edges)
        if passes is None:
            passes = done
        if passes < 1:
            raise InputError(f"the sweep in {path} has not completed a single pass yet; nothing to export")
        recorded_by = ro.meta("sweep_made_by") or made_by
        rounds = ro.history()
        seconds = float(sum(r["elapsed"] for r in rounds))
        info = {"run_file": path.name, "rounds": len(rounds), "probe_seconds": round(seconds, 1),
                "batch_size": ro.config["batch_size"], "recorded": ro.meta("created"),
                "target_passes": settings["passes"], "completed_passes": done}
        if settings.get("shard"):
            # What `sweep merge` checks: the shards of one sweep (its edges, its command).
            info["shard"] = {"index": settings["shard"][0], "count": settings["shard"][1],
                             "sweep_edges": int(sweep_edges.size),
                             "edges_sha256": hashlib.sha256(np.asarray(sweep_edges, dtype=np.int64).tobytes())
                             .hexdigest(), "made_by": recorded_by}
            recorded_by += f" --shard {settings['shard'][0]}/{settings['shard'][1]}"
        sweep = sweep_from_store(ro, passes=passes, edges=edges, kg=kg, seed=settings["seed"], made_by=recorded_by,
                                 info=info)
    if settings.get("extend"):
        from kgprobe.sweep import load_sweep, merge_sweeps

        sweep = merge_sweeps(load_sweep(settings["extend"]), sweep, made_by=recorded_by)
    target = Path(settings.get("export") or path.with_suffix(".npz"))
    save_sweep(sweep, target)
    note = "" if passes >= settings["passes"] else f" — {passes} of the {settings['passes']} passes asked for"
    print(f"sweep: {target} ({sweep.describe()}){note}")
    return 0

"""Recorded sweeps: every answer a real model gave in K brute-force passes over a set of edges.

A sweep is what ``kgprobe sweep`` records (see :mod:`kgprobe.commands.sweep`): each of
``E`` edges of a KG probed ``K`` times, each pass in its own seeded order, with fresh
ZP-LKE examples and distractors (or fresh phrasings) per probe. The compact file keeps,
per (edge, pass), the verdict and — for scoring methods — the summed log-prob of the
gold option and of the best wrong option, so studies have a continuous margin as well
as the verdict. Replaying a sweep (:mod:`kgprobe.simulation.replay`) judges samplers on
how a real model answers.

File format (``.npz``, written by :func:`save_sweep`, read by :func:`load_sweep`; no
pickles): arrays ``edges`` (int64, E, sorted), ``keys`` (str, E × 3: subject, predicate,
object ids of each edge), ``correct`` (bool, E × K), ``gold_logprob`` and
``best_wrong_logprob`` (float32, E × K; absent for methods that do not score options;
NaN where a probe had no wrong option) and ``meta`` (a JSON string with the other
fields). ``format`` in ``meta`` is :data:`SWEEP_FORMAT`.

A sweep is matched to a KG by the KG name and the (subject, predicate, object) ids of
its edges; the KG's content hash is stored too, and a mismatch is reported as a warning
(not an error) when every key is found (:meth:`Sweep.edges_in`).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kgprobe.errors import InputError

#: Version of the file layout; bumped when a field changes meaning.
SWEEP_FORMAT = 1
#: Directory of the committed sweeps (package data) and the names they are known by.
SWEEPS_DIR = Path(__file__).parent / "sweeps"
SWEEP_SUFFIX = ".npz"


class SweepMismatchWarning(UserWarning):
    """A sweep's KG content hash differs from the KG it is used with (all edges still match)."""


@dataclass
class Sweep:
    """Verdicts (and log-probs) of ``passes`` probes of each of ``edges``; see the module doc."""

    kg: str
    kg_hash: str
    method: str
    probe_options: dict
    model: str
    passes: int
    seed: int
    edges: np.ndarray
    correct: np.ndarray
    gold_logprob: np.ndarray | None
    best_wrong_logprob: np.ndarray | None
    made_by: str
    keys: np.ndarray | None = None
    """(E, 3) str: subject, predicate, object id of each edge (how a sweep finds its edges in a KG)."""
    info: dict = field(default_factory=dict)
    """Free-form provenance: kgprobe version, run file, seconds, recording date, ..."""

    def __post_init__(self):
        self.edges = np.asarray(self.edges, dtype=np.int64)
        self.correct = np.asarray(self.correct, dtype=bool)
        e, k = self.edges.size, int(self.passes)
        if self.correct.shape != (e, k):
            raise InputError(f"sweep: correct has shape {self.correct.shape}, expected ({e}, {k})")
        if e and np.any(np.diff(self.edges) <= 0):
            raise InputError("sweep: edges must be sorted ascending without duplicates")
        for name in ("gold_logprob", "best_wrong_logprob"):
            value = getattr(self, name)
            if value is not None:
                value = np.asarray(value, dtype=np.float64)
                if value.shape != (e, k):
                    raise InputError(f"sweep: {name} has shape {value.shape}, expected ({e}, {k})")
                setattr(self, name, value)
        if self.keys is not None:
            self.keys = np.asarray(self.keys, dtype=str).reshape(-1, 3)
            if self.keys.shape[0] != e:
                raise InputError(f"sweep: {self.keys.shape[0]} edge keys for {e} edges")

    @property
    def num_edges(self) -> int:
        return int(self.edges.size)

    def theta(self) -> np.ndarray:
        """(E,) share of wrong answers over the K passes per edge: the truth θ_j of replay studies."""
        return 1.0 - self.correct.mean(axis=1)

    def accuracy(self) -> float:
        """1 − mean θ over the sweep's edges: the KG accuracy truth (over these edges)."""
        return float(self.correct.mean())

    def margin(self) -> np.ndarray | None:
        """(E, K) gold log-prob minus best wrong log-prob (> 0: right), or None."""
        if self.gold_logprob is None or self.best_wrong_logprob is None:
            return None
        return self.gold_logprob - self.best_wrong_logprob

    def describe(self) -> str:
        th = self.theta()
        return (f"{self.model} on {self.kg}, {self.method}: {self.num_edges} edges x {self.passes} passes, "
                f"accuracy {self.accuracy():.3f}, always right {np.mean(th == 0):.1%}, "
                f"always wrong {np.mean(th == 1):.1%}")

    def edges_in(self, kg) -> np.ndarray:
        """This sweep's edges as edge indices of ``kg``, found by (subject, predicate, object).

        Raises InputError when the KG has another name or lacks an edge; warns
        (:class:`SweepMismatchWarning`) when only the content hash differs.
        """
        if kg.name != self.kg:
            raise InputError(f"the sweep was recorded on the KG {self.kg!r}, not {kg.name!r}; "
                             f"use a sweep of {kg.name!r} or the KG {self.kg!r}")
        if self.keys is None:
            raise InputError("the sweep has no edge keys, so it cannot be matched to a KG")
        index = {(kg.triple(j).subject, kg.triple(j).predicate, kg.triple(j).object): j for j in range(kg.num_edges)}
        out = np.empty(self.num_edges, dtype=np.int64)
        for i, (s, p, o) in enumerate(self.keys.tolist()):
            j = index.get((s, p, o))
            if j is None:
                raise InputError(f"the sweep's edge ({s}, {p}, {o}) is not in the KG {kg.name!r}: the KG changed "
                                 "since the sweep was recorded; record the sweep again")
            out[i] = j
        from kgprobe.store import kg_fingerprint

        if kg_fingerprint(kg) != self.kg_hash:
            warnings.warn(f"the KG {kg.name!r} differs from the one the sweep was recorded on (content hash "
                          f"{self.kg_hash[:12]}…), but every one of its {self.num_edges} edges is still there",
                          SweepMismatchWarning, stacklevel=2)
        return out


def save_sweep(sweep: Sweep, path) -> None:
    """Write ``sweep`` as a compressed ``.npz`` (see the module doc); written to a temp file first."""
    path = Path(path)
    meta = {
        "format": SWEEP_FORMAT, "kg": sweep.kg, "kg_hash": sweep.kg_hash, "method": sweep.method,
        "probe_options": sweep.probe_options, "model": sweep.model, "passes": int(sweep.passes),
        "seed": int(sweep.seed), "made_by": sweep.made_by, "info": sweep.info,
    }
    arrays = {"edges": sweep.edges, "correct": sweep.correct, "meta": np.asarray(json.dumps(meta, sort_keys=True))}
    if sweep.keys is not None:
        arrays["keys"] = sweep.keys
    for name in ("gold_logprob", "best_wrong_logprob"):
        value = getattr(sweep, name)
        if value is not None:
            # float32 keeps ~7 significant digits of a log-prob: plenty for margins, half the size.
            arrays[name] = value.astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    tmp.replace(path)


def packaged_sweeps() -> dict[str, Path]:
    """Name -> path of every committed sweep (``kgprobe/sweeps/NAME.npz``)."""
    if not SWEEPS_DIR.is_dir():
        return {}
    return {p.name[: -len(SWEEP_SUFFIX)]: p for p in sorted(SWEEPS_DIR.glob("*" + SWEEP_SUFFIX))}


def built_sweeps() -> dict[str, tuple[Path, Path]]:
    """Name -> (sweep path, KG file) of every committed sweep of a user-built KG
    (``kgprobe/sweeps/built/KG-MODEL.npz`` beside its ``KG.jsonl.gz``).

    A built KG lives only in its file, so a replay of its sweep needs that file
    (:func:`kgprobe.simulation.replay.sweep_graph`); a sweep belongs to the KG whose file
    name is the longest prefix of its own, followed by ``-``.
    """
    built = SWEEPS_DIR / "built"
    if not built.is_dir():
        return {}
    graphs = sorted((p for p in built.glob("*.jsonl.gz")), key=lambda p: -len(p.name))
    out = {}
    for path in sorted(built.glob("*" + SWEEP_SUFFIX)):
        name = path.name[: -len(SWEEP_SUFFIX)]
        kg = next((g for g in graphs if name.startswith(g.name[: -len(".jsonl.gz")] + "-")), None)
        if kg is not None:
            out[name] = (path, kg)
    return out


def committed_kg_files(kg_name: str) -> list[Path]:
    """The committed built KG files (``kgprobe/sweeps/built/*.jsonl.gz``) of the KG named
    ``kg_name``, so that a sweep of one replays without ``--graph`` wherever it was copied.

    Only each file's first line (the KG's name) is read.
    """
    import gzip

    out = []
    for path in sorted((SWEEPS_DIR / "built").glob("*.jsonl.gz")):
        try:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                name = json.loads(fh.readline()).get("name")
        except (OSError, EOFError, ValueError, AttributeError):
            continue
        if name == kg_name:
            out.append(path)
    return out


def load_sweep(name_or_path: str | Path) -> Sweep:
    """A committed sweep by name (``default``, ``gemma3-270m``, a built KG's ``geo-four-default``, …)
    or a sweep file path."""
    text = str(name_or_path)
    packaged = packaged_sweeps()
    path = packaged.get(text)
    if path is None and text in (built := built_sweeps()):
        path = built[text][0]
    if path is None:
        path = Path(text)
        if not path.is_file():
            names = ", ".join(packaged) or "none committed"
            example = f", e.g. {next(iter(built))}" if built else ""
            raise InputError(f"no sweep {text!r}: not a committed sweep (the embedded KG's: {names}; "
                             f"{len(built)} of built KGs in {SWEEPS_DIR / 'built'}{example}) nor an existing file")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not a sweep file (a .npz written by `kgprobe sweep`): {exc}") from None
    try:
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("format") != SWEEP_FORMAT:
            raise InputError(f"{path}: sweep format {meta.get('format')!r}, this kgprobe reads {SWEEP_FORMAT}")
        return Sweep(
            kg=meta["kg"], kg_hash=meta["kg_hash"], method=meta["method"], probe_options=meta["probe_options"],
            model=meta["model"], passes=meta["passes"], seed=meta["seed"], edges=arrays["edges"],
            correct=arrays["correct"], gold_logprob=arrays.get("gold_logprob"),
            best_wrong_logprob=arrays.get("best_wrong_logprob"), made_by=meta["made_by"], keys=arrays.get("keys"),
            info=meta.get("info", {}),
        )
    except (KeyError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not a complete sweep file (missing {exc})") from None


def completed_passes(store, edges: np.ndarray) -> int:
    """Passes every one of ``edges`` has answered so far in a run store (0 if one has none)."""
    probed = store.probe_arrays()["edge"]
    edges = np.asarray(edges, dtype=np.int64)
    if edges.size == 0:
        return 0
    counts = np.bincount(probed, minlength=int(edges.max()) + 1) if probed.size else np.zeros(int(edges.max()) + 1)
    return int(counts[edges].min())


def sweep_from_store(store, *, passes: int, edges: np.ndarray, kg, seed: int, made_by: str, info=None) -> Sweep:
    """The first ``passes`` answers of each of ``edges`` in a run store, as a :class:`Sweep`.

    ``kg`` is the full KG the edge indices refer to (its fingerprint is the sweep's
    ``kg_hash``). Probes are taken in (round, position) order, which with the
    brute-force sampler is pass order; probes past the K-th of an edge (the last round
    can start pass K + 1) are left out.
    """
    from kgprobe.store import kg_fingerprint

    edges = np.asarray(edges, dtype=np.int64)
    row = {int(e): i for i, e in enumerate(edges)}
    e, k = edges.size, int(passes)
    correct = np.zeros((e, k), dtype=bool)
    gold = np.full((e, k), np.nan)
    wrong = np.full((e, k), np.nan)
    seen = np.zeros(e, dtype=np.int64)
    scoring = False
    for rec in store.probes():
        i = row.get(int(rec.edge))
        if i is None:
            raise InputError(f"run {store.path} probed edge {rec.edge}, which is not one of the sweep's edges")
        n = seen[i]
        if n >= k:
            continue
        correct[i, n] = rec.correct
        if "gold_logprob" in rec.detail:
            scoring = True
            gold[i, n] = rec.detail["gold_logprob"]
            bw = rec.detail.get("best_wrong_logprob")
            wrong[i, n] = np.nan if bw is None else bw
        seen[i] = n + 1
    short = np.flatnonzero(seen < k)
    if short.size:
        raise InputError(f"the sweep in {store.path} is not finished: {short.size} of {e} edges have fewer than "
                         f"{k} answers; continue it with `kgprobe resume {store.path}` or the same sweep command")
    config = store.config
    keys = np.asarray([[kg.triple(int(j)).subject, kg.triple(int(j)).predicate, kg.triple(int(j)).object]
                       for j in edges], dtype=str).reshape(-1, 3)
    return Sweep(
        kg=kg.name, kg_hash=kg_fingerprint(kg), method=config["method"], probe_options=config["probe_options"],
        model=model_label(store.model_identity or store.model_name), passes=k, seed=seed, edges=edges, correct=correct,
        gold_logprob=gold if scoring else None, best_wrong_logprob=wrong if scoring else None,
        made_by=made_by, keys=keys, info={"model_identity": store.model_identity, **dict(info or {})},
    )


def _allocation(preds: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predicate ids, their sizes and how many of ``n`` each gets (see :func:`stratified_edges`)."""
    total = preds.size
    ids, sizes = np.unique(preds, return_counts=True)
    quota = n * sizes / total
    take = np.floor(quota).astype(np.int64)
    if n >= ids.size:
        take = np.maximum(take, 1)
    frac = quota - np.floor(quota)
    while take.sum() < n:
        room = take < sizes
        i = int(np.flatnonzero(room)[np.argmax(frac[room])])
        take[i] += 1
        frac[i] = -1.0
    while take.sum() > n:
        # only possible after the "at least one" floor: trim the largest allocations
        i = int(np.argmax(np.where(take > 1, take - quota, -np.inf)))
        take[i] -= 1
    return ids, sizes, take


def model_label(identity: str) -> str:
    """``name@weights-hash`` of a model identity (``backend:name@hash|setting=…``): what a sweep
    file calls its model. The run store's display name is not used: it is for people and
    may change between versions, while a sweep's model must match across recordings."""
    name = identity.split("|", 1)[0]
    return name.split(":", 1)[1] if ":" in name else name


def stratified_edges(kg, population: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` of ``population``'s edges, every predicate in proportion to its share; sorted.

    Allocation: each predicate gets ``n · size / total`` edges rounded down, at least one
    when ``n`` is at least the number of predicates (so each is represented); the rest go
    to the largest fractional parts (ties: predicate order in the KG). Within a
    predicate, the edges are a uniform draw without replacement from
    ``numpy.random.default_rng(seed)``, predicates taken in KG order.
    """
    population = np.unique(np.asarray(population, dtype=np.int64))
    total = population.size
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= total:
        raise InputError(f"--edges must be an integer from 1 to the {total} edges available, got {n!r}")
    if n == total:
        return population
    preds = kg.predicate_of[population]
    ids, _, take = _allocation(preds, n)
    rng = np.random.default_rng(seed)
    chosen = [rng.choice(population[preds == p], size=int(t), replace=False) for p, t in zip(ids, take) if t]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def extension_edges(kg, population: np.ndarray, n: int, seed: int, base: np.ndarray) -> np.ndarray:
    """The edges to add to ``base`` so that together they are a stratified sample of ``n``; sorted.

    Why: a recorded sweep of a few edges can grow into a larger one without probing its
    edges again (``kgprobe sweep --extend``), and the larger sample still has every
    predicate in proportion. ``population`` is every edge the sample may hold (``base``
    need not be in it: an edge of ``base`` that has since become inactive is kept as
    recorded). Each predicate's target is :func:`stratified_edges`' allocation of ``n``
    over ``population ∪ base``; a predicate gets ``target − (its edges in base)`` new
    edges (none when ``base`` already holds more). Where ``base`` is above its target for
    some predicate that overshoots ``n``; the excess is taken back, one edge at a time, from
    the predicate furthest above its quota, keeping each predicate represented while
    another can give.
    New edges are uniform draws without replacement from ``numpy.random.default_rng(seed)``
    outside ``base``, predicates taken in KG order.
    """
    base = np.unique(np.asarray(base, dtype=np.int64))
    pool = np.union1d(np.asarray(population, dtype=np.int64), base)
    total = pool.size
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not base.size < n <= total:
        raise InputError(f"--edges must be an integer above the {base.size} edges of the sweep being extended and "
                         f"at most the {total} edges available, got {n!r}")
    fresh = np.setdiff1d(pool, base)
    preds = kg.predicate_of[pool]
    ids, sizes, take = _allocation(preds, n)
    have = np.array([np.count_nonzero(kg.predicate_of[base] == p) for p in ids], dtype=np.int64)
    left = np.array([np.count_nonzero(kg.predicate_of[fresh] == p) for p in ids], dtype=np.int64)
    add = np.clip(take - have, 0, left)
    quota = n * sizes / total
    # add ≥ target − have everywhere, so add.sum() ≥ n − |base|: only an overshoot is possible
    while add.sum() > n - base.size:
        # base is over its quota somewhere: take back from the predicate most above its
        # quota, keeping every predicate represented while another can give
        can = add > 0
        if np.any(can & (have + add > 1)):
            can &= have + add > 1
        add[int(np.argmax(np.where(can, have + add - quota, -np.inf)))] -= 1
    rng = np.random.default_rng(seed)
    fresh_preds = kg.predicate_of[fresh]
    chosen = [rng.choice(fresh[fresh_preds == p], size=int(t), replace=False) for p, t in zip(ids, add) if t]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def resolved_probe_options(method: str, options: dict) -> dict:
    """``options`` over every default of ``method``'s probe: a sweep file keeps the options
    its recording resolved, so options added to the probe since then count at the value
    such a recording was made with (:func:`kgprobe.settings.recorded_probe_options`)."""
    from kgprobe.settings import recorded_probe_options

    return recorded_probe_options(method, options)


def protocol_difference(base: Sweep, *, kg: str, method: str, probe_options: dict) -> tuple[str, object, object] | None:
    """Where answers recorded on ``kg`` with ``method`` and ``probe_options`` could not join ``base``'s.

    The first of ``kg``, ``method`` and ``probe_options`` (resolved against the probe's
    defaults, :func:`resolved_probe_options`) that differs, as ``(name, base's, theirs)``;
    None when all agree. One rule for the check before any probing and for the merge.
    """
    for name, theirs in (("kg", kg), ("method", method), ("probe_options", probe_options)):
        ours = getattr(base, name)
        a, b = ours, theirs
        if name == "probe_options":
            a, b = resolved_probe_options(base.method, ours), resolved_probe_options(method, theirs)
        if a != b:
            return name, ours, theirs
    return None


def _check_same_recording(base: Sweep, new: Sweep) -> None:
    """Refuse ``new``'s answers joining ``base``'s unless both are the same model (weights and
    settings) on the same KG, method and probe options: otherwise a replay would mix two
    different questioners' answers as if they were one's."""
    diff = protocol_difference(base, kg=new.kg, method=new.method, probe_options=new.probe_options)
    if diff is None and base.model != new.model:
        diff = ("model", base.model, new.model)
    if diff is not None:
        name, ours, theirs = diff
        raise InputError(f"cannot extend the sweep: its {name} is {ours!r}, the new answers' is {theirs!r}")
    ident_base, ident_new = base.info.get("model_identity"), new.info.get("model_identity")
    if ident_base and ident_new and ident_base != ident_new:
        raise InputError(f"cannot extend the sweep: it was recorded with {ident_base}, the new answers with "
                         f"{ident_new} (another dtype or tokenizer setting); use the same model options")


def pass_seeds(sweep: Sweep) -> list[int]:
    """The recording seed of each of ``sweep``'s passes (``sweep.seed`` unless passes were appended;
    edges added by :func:`merge_sweeps` after an append were recorded with ``sweep.seed``)."""
    return [int(s) for s in sweep.info.get("pass_seeds", [sweep.seed] * sweep.passes)]


def append_passes(base: Sweep, more: Sweep, *, made_by: str) -> Sweep:
    """``base`` with ``more``'s passes after its own: ``base.passes + more.passes`` answers per edge.

    Why: a sweep with few passes replays coarsely (an edge asked a sixth time in a replay of
    five passes hears its first answer again), and more passes of the same edges need not
    re-record the first ones. ``more`` must hold exactly ``base``'s edges (by edge key),
    the same model, KG, method and probe options, and a seed none of ``base``'s passes was
    recorded with: with a seed already used, its probes would repeat those questions
    (the same examples, distractors and order), not ask new ones. The result keeps
    ``base``'s seed and edge ids, takes ``more``'s KG hash, lists every pass's seed in
    ``info["pass_seeds"]`` and keeps ``base``'s provenance in ``info["appends_to"]``, ``more``'s
    in ``info["appended"]``.
    """
    _check_same_recording(base, more)
    if base.keys is None or more.keys is None:
        raise InputError("cannot append passes to a sweep without edge keys")
    if not np.array_equal(base.keys, more.keys):  # False also when the shapes differ
        only = {tuple(k) for k in base.keys} ^ {tuple(k) for k in more.keys}
        raise InputError(f"cannot append passes: the new answers are not on the same edges as the sweep "
                         f"({len(only)} edges in only one of them); record them with --edges-from the sweep "
                         f"and --edges {base.num_edges}")
    seeds = pass_seeds(base)
    used = sorted(set(seeds) | {int(base.seed)})
    if int(more.seed) in used:
        raise InputError(f"cannot append passes recorded with --seed {more.seed}: the sweep's answers were "
                         f"recorded with seed(s) {used}, so the new probes would ask the same questions again; "
                         f"record the new passes with another --seed")

    def side_by_side(a, b):
        if a is None or b is None:
            return None
        return np.concatenate([np.asarray(a), np.asarray(b)], axis=1)

    # The appended recording's own provenance (its run file, its passes asked and done) goes
    # under "appended", so that it is not read as the whole file's.
    info = {"model_identity": more.info.get("model_identity") or base.info.get("model_identity"),
            "pass_seeds": seeds + [int(more.seed)] * more.passes,
            "appends_to": {"passes": base.passes, "kg_hash": base.kg_hash, "made_by": base.made_by,
                           "info": base.info},
            "appended": {"passes": more.passes, "seed": int(more.seed), "made_by": more.made_by,
                         "info": more.info}}
    return Sweep(
        kg=more.kg, kg_hash=more.kg_hash, method=more.method, probe_options=more.probe_options, model=more.model,
        passes=base.passes + more.passes, seed=base.seed, edges=base.edges,
        correct=side_by_side(base.correct, more.correct),
        gold_logprob=side_by_side(base.gold_logprob, more.gold_logprob),
        best_wrong_logprob=side_by_side(base.best_wrong_logprob, more.best_wrong_logprob),
        made_by=made_by, keys=base.keys, info=info,
    )


def merge_sweeps(base: Sweep, new: Sweep, *, made_by: str) -> Sweep:
    """One sweep of ``base``'s and ``new``'s edges: ``new.passes`` answers each (the first of ``base``'s).

    Both must be the same model (weights and settings), KG, method and probe options, on
    disjoint edges, and ``base`` must have at least ``new.passes`` passes; the merged
    sweep takes ``new``'s KG hash and seed, and keeps ``base``'s provenance in ``info``.
    """
    _check_same_recording(base, new)
    if base.passes < new.passes:
        raise InputError(f"cannot extend the sweep to {new.passes} passes: it has only {base.passes}")
    if base.keys is None or new.keys is None:
        raise InputError("cannot extend a sweep without edge keys")
    if np.intersect1d(base.edges, new.edges).size:
        raise InputError("cannot extend the sweep: the new answers repeat some of its edges")
    k = new.passes
    edges = np.concatenate([base.edges, new.edges])
    order = np.argsort(edges, kind="stable")

    def stack(a, b):
        if a is None or b is None:
            return None
        return np.concatenate([np.asarray(a)[:, :k], np.asarray(b)])[order]

    info = dict(new.info)
    if "pass_seeds" in base.info:
        # the old edges' passes keep their seeds (the new edges' are all new.seed, the file's)
        info["pass_seeds"] = pass_seeds(base)[:k]
    info["extends"] = {"edges": base.num_edges, "passes": base.passes, "kg_hash": base.kg_hash,
                       "made_by": base.made_by, "info": base.info}
    return Sweep(
        kg=new.kg, kg_hash=new.kg_hash, method=new.method, probe_options=new.probe_options, model=new.model,
        passes=k, seed=new.seed, edges=edges[order], correct=stack(base.correct, new.correct),
        gold_logprob=stack(base.gold_logprob, new.gold_logprob),
        best_wrong_logprob=stack(base.best_wrong_logprob, new.best_wrong_logprob), made_by=made_by,
        keys=np.concatenate([base.keys, new.keys])[order], info=info,
    )


def pass_slice(sweep: Sweep, lo: int, hi: int) -> Sweep:
    """Passes ``lo`` … ``hi − 1`` of ``sweep``: every edge's verdicts and margins from those
    passes (``info`` as it was)."""
    def cut(values):
        return None if values is None else values[:, lo:hi]

    return replace(sweep, passes=hi - lo, correct=cut(sweep.correct), gold_logprob=cut(sweep.gold_logprob),
                   best_wrong_logprob=cut(sweep.best_wrong_logprob))


def first_passes(sweep: Sweep, k: int, *, name: str = "the sweep") -> Sweep:
    """``sweep`` cut to its first ``k`` passes (every edge's first ``k`` answers).

    Why: shards recorded side by side in one time box stop after different numbers of
    complete passes (``--export-now`` writes each shard's own), and joining them needs one
    number. Passes run in order, so the first ``k`` of a longer recording are exactly what a
    recording stopped after pass ``k`` holds. ``info["first_passes"]`` says that ``k`` were kept
    of the passes recorded.
    """
    if not 1 <= k <= sweep.passes:
        raise InputError(f"cannot keep the first {k} passes of {name}: it has {sweep.passes} "
                         f"(keep between 1 and {sweep.passes})")
    if k == sweep.passes:
        return sweep
    info = dict(sweep.info)
    if "pass_seeds" in info:
        info["pass_seeds"] = list(info["pass_seeds"])[:k]
    info["first_passes"] = {"kept": k, "recorded": sweep.passes}
    return replace(pass_slice(sweep, 0, k), info=info)


def merge_shards(shards: list[Sweep], *, names: list[str] | None = None, passes: int | None = None) -> Sweep:
    """The sweep the N shards of one sweep (``kgprobe sweep ... --shard I/N``) make together.

    Every shard must carry its shard record (``info["shard"]``: index, count, the whole
    sweep's edge count and digest, its command line) and agree with the first on KG,
    method and probe options (:func:`protocol_difference`), model and model identity,
    passes, seed and KG hash; the shards must be 1..N, each once. The result holds the
    same edges, verdicts and log-probs as the unsharded sweep, and its ``made_by`` is the
    unsharded command; ``info`` keeps each shard's provenance. With ``passes``, each shard's
    first ``passes`` passes are joined (:func:`first_passes`): shards stopped in one time box
    after different numbers of passes join on the number all of them completed.
    """
    names = list(names or [f"shard file {i + 1}" for i in range(len(shards))])
    if not shards:
        raise InputError("sweep merge: no shard files given")
    if passes is not None:
        shards = [first_passes(s, passes, name=f"sweep merge: {n}") for n, s in zip(names, shards)]
    elif len({s.passes for s in shards}) > 1:
        done = ", ".join(f"{n} {s.passes}" for n, s in zip(names, shards))
        fewest = min(s.passes for s in shards)
        raise InputError(f"sweep merge: the shards hold different numbers of passes ({done}); join the first "
                         f"{fewest} of each with --passes {fewest}")
    records = []
    for name, shard in zip(names, shards):
        record = shard.info.get("shard")
        if not isinstance(record, dict):
            raise InputError(f"sweep merge: {name} is not a shard (recorded without --shard I/N)")
        records.append(record)
    first, head = shards[0], records[0]
    for name, shard, record in zip(names[1:], shards[1:], records[1:]):
        diff = protocol_difference(first, kg=shard.kg, method=shard.method, probe_options=shard.probe_options)
        for field_name in ("model", "passes", "seed", "kg_hash"):
            if diff is None and getattr(first, field_name) != getattr(shard, field_name):
                diff = (field_name, getattr(first, field_name), getattr(shard, field_name))
        if diff is None and first.info.get("model_identity") != shard.info.get("model_identity"):
            diff = ("model identity", first.info.get("model_identity"), shard.info.get("model_identity"))
        for key in ("count", "sweep_edges", "edges_sha256", "made_by"):
            if diff is None and record.get(key) != head.get(key):
                diff = (f"sweep ({key})", head.get(key), record.get(key))
        if diff is not None:
            what, ours, theirs = diff
            raise InputError(f"sweep merge: {name} is not a shard of the same sweep as {names[0]}: its {what} is "
                             f"{theirs!r}, not {ours!r}")
    count = int(head["count"])
    indices = sorted(int(r["index"]) for r in records)
    if indices != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(indices))
        repeated = sorted({i for i in indices if indices.count(i) > 1})
        raise InputError(f"sweep merge: the sweep has {count} shards; "
                         + (f"missing {', '.join(f'{i}/{count}' for i in missing)}" if missing else "")
                         + ("; " if missing and repeated else "")
                         + (f"given twice {', '.join(f'{i}/{count}' for i in repeated)}" if repeated else ""))
    edges = np.concatenate([s.edges for s in shards])
    order = np.argsort(edges, kind="stable")
    edges = edges[order]
    import hashlib

    if edges.size != int(head["sweep_edges"]) or hashlib.sha256(edges.tobytes()).hexdigest() != head["edges_sha256"]:
        raise InputError("sweep merge: the shards' edges do not make up the sweep's edges (files from different "
                         "recordings?)")

    def joined(name):
        parts = [getattr(s, name) for s in shards]
        if any(p is None for p in parts):
            return None
        return np.concatenate(parts)[order]

    return Sweep(
        kg=first.kg, kg_hash=first.kg_hash, method=first.method, probe_options=first.probe_options, model=first.model,
        passes=first.passes, seed=first.seed, edges=edges, correct=joined("correct"),
        gold_logprob=joined("gold_logprob"), best_wrong_logprob=joined("best_wrong_logprob"),
        made_by=head["made_by"], keys=joined("keys"),
        info={"model_identity": first.info.get("model_identity"),
              **({"first_passes": {"kept": passes}} if passes is not None else {}),
              "shards": [{k: v for k, v in s.info.items() if k != "model_identity"} for s in shards]},
    )

"""A recorded sweep as an oracle: probing edge j returns one of its recorded real answers.

Each edge of a :class:`~kgprobe.sweep.Sweep` has K recorded verdicts. A replay hands
them out in a fresh random order per edge and per replay (a seeded permutation of the
K passes, drawn when the replay starts), without replacement, so the first K probes of
an edge return exactly its K recorded answers. When an edge's K answers are used up,
further probes draw one of its K answers uniformly *with* replacement; each such draw
is counted in :attr:`ReplayOracle.replacement_draws`, so a study can say how much it
leaned on answers it had already seen.

Why without replacement first: a sampler that probes an edge K times then sees the
model's actual answer distribution on that edge, and the truth θ_j of a replay study
is the share of wrong answers over the K passes, which such a sampler then recovers
exactly, as it would with a live model and many probes. Note the consequence: brute
force after n ≤ K epochs estimates θ_j from n of K answers drawn without replacement,
whose variance is the Bernoulli one times (K − n)/(K − 1) — a replay is a little kinder
to brute force (and to any sampler that spreads its probes) than a live model.
"""

from __future__ import annotations

import numpy as np

from kgprobe.errors import InputError


class ReplayOracle:
    """``answer(edges)`` -> recorded verdicts (True = right) of a sweep, replayed.

    ``edges`` are KG edge indices (the sweep's ``edges``); an index not in the sweep is
    an :class:`InputError`. Seeded: equal ``seed`` and equal call sequence, equal answers.
    """

    def __init__(self, sweep, seed: int):
        self.sweep = sweep
        self.passes = int(sweep.passes)
        if self.passes < 1:
            raise InputError("a replay needs a sweep with at least one pass")
        edges = np.asarray(sweep.edges, dtype=np.int64)
        size = int(edges.max()) + 1 if edges.size else 0
        self._row = np.full(size, -1, dtype=np.int64)
        self._row[edges] = np.arange(edges.size)
        self._rng = np.random.default_rng(seed)
        # Row i: the order in which edge i's recorded passes are handed out.
        self._order = self._rng.permuted(np.tile(np.arange(self.passes), (edges.size, 1)), axis=1)
        self._used = np.zeros(edges.size, dtype=np.int64)
        self._correct = np.asarray(sweep.correct, dtype=bool)
        # Anything with edges, passes and verdicts replays; margins only from a sweep that has them.
        margin = sweep.margin() if hasattr(sweep, "margin") else None
        self._margin = None if margin is None else np.asarray(margin, dtype=np.float64)
        #: The recorded margins of the last :meth:`answer` call's verdicts, in order (None
        #: for a sweep without log-probs): what a margin-reading sampler is given.
        self.last_margins: np.ndarray | None = None
        self.replacement_draws = 0
        self.draws = 0

    def rows(self, edges: np.ndarray) -> np.ndarray:
        """Sweep rows of KG edge indices (InputError for an edge the sweep does not hold)."""
        edges = np.asarray(edges, dtype=np.int64)
        bad = (edges < 0) | (edges >= self._row.size)
        rows = np.where(bad, -1, self._row[np.where(bad, 0, edges)])
        if np.any(rows < 0):
            raise InputError(f"edge {int(edges[np.flatnonzero(rows < 0)[0]])} is not in the replayed sweep")
        return rows

    def answer(self, edges: np.ndarray) -> np.ndarray:
        """One recorded verdict per edge, in order (an edge may appear more than once)."""
        rows = self.rows(edges)
        out = np.empty(rows.size, dtype=bool)
        picked = np.empty(rows.size, dtype=np.int64)
        for i, r in enumerate(rows.tolist()):
            used = self._used[r]
            if used < self.passes:
                k = self._order[r, used]
            else:
                k = int(self._rng.integers(self.passes))
                self.replacement_draws += 1
            self._used[r] = used + 1
            out[i] = self._correct[r, k]
            picked[i] = k
        self.last_margins = None if self._margin is None else self._margin[rows, picked]
        self.draws += rows.size
        return out

    @property
    def used(self) -> np.ndarray:
        """(E,) answers handed out so far per sweep edge."""
        return self._used.copy()


#: Size of the embedded ``countries`` KG's active set: the graph KGLens-style top-k
#: (200, 600) and batch (64) are defined for; a sweep of E edges scales them by E / 3,246.
REFERENCE_EDGES = 3246


def scaled(value: float, num_edges: int) -> int:
    """``value × E / 3,246`` rounded, at least 1: top-k and batch of a sampled sweep."""
    return max(1, int(round(value * num_edges / REFERENCE_EDGES)))


def _recorded_kg_file(sweep) -> str | None:
    """The ``--kg`` value of the command that recorded ``sweep`` (its ``made_by``), if any."""
    import shlex

    try:
        words = shlex.split(sweep.made_by or "")
    except ValueError:
        return None
    for i, word in enumerate(words[:-1]):
        if word == "--kg":
            return words[i + 1]
    return None


def _graph_hint(sweep) -> str:
    recorded = _recorded_kg_file(sweep)
    if recorded and recorded != sweep.kg:
        return f"pass --graph {recorded} (the KG file the sweep was recorded with)"
    return f"pass --graph with the file of the KG {sweep.kg!r} (the one `kgprobe sweep --kg` was given)"


def sweep_on_kg(kg, sweep):
    """``sweep`` with its edges as ``kg``'s edge indices (sorted), matched by edge keys and content hash.

    The KG matches when it has the sweep's KG name and holds every one of the sweep's
    (subject, predicate, object) keys (a sweep without keys: its edge indices are taken
    as they are); otherwise an InputError names what differs (name and content hashes,
    or the first missing edge). When only the content hash differs (the same KG,
    rebuilt, still holding every edge) the sweep's
    :class:`~kgprobe.sweep.SweepMismatchWarning` is issued and the replay goes on.
    """
    import dataclasses

    from kgprobe.store import kg_fingerprint

    fingerprint = kg_fingerprint(kg)
    if kg.name != sweep.kg:  # the name is part of the content, so the hash differs too
        raise InputError(
            f"the sweep was recorded on the KG {sweep.kg!r} (content hash {sweep.kg_hash[:12]}…), but the "
            f"graph given is {kg.name!r} (content hash {fingerprint[:12]}…): {_graph_hint(sweep)}")
    if sweep.keys is None:
        # A sweep without edge keys (hand-made, or written before keys were kept) can only
        # be taken at its word: its edges are the KG's edge indices.
        if sweep.num_edges and int(sweep.edges.max()) >= kg.num_edges:
            raise InputError(f"the sweep has no edge keys and its edge indices run past the {kg.num_edges} edges "
                             f"of the KG {kg.name!r}: {_graph_hint(sweep)}")
        return sweep
    try:
        edges = sweep.edges_in(kg)
    except InputError as exc:
        raise InputError(f"{exc} (the sweep's KG content hash {sweep.kg_hash[:12]}…, this KG's "
                         f"{fingerprint[:12]}…)") from None
    order = np.argsort(edges, kind="stable")
    return dataclasses.replace(
        sweep, edges=edges[order], correct=sweep.correct[order], kg_hash=fingerprint,
        gold_logprob=None if sweep.gold_logprob is None else sweep.gold_logprob[order],
        best_wrong_logprob=None if sweep.best_wrong_logprob is None else sweep.best_wrong_logprob[order],
        keys=None if sweep.keys is None else sweep.keys[order])


def sweep_graph(sweep, graph=None):
    """(KG, sweep on it): the KG a sweep is replayed on, and the sweep mapped by :func:`sweep_on_kg`.

    ``graph`` is a KG file, an embedded KG name or a KnowledgeGraph; without it the
    sweep's own KG, which must then be embedded or one of the committed built KGs
    (:func:`kgprobe.sweep.committed_kg_files`; another built KG lives only in its file:
    the error says which file to pass).
    """
    import os

    from kgprobe.kg.formats import load_kg
    from kgprobe.sources.embedded import EMBEDDED_KGS, load_embedded_kg
    from kgprobe.store import kg_fingerprint
    from kgprobe.sweep import committed_kg_files

    if graph is None:
        if sweep.kg in EMBEDDED_KGS:
            kg = load_embedded_kg(sweep.kg)
        else:
            files = committed_kg_files(sweep.kg)
            # Only the very KG the sweep was recorded on: a user's own KG may share a
            # committed one's name (the same seed entities) and differ in its edges.
            kg = next((k for k in map(load_kg, files) if kg_fingerprint(k) == sweep.kg_hash), None)
            if kg is None:
                committed = (f"; kgprobe ships a KG of that name ({', '.join(p.name for p in files)}) "
                             f"but with another content hash") if files else ""
                raise InputError(f"the sweep was recorded on the KG {sweep.kg!r} (content hash "
                                 f"{sweep.kg_hash[:12]}…), which is neither embedded in kgprobe nor one of "
                                 f"its committed built KGs{committed}: {_graph_hint(sweep)}")
    elif not isinstance(graph, (str, os.PathLike)):
        kg = graph
    elif os.path.exists(graph):
        kg = load_kg(graph)
    elif str(graph) in EMBEDDED_KGS:
        kg = load_embedded_kg(str(graph))
    else:
        raise InputError(f"--graph {graph}: neither an existing KG file nor an embedded KG "
                         f"({', '.join(EMBEDDED_KGS)})")
    return kg, sweep_on_kg(kg, sweep)


def replay_truth(kg, sweep):
    """(sweep mapped onto ``kg``'s edge indices, active mask, θ truth per KG edge).

    Only the sweep's edges are active; every other edge stays as dead structure (it is
    still there for propagation and for pooling over entities).
    """
    sweep = sweep_on_kg(kg, sweep)
    active = np.zeros(kg.num_edges, dtype=bool)
    active[sweep.edges] = True
    theta = np.zeros(kg.num_edges)
    theta[sweep.edges] = sweep.theta()
    return sweep, active, theta


def run_replay_study(kg, sweep, *, specs=None, seeds=range(5), epochs: float = 5.0, batch: int | None = None,
                     top_k=None, streams=None):
    """The KGLens study (:func:`kgprobe.simulation.study.run_study`) on a replayed sweep.

    Truth θ_j = share of wrong answers over the sweep's K passes; answers come from a
    :class:`ReplayOracle` per (configuration, seed) with seed = the study seed, so every
    configuration sees the same replay order. Defaults scale with the sweep's E edges:
    batch ``64·E/3,246`` and top-k ``(200·E/3,246, 600·E/3,246)``. ``streams``: as in
    :func:`~kgprobe.simulation.study.run_study`.
    """
    from kgprobe.kg.parameterized import ParameterizedKG
    from kgprobe.simulation.study import DEFAULT_SPECS, run_study

    sweep, active, theta = replay_truth(kg, sweep)
    e = sweep.num_edges
    batch = scaled(64, e) if batch is None else batch
    top_k = (scaled(200, e), scaled(600, e)) if top_k is None else tuple(top_k)
    pkg = ParameterizedKG.from_kg(kg)
    return run_study(pkg.heads, pkg.tails, active, theta, predicates=kg.predicate_of,
                     specs=DEFAULT_SPECS if specs is None else specs, batch=batch, epochs=epochs,
                     seeds=seeds, top_k=top_k, oracle=lambda seed: ReplayOracle(sweep, seed), streams=streams)

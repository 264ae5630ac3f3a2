"""The parameterized KG (KGLens §2.1): a Beta(α, β) error belief per edge, in arrays.

Every edge ``j`` carries ``θ_j ~ Beta(α_j, β_j)``, the probability that the model
fails on it; α counts failures and β successes (KGLens' convention). The round state
is a handful of flat numpy arrays so that a round costs O(batch + touched edges), not
O(graph) in Python:

* ``alpha``, ``beta`` (float64) — the Beta parameters of every edge; dead edges keep
  the prior forever;
* ``successes``, ``failures`` (int32) — direct probe results per edge (``m``, ``n``
  in METHODS.md), without any propagated signal;
* ``margin_count``, ``margin_sum``, ``margin_squares`` — per edge the number, sum and
  sum of squares of the answers' margins (gold log-prob minus the best wrong one), kept
  only when a round passes margins (:meth:`update`; None until then): what
  :mod:`kgprobe.sampling.margin` reads;
* a node → incident-edge index in CSR form (``int64`` offsets, ``int32`` edge ids) from
  which the one-hop neighbourhood of an edge (every edge sharing a node with it) is
  read on demand; the edge × edge adjacency is never materialized, because a hub node
  with d edges would contribute d² entries.

The update rule (:meth:`ParameterizedKG.update`), exactly::

    for every ACTIVE edge k of the graph (probed this round or not):
        α_k += 1[k probed and wrong] + w · M_k
        β_k += 1[k probed and right] + w · N_k
    M_k = |{ j probed this round, j ≠ k, j wrong, j shares at least one node with k }|
    N_k = |{ j probed this round, j ≠ k, j right, j shares at least one node with k }|

* One hop only: signal reaches edges that share a node with a probed edge.
* A probed edge that shares BOTH nodes with k (a parallel or reversed edge) counts
  once, not twice. A self-loop has one node.
* Unprobed neighbours receive the signal too (METHODS.md §1: "propagation is to
  neighbouring edges"); a probed edge receives its own result plus its neighbours'.
* ``w = 0`` disables propagation (the brute-force / Monte-Carlo baselines).
* Dead edges are never probed (so they emit no signal) and receive none (they keep
  the prior); they stay in the structure so edge ``j`` is triple ``j`` everywhere and
  they show up in :meth:`neighbours` and :meth:`to_networkx`.
* Literal objects (a year, a number) are not shared nodes when built with
  :meth:`from_kg`: two facts that happen to have the object "1990" are unrelated, so
  each literal endpoint becomes a node of its own unless ``link_literals=True``.

``successes``/``failures`` only ever change by direct probes, so the propagated part
of the belief is recoverable as ``(α − α₀ − failures) / w`` (see
:meth:`neighbour_counts`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kgprobe.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from kgprobe.kg.graph import KnowledgeGraph

_STATE_KEYS = ("alpha", "beta", "successes", "failures", "prior", "propagation_weight", "num_nodes")
#: Per-edge margin arrays: in a state only when the run's rounds passed margins, then all three.
_MARGIN_KEYS = ("margin_count", "margin_sum", "margin_squares")


def _check_prior(prior) -> tuple[float, float]:
    try:
        a0, b0 = (float(x) for x in prior)
    except (TypeError, ValueError):
        raise InputError(f"prior must be two numbers (α₀, β₀), got {prior!r}") from None
    if not (math.isfinite(a0) and math.isfinite(b0)) or a0 <= 0 or b0 <= 0:
        raise InputError(
            f"prior Beta({a0}, {b0}) is invalid: both parameters must be finite and > 0 "
            "(KGLens uses Beta(1, 1))"
        )
    return a0, b0


def _check_weight(w) -> float:
    try:
        w = float(w)
    except (TypeError, ValueError):
        raise InputError(f"propagation weight must be a number, got {w!r}") from None
    if not math.isfinite(w) or w < 0:
        raise InputError(f"propagation weight must be finite and >= 0 (0 disables propagation), got {w}")
    return w


class ParameterizedKG:
    """Beta beliefs over the edges of a graph given as endpoint arrays.

    Parameters
    ----------
    heads, tails:
        Integer node ids of each edge's endpoints (subject, object); edge ``j`` is
        ``(heads[j], tails[j])``. Node ids are ``0 .. num_nodes-1`` (need not all occur).
    active:
        Boolean mask; inactive ("dead") edges are never probed and keep the prior.
    prior:
        ``(α₀, β₀)`` of the Beta prior, both finite and > 0.
    propagation_weight:
        ``w`` in the update rule (module docstring); 0 disables propagation.
    predicates:
        Optional predicate index per edge (for predicate-level pooling and grouping).
    """

    def __init__(
        self,
        heads: np.ndarray,
        tails: np.ndarray,
        active: np.ndarray,
        *,
        prior=(1.0, 1.0),
        propagation_weight: float = 1.0,
        predicates: np.ndarray | None = None,
    ):
        heads = np.asarray(heads)
        tails = np.asarray(tails)
        active = np.asarray(active, dtype=bool)
        if heads.ndim != 1 or heads.shape != tails.shape or heads.shape != active.shape:
            raise InputError(
                f"heads, tails and active must be 1-d arrays of one length, got shapes "
                f"{heads.shape}, {tails.shape}, {active.shape}"
            )
        if heads.shape[0] == 0:
            raise InputError("the graph has no edges: build or load a KG with at least one triple")
        if not active.any():
            raise InputError(
                f"the graph has {heads.shape[0]} edges but none is active: every predicate is "
                "marked dead; un-mark at least one predicate so there is something to probe"
            )
        if heads.shape[0] >= 2**31:
            raise InputError("graphs with 2^31 or more edges are not supported")
        if not (np.issubdtype(heads.dtype, np.integer) and np.issubdtype(tails.dtype, np.integer)):
            raise InputError("heads and tails must be integer node ids")
        lo = min(int(heads.min()), int(tails.min()))
        if lo < 0:
            raise InputError(f"node ids must be >= 0, found {lo}")
        self.prior = _check_prior(prior)
        self.propagation_weight = _check_weight(propagation_weight)
        self.num_nodes = max(int(heads.max()), int(tails.max())) + 1
        node_dtype = np.int32 if self.num_nodes < 2**31 else np.int64
        self.heads = heads.astype(node_dtype, copy=False)
        self.tails = tails.astype(node_dtype, copy=False)
        self.active = active
        self.predicates = None if predicates is None else np.asarray(predicates, dtype=np.int32)
        # The index first: its sort temporaries then never coexist with the state arrays.
        self._build_incidence()
        n = self.heads.shape[0]
        a0, b0 = self.prior
        self.alpha = np.full(n, a0, dtype=np.float64)
        self.beta = np.full(n, b0, dtype=np.float64)
        self.successes = np.zeros(n, dtype=np.int32)
        self.failures = np.zeros(n, dtype=np.int32)
        self.margin_count: np.ndarray | None = None
        self.margin_sum: np.ndarray | None = None
        self.margin_squares: np.ndarray | None = None
        self._active_edges: np.ndarray | None = None
        self._num_active: int | None = None
        self._bins: np.ndarray | None = None  # see kgprobe.sampling.beta_bins

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_kg(
        cls,
        kg: "KnowledgeGraph",
        *,
        prior=(1.0, 1.0),
        propagation_weight: float = 1.0,
        link_literals: bool = False,
    ) -> "ParameterizedKG":
        """The parameterized view of a :class:`KnowledgeGraph` (edge j = triple j).

        Literal objects are private nodes unless ``link_literals`` (module docstring).
        """
        if kg.num_edges == 0:
            raise InputError(f"KG {kg.name!r} has no triples: nothing to probe")
        heads = kg.subjects
        tails = kg.objects.copy()
        if not link_literals:
            literal = np.array(
                [kg.entities[eid].is_literal for eid in kg.entity_ids], dtype=bool
            )
            is_lit_edge = literal[tails] if literal.size else np.zeros(len(tails), bool)
            k = int(is_lit_edge.sum())
            if k:
                tails[is_lit_edge] = kg.num_entities + np.arange(k)
        return cls(
            heads, tails, kg.active, prior=prior, propagation_weight=propagation_weight,
            predicates=kg.predicate_of,
        )

    def _build_incidence(self, chunk: int = 1 << 20) -> None:
        # One int64 key per (node, edge) incidence, node in the high 32 bits, sorted in
        # place: the CSR falls out of a single sort with no int64 index array, which
        # keeps the peak memory of a 10⁷-edge build near 24 bytes per edge.
        n = self.heads.shape[0]
        not_loop = self.heads != self.tails
        n_tail = int(np.count_nonzero(not_loop))
        keys = np.empty(n + n_tail, dtype=np.int64)
        pos = n
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            ids = np.arange(lo, hi, dtype=np.int64)
            keys[lo:hi] = (self.heads[lo:hi].astype(np.int64) << 32) | ids
            # A self-loop is incident to its node once, so it is counted once per node.
            m = not_loop[lo:hi]
            k = int(np.count_nonzero(m))
            keys[pos : pos + k] = (self.tails[lo:hi][m].astype(np.int64) << 32) | ids[m]
            pos += k
        del not_loop
        keys.sort()
        self.node_ptr = np.searchsorted(keys, np.arange(self.num_nodes + 1, dtype=np.int64) << 32)
        self.node_edges = np.empty(keys.shape[0], dtype=np.int32)
        for lo in range(0, keys.shape[0], chunk):
            self.node_edges[lo : lo + chunk] = keys[lo : lo + chunk] & 0xFFFFFFFF

    # -- sizes and views ---------------------------------------------------------------
    @property
    def num_edges(self) -> int:
        return int(self.heads.shape[0])

    @property
    def num_active(self) -> int:
        if self._num_active is None:
            self._num_active = int(np.count_nonzero(self.active))
        return self._num_active

    @property
    def active_edges(self) -> np.ndarray:
        """Indices of the active edges, ascending (int64)."""
        if self._active_edges is None:
            self._active_edges = np.flatnonzero(self.active)
        return self._active_edges

    def degree(self, node: int) -> int:
        return int(self.node_ptr[node + 1] - self.node_ptr[node])

    def incident_edges(self, node: int) -> np.ndarray:
        """Edges with ``node`` as an endpoint (a self-loop once)."""
        return self.node_edges[self.node_ptr[node] : self.node_ptr[node + 1]]

    def neighbours(self, edge: int) -> np.ndarray:
        """Every other edge sharing a node with ``edge`` (dead ones included), ascending."""
        edge = self._check_edge_index(edge)
        h, t = int(self.heads[edge]), int(self.tails[edge])
        parts = [self.incident_edges(h)]
        if t != h:
            parts.append(self.incident_edges(t))
        out = np.unique(np.concatenate(parts)).astype(np.int64)
        return out[out != edge]

    def _check_edge_index(self, edge) -> int:
        edge = int(edge)
        if not 0 <= edge < self.num_edges:
            raise InputError(f"edge {edge} is out of range: the graph has {self.num_edges} edges")
        return edge

    # -- estimates -----------------------------------------------------------------------
    def error_estimate(self) -> np.ndarray:
        """The posterior mean α / (α + β) of every edge: the point estimate of θ."""
        return self.alpha / (self.alpha + self.beta)

    def neighbour_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Propagated (failures, successes) each edge has received, in probe units.

        Zero everywhere when ``w == 0``. Recovered from α, β and the direct counts.
        """
        w = self.propagation_weight
        if w == 0:
            z = np.zeros(self.num_edges)
            return z, z.copy()
        a0, b0 = self.prior
        nb_fail = (self.alpha - a0 - self.failures) / w
        nb_succ = (self.beta - b0 - self.successes) / w
        # Float round-off must not produce tiny negative counts.
        np.maximum(nb_fail, 0.0, out=nb_fail)
        np.maximum(nb_succ, 0.0, out=nb_succ)
        return nb_fail, nb_succ

    # -- the update rule -----------------------------------------------------------------
    def validate_batch(self, edges, correct=None) -> tuple[np.ndarray, np.ndarray | None]:
        """Check a round's edges (distinct, in range, active); return them as arrays."""
        edges = np.asarray(edges)
        if edges.ndim != 1 or (edges.size and not np.issubdtype(edges.dtype, np.integer)):
            raise InputError("edges must be a 1-d array of integer edge indices")
        edges = edges.astype(np.int64, copy=False)
        if edges.size:
            if edges.min() < 0 or edges.max() >= self.num_edges:
                raise InputError(
                    f"edge indices must lie in 0..{self.num_edges - 1}; got {edges.min()}..{edges.max()}"
                )
            if np.unique(edges).size != edges.size:
                raise InputError("a round must not probe the same edge twice")
            if not self.active[edges].all():
                dead = edges[~self.active[edges]]
                raise InputError(f"dead edges are never probed, but the round contains {dead[:5].tolist()}")
        if correct is None:
            return edges, None
        correct = np.asarray(correct)
        if correct.shape != edges.shape:
            raise InputError(f"correct has shape {correct.shape}, edges {edges.shape}: one flag per edge")
        if correct.dtype != bool:
            if not np.isin(correct, (0, 1)).all():
                raise InputError("correct must hold booleans (or 0/1)")
            correct = correct.astype(bool)
        return edges, correct

    def update(self, edges: np.ndarray, correct: np.ndarray, margins: np.ndarray | None = None) -> None:
        """Apply one round's results: direct update plus one-hop propagation.

        ``edges`` are the distinct active edges probed this round and ``correct[i]``
        whether the model answered edge ``edges[i]`` right. The exact rule is in the
        module docstring. ``margins[i]`` (optional): the answer's margin, added to the
        edge's margin counts; NaN where the answer has none. The margins change nothing
        else: α, β and the counts are the verdicts'.
        """
        edges, correct = self.validate_batch(edges, correct)
        if edges.size == 0:
            return
        if margins is not None:
            self._add_margins(edges, margins)
        wrong = ~correct
        self.failures[edges[wrong]] += 1
        self.successes[edges[correct]] += 1
        self.alpha[edges[wrong]] += 1.0
        self.beta[edges[correct]] += 1.0
        changed = [edges]
        w = self.propagation_weight
        if w > 0:
            changed.append(self._propagate(edges, wrong, w))
        if self._bins is not None:
            from kgprobe.sampling.beta_bins import refresh_bins

            refresh_bins(self, np.concatenate(changed))

    def _add_margins(self, edges: np.ndarray, margins) -> None:
        margins = np.asarray(margins, dtype=np.float64)
        if margins.shape != edges.shape:
            raise InputError(f"margins has shape {margins.shape}, edges {edges.shape}: one margin (or NaN) per edge")
        if np.isinf(margins).any():
            raise InputError("a margin must be finite (NaN where an answer has none)")
        has = ~np.isnan(margins)
        if not has.any():
            return
        if self.margin_count is None:
            n = self.num_edges
            self.margin_count = np.zeros(n, dtype=np.int32)
            self.margin_sum = np.zeros(n, dtype=np.float64)
            self.margin_squares = np.zeros(n, dtype=np.float64)
        e, m = edges[has], margins[has]
        self.margin_count[e] += 1
        self.margin_sum[e] += m
        self.margin_squares[e] += m * m

    def _propagate(self, edges: np.ndarray, wrong: np.ndarray, w: float) -> np.ndarray:
        h = self.heads[edges].astype(np.int64)
        t = self.tails[edges].astype(np.int64)
        loop = h == t
        # Per touched node: how many probed edges at it were wrong / right.
        nodes = np.concatenate([h, t[~loop]])
        node_wrong = np.concatenate([wrong, wrong[~loop]])
        touched, inv = np.unique(nodes, return_inverse=True)
        n_wrong = np.bincount(inv, weights=node_wrong, minlength=touched.size)
        n_all = np.bincount(inv, minlength=touched.size).astype(np.float64)
        n_right = n_all - n_wrong
        # Every edge incident to a touched node receives that node's counts; an edge
        # touching two such nodes receives both (corrected below for shared pairs).
        starts = self.node_ptr[touched]
        lens = self.node_ptr[touched + 1] - starts
        total = int(lens.sum())
        offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        receivers = self.node_edges[offsets + np.arange(total)]
        live = self.active[receivers]
        receivers = receivers[live]
        np.add.at(self.alpha, receivers, (w * np.repeat(n_wrong, lens))[live])
        np.add.at(self.beta, receivers, (w * np.repeat(n_right, lens))[live])
        # A probed edge received its own result once per node it has: take it back.
        n_nodes_own = np.where(loop, 1.0, 2.0)
        self.alpha[edges] -= w * n_nodes_own * wrong
        self.beta[edges] -= w * n_nodes_own * ~wrong
        # An edge sharing both nodes with a probed edge j ≠ it got j's result twice.
        self._undo_double_count(edges, h, t, loop, wrong, w)
        return receivers

    def _undo_double_count(self, edges, h, t, loop, wrong, w) -> None:
        keep = ~loop
        if not keep.any():
            return
        edges, h, t, wrong = edges[keep], h[keep], t[keep], wrong[keep]
        deg_h = self.node_ptr[h + 1] - self.node_ptr[h]
        deg_t = self.node_ptr[t + 1] - self.node_ptr[t]
        # Scan the smaller endpoint's incidence list for edges ending at the other one.
        scan = np.where(deg_h <= deg_t, h, t)
        other = np.where(deg_h <= deg_t, t, h)
        starts = self.node_ptr[scan]
        lens = self.node_ptr[scan + 1] - starts
        total = int(lens.sum())
        offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        cand = self.node_edges[offsets + np.arange(total)].astype(np.int64)
        src = np.repeat(np.arange(edges.size), lens)
        ch, ct = self.heads[cand], self.tails[cand]
        o = other[src]
        parallel = ((ch == o) | (ct == o)) & (ch != ct) & (cand != edges[src]) & self.active[cand]
        cand, src = cand[parallel], src[parallel]
        np.add.at(self.alpha, cand, -w * wrong[src])
        np.add.at(self.beta, cand, -w * ~wrong[src])

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything that changes during a run, plus the settings it depends on (copies)."""
        return {
            "alpha": self.alpha.copy(),
            "beta": self.beta.copy(),
            "successes": self.successes.copy(),
            "failures": self.failures.copy(),
            "prior": np.asarray(self.prior, dtype=np.float64),
            "propagation_weight": np.asarray(self.propagation_weight, dtype=np.float64),
            "num_nodes": np.asarray(self.num_nodes, dtype=np.int64),
            **({} if self.margin_count is None else {
                "margin_count": self.margin_count.copy(), "margin_sum": self.margin_sum.copy(),
                "margin_squares": self.margin_squares.copy()}),
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore a :meth:`state_dict` exactly; it must come from the same graph and settings."""
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise InputError(f"checkpoint is missing {missing}: it was not written by ParameterizedKG.state_dict")
        margin_keys = [k for k in _MARGIN_KEYS if k in state]
        if margin_keys and len(margin_keys) != len(_MARGIN_KEYS):
            raise InputError(f"checkpoint has {margin_keys} but not all of {list(_MARGIN_KEYS)}: "
                             "it was not written by ParameterizedKG.state_dict")
        for key in ("alpha", "beta", "successes", "failures", *margin_keys):
            if np.shape(state[key]) != (self.num_edges,):
                raise InputError(
                    f"checkpoint {key!r} has shape {np.shape(state[key])}, but this graph has "
                    f"{self.num_edges} edges: it belongs to a different graph"
                )
        if tuple(np.asarray(state["prior"]).tolist()) != self.prior or float(
            state["propagation_weight"]
        ) != self.propagation_weight:
            raise InputError(
                "checkpoint was written with prior "
                f"{tuple(np.asarray(state['prior']).tolist())} and w={float(state['propagation_weight'])}, "
                f"but this run uses prior {self.prior} and w={self.propagation_weight}"
            )
        if int(state["num_nodes"]) != self.num_nodes:
            raise InputError("checkpoint belongs to a graph with a different number of nodes")
        self.alpha = np.array(state["alpha"], dtype=np.float64)
        self.beta = np.array(state["beta"], dtype=np.float64)
        self.successes = np.array(state["successes"], dtype=np.int32)
        self.failures = np.array(state["failures"], dtype=np.int32)
        # Margins: only in the states of runs whose rounds passed them.
        if margin_keys:
            self.margin_count = np.array(state["margin_count"], dtype=np.int32)
            self.margin_sum = np.array(state["margin_sum"], dtype=np.float64)
            self.margin_squares = np.array(state["margin_squares"], dtype=np.float64)
        else:
            self.margin_count = self.margin_sum = self.margin_squares = None
        self._bins = None

    # -- export ------------------------------------------------------------------------------
    def to_networkx(self, kg: "KnowledgeGraph | None" = None):
        """A ``networkx.MultiGraph``: one edge per KG edge with alpha, beta, counts, active.

        Nodes are integer ids, or entity ids when the source ``kg`` is given.
        """
        import networkx as nx

        g = nx.MultiGraph()
        names = None
        if kg is not None:
            names = kg.entity_ids
        for j in range(self.num_edges):
            h, t = int(self.heads[j]), int(self.tails[j])
            if names is not None:
                h = names[h] if h < len(names) else f"literal:{j}"
                t = names[t] if t < len(names) else f"literal:{j}"
            g.add_edge(
                h, t, key=j, edge=j, alpha=float(self.alpha[j]), beta=float(self.beta[j]),
                successes=int(self.successes[j]), failures=int(self.failures[j]),
                active=bool(self.active[j]),
            )
        return g

    def __repr__(self) -> str:
        return (
            f"ParameterizedKG({self.num_edges} edges, {self.num_active} active, {self.num_nodes} nodes, "
            f"prior={self.prior}, w={self.propagation_weight})"
        )

"""Priors from earlier runs: an item-response model of edge difficulty and model ability.

Other models' recorded answers on the same KG (run files or recorded sweeps) say which
facts are hard. The Rasch model (one-parameter item response theory) puts that in one
number per edge::

    P(model m answers edge j right) = σ(a_m − b_j)

with ability ``a_m`` per model and difficulty ``b_j`` per edge, fitted by maximum
likelihood with a Gaussian penalty ``b_j ~ N(0, τ²)`` (``τ`` = :data:`DIFFICULTY_SD`;
it keeps an edge every source model always got right, or always wrong, at a finite
difficulty) over every recorded answer (scipy L-BFGS, analytic gradient).

For a new model the ability is unknown. Before any probe it is the mean ability of the
source models; after each round it is re-estimated from the new model's own direct
answers (one-dimensional Newton steps on the penalized likelihood, penalty ``N(ā, s²)``
with ``ā, s`` the source abilities' mean and spread, at least :data:`ABILITY_SD`). The
prediction for edge j combines the item-response mean ``p_j = σ(â − b_j)`` with the
edge's own answers as a Beta posterior of strength :data:`STRENGTH`::

    ŷ_j = (K·p_j + s_j) / (K + s_j + f_j)

That prediction is then weighed against the run's own (the sampler's posterior, pooled
over predicates and neighbours) by how well each predicts answers it has not seen
(:meth:`ItemPrior.stacked`): sources that fail on other facts than the new model get
little weight once the run has answers, so a weak prior costs little. It still costs
something: before the first answers it counts in full (docs/priors.md measures how
much: an interval about 3 % wider for the held-out models whose prior ended near
weight 0). The design draws, too, lean on the prior
(:func:`kgprobe.sampling.design_draws.prior_design_weights`).

Edges no source probed get the mean difficulty. The PKG starts from ``Beta(α₀ + K(1 −
p_j), β₀ + K p_j)`` so the sampler, too, starts from what the prior knows. The fitted
prior is stored in the run file (meta ``item_prior``), so a resumed run and its report
use the very same numbers.

Reading the sources (run files, recorded sweeps) is :mod:`kgprobe.prior_sources`; this
module only fits and applies the prior, so the engine can use it without the run store
or sweep formats. Matching: sources are matched to the run's KG by KG name and by the (subject,
predicate, object) ids of their edges. A source made on another KG, or sharing no edge
with the run's KG, is an :class:`~kgprobe.errors.InputError` (exit code 2).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from kgprobe.errors import InputError

#: Prior standard deviation of an edge difficulty (logit scale).
DIFFICULTY_SD = 3.0
#: Least prior spread of a new model's ability around the sources' mean (logit scale).
ABILITY_SD = 1.0
#: Pseudo-count of the item-response prediction against the edge's own answers.
STRENGTH = 4.0
#: Weights of the prior tried when it is stacked with the run's own predictions.
STACKING_GRID = np.linspace(0.0, 1.0, 21)


@dataclass
class AnswerCounts:
    """One model's recorded answers: per edge (indices into ``kg``) right and total counts."""

    source: str
    model: str
    kg_name: str
    keys: list[tuple[str, str, str]]
    right: np.ndarray
    total: np.ndarray
    #: The probe method and full probe options the answers were recorded with (None: unknown).
    method: str | None = None
    probe_options: dict | None = None


def triple_keys(kg, edges: np.ndarray) -> list[tuple[str, str, str]]:
    """The (subject, predicate, object) ids of ``edges``: how answers are matched across KGs."""
    return [(kg.entity_id(int(kg.subjects[e])), kg.predicate_id(int(kg.predicate_of[e])),
             kg.entity_id(int(kg.objects[e]))) for e in edges.tolist()]


def fit_rasch(right: np.ndarray, total: np.ndarray, *, difficulty_sd: float = DIFFICULTY_SD
              ) -> tuple[np.ndarray, np.ndarray]:
    """Penalized ML abilities (M,) and difficulties (J,) from counts of shape (M, J).

    ``total[m, j] = 0`` where model m never answered edge j. The penalty is
    ``Σ_j b_j² / (2 τ²)``; abilities are free (the penalty pins the scale's origin).
    """
    right = np.asarray(right, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    m, j = total.shape
    wrong = total - right
    inv_var = 1.0 / difficulty_sd**2

    def objective(x):
        a, b = x[:m], x[m:]
        eta = a[:, None] - b[None, :]
        p = expit(eta)
        # −log L = Σ −r log p − w log(1 − p), written stably with logaddexp.
        nll = np.sum(right * np.logaddexp(0.0, -eta) + wrong * np.logaddexp(0.0, eta))
        resid = right - total * p  # d(log L)/d eta
        grad_a = -resid.sum(axis=1)
        grad_b = resid.sum(axis=0) + inv_var * b
        return nll + 0.5 * inv_var * float(b @ b), np.concatenate([grad_a, grad_b])

    res = minimize(objective, np.zeros(m + j), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    return res.x[:m], res.x[m:]


@dataclass
class ItemPrior:
    """A fitted prior over a target KG's edges (module docstring). JSON round-trips exactly."""

    kg_name: str
    difficulty: np.ndarray  # (num_edges,) over the target KG; NaN where no source probed the edge
    abilities: dict[str, float]
    sources: list[str]
    strength: float = STRENGTH
    shared_edges: int = 0
    #: How much the sources agree on which edges are hard (:func:`source_agreement`); 1 with one source.
    agreement: float = 1.0
    #: Sources recorded with another method or other probe options than the run that uses
    #: the prior, one line each (:func:`kgprobe.prior_sources.protocol_notes`).
    protocol_notes: list[str] = field(default_factory=list)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def mean_difficulty(self) -> float:
        known = self.difficulty[np.isfinite(self.difficulty)]
        return float(known.mean()) if known.size else 0.0

    @property
    def ability_prior(self) -> tuple[float, float]:
        a = np.asarray(list(self.abilities.values()), dtype=np.float64)
        sd = float(a.std()) if a.size > 1 else 0.0
        return float(a.mean()), max(ABILITY_SD, sd)

    def design_share(self, share: float) -> float:
        """The share of the design that follows this prior: the asked-for ``share`` × :attr:`agreement`.

        Why: the prior design draws edges the prior leaves uncertain more often, which pays
        only when the new model fails where the sources fail. Sources that disagree with
        each other say that transfer is weak (replays of the recorded sweeps: with one
        source that disagrees with the rest, a design at share ½ held the KG accuracy within
        3 points less often than a uniform one; docs/priors.md), so their prior shapes the
        design less. The predictions still use it, weighed by :meth:`stacked`.
        """
        return float(share) * self.agreement

    def filled_difficulty(self) -> np.ndarray:
        if "b" not in self._cache:
            b = self.difficulty.copy()
            b[~np.isfinite(b)] = self.mean_difficulty
            self._cache["b"] = b
        return self._cache["b"]

    def ability(self, successes: np.ndarray, failures: np.ndarray) -> float:
        """The new model's ability from its direct answers (penalized ML, Newton steps)."""
        b = self.filled_difficulty()
        s = np.asarray(successes, dtype=np.float64)
        f = np.asarray(failures, dtype=np.float64)
        probed = (s + f) > 0
        mu, sd = self.ability_prior
        a = mu
        if not probed.any():
            return a
        bs, ss, ns = b[probed], s[probed], s[probed] + f[probed]
        for _ in range(25):
            p = expit(a - bs)
            grad = float(np.sum(ss - ns * p)) - (a - mu) / sd**2
            hess = -float(np.sum(ns * p * (1 - p))) - 1.0 / sd**2
            step = grad / hess
            a -= step
            if abs(step) < 1e-10:
                break
        return float(a)

    def item_mean(self, ability: float) -> np.ndarray:
        """σ(a − b_j) for every edge of the target KG."""
        return expit(ability - self.filled_difficulty())

    def initial_mean(self) -> np.ndarray:
        """σ(ā − b_j): every edge's predicted chance of a right answer before the new model's first answer."""
        return self.item_mean(self.ability_prior[0])

    def predict(self, pkg) -> np.ndarray:
        """Every edge's predicted chance of a right answer given the run so far (module docstring)."""
        s = np.asarray(pkg.successes, dtype=np.float64)
        f = np.asarray(pkg.failures, dtype=np.float64)
        p = self.item_mean(self.ability(s, f))
        k = self.strength
        return (k * p + s) / (k + s + f)

    def stacked(self, pkg, other: np.ndarray, other_prior: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """``w·ŷ_prior + (1 − w)·ŷ_other`` and ``w``: the prior weighed against the run's own predictions.

        ``other`` is the run's own prediction of every edge's chance of a right answer
        (:func:`kgprobe.predictions.predicted_right`: the sampler's posterior, pooled over
        predicates and neighbours, averaged with the edge's cell's share) and
        ``other_prior`` the same from the other edges' answers only (None: ``other``).
        ``w`` maximizes the Bernoulli likelihood of the probed edges' own answers under
        ``w·σ(â − b_j) + (1 − w)·other_prior_j`` (grid of :data:`STACKING_GRID`): each
        side is judged on answers it has not seen, so a prior from models that fail on
        other facts than this one gets ``w`` near 0, so its predictions count little against
        the run's own, and a sharp prior (an earlier run of a close model) gets ``w`` near 1.
        Before two edges have answers, ``w`` = 1: the prior is all there is. That first
        round is most of what a poorly fitting prior costs, and ``w`` = 0 there would cost a
        sharp prior more than it saves a poor one (docs/priors.md, "Where a prior helps and
        where it costs").
        """
        own = self.predict(pkg)
        s = np.asarray(pkg.successes, dtype=np.float64)
        f = np.asarray(pkg.failures, dtype=np.float64)
        probed = (s + f) > 0
        if int(probed.sum()) < 2:
            return own, 1.0
        other = np.asarray(other, dtype=np.float64)
        side = other if other_prior is None else np.asarray(other_prior, dtype=np.float64)
        p1 = np.clip(self.item_mean(self.ability(s, f))[probed], 1e-9, 1 - 1e-9)
        p2 = np.clip(side[probed], 1e-9, 1 - 1e-9)
        mix = STACKING_GRID[:, None] * p1 + (1.0 - STACKING_GRID[:, None]) * p2
        loglik = (s[probed] * np.log(mix) + f[probed] * np.log1p(-mix)).sum(axis=1)
        w = float(STACKING_GRID[int(np.argmax(loglik))])
        return w * own + (1.0 - w) * other, w

    def start(self, pkg) -> None:
        """Start the PKG's Beta beliefs from the prior (before any probe)."""
        p = self.initial_mean()
        act = pkg.active
        pkg.alpha[act] += self.strength * (1.0 - p[act])
        pkg.beta[act] += self.strength * p[act]
        pkg._bins = None

    # -- persistence -------------------------------------------------------------------
    def to_json(self) -> str:
        diff = [None if not math.isfinite(x) else round(float(x), 6) for x in self.difficulty.tolist()]
        return json.dumps({"kg": self.kg_name, "difficulty": diff, "abilities": self.abilities,
                           "sources": self.sources, "strength": self.strength, "shared_edges": self.shared_edges,
                           "agreement": self.agreement, "protocol_notes": self.protocol_notes},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "ItemPrior":
        d = json.loads(text)
        diff = np.asarray([np.nan if x is None else x for x in d["difficulty"]], dtype=np.float64)
        return cls(d["kg"], diff, {k: float(v) for k, v in d["abilities"].items()}, list(d["sources"]),
                   float(d["strength"]), int(d["shared_edges"]),
                   # Priors stored before the agreement was measured shaped the design in full.
                   float(d.get("agreement", 1.0)),
                   # Priors stored before the sources' protocols were checked have no notes.
                   list(d.get("protocol_notes", [])))


def fit_prior(kg, sources: list[AnswerCounts], *, difficulty_sd: float = DIFFICULTY_SD) -> ItemPrior:
    """The item-response prior over ``kg``'s edges from other models' recorded answers."""
    if not sources:
        raise InputError("a prior needs at least one run file or recorded sweep")
    for src in sources:
        if src.kg_name != kg.name:
            raise InputError(
                f"the prior {src.source!r} was recorded on the KG {src.kg_name!r}, but this run probes "
                f"{kg.name!r}; a prior must come from runs or sweeps on the same KG"
            )
    index = {key: j for j, key in enumerate(triple_keys(kg, np.arange(kg.num_edges)))}
    cols: dict[int, int] = {}
    rows = []
    for src in sources:
        idx = np.asarray([index.get(k, -1) for k in src.keys], dtype=np.int64)
        keep = idx >= 0
        if not keep.any():
            raise InputError(
                f"the prior {src.source!r} shares no edge with the KG {kg.name!r} of this run (matched by "
                "subject, predicate and object ids); record it on the same KG"
            )
        rows.append((idx[keep], src.right[keep], src.total[keep]))
        for e in idx[keep].tolist():
            cols.setdefault(e, len(cols))
    edges = np.fromiter(cols, dtype=np.int64, count=len(cols))
    right = np.zeros((len(sources), edges.size))
    total = np.zeros_like(right)
    for m, (idx, r, t) in enumerate(rows):
        c = np.asarray([cols[e] for e in idx.tolist()], dtype=np.int64)
        np.add.at(right[m], c, r)
        np.add.at(total[m], c, t)
    active = np.asarray(kg.active, bool)
    if not active[edges].any():
        raise InputError(f"the prior shares no active edge with the KG {kg.name!r}; nothing it knows can be used")
    a, b = fit_rasch(right, total, difficulty_sd=difficulty_sd)
    difficulty = np.full(kg.num_edges, np.nan)
    difficulty[edges] = b
    names = []
    for src in sources:
        name = src.model
        while name in names:
            name += "'"
        names.append(name)
    return ItemPrior(kg.name, difficulty, dict(zip(names, a.tolist())), [s.source for s in sources],
                     shared_edges=int(active[edges].sum()), agreement=source_agreement(right, total))


#: Fewest edges two sources must both have answered for their agreement to count.
MIN_SHARED_FOR_AGREEMENT = 3


def source_agreement(right: np.ndarray, total: np.ndarray) -> float:
    """Mean over pairs of sources of the correlation of their per-edge shares of right answers.

    ``right``, ``total``: (sources × edges) counts. Each pair is scored on the edges both
    answered (at least :data:`MIN_SHARED_FOR_AGREEMENT`); a negative correlation, or a
    source whose share is the same on every shared edge (no ordering of difficulty to
    agree with), counts 0. Rounded to 4 decimals so a stored prior reads back the same.
    1.0 with one source or no pair to score: nothing to check the prior against, and the
    design follows it in full.
    """
    right = np.asarray(right, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    scores = []
    for i in range(right.shape[0]):
        for j in range(i + 1, right.shape[0]):
            both = (total[i] > 0) & (total[j] > 0)
            if int(both.sum()) < MIN_SHARED_FOR_AGREEMENT:
                continue
            x = right[i, both] / total[i, both]
            y = right[j, both] / total[j, both]
            if x.std() == 0 or y.std() == 0:
                scores.append(0.0)
                continue
            scores.append(max(0.0, float(np.corrcoef(x, y)[0, 1])))
    return round(float(np.mean(scores)), 4) if scores else 1.0

"""The run's design: which probes are drawn with known inclusion probabilities, and how.

Every design probe of a round is drawn with an inclusion probability ``π_j`` fixed before
the round's answers (it may depend on every earlier answer). That is all the estimators of
:mod:`kgprobe.estimators` need to stay unbiased under adaptivity. Three designs:

* ``uniform`` — a simple random sample of the active edges each round (``π_j = k/N``);
  what run files written before the other designs existed used, and what ``--design
  uniform`` keeps.
* ``stratified`` — the uniform design with a minimum allocation per stratum: every
  predicate and every subject group gets about :data:`MIN_STRATUM_DRAWS` expected
  design draws over the run, fewer where the budget makes that costly (:func:`run_minimum`;
  the first :data:`FIRST_DRAWS` within
  :data:`MINIMUM_ROUNDS` rounds, the rest spread evenly over the rounds the budget
  leaves), the rest of the draws proportional to size. Drawn by systematic sampling over
  the edges ordered by predicate (strata and edges in random order), so a predicate gets
  the floor or the ceiling of its expected draws — a two-edge predicate is reached
  every run, not one run in ten.
* ``adaptive`` — two parts per round. The *floor*: a share of the draws by the
  stratified design, which depends on nothing but the seed, the KG, the budget and
  batch, and the counts of earlier floor draws, so two models' runs with the same seed
  draw the same floor edges (common random numbers: their difference is paired there).
  The *lean*: the rest, drawn among the edges not in the floor with
  ``π_j ∝ (1 − λ)/N + λ·s_j/Σs``, ``s_j`` leaning towards edges whose answer is worth
  most: predicted wrong or uncertain (:func:`lean_scores`). Each part carries its share
  of the stratum minimums, counted on its own draws. The estimator combines both parts
  with weights fixed by the design (:mod:`kgprobe.estimators`).

The part of every design probe is stored in the run file's design column: 1 floor (or
the single part of the uniform and stratified designs), 2 lean, 0 not a design probe.
"""

from __future__ import annotations

import math

import numpy as np

from kgprobe.errors import InputError
from kgprobe.sampling.design_draws import design_inclusion, draw_systematic, inclusion_probabilities

DESIGNS = ("uniform", "stratified", "adaptive")
#: Expected design draws every stratum (predicate, subject group) gets over a run, budget
#: permitting: enough for a ratio estimate with an interval (two are the least).
MIN_STRATUM_DRAWS = 4
#: The most of a round's draws that stratum minimums may take.
MINIMUM_SHARE = 0.5
#: The first draws of a stratum short of :data:`FIRST_DRAWS` (what an interval needs) come
#: over this many rounds; so does the rest of its minimum when the rounds to come are not
#: known (:meth:`DesignPlan.round` given none) or under the ``early`` pacing.
MINIMUM_ROUNDS = 2
#: Design draws a stratum gets quickly, over :data:`MINIMUM_ROUNDS` rounds: the least a
#: predicate's interval needs (``kgprobe.estimators.MIN_DESIGN_PROBES``), so a run stopped
#: early still has one. The rest of the minimum is spread evenly over the run's rounds:
#: a round whose floor is half minimums has a noisier floor estimate, and the KG
#: interval pays for that unevenly spread more than for the same draws spread evenly.
FIRST_DRAWS = 2
#: The most of a run's design draws the stratum minimums may take beyond what a share of
#: draws proportional to the strata's sizes would give them. Those extra draws come from
#: the large strata, so the KG interval widens by about half this share at most
#: (:func:`run_minimum`); beyond it a small stratum gets fewer than
#: :data:`MIN_STRATUM_DRAWS`, never fewer than :data:`FIRST_DRAWS`.
MINIMUM_COST = 0.05
#: How stratum minimums are set and paced. ``capped``: the run's minimum per stratum from
#: :func:`run_minimum` (its cost capped at :data:`MINIMUM_COST` of the design draws), the
#: first :data:`FIRST_DRAWS` over :data:`MINIMUM_ROUNDS` rounds and the rest evenly over
#: the rounds the budget leaves, each part of a round carrying its share. ``budget``: the
#: same with :data:`MIN_STRATUM_DRAWS` whatever it costs — the rule of run files written
#: before ``capped``. ``early``: what a stratum lacked over the next
#: :data:`MINIMUM_ROUNDS` rounds, all in the floor — the rule of run files written
#: before ``budget``. A run file resumes with the rule it was played with.
PACINGS = ("capped", "budget", "early")
#: Share of an adaptive round's design draws in the floor (shared across models).
FLOOR_SHARE = 0.35
#: Within the lean part, the share λ that follows the scores (the rest is uniform, which
#: bounds every lean weight by 1/(1 − λ) times the uniform one).
LEAN = 0.9
#: Weight κ of the lean on the chance of a wrong answer next to the residual's sd
#: (:func:`lean_scores`); 0.5 kept the weak-probe share of κ = 1 on the committed sweeps
#: with narrower intervals (docs/design-measured.md).
ERROR_LEAN = 0.5
#: With a lean target (``--lean-target``): the exponent of the hunting score ``(1 − ŷ)^a``
#: mixed into the lean, and the steps of the mixture tried each round (docs/design.md,
#: "Hunting within a half-width target").
HUNT_POWER = 2.0
HUNT_STEPS = 8
#: How a lean target (``--lean-target``) projects the run's half-width. ``realized``: the
#: rounds played count with the variance the interval gives them, and the rounds to come
#: are projected with their predictions' variance times how much the rounds played
#: exceeded theirs (:func:`projected_halfwidth`). ``projected``: every round is projected
#: to draw like the current one from its predictions alone — the rule of run files written
#: before ``realized`` (docs/design.md). A run file resumes with its rule.
LEAN_CONTROLS = ("realized", "projected")
#: Part codes of the store's design column.
SAMPLER, FLOOR, LEAN_PART = 0, 1, 2


def check_design(name: str) -> str:
    if name not in DESIGNS:
        raise InputError(f"unknown design {name!r}; choose one of {', '.join(DESIGNS)}")
    return name


def lean_scores(predicted_right: np.ndarray, error_lean: float = ERROR_LEAN) -> np.ndarray:
    """Where one more design answer is worth most: ``sqrt(ŷ(1 − ŷ)) + κ·(1 − ŷ)``.

    The first term is the predicted residual's standard deviation (the variance-optimal
    design draws ``π ∝ sd``, Neyman allocation); the second leans on the chance the edge
    is answered wrong, which is what the blind-spot search wants. Both are small on edges
    the predictions are sure the model knows.
    """
    p = np.clip(np.asarray(predicted_right, dtype=np.float64), 0.0, 1.0)
    return np.sqrt(p * (1.0 - p)) + error_lean * (1.0 - p)


def projected_halfwidth(weights: np.ndarray, variance: np.ndarray, floor_share: float, draws: float,
                        spent: float = 0.0, spent_draws: float = 0.0, inflation: float = 1.0) -> float:
    """The KG half-width (95 %) of a run whose rounds to come draw their lean by ``weights``.

    ``weights``: the lean's draw probabilities over its candidates (summing to 1);
    ``variance``: each candidate's predicted outcome variance ŷ(1 − ŷ). One lean draw's
    inverse-probability score then has variance ``Σ v_j / (n² w_j)`` over the ``n``
    candidates (with replacement), a floor draw's the mean ``v̄``; the KG estimate mixes
    the parts by their draws. ``draws``: the run's design draws. Without the other
    arguments every round is projected to draw like this one, ``1.96·sqrt((f·v̄ + (1 − f)·
    Σ v_j/(n² w_j)) / draws)``, leaving out the predictions' own errors and the stratum
    minimums, so it runs narrower than a run's interval. With them (what a run does,
    :meth:`DesignPlan.lean_probabilities`) the rounds played count as they were:
    ``spent`` = Σ m_t·s²_t of the interval's variance over ``spent_draws`` design draws
    (:func:`kgprobe.estimators.round_spread`), and the draws left are projected with their
    per-draw variance times ``inflation``, how much the rounds played exceeded what their
    predictions expected; the variance is ``(spent + inflation·per-draw·left) / draws²``.
    """
    n = weights.size
    lean = float(np.sum(variance / (n * n * weights)))
    per_draw = floor_share * float(variance.mean()) + (1.0 - floor_share) * lean
    if not spent_draws:
        return 1.959964 * math.sqrt(per_draw / draws)
    left = max(draws - spent_draws, 0.0)
    return 1.959964 * math.sqrt((spent + inflation * per_draw * left) / (draws * draws))


def hunting_weights(predicted_right: np.ndarray, scores: np.ndarray, lean: float, floor_share: float,
                    draws: float, target: float, spent: tuple[float, float, float] = (0.0, 0.0, 1.0),
                    ) -> tuple[np.ndarray, float]:
    """The lean's draw weights over its candidates, hunting as hard as ``target`` allows.

    ``scores``: the candidates' :func:`lean_scores`. Mixes the hunting score ``(1 − ŷ)^a``
    (:data:`HUNT_POWER`) into them in :data:`HUNT_STEPS` steps and keeps the largest share
    ``c`` whose :func:`projected_halfwidth` is at most ``target`` (0 when none is: today's
    lean). The weights keep the uniform share ``1 − lean``; the stratum minimums are laid
    on them afterwards (:meth:`DesignPlan.lean_probabilities`), so a small predicate the
    model knows keeps its draws. Depends on the predictions before the round only, so the
    round's probabilities stay known and fixed in advance. ``spent``: the run's rounds
    played so far, ``(Σ m_t·s²_t, their design draws, inflation)`` for
    :func:`projected_halfwidth`; the default projects every round like this one.
    Returns (weights, c).
    """
    p = np.clip(np.asarray(predicted_right, dtype=np.float64), 0.0, 1.0)
    n = p.size
    uniform = np.full(n, 1.0 / n)
    base = scores / scores.sum()
    weights = (1.0 - lean) * uniform + lean * base
    hunt = (1.0 - p) ** HUNT_POWER
    if hunt.sum() <= 0:
        return weights, 0.0
    hunt = hunt / hunt.sum()
    variance = np.maximum(p * (1.0 - p), 1e-4)  # an edge predicted sure still has some
    share = 0.0
    for c in np.linspace(0.0, 1.0, HUNT_STEPS + 1)[1:]:
        w = (1.0 - lean) * uniform + lean * ((1.0 - c) * base + c * hunt)
        if projected_halfwidth(w, variance, floor_share, draws, *spent) > target:
            break
        weights, share = w, float(c)
    return weights, share


def rounds_to_come(queries_left: int | None, batch: int, round_limit_left: int | None = None) -> int | None:
    """The run's rounds still to come, this one included: as many as the queries left fill
    in batches of ``batch``, or ``round_limit_left`` when fewer; None when neither bounds
    the run."""
    limits = [] if queries_left is None else [-(-queries_left // max(batch, 1))]
    if round_limit_left is not None:
        limits.append(round_limit_left)
    return min(limits) if limits else None


def stratum_minimums(counts: np.ndarray, sizes: np.ndarray, rounds_left: int, k: float,
                     target: float = MIN_STRATUM_DRAWS, first: float = FIRST_DRAWS) -> np.ndarray:
    """Expected draws each stratum needs this round to reach ``target`` over the run.

    ``counts``: design draws so far per stratum; ``sizes``: active edges per stratum (a
    round draws an edge at most once); ``rounds_left``: the run's rounds still to come,
    this one included. A stratum gets its ``first`` draws over the next
    :data:`MINIMUM_ROUNDS` rounds and the rest of ``target`` evenly over ``rounds_left``.
    Scaled down so minimums take at most :data:`MINIMUM_SHARE` of the round's ``k`` draws.
    """
    left = max(int(rounds_left), 1)
    quick = np.clip(min(target, first) - counts, 0.0, None) / min(left, MINIMUM_ROUNDS)
    need = np.maximum(quick, np.clip(target - counts, 0.0, None) / left)
    need = np.minimum(need, sizes).astype(np.float64)
    need[sizes == 0] = 0.0
    total = float(need.sum())
    if total > MINIMUM_SHARE * k and total > 0:
        need *= MINIMUM_SHARE * k / total
    return need


def run_minimum(sizes, n_active: int, draws: float | None, *, target: float = MIN_STRATUM_DRAWS,
                least: float = FIRST_DRAWS, cost: float = MINIMUM_COST) -> float:
    """The design draws each stratum gets over a run: ``target``, or less where that costs more.

    ``sizes``: active edges per stratum, one array per kind of stratum (predicates,
    subject groups); ``draws``: the run's design draws (None: not known, ``target``). A
    stratum of ``N_h`` edges gets about ``draws·N_h/N`` draws by proportion; the
    minimum ``m`` asks ``min(m, N_h)``, and the excess summed over strata (a draw in a
    small predicate and a small group counted twice, so on the safe side) may be at most
    ``cost·draws``. Returns the largest ``m`` in [``least``, ``target``] within that
    cost, ``least`` when even that costs more (an interval needs ``least`` draws).
    """
    if draws is None or draws <= 0 or n_active <= 0:
        return float(target)
    least = min(least, target)  # a plan asking fewer than ``least`` (e.g. none) keeps its own
    arrays = [np.asarray(s, dtype=np.float64) for s in sizes]

    def excess(m: float) -> float:
        # An empty stratum asks min(m, 0) = 0 and costs nothing.
        return sum(float(np.clip(np.minimum(m, s) - draws * s / n_active, 0.0, None).sum()) for s in arrays)

    allowed = cost * draws
    if excess(target) <= allowed:
        return float(target)
    if excess(least) >= allowed:
        return float(least)
    low, high = float(least), float(target)
    for _ in range(40):  # excess(m) is continuous and increasing in m
        mid = (low + high) / 2
        low, high = (mid, high) if excess(mid) <= allowed else (low, mid)
    return low


def run_design_draws(queries: float | None, sampler) -> float | None:
    """A run's design draws from its query bound (None: unbounded): the queries times the
    sampler's design fraction (1 for samplers without one)."""
    if queries is None:
        return None
    return float(queries) * float(getattr(sampler, "design_fraction", 1.0))


def stratified_probabilities(active: np.ndarray, k: float, strata: list[tuple[np.ndarray, np.ndarray]],
                             base: np.ndarray | None = None) -> np.ndarray:
    """Inclusion probabilities (sum ``k``, each ≤ 1) proportional to ``base`` with stratum minimums.

    ``strata``: ``(label per edge, minimum expected draws per label)`` pairs; strata below
    their minimum are scaled up, the others down to keep the sum (a few rounds of raking,
    so the minimums hold approximately when strata cross). ``base``: relative weights
    (uniform over the active edges when None).
    """
    act = np.asarray(active, bool)
    w = np.where(act, 1.0, 0.0) if base is None else np.where(act, np.asarray(base, np.float64), 0.0)
    if w.sum() <= 0:
        raise ValueError("no active edge has a positive design weight")
    pi = inclusion_probabilities(w, int(round(k))) if float(k).is_integer() else w * (k / w.sum())
    for _ in range(8):
        boosted = np.zeros(act.size, bool)
        for labels, need in strata:
            tot = np.bincount(labels[act], weights=pi[act], minlength=need.size)
            low = (need > tot * (1 + 1e-9)) & (tot > 0)
            if not low.any():
                continue
            factor = np.ones(need.size)
            factor[low] = need[low] / tot[low]
            edge_factor = np.where(act, factor[labels], 1.0)
            member = act & low[labels]
            pi = np.where(member, np.minimum(pi * edge_factor, 1.0), pi)
            boosted |= member
        rest = act & ~boosted
        excess = float(pi.sum()) - k
        if excess <= 1e-9 or not rest.any():
            break
        rest_total = float(pi[rest].sum())
        if rest_total <= excess:
            break
        pi = np.where(rest, pi * (rest_total - excess) / rest_total, pi)
    # Exactly k (the raking may leave a rounding residue) with every π ≤ 1.
    return inclusion_probabilities(pi, int(round(k))) if float(k).is_integer() else pi


def draw_by_strata(pi: np.ndarray, strata: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomized systematic sampling with the edges ordered by stratum (random order of
    strata and of edges within): edge j is drawn with probability exactly ``π_j``, and each
    stratum gets the floor or the ceiling of its expected draws."""
    cand = np.flatnonzero(pi > 0)
    rank = rng.permutation(int(strata.max()) + 1 if strata.size else 1)
    order = cand[np.lexsort((rng.random(cand.size), rank[strata[cand]]))]
    return draw_systematic(pi, rng, order=order)


def lean_layout(candidates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The order the lean's systematic sample lays its candidate edges out in: a random one.

    The lean's generator makes this permutation first and then the sample's start ``u``
    (:func:`draw_systematic`), so the points ``u, u + 1, …`` of two models' runs with the
    same seed fall at the same places of the same layout: the i-th lean draws of the two
    runs are a pair (:func:`lean_draw_ranks`), as their floor draws are.
    """
    cand = np.flatnonzero(np.asarray(candidates, bool))
    return cand[rng.permutation(cand.size)]


def lean_draw_ranks(active: np.ndarray, floor: np.ndarray, lean: np.ndarray,
                    rng: np.random.Generator) -> np.ndarray | None:
    """Each of a round's ``lean`` edges' place in the order its systematic points fell on them.

    Rebuilt from what a run file keeps: the run's ``active`` edges and the round's
    ``floor`` edges (the lean's candidates are the active edges outside the floor, each
    with ``π > 0``) and the round's lean generator ``rng`` (fresh, as the run made it).
    Points are laid along the layout in increasing order, so ranking the drawn edges by
    their place in the layout (:func:`lean_layout`) ranks them by point. None when a lean
    edge is not a candidate (the file was not played by this design).
    """
    avail = np.asarray(active, bool).copy()
    avail[np.asarray(floor, dtype=np.int64)] = False
    lean = np.asarray(lean, dtype=np.int64)
    if lean.size and (lean.max() >= avail.size or not avail[lean].all()):
        return None
    place = np.empty(avail.size, dtype=np.int64)
    layout = lean_layout(avail, rng)
    place[layout] = np.arange(layout.size)
    return np.argsort(np.argsort(place[lean], kind="stable"), kind="stable")


def design_columns(pkg, edges: np.ndarray, in_design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each selected edge's inclusion probability and design part, from the round's design on ``pkg``.

    The run's :class:`RoundDesign` when one is set (``pkg.design``), else the uniform design
    (weighted by ``pkg.design_weights`` when set), whose draws are one part, the floor. The
    sampler's own choices (``in_design`` False) get NaN and part :data:`SAMPLER`.
    """
    edges = np.asarray(edges, dtype=np.int64)
    in_design = np.asarray(in_design, dtype=bool)
    drawn = edges[in_design]
    inclusion = np.full(edges.size, np.nan)
    parts = np.full(edges.size, SAMPLER, dtype=np.int64)
    round_design = getattr(pkg, "design", None)
    if round_design is not None:
        inclusion[in_design] = round_design.inclusion(drawn)
        parts[in_design] = round_design.parts(drawn)
    else:
        inclusion[in_design] = design_inclusion(pkg, drawn.size, drawn)
        parts[in_design] = FLOOR
    return inclusion, parts


def with_expected_draws(means: dict, round_design: "RoundDesign | None", labels: dict) -> dict:
    """A round's recorded group means, each ``(P̄, V̄)`` extended by the group's expected
    floor and lean draws ``(e_F, e_L)`` (:meth:`RoundDesign.expected_draws`); unchanged
    without a round design (the uniform design: its groups are weighed by the round's draws,
    as before these were recorded). ``labels``: ``{kind: (label per edge, names)}``."""
    if round_design is None:
        return means
    out = {}
    for kind, groups in means.items():
        expected = round_design.expected_draws(*labels[kind])
        out[kind] = {g: [*v[:2], *expected.get(g, (0.0, 0.0))] for g, v in groups.items()}
    return out


class RoundDesign:
    """One round's design, set on the PKG (``pkg.design``) while the sampler selects.

    :meth:`draw` hands a sampler its ``k`` design edges (the floor part, then the lean
    part); :meth:`parts` and :meth:`inclusion` give the engine each drawn edge's part
    and inclusion probability.
    """

    def __init__(self, plan: "DesignPlan", predicted_right: np.ndarray | None, rounds_left: int,
                 floor_rng: np.random.Generator, lean_rng: np.random.Generator):
        self.plan, self.predicted_right, self.rounds_left = plan, predicted_right, rounds_left
        self.floor_rng, self.lean_rng = floor_rng, lean_rng
        self._pi: dict[int, float] = {}
        self._part: dict[int, int] = {}
        #: Every edge's inclusion probability in the floor and in the lean (the lean's given
        #: the floor, 0 on floor edges) of the last :meth:`draw`; zeros before it.
        self.floor_pi = self.lean_pi = np.zeros(plan.active.size)

    def draw(self, k: int) -> np.ndarray:
        plan = self.plan
        self._pi, self._part = {}, {}
        self.floor_pi = self.lean_pi = np.zeros(plan.active.size)
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        k_floor = k if plan.design != "adaptive" else int(math.ceil(plan.floor_share * k))
        # Each part carries its share of the stratum minimums: the KG estimate mixes the
        # parts by their draws, and minimums spent in one part only make that part's
        # estimate noisier than the same minimums spread over both.
        floor_minimums = 1.0 if plan.pacing == "early" else k_floor / k
        pi_f = plan.floor_probabilities(k_floor, self.rounds_left, share=floor_minimums)
        floor = draw_by_strata(pi_f, plan.predicate, self.floor_rng)
        self.floor_pi = np.asarray(pi_f, dtype=np.float64)
        for e in floor.tolist():
            self._pi[e], self._part[e] = float(pi_f[e]), FLOOR
        k_lean = k - floor.size
        lean = np.empty(0, dtype=np.int64)
        if k_lean > 0:
            pi_l = plan.lean_probabilities(self.predicted_right, k_lean, exclude=floor,
                                           rounds_left=self.rounds_left, share=1.0 - floor_minimums)
            lean = draw_systematic(pi_l, self.lean_rng, order=lean_layout(pi_l > 0, self.lean_rng))
            self.lean_pi = np.asarray(pi_l, dtype=np.float64)
            for e in lean.tolist():
                self._pi[e], self._part[e] = float(pi_l[e]), LEAN_PART
        return np.sort(np.concatenate([floor, lean])).astype(np.int64)

    def inclusion(self, edges: np.ndarray) -> np.ndarray:
        return np.asarray([self._pi[int(e)] for e in edges], dtype=np.float64)

    def expected_draws(self, labels: np.ndarray, names) -> dict[str, tuple[float, float]]:
        """``{name: (e_F, e_L)}``: each group's expected floor draws this round and its
        expected lean draws given the floor (sums of the parts' π over the group's edges).

        A group's ratio estimate weighs each round by them (:func:`kgprobe.estimators.group_probe_weights`):
        both are fixed before the answers they weigh (the lean's once the floor is drawn, which
        is all the lean's estimate is unbiased given), so the ratio stays consistent, and a
        round that reached a small predicate by a rare draw no longer outweighs the rounds
        that drew it by its minimum. Zeros when the round drew nothing (or before :meth:`draw`).
        """
        lab = np.asarray(labels, dtype=np.int64)
        size = len(names)
        floor = np.bincount(lab, weights=self.floor_pi, minlength=size)
        lean = np.bincount(lab, weights=self.lean_pi, minlength=size)
        return {str(names[g]): (float(floor[g]), float(lean[g])) for g in range(size)}

    def parts(self, edges: np.ndarray) -> np.ndarray:
        return np.asarray([self._part[int(e)] for e in edges], dtype=np.int64)


class DesignPlan:
    """A run's design across rounds: its strata and the design draws each stratum got so far.

    ``predicate`` and ``group``: each edge's stratum index (predicate; subject's entity
    group); ``active``: the edges that can be drawn. The counts of earlier draws
    (:meth:`record`), per part, set each round's stratum minimums of that part. The
    floor's depend on the floor draws only, which are the same for every model given the
    seed, so the floor stays shared; the lean's on the lean draws.

    ``draws``: the run's design draws when known (its budget times the design fraction);
    under the ``capped`` pacing they set ``min_draws`` by :func:`run_minimum`, from the
    KG and the budget only, so two models' runs with the same settings share it.
    """

    def __init__(self, design: str, predicate: np.ndarray, group: np.ndarray, active: np.ndarray, *,
                 floor_share: float = FLOOR_SHARE, lean: float = LEAN, min_draws: float = MIN_STRATUM_DRAWS,
                 base: np.ndarray | None = None, pacing: str = "capped", draws: float | None = None,
                 lean_target: float | None = None, lean_control: str = "realized"):
        self.design = check_design(design)
        if pacing not in PACINGS:
            raise ValueError(f"unknown pacing of stratum minimums {pacing!r}; one of {PACINGS}")
        if lean_control not in LEAN_CONTROLS:
            raise ValueError(f"unknown lean-target control {lean_control!r}; one of {LEAN_CONTROLS}")
        self.pacing = pacing
        self.predicate = np.asarray(predicate, dtype=np.int64)
        self.group = np.asarray(group, dtype=np.int64)
        self.active = np.asarray(active, bool)
        self.floor_share, self.lean, self.min_draws = float(floor_share), float(lean), float(min_draws)
        #: Relative weights of the floor before minimums (a prior's design), or None (uniform).
        self.base = base
        self._labels = (("predicate", self.predicate), ("group", self.group))
        self._sizes = {kind: np.bincount(lab[self.active], minlength=int(lab.max()) + 1 if lab.size else 1)
                       for kind, lab in self._labels}
        if pacing == "capped":
            self.min_draws = run_minimum(list(self._sizes.values()), int(self.active.sum()), draws,
                                         target=self.min_draws)
        #: The run's design draws and the half-width the lean may spend on hunting
        #: (:func:`hunting_weights`; None: today's lean, as without a target).
        self.draws, self.lean_target, self.lean_control = draws, lean_target, lean_control
        #: The rounds recorded with their spread (:meth:`record`): Σ m_t·s²_t, what their
        #: predictions expected of it, and their design draws.
        self.played = [0.0, 0.0, 0.0]
        #: The hunting share of each round's lean since the plan was made or reset (what the
        #: target allowed; read by replays and tests).
        self.hunt_shares: list[float] = []
        self.counts = {kind: np.zeros(s.size, dtype=np.float64) for kind, s in self._sizes.items()}
        self.lean_counts = {kind: np.zeros(s.size, dtype=np.float64) for kind, s in self._sizes.items()}

    def reset(self) -> None:
        for c in (*self.counts.values(), *self.lean_counts.values()):
            c[:] = 0.0
        self.hunt_shares.clear()
        self.played = [0.0, 0.0, 0.0]

    def record(self, edges: np.ndarray, parts: np.ndarray,
               spread: tuple[float, float, int] | None = None) -> None:
        """Count a round's floor draws and lean draws per stratum; ``spread``: the round's
        :func:`kgprobe.estimators.round_spread`, which a lean target's control reads."""
        edges, parts = np.asarray(edges, dtype=np.int64), np.asarray(parts)
        if spread is not None:
            for i, x in enumerate(spread):
                self.played[i] += float(x)
        for counts, code in ((self.counts, FLOOR), (self.lean_counts, LEAN_PART)):
            drawn = edges[parts == code]
            for kind, lab in self._labels:
                np.add.at(counts[kind], lab[drawn], 1.0)

    def _minimums(self, counts: dict, sizes: dict, rounds_left: int, k: int, share: float) -> list:
        if self.design == "uniform" or share <= 0:
            return []
        return [(lab, stratum_minimums(counts[kind], sizes[kind], rounds_left, k, self.min_draws * share,
                                       FIRST_DRAWS * share))
                for kind, lab in self._labels]

    def floor_probabilities(self, k: int, rounds_left: int, share: float = 1.0) -> np.ndarray:
        """The floor's π (sum ``k``), carrying ``share`` of each stratum's minimum."""
        return stratified_probabilities(self.active, k, self._minimums(self.counts, self._sizes, rounds_left, k, share),
                                        self.base)

    def lean_probabilities(self, predicted_right: np.ndarray | None, k: int, exclude: np.ndarray,
                           rounds_left: int = MINIMUM_ROUNDS, share: float = 0.0) -> np.ndarray:
        """The lean's π (sum ``k``) among the active edges not in ``exclude`` (the floor),
        carrying ``share`` of each stratum's minimum."""
        avail = self.active.copy()
        avail[np.asarray(exclude, dtype=np.int64)] = False
        n = int(avail.sum())
        w = np.where(avail, 1.0 / max(n, 1), 0.0)
        if predicted_right is not None and self.lean > 0:
            s = np.where(avail, lean_scores(predicted_right), 0.0)
            if s.sum() > 0:
                if self.lean_target is not None and self.draws:
                    w = np.zeros_like(w)
                    w[avail], hunt = hunting_weights(np.asarray(predicted_right)[avail], s[avail], self.lean,
                                                      self.floor_share, self.draws, self.lean_target,
                                                      self._spent_so_far())
                    self.hunt_shares.append(hunt)
                else:
                    w = (1.0 - self.lean) * w + self.lean * s / s.sum()
        sizes = {kind: np.bincount(lab[avail], minlength=self._sizes[kind].size) for kind, lab in self._labels}
        strata = self._minimums(self.lean_counts, sizes, rounds_left, k, share)
        if not strata:
            return inclusion_probabilities(w, k)
        return stratified_probabilities(avail, k, strata, w)

    def _spent_so_far(self) -> tuple[float, float, float]:
        """What :func:`projected_halfwidth` counts of the rounds played: their variance, their
        design draws, and the factor by which it exceeded their predictions' (never below 1:
        a prediction's error only adds to an answer's variance)."""
        spent, expected, drawn = self.played
        if self.lean_control != "realized" or drawn <= 0:
            return 0.0, 0.0, 1.0
        return spent, drawn, max(1.0, spent / expected) if expected > 0 else 1.0

    def round(self, predicted_right: np.ndarray | None, floor_rng, lean_rng,
              rounds_left: int | None = None) -> RoundDesign:
        """This round's design. ``rounds_left``: the run's rounds still to come with this one
        (:func:`rounds_to_come`); None (not known) and the ``early`` pacing give minimums
        over :data:`MINIMUM_ROUNDS` rounds."""
        if rounds_left is None or self.pacing == "early":
            rounds_left = MINIMUM_ROUNDS
        return RoundDesign(self, predicted_right, rounds_left, floor_rng, lean_rng)

"""Comparing runs of several models on the same KG.

Side by side: win / zero-sense / all-sense rates over each run's probed edges and the
unbiased KG-level accuracy; the difference of every pair's KG and per-predicate accuracy
with an interval (paired when the runs' design probes coincide), marked significant
after Holm's correction for the number of differences tested
(:func:`accuracy_differences`). Subsumption rate (ZP-LKE §4.2.2, Table 2):

    η(A | B) = |known(A) ∩ known(B)| / |known(A)|

the share of facts model A knows that model B also knows. A fact is *known* by a run
when its edge's win condition holds (more right than wrong answers, m > n). Adaptive
sampling probes different edges for different models, so η is computed over the edges
probed by *both* runs (reported as ``common``); η is undefined (None) when A knows none
of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kgprobe.runs import Run, run_completion
from kgprobe.engine import metrics_to_dict
from kgprobe.errors import InputError


def subsumption(known_a: np.ndarray, known_b: np.ndarray, mask: np.ndarray | None = None) -> float | None:
    """η(A | B) over the edges in ``mask`` (all edges when None); None if A knows none."""
    known_a, known_b = np.asarray(known_a, bool), np.asarray(known_b, bool)
    if mask is not None:
        known_a, known_b = known_a[mask], known_b[mask]
    denom = int(known_a.sum())
    return None if denom == 0 else float((known_a & known_b).sum() / denom)


@dataclass
class Comparison:
    names: list[str]
    metrics: list[dict]
    estimates: list[dict | None]
    eta: list[list[float | None]]
    """``eta[i][j]`` = η(run i | run j): share of facts run i knows that run j also knows."""
    common: list[list[int]]
    """Edges probed by both runs i and j."""
    differences: dict | None = None
    """KG and per-predicate accuracy differences with intervals (:func:`accuracy_differences`)."""
    baselines: list[dict] | None = None
    """Per run: its no-knowledge baselines, ``{"kg": {chance, majority, null}, "by_predicate": {…}}``."""
    states: list[dict] | None = None
    """Per run: :func:`run_state`, whether it finished and how far it got."""

    def to_dict(self) -> dict:
        return {"runs": self.names, "metrics": self.metrics, "accuracy_estimates": self.estimates,
                "eta": self.eta, "common_edges": self.common, "accuracy_differences": self.differences,
                "baselines": self.baselines, "run_states": self.states}


def compare_runs(runs: list[Run], names: list[str] | None = None, *,
                 being_written: list[bool] | None = None) -> Comparison:
    """Compare runs made on the same KG (same fingerprint); raises InputError otherwise.

    ``being_written``: per run, whether another process is writing it now (see
    :func:`run_state`); unfinished runs are compared as far as they got, and say so.
    """
    if len(runs) < 2:
        raise InputError("compare needs at least two runs")
    fps = {r.store.meta("kg_fingerprint") for r in runs}
    if len(fps) != 1:
        raise InputError(
            "these runs were made on different KGs (their KG fingerprints differ); η and side-by-side "
            "rates are only meaningful on the same graph"
        )
    names = names or [r.model_name for r in runs]
    probed = [(r.successes + r.failures) > 0 for r in runs]
    known = [r.successes > r.failures for r in runs]
    k = len(runs)
    eta = [[None] * k for _ in range(k)]
    common = [[0] * k for _ in range(k)]
    for i in range(k):
        for j in range(k):
            mask = probed[i] & probed[j]
            common[i][j] = int(mask.sum())
            eta[i][j] = subsumption(known[i], known[j], mask)
    # Each run's estimates are computed once and read by the KG line and the differences.
    run_estimates = [r.estimates() for r in runs]
    estimates = []
    for r, e in zip(runs, run_estimates):
        est = r.kg_accuracy(e)
        estimates.append(metrics_to_dict(est) if est.n else None)
    from kgprobe.report import run_baselines

    found = [run_baselines(r) for r in runs]
    base = [{"kg": b.get("kg"), "by_predicate": b.get("by_predicate", {})} if b else {} for b in found]
    written = being_written or [False] * len(runs)
    return Comparison(names, [metrics_to_dict(r.metrics) for r in runs], estimates, eta, common,
                      accuracy_differences(runs, names, estimates=run_estimates), base,
                      [run_state(r, being_written=w) for r, w in zip(runs, written)])


# -- differences of accuracy between runs -------------------------------------------------
#: Family-wise error rate of the significance marks (Holm's step-down correction).
ALPHA = 0.05


def holm(pvalues: list[float]) -> list[float]:
    """Holm-adjusted p-values (step-down Bonferroni; valid under any dependence between tests)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def floor_pairs(ta, tb) -> tuple[np.ndarray, np.ndarray] | None:
    """Masks over each run's design probes of the floor draws both runs share, or None.

    Runs with the same seed, KG, batch and budget draw the same floor edges in the same
    rounds (:mod:`kgprobe.sampling.design`; the whole design for the uniform and stratified
    designs); those probes compare paired. None when the floors differ.
    """
    if ta is None or tb is None or ta.edge is None or tb.edge is None:
        return None
    da, db = ta.design, tb.design
    if int(da.sum()) != int(db.sum()) or not da.any():
        return None
    fa = np.ones(int(da.sum()), bool) if ta.part is None else ta.part[da] == 1
    fb = np.ones(int(db.sum()), bool) if tb.part is None else tb.part[db] == 1
    if int(fa.sum()) != int(fb.sum()) or not fa.any():
        return None
    same = np.array_equal(ta.edge[da][fa], tb.edge[db][fb]) and np.array_equal(ta.round[da][fa], tb.round[db][fb])
    return (fa, fb) if same else None


def lean_ranks(table, active: np.ndarray, rng_for_round) -> np.ndarray | None:
    """Each design probe's rank among its round's lean draws by systematic point (−1 for
    floor draws), or None when it cannot be rebuilt.

    ``active``: the run's active edges; ``rng_for_round(t)``: a fresh lean generator of the
    0-based round ``t``, as the run made it (:func:`kgprobe.sampling.design.lean_draw_ranks`).
    """
    from kgprobe.sampling.design import FLOOR, LEAN_PART, lean_draw_ranks

    if table is None or table.part is None or table.edge is None:
        return None
    d = table.design
    part, edge, rnd = table.part[d], table.edge[d], table.round[d]
    ranks = np.full(edge.size, -1, dtype=np.int64)
    for t in np.unique(rnd[part == LEAN_PART]).tolist():
        here = rnd == t
        lean = here & (part == LEAN_PART)
        r = lean_draw_ranks(active, edge[here & (part == FLOOR)], edge[lean], rng_for_round(int(t)))
        if r is None:
            return None
        ranks[lean] = r
    return ranks


def run_lean_ranks(run: Run, table) -> np.ndarray | None:
    """:func:`lean_ranks` of a run file played by the adaptive design (None for other designs)."""
    from kgprobe.engine import round_rng

    cfg = run.config
    if table is None or getattr(cfg, "design", None) != "adaptive":
        return None
    # The engine numbers rounds from 1 and draws round r's lean with round_rng(seed, r, 3);
    # a ProbeTable's rounds are 0-based.
    return lean_ranks(table, np.asarray(run.kg.active, bool), lambda t: round_rng(cfg.seed, t + 1, 3))


def draw_pairs(ta, tb, ranks_a=None, ranks_b=None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Index pairs into the two runs' design probes of the draws they share, the floor's
    first (and how many of them are the floor's), or None.

    The floor draws (:func:`floor_pairs`) pair edge for edge; the lean draws, when both
    runs' lean ranks are known (:func:`lean_ranks`) and each round holds as many in both,
    pair by point: the two runs' i-th lean points of a round fall at the same place of the
    same random layout with the same start (common random numbers), so where the two
    models' lean probabilities agree the pair is one edge, and where they differ the pair
    still shares the layout's neighbourhood. Each pair is one draw of a joint design, so
    the per-pair differences estimate the difference's variance as each run's own scores
    estimate its own.
    """
    floor = floor_pairs(ta, tb)
    if floor is None:
        return None
    fa, fb = floor
    ia, ib = [np.flatnonzero(fa)], [np.flatnonzero(fb)]
    if ranks_a is not None and ranks_b is not None and (~fa).any():
        ra, rb = ta.round[ta.design], tb.round[tb.design]
        la, lb = np.flatnonzero(~fa), np.flatnonzero(~fb)
        if np.array_equal(np.bincount(ra[la], minlength=ra.max() + 1), np.bincount(rb[lb], minlength=ra.max() + 1)) \
                and (ranks_a[la] >= 0).all() and (ranks_b[lb] >= 0).all():
            ia.append(la[np.lexsort((ranks_a[la], ra[la]))])
            ib.append(lb[np.lexsort((ranks_b[lb], rb[lb]))])
    return np.concatenate(ia), np.concatenate(ib), int(fa.sum())


def floor_part(pairs):
    """The floor pairs of ``pairs`` (:func:`draw_pairs` puts them first), or None."""
    if pairs is None:
        return None
    ia, ib, n_floor = pairs
    return ia[:n_floor], ib[:n_floor], n_floor


def informative_pairs(za: np.ndarray, zb: np.ndarray, pairs):
    """``pairs`` (:func:`draw_pairs`), or only its floor pairs when every pair's score
    difference is the same (the same run twice, or a resumed copy of it): such pairs hold
    no spread to build an interval from, so the lean draws count unpaired."""
    if pairs is None:
        return None
    ia, ib, n_floor = pairs
    d = za[ia] - zb[ib]
    if ia.size > n_floor and d.size and np.all(d == d[0]):
        return floor_part(pairs)
    return pairs


def unpaired_reason(ta, tb) -> str:
    """Why :func:`floor_pairs` found no shared floor, in words a user can act on."""
    if ta is None or tb is None or ta.edge is None or tb.edge is None:
        return "a run file records no per-probe design draws (a run made by an older kgprobe)"
    na, nb = int(ta.design.sum()), int(tb.design.sum())
    if not na or not nb:
        return "a run has no design draws"
    if na != nb:
        return (f"their design draws differ in number ({na} and {nb}): a run is unfinished, or their budgets "
                "or batch sizes differ")
    return "they drew different floor edges: their seeds differ, or their budgets or batch sizes"


def run_state(run: Run, *, being_written: bool = False) -> dict:
    """Whether ``run`` finished, and how far it got: a comparison of unfinished runs says so.

    ``being_written``: whether another process holds the run's writer lock now
    (:func:`kgprobe.store.transactions.writer_active`, which the caller checks before it
    opens the file, since closing a descriptor of a file this process reads through
    SQLite would drop SQLite's locks on it).
    """
    return {"status": run.status or None, "stop_reason": run.stop_reason or "",
            "finished": run_completion(run.status) == "finished", "being_written": bool(being_written),
            "rounds": run.rounds_played, "queries": run.queries_spent, "budget": run.config.budget}


def _feasible(diff: float, low: float, high: float, est_a: dict, est_b: dict) -> tuple[float, float]:
    """``[low, high]`` cut to what the two accuracies' own intervals allow (and to [−1, 1])."""
    lo = max(-1.0, est_a["low"] - est_b["high"], low)
    hi = min(1.0, est_a["high"] - est_b["low"], high)
    return min(lo, diff), max(hi, diff)


def _difference(est_a: dict | None, est_b: dict | None, za=None, zb=None, *, group: bool, pairs=None,
                confidence: float = 0.95, correlation: float | None = None) -> dict | None:
    """A − B with a confidence interval and a two-sided p-value; None when not testable.

    KG: **paired** on the draws both runs share (``pairs``, index pairs into the design
    probes' scores ``za``, ``zb``, :func:`draw_pairs`): the variance is that of the
    per-pair differences plus each run's own over its draws left unpaired, ``(n_P·s²_d +
    n_A·s²_A + n_B·s²_B)/M²``; **unpaired** otherwise, ``se² = se_A² + se_B²``. Predicates and groups:
    the MOVER interval (Zou & Donner 2008) built from the two accuracies' own intervals,
    ``d ∓ sqrt((p_A − l_A)² + (u_B − p_B)² − 2r·(p_A − l_A)(u_B − p_B))`` and its mirror,
    with ``r`` the two estimates' ``correlation`` over the runs' paired draws
    (:func:`predicate_correlation`; 0, the unpaired MOVER, when None), which never leaves
    the range the two intervals allow. Every interval is cut to that range
    ``[l_A − u_B, u_A − l_B]`` and to [−100, +100] points.
    """
    from scipy.stats import norm

    from kgprobe.estimators import DESIGN

    if not est_a or not est_b or est_a.get("basis") != DESIGN or est_b.get("basis") != DESIGN:
        return None
    if est_a.get("estimate") is None or est_b.get("estimate") is None:
        return None
    diff = est_a["estimate"] - est_b["estimate"]
    q = float(norm.ppf(0.5 + confidence / 2))
    if group:
        r = 0.0 if correlation is None else min(max(float(correlation), 0.0), 1.0)

        def reach(x: float, y: float) -> float:
            return math.sqrt(max(x * x + y * y - 2.0 * r * x * y, 0.0))

        below = reach(est_a["estimate"] - est_a["low"], est_b["high"] - est_b["estimate"])
        above = reach(est_a["high"] - est_a["estimate"], est_b["estimate"] - est_b["low"])
        low, high = diff - below, diff + above
        se = (above + below) / (2 * q)
        if correlation is None:
            kind, variance = "unpaired", "MOVER from each side's Korn-Graubard interval"
        else:
            kind = "paired"
            variance = ("MOVER from each side's Korn-Graubard interval, with the two estimates' correlation "
                        "over the paired draws")
    elif za is not None and zb is not None and pairs is not None:
        ia, ib, n_floor = pairs

        def spread(x):
            return x.size * float(x.var(ddof=1)) if x.size > 1 else 0.0

        def paired_variance(ia, ib):
            rest_a, rest_b = np.ones(za.size, bool), np.ones(zb.size, bool)
            rest_a[ia], rest_b[ib] = False, False
            return (spread(za[ia] - zb[ib]) + spread(za[rest_a]) + spread(zb[rest_b])) / za.size ** 2, rest_a

        var, rest_a = paired_variance(ia, ib)
        lean_paired = ia.size > n_floor
        se = math.sqrt(var)
        low, high = diff - q * se, diff + q * se
        kind = "paired" if not rest_a.any() else "paired on the shared floor, unpaired on the rest"
        variance = ("per-draw score differences, floor draws paired by edge and lean draws by systematic point "
                    "(with-replacement, martingale CLT)" if lean_paired
                    else "per-probe score differences (with-replacement, martingale CLT)")
    else:
        if est_a.get("se") is None or est_b.get("se") is None:
            return None
        se = math.sqrt(est_a["se"] ** 2 + est_b["se"] ** 2)
        low, high = diff - q * se, diff + q * se
        kind, variance = "unpaired", "sum of the two runs' variances"
    if not (se > 0 and math.isfinite(se)):
        return None
    low, high = _feasible(diff, low, high, est_a, est_b)
    p = float(2 * norm.sf(abs(diff) / se))
    return {"difference": diff, "low": low, "high": high, "se": se, "p": p, "test": kind, "variance": variance}


def predicate_correlation(ta, tb, pairs, predicate: str) -> float | None:
    """Correlation of the two runs' estimates of ``predicate``'s accuracy over their paired
    draws (:func:`draw_pairs`), cut to [0, 1]; None when either run has no design probe of it.

    Each estimate's linearized error is the sum of its design probes' scores
    (:func:`kgprobe.estimators.hajek_scores`, variance ``M·s²(u)``); the two sums covary
    through the pairs only, ``M·Σ_pairs (u_A − ū_A)(u_B − ū_B)/M``. A negative estimate
    counts as 0 (the unpaired MOVER): pairing is not allowed to widen an interval on noise.
    """
    from kgprobe.estimators import hajek_scores

    ua, ub = hajek_scores(ta, "predicate", predicate), hajek_scores(tb, "predicate", predicate)
    if ua is None or ub is None or ua.size < 2 or ua.size != ub.size:
        return None
    ia, ib, _ = pairs
    va, vb = float(ua.var()), float(ub.var())
    if va <= 0.0 or vb <= 0.0:
        return 0.0
    cov = float(np.sum((ua[ia] - ua.mean()) * (ub[ib] - ub.mean()))) / ua.size
    return min(max(cov / math.sqrt(va * vb), 0.0), 1.0)


def predicate_difference(ta, tb, est_a: dict | None, est_b: dict | None, predicate: str, *, pairs=None,
                         confidence: float = 0.95) -> dict | None:
    """``predicate``'s accuracy difference A − B as ``compare`` reports it: MOVER, with the
    estimates' correlation over ``pairs`` (:func:`draw_pairs`) when the runs pair."""
    r = None if pairs is None else predicate_correlation(ta, tb, pairs, predicate)
    return _difference(est_a, est_b, group=True, confidence=confidence, correlation=r)


def kg_difference(est_a: dict | None, est_b: dict | None, za=None, zb=None, *, pairs=None,
                  confidence: float = 0.95) -> dict | None:
    """The KG difference A − B as ``compare`` reports it (:func:`_difference`): paired on
    ``pairs`` (:func:`draw_pairs`) with the design scores ``za``, ``zb``, else unpaired."""
    return _difference(est_a, est_b, za, zb, group=False, pairs=pairs, confidence=confidence)


def _untested(d, est_a, est_b) -> dict:
    """Why a difference was not tested (empty when it was)."""
    from kgprobe.estimators import DESIGN, TOO_FEW

    if d is not None:
        return {}
    if est_a and est_b and TOO_FEW in (est_a.get("basis"), est_b.get("basis")):
        return {"reason": "too few design probes"}
    if not est_a or not est_b or est_a.get("basis") != DESIGN or est_b.get("basis") != DESIGN:
        return {"reason": "model-based"}
    return {"reason": "no variation"}


def accuracy_differences(runs: list[Run], names: list[str], *, confidence: float = 0.95,
                         estimates: list[dict] | None = None) -> dict:
    """KG and per-predicate accuracy differences of every pair of runs, Holm-corrected.

    Each difference is A − B of the design-based estimates (:mod:`kgprobe.estimators`)
    with a ``confidence`` interval (:func:`_difference`). The KG difference is **paired**
    on the draws the runs share (runs with the same seed, KG, batch and budget draw the
    same floor edges and their lean draws pair by point, :func:`draw_pairs`): the per-pair
    differences ``z_i(A) − z_i(B)`` remove the shared edge difficulty; draws left unpaired
    add their own variance. Each row says which (``test``) and which variance it used
    (``variance``). Predicates use the MOVER interval from each side's interval, with
    the two estimates' correlation over the paired draws when the runs pair
    (:func:`predicate_correlation`); every interval is cut to the range the two
    accuracies' intervals allow.
    Groups without a design-based estimate in either run are not tested.
    ``significant`` marks differences whose Holm-adjusted p-value is below
    :data:`ALPHA` over the whole family (every pair × the KG and every predicate).
    ``estimates``: each run's :meth:`Run.estimates` at ``confidence``, when the caller
    already has them.
    """
    from kgprobe.estimators import design_scores, table_from_store

    tables = [table_from_store(r.store) for r in runs]
    lean = [run_lean_ranks(r, t) for r, t in zip(runs, tables)]
    if estimates is None:
        estimates = [r.estimates(confidence) for r in runs]
    rows: list[dict] = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            ta, tb = tables[i], tables[j]
            pairs = draw_pairs(ta, tb, lean[i], lean[j])
            paired = pairs is not None
            za = zb = None
            if paired:
                za, zb = design_scores(ta), design_scores(tb)
                pairs = informative_pairs(za, zb, pairs)
            d = _difference(estimates[i]["kg"], estimates[j]["kg"], za, zb, group=False, pairs=pairs,
                            confidence=confidence)
            rows.append({"a": names[i], "b": names[j], "pair": [i, j], "scope": "KG", "label": "KG", **(d or {}),
                         "tested": d is not None, **_untested(d, estimates[i]["kg"], estimates[j]["kg"])})
            if not paired:
                rows[-1]["unpaired_reason"] = unpaired_reason(ta, tb)
            preds = sorted(set(estimates[i]["by_predicate"]) & set(estimates[j]["by_predicate"]))
            for pid in preds:
                ea, eb = estimates[i]["by_predicate"][pid], estimates[j]["by_predicate"][pid]
                d = predicate_difference(ta, tb, ea, eb, pid, pairs=pairs, confidence=confidence)
                rows.append({"a": names[i], "b": names[j], "pair": [i, j], "scope": "predicate", "predicate": pid,
                             "label": ea.get("label", pid), **(d or {}), "tested": d is not None,
                             **_untested(d, ea, eb)})
            for row in rows[-(len(preds) + 1):]:
                row["paired"] = paired
    tested = [r for r in rows if r["tested"]]
    for r, adj in zip(tested, holm([r["p"] for r in tested])):
        r["p_holm"] = adj
        r["significant"] = adj < ALPHA
    for r in rows:
        r.setdefault("significant", False)
    return {"confidence": confidence, "correction": "holm", "alpha": ALPHA, "family_size": len(tested),
            "differences": rows}

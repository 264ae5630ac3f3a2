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

from dataclasses import dataclass

import numpy as np

from kgprobe.runs import Run
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

    def to_dict(self) -> dict:
        return {"runs": self.names, "metrics": self.metrics, "accuracy_estimates": self.estimates,
                "eta": self.eta, "common_edges": self.common, "accuracy_differences": self.differences}


def compare_runs(runs: list[Run], names: list[str] | None = None) -> Comparison:
    """Compare runs made on the same KG (same fingerprint); raises InputError otherwise."""
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
    estimates = []
    for r in runs:
        est = r.accuracy_estimate()
        estimates.append(metrics_to_dict(est) if est.n else None)
    return Comparison(names, [metrics_to_dict(r.metrics) for r in runs], estimates, eta, common,
                      accuracy_differences(runs, names))


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


def _paired(ta, tb) -> bool:
    """Whether two runs' design probes are the same edges in the same rounds and order."""
    if ta is None or tb is None or ta.edge is None or tb.edge is None:
        return False
    da, db = ta.design, tb.design
    if int(da.sum()) != int(db.sum()) or not da.any():
        return False
    return bool(np.array_equal(ta.edge[da], tb.edge[db]) and np.array_equal(ta.round[da], tb.round[db]))


def _value(est: dict) -> float:
    raw = est.get("raw")
    return est["estimate"] if raw is None else raw


def _difference(est_a: dict | None, est_b: dict | None, za=None, zb=None, *, group: bool, hits: int = 0,
                confidence: float = 0.95) -> dict | None:
    """A − B with a confidence interval and a two-sided p-value; None when not testable."""
    from scipy.stats import norm
    from scipy.stats import t as student_t

    from kgprobe.estimators import DESIGN, MIN_DESIGN_PROBES

    if not est_a or not est_b or est_a.get("basis") != DESIGN or est_b.get("basis") != DESIGN:
        return None
    if est_a.get("estimate") is None or est_b.get("estimate") is None:
        return None
    # The unclipped (unbiased) values: their difference is the mean of the paired z differences.
    diff = _value(est_a) - _value(est_b)
    if za is not None and zb is not None:
        d = za - zb
        var = float(d.var(ddof=1)) / d.size if d.size > 1 else float("inf")
        df = float(max(hits - 1, 1)) if group else float("inf")
        if group and hits < MIN_DESIGN_PROBES:
            return None
        kind = "paired"
    else:
        if est_a.get("se") is None or est_b.get("se") is None:
            return None
        var = est_a["se"] ** 2 + est_b["se"] ** 2
        df = min(est_a.get("df") or float("inf"), est_b.get("df") or float("inf"))
        kind = "independent"
    if not (var > 0 and np.isfinite(var)):
        return None
    se = float(np.sqrt(var))
    dist = norm if not np.isfinite(df) else student_t(df)
    q = float(dist.ppf(0.5 + confidence / 2))
    p = float(2 * dist.sf(abs(diff) / se))
    return {"difference": diff, "low": diff - q * se, "high": diff + q * se, "se": se, "p": p, "test": kind}


def _untested(d, est_a, est_b) -> dict:
    """Why a difference was not tested (empty when it was)."""
    from kgprobe.estimators import DESIGN

    if d is not None:
        return {}
    if not est_a or not est_b or est_a.get("basis") != DESIGN or est_b.get("basis") != DESIGN:
        return {"reason": "model-based"}
    return {"reason": "too few design probes or no variation"}


def accuracy_differences(runs: list[Run], names: list[str], *, confidence: float = 0.95) -> dict:
    """KG and per-predicate accuracy differences of every pair of runs, Holm-corrected.

    Each difference is A − B of the design-based estimates (:mod:`kgprobe.estimators`)
    with a ``confidence`` interval. **Paired** when the two runs' design probes are the
    same edges in the same rounds (runs with the same seed and batch draw the same audit
    edges): the interval comes from the per-probe differences ``z_i(A) − z_i(B)``, which
    removes the shared edge difficulty. Otherwise **independent**: ``se² = se_A² + se_B²``
    (conservative when the runs share some probed edges, whose answers correlate
    positively). Groups with a model-based estimate in either run are not tested.
    ``significant`` marks differences whose Holm-adjusted p-value is below
    :data:`ALPHA` over the whole family (every pair × the KG and every predicate).
    """
    from kgprobe.estimators import design_scores, table_from_store

    tables = [table_from_store(r.store) for r in runs]
    estimates = [r.estimates(confidence) for r in runs]
    rows: list[dict] = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            ta, tb = tables[i], tables[j]
            paired = _paired(ta, tb)
            za = zb = None
            if paired:
                za, zb = design_scores(ta), design_scores(tb)
            d = _difference(estimates[i]["kg"], estimates[j]["kg"], za, zb, group=False, confidence=confidence)
            rows.append({"a": names[i], "b": names[j], "pair": [i, j], "scope": "KG", "label": "KG", **(d or {}),
                         "tested": d is not None, **_untested(d, estimates[i]["kg"], estimates[j]["kg"])})
            preds = sorted(set(estimates[i]["by_predicate"]) & set(estimates[j]["by_predicate"]))
            for pid in preds:
                ea, eb = estimates[i]["by_predicate"][pid], estimates[j]["by_predicate"][pid]
                za = zb = None
                hits = 0
                if paired:
                    za, zb = design_scores(ta, "predicate", pid), design_scores(tb, "predicate", pid)
                    hits = int((ta.labels["predicate"][ta.design] == pid).sum())
                d = _difference(ea, eb, za, zb, group=True, hits=hits, confidence=confidence)
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

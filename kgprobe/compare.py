"""Comparing runs of several models on the same KG.

Side by side: win / zero-sense / all-sense rates over each run's probed edges and the
unbiased KG-level accuracy. Subsumption rate (ZP-LKE §4.2.2, Table 2):

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

from kgprobe.api import Run
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

    def to_dict(self) -> dict:
        return {"runs": self.names, "metrics": self.metrics, "accuracy_estimates": self.estimates,
                "eta": self.eta, "common_edges": self.common}


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
    return Comparison(names, [metrics_to_dict(r.metrics) for r in runs], estimates, eta, common)

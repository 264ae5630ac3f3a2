"""Realistic true error probabilities θ* on a real graph, for simulated models and studies.

Model (logit scale)::

    logit θ*_j = μ + σ · ( √ρ_p · z_pred[p_j] + √ρ_e · (z_node[s_j] + z_node[o_j]) / √2
                          + √(1 − ρ_p − ρ_e) · ε_j )

with independent standard normals ``z_pred`` per predicate, ``z_node`` per node and
``ε_j`` per edge. Edges sharing a node share part of their difficulty (the hypothesis
behind propagation: a model that does not know an entity fails on its facts), edges of
one predicate share another part (some relations are harder), and the rest is
idiosyncratic. Knobs: ``predicate_share`` ρ_p, ``entity_share`` ρ_e (their sum ≤ 1),
``mean_logit`` μ, ``scale`` σ. Literal objects (years, numbers) are not shared nodes.

``correlation="none"`` draws the same correlated field and then shuffles it across the
active edges: the same marginal distribution of θ*, no structure at all — the mode where
propagation must not hurt much.

Calibration of the default (done before any sampler was tuned; see
``calibration_rates``). KGLens Tables 6–7 report, for real models probed ~10 times per
edge, zero-sense rates of 5.8–56.8 % and all-sense rates of 24.0–83.9 % (roughly 5–50 % and
25–80 %). The default targets the middle of those ranges —
zero-sense ≈ 20 %, all-sense ≈ 50 %, roughly Yi-34B / GPT-3.5 — with 10 probes per
edge. For a logit-normal θ*, zero-sense = E[θ*¹⁰] and all-sense = E[(1−θ*)¹⁰], which
depend only on (μ, σ); solving both by Gauss–Hermite quadrature gives μ = −2.82,
σ = 6.58 (zero-sense 20.0 %, all-sense 50.0 %; mean θ* 0.34). So wide a logit scale
means most facts are either nearly always known or nearly never, as the KGLens tables
imply. The shares ρ_p = 0.25, ρ_e = 0.35 (60 % of the logit variance shared with
neighbours or predicate) are a judgement call: clustering clearly present, a 40 %
idiosyncratic part left. On the embedded ``countries`` KG (3,246 active edges), 10
simulated probes per edge give, for θ* seeds 0–4: zero-sense 19.3, 18.3, 22.6, 13.4,
20.5 % and all-sense 49.0, 48.7, 47.4, 57.7, 49.5 % (the spread comes from the only 13
predicate effects) — all inside KGLens' ranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from kgprobe.errors import InputError

#: Calibrated defaults (module docstring).
DEFAULT_MEAN_LOGIT = -2.82
DEFAULT_SCALE = 6.58
DEFAULT_PREDICATE_SHARE = 0.25
DEFAULT_ENTITY_SHARE = 0.35


@dataclass(frozen=True)
class ThetaSettings:
    """Knobs of the θ* generator; the defaults are the calibrated ones."""

    mean_logit: float = DEFAULT_MEAN_LOGIT
    scale: float = DEFAULT_SCALE
    predicate_share: float = DEFAULT_PREDICATE_SHARE
    entity_share: float = DEFAULT_ENTITY_SHARE
    correlation: str = "correlated"  # or "none"

    def validate(self) -> "ThetaSettings":
        for name in ("mean_logit", "scale", "predicate_share", "entity_share"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"θ* setting {name} must be a finite number, got {v!r}")
        if self.scale < 0:
            raise InputError(f"θ* scale must be >= 0, got {self.scale}")
        if self.predicate_share < 0 or self.entity_share < 0 or self.predicate_share + self.entity_share > 1:
            raise InputError(
                "predicate_share and entity_share must be >= 0 and sum to at most 1, got "
                f"{self.predicate_share} + {self.entity_share}"
            )
        if self.correlation not in ("correlated", "none"):
            raise InputError(f"correlation must be 'correlated' or 'none', got {self.correlation!r}")
        return self


def generate_theta(
    heads: np.ndarray,
    tails: np.ndarray,
    predicates: np.ndarray,
    active: np.ndarray,
    settings: ThetaSettings = ThetaSettings(),
    *,
    seed: int = 0,
) -> np.ndarray:
    """θ* for every edge given its endpoints and predicate ids (module docstring).

    Dead edges get θ* too (they are never probed; it keeps indices aligned).
    """
    settings.validate()
    heads = np.asarray(heads, dtype=np.int64)
    tails = np.asarray(tails, dtype=np.int64)
    predicates = np.asarray(predicates, dtype=np.int64)
    active = np.asarray(active, dtype=bool)
    if heads.size == 0:
        raise InputError("cannot generate θ* for an empty graph")
    rng = np.random.default_rng(seed)
    z_pred = rng.standard_normal(int(predicates.max()) + 1)
    z_node = rng.standard_normal(int(max(heads.max(), tails.max())) + 1)
    eps = rng.standard_normal(heads.size)
    rp, re = settings.predicate_share, settings.entity_share
    z = (
        math.sqrt(rp) * z_pred[predicates]
        + math.sqrt(re) * (z_node[heads] + z_node[tails]) / math.sqrt(2.0)
        + math.sqrt(max(0.0, 1.0 - rp - re)) * eps
    )
    theta = expit(settings.mean_logit + settings.scale * z)
    if settings.correlation == "none":
        idx = np.flatnonzero(active)
        theta[idx] = theta[idx][rng.permutation(idx.size)]
    return theta


def theta_for_kg(kg, settings: ThetaSettings = ThetaSettings(), *, seed: int = 0) -> np.ndarray:
    """θ* for a :class:`~kgprobe.kg.graph.KnowledgeGraph` (literal objects are private nodes)."""
    from kgprobe.kg.parameterized import ParameterizedKG

    pkg = ParameterizedKG.from_kg(kg)
    return generate_theta(pkg.heads, pkg.tails, kg.predicate_of, kg.active, settings, seed=seed)


def calibration_rates(mean_logit: float, scale: float, probes: int = 10) -> tuple[float, float]:
    """Expected (zero-sense, all-sense) rates of a logit-normal θ* after ``probes`` probes each.

    Gauss–Hermite quadrature of E[θ^k] and E[(1−θ)^k]; used to calibrate the defaults.
    """
    x, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / w.sum()
    th = expit(mean_logit + scale * x)
    return float(np.dot(w, th**probes)), float(np.dot(w, (1 - th) ** probes))

"""Simulation: realistic θ*, a simulated model, and the KGLens §2.4 efficiency study."""

from kgprobe.simulation.model import SimulatedModel
from kgprobe.simulation.study import (
    DEFAULT_SPECS,
    SamplerSpec,
    StudyResult,
    efficiency_ratio,
    estimator_coverage,
    ratio_intervals,
    run_study,
    run_study_on_kg,
)
from kgprobe.simulation.theta import ThetaSettings, generate_theta, theta_for_kg

__all__ = [
    "DEFAULT_SPECS", "SamplerSpec", "SimulatedModel", "StudyResult", "ThetaSettings", "efficiency_ratio",
    "estimator_coverage", "generate_theta", "ratio_intervals", "run_study", "run_study_on_kg", "theta_for_kg",
]

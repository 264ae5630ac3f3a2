"""When a posterior refits its learned prior: not every round, once the answers have grown.

A marginal-likelihood fit costs more than a round's selection and moves little from
one round to the next, so the posteriors of :mod:`~kgprobe.sampling.evidence`,
:mod:`~kgprobe.sampling.pooled` and :mod:`~kgprobe.sampling.npmle` refit once the
number of answers has grown by ``refit_growth`` since their last fit (1.1: after 10 %
more), which keeps the number of fits logarithmic in the budget.
"""

from __future__ import annotations


class RefitOnGrowth:
    """Base of a posterior whose :meth:`fit` runs on the schedule of the module doc."""

    def __init__(self, *, refit_growth: float = 1.1):
        self.refit_growth = float(refit_growth)
        self._fitted_at = 0  # total direct answers at the last fit

    def maybe_fit(self, pkg) -> None:
        """Refit once the number of answers has grown by ``refit_growth`` since the last fit."""
        total = int(pkg.failures.sum()) + int(pkg.successes.sum())
        if total > 0 and total >= self.refit_growth * self._fitted_at:
            self.fit(pkg)
            self._fitted_at = total

    def fit(self, pkg) -> None:
        raise NotImplementedError

"""Thompson sampling: KGLens' variant (``kglens-thompson``) and kgprobe's (``thompson``).

``thompson`` (:class:`ThompsonSampler`), kgprobe's own: θ̃_j drawn from the
evidence posterior of :mod:`kgprobe.sampling.evidence` — the edge's own answers plus a
prior from its predicate's and entities' other answers, with strengths learned from
the data. Neighbours inform an edge only through a prior worth at most K answers, so a
hub edge is never turned into its neighbourhood's average. The draw decides which
edges are blind spots this round (θ̃_j > ½, each edge with its posterior probability of
being one); of those, the ones whose estimate one more answer would move most are
probed (:func:`weak_draw_top_n`), after the uniform design draws. Plain top-n of θ̃
keeps re-asking edges that are already known to be wrong (their draws sit near 1);
this spends the queries where the weak edges are still uncertain. Draws are made for
every active edge with ``Generator.beta``: fine up to ~10⁶ edges; at 10⁷ use
``kglens-thompson``'s exact threshold draws.

``kglens-thompson`` (:class:`KGLensThompsonSampler`), KGLens §2.1: draw θ̃_j ~
Beta(α_j, β_j) for every active edge, probe the top n.

Exact at any scale. Small graphs draw every θ̃ directly. Large graphs (more than
``direct_limit`` active edges) use an exact threshold method, since ``Generator.beta``
costs ~130 ns per draw and one round of ten million edges would take over a second:

1. pick τ such that, by a *lower* bound on every edge's tail, the expected number of
   draws above τ is ``n + 8√n + 16`` (so fewer than ``n`` is an ~8σ event);
2. decide for every edge whether ``θ̃_j > τ`` in two steps: a cheap test against an
   *upper* bound ``u_g ≥ P(θ̃_j > τ)`` shared by the edge's (α, β) bin
   (:mod:`kgprobe.sampling.beta_bins`; one uint32 comparison per edge), then, for the
   few candidates, acceptance with probability ``P(θ̃_j > τ) / u_g`` (thinning) —
   together exactly ``P(θ̃_j > τ)``;
3. draw the survivors' θ̃ from Beta(α_j, β_j) truncated to (τ, 1] by inverting the
   survival function, and take the top n.

Edges above τ are independent of each other and of the rest, so the top n of the
survivors is distributed exactly as the top n of a full draw. If fewer than n survive
(never seen in practice), the remaining edges are drawn from the Beta truncated to
[0, τ] by inversion — slow but still exact.

``design_fraction`` (the class default 0.1; a run's default is 1, every probe a design
draw) reserves part of each batch for the run's design draws
(:mod:`kgprobe.sampling.design_draws`) so a run can report an unbiased KG-level accuracy;
KGLens' plain Thompson sampling is ``design_fraction=0`` (what the efficiency study runs).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betainc, betaincinv, betainccinv

from kgprobe.sampling.design_draws import check_batch_size, check_fraction, design_count, draw_design
from kgprobe.sampling.base import DesignShareSampler, Sampler, Selection
from kgprobe.sampling.beta_bins import DEAD, bin_corners, ensure_bins

_TWO32 = float(2**32)
#: Bounds of a margin-moved prior mean (a Beta part needs a mean strictly inside (0, 1)).
_MU_CLIP = 1e-6


def top_n_direct(alpha: np.ndarray, beta: np.ndarray, candidates: np.ndarray, n: int, rng) -> np.ndarray:
    """Top ``n`` of θ̃ ~ Beta(α, β) drawn for every edge in ``candidates`` (by draw, descending)."""
    draws = rng.beta(alpha[candidates], beta[candidates])
    if n >= candidates.size:
        return candidates[np.argsort(-draws, kind="stable")]
    part = np.argpartition(-draws, n - 1)[:n]
    return candidates[part[np.argsort(-draws[part], kind="stable")]]


def _tail(a, b, tau):
    """P(Beta(a, b) > τ), as I_{1−τ}(b, a): exact (1 − τ is exact near 1) and ~10× faster
    than ``betaincc`` for small parameters."""
    return betainc(b, a, 1.0 - tau)


def _threshold(counts: np.ndarray, a_lo: np.ndarray, b_hi: np.ndarray, target: float) -> float:
    """Largest τ (to bisection precision) whose lower-bound expected survivor count ≥ target."""
    lo, hi = 0.0, 1.0
    for _ in range(36):  # τ to within 2^-36
        mid = 0.5 * (lo + hi)
        if float(np.dot(counts, _tail(a_lo, b_hi, mid))) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def top_n_threshold(pkg, n: int, rng, exclude: np.ndarray) -> np.ndarray:
    """Exact top-``n`` Thompson draw over the active edges not in ``exclude`` (module docstring)."""
    bins = ensure_bins(pkg)
    base = min(pkg.prior)
    # Chunked: bincount would otherwise cast all of ``bins`` to int64 at once.
    counts = np.zeros(65536, dtype=np.int64)
    for lo in range(0, bins.shape[0], 1 << 20):
        counts += np.bincount(bins[lo : lo + (1 << 20)], minlength=65536)
    counts[DEAD] = 0
    occupied = np.flatnonzero(counts)
    a_lo, a_hi, b_lo, b_hi = bin_corners(occupied, base)
    wanted = n + exclude.size
    target = wanted + 8.0 * math.sqrt(wanted) + 16.0
    tau = _threshold(counts[occupied].astype(np.float64), a_lo, b_hi, target)
    p_upper = _tail(a_hi, b_lo, tau)
    scaled = np.ceil(p_upper * _TWO32)
    always = scaled >= _TWO32  # bins whose bound is (numerically) 1: every edge is a candidate
    table = np.zeros(65536, dtype=np.uint32)
    table[occupied] = np.where(always, 0, scaled).astype(np.uint32)
    always_table = None
    if always.any():
        always_table = np.zeros(65536, dtype=bool)
        always_table[occupied[always]] = True
    # In chunks: a uint16 fancy index is widened to int64 internally, which on 10⁷
    # edges would cost 80 MB at once.
    parts = []
    step = 1 << 20
    for lo in range(0, bins.shape[0], step):
        b = bins[lo : lo + step]
        hit = rng.integers(0, 2**32, size=b.shape[0], dtype=np.uint32) < table[b]
        if always_table is not None:
            hit |= always_table[b]
        parts.append(np.flatnonzero(hit) + lo)
    cand = np.concatenate(parts)
    eff = np.zeros(65536, dtype=np.float64)
    eff[occupied] = np.where(always, 1.0, scaled / _TWO32)
    a, b = pkg.alpha[cand], pkg.beta[cand]
    p = _tail(a, b, tau)
    keep = rng.random(cand.size) * eff[bins[cand]] < p
    if exclude.size:
        keep &= ~np.isin(cand, exclude)
    survivors, a, b, p = cand[keep], a[keep], b[keep], p[keep]
    draws = betainccinv(a, b, rng.random(survivors.size) * p)
    order = np.argsort(-draws, kind="stable")
    if survivors.size >= n:
        return survivors[order[:n]]
    # Fallback (astronomically rare): complete the draw below τ for every other edge.
    rest = np.setdiff1d(pkg.active_edges, np.concatenate([survivors, exclude]), assume_unique=False)
    ra, rb = pkg.alpha[rest], pkg.beta[rest]
    below = betaincinv(ra, rb, rng.random(rest.size) * betainc(ra, rb, tau))
    k = n - survivors.size
    part = np.argpartition(-below, k - 1)[:k]
    part = part[np.argsort(-below[part], kind="stable")]
    return np.concatenate([survivors[order], rest[part]])


class KGLensThompsonSampler(Sampler):
    """Top-n of θ̃ ~ Beta(α, β) over the active edges (KGLens), with optional design draws.

    KGLens' own variant, kept for fidelity to the paper: the Beta counts are the
    parameterized KG's, i.e. the edge's answers plus every neighbour's answer at the
    propagation weight. ``thompson`` (:class:`ThompsonSampler`) is kgprobe's own; the run default is ``focus``.
    """

    name = "kglens-thompson"

    def __init__(self, *, design_fraction: float = 0.1, direct_limit: int = 200_000):
        self.design_fraction = check_fraction("design_fraction", design_fraction)
        self.direct_limit = int(direct_limit)

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        n = check_batch_size(pkg, n)
        design = draw_design(pkg, design_count(n, self.design_fraction, rng), rng)
        rest = n - design.size
        chosen = self.top_n(pkg, rest, rng, exclude=design)
        return Selection.design_first(design, chosen)

    def top_n(self, pkg, n: int, rng, *, exclude: np.ndarray) -> np.ndarray:
        if n == 0:
            return np.empty(0, dtype=np.int64)
        if pkg.num_active <= self.direct_limit:
            pool = pkg.active_edges
            if exclude.size:
                pool = np.setdiff1d(pool, exclude, assume_unique=True)
            return top_n_direct(pkg.alpha, pkg.beta, pool, n, rng)
        return top_n_threshold(pkg, n, rng, exclude)


def weak_draw_top_n(a: np.ndarray, b: np.ndarray, pool: np.ndarray, n: int, rng, threshold: float = 0.5) -> np.ndarray:
    """Thompson draw of which edges are weak, then the most informative of them.

    θ̃ ~ Beta(a, b) per edge of ``pool``; an edge is *drawn weak* when θ̃ > ``threshold``.
    Drawn-weak edges come first, ordered by how much one more answer is expected to
    move their estimate (the variance of the posterior mean's update,
    ``p(1 − p)/(a + b + 1)²``); then the others by θ̃. So an edge is probed about as
    often as it plausibly is a blind spot, and an edge whose θ is already pinned down
    (its update variance is tiny) yields its place to one still uncertain.
    """
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    draws = rng.beta(a, b)
    nu = a + b
    p = a / nu
    return rank_weak(draws, p * (1 - p) / (nu + 1) ** 2, pool, n, rng, threshold)


def rank_weak(draws: np.ndarray, gain: np.ndarray, pool: np.ndarray, n: int, rng,
              threshold: float = 0.5) -> np.ndarray:
    """The ``n`` edges of ``pool`` to probe: drawn-weak ones by gain, then the rest by draw.

    Equal scores (e.g. unprobed edges with the same prior) are ordered at random, never
    by edge index.
    """
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    weak = draws > threshold
    score = np.where(weak, 1.0 + gain, draws * threshold)  # weak edges (>= 1) before the rest (< 0.5)
    order = np.lexsort((rng.random(pool.size), -score))[:n]
    return pool[order]


class ThompsonSampler(DesignShareSampler):
    """kgprobe's Thompson sampling on two learned posteriors, weighed by how well each predicted.

    Two empirical-Bayes models of θ, both fitted to the run's own answers:

    * the evidence posterior (:mod:`kgprobe.sampling.evidence`): a parametric prior
      (atoms at 0 and 1 plus a Beta) whose mean pools the predicate's and entities'
      other answers with learned strengths;
    * the grid NPMLE (:mod:`kgprobe.sampling.npmle`): any prior shape, no pooling.

    Neither is right everywhere: pooling pays when errors cluster on the graph; the
    nonparametric shape pays when facts are known or not (on the recorded real sweeps
    it predicted the next answers better by tens of nats). So the sampler keeps a
    *prequential* score per model (Dawid): before each answer arrives, each model's
    posterior predictive probability of it (its posterior mean θ̂ at selection time)
    is noted; the answer adds ``log θ̂`` (wrong) or ``log(1 − θ̂)`` (right) to that
    model's score. Model weights are ``softmax(scores)`` — the posterior model
    probabilities under even prior odds, with each model's fit plugged in as it stood
    when it predicted, so no answer ever helps predict itself.

    * estimate: the weighted average of the two posterior means, except where margins
      are read (``margin_estimate``, below);
    * selection: per edge a model is drawn by weight, θ̃ from that model's posterior;
      an edge is drawn weak when θ̃ > ``threshold``; drawn-weak edges by how much one
      more answer would move the weighted estimate (``p(1 − p)(m_W − m_R)²``), then the
      rest by θ̃ (:func:`rank_weak`); after the uniform design draws.

    * margins (``margins=True``, the default): where the probe scores options (ZP-LKE),
      each answer's margin moves the evidence posterior's prior mean the way
      ``margin-focus`` moves ``focus``'s (:meth:`moved_prior_means`), so an edge answered
      right by a hair is drawn weak more often than one answered right by a wide margin.
      On the 31 committed sweeps with three or more passes this took the geometric mean
      of the ratios from 0.425 to 0.284 (docs/samplers-measured.md); ``margins=False``
      is the sampler as it was.
    * margin estimate (``margin_estimate=True``, the default): where margins are read,
      the estimate is the margin-moved evidence posterior's mean alone. The weighing
      asks which model better predicts the next answer of the edges the sampler asks,
      which is what the draws need, and there the grid can win (it does on
      Qwen2.5-Coder-1.5B's sweep); but the grid reads no margins, so its estimate of an
      edge asked once ignores what that answer's margin said, and on the hardest edges
      its shrinkage is what the error is made of. Replayed with ``thompson``'s own picks,
      the grid's estimate alone never reached brute force's top-k error there and the
      evidence model's alone needed 0.418 of it; over the 31 committed sweeps the
      geometric mean of the ratios went from 0.284 to 0.267, and on every simulated
      pattern down as well (docs/samplers-measured.md, "`thompson`'s estimate where
      margins are read"). ``margin_estimate=False`` is the weighted mean as before.

    Answers are read from the change in the edges' direct counts between calls, so the
    sampler needs nothing beyond the parameterized KG the engine updates.
    """

    name = "thompson"
    #: Asks the engine and the replays for each answer's margin (ParameterizedKG.update).
    uses_margins = True

    def __init__(self, *, design_fraction: float = 0.1, threshold: float = 0.5, refit_growth: float = 1.1,
                 margins: bool = True, margin_estimate: bool = True):
        from kgprobe.sampling.evidence import EvidencePosterior
        from kgprobe.sampling.npmle import GridPosterior

        super().__init__(design_fraction=design_fraction)
        self.threshold = check_fraction("threshold", threshold)
        self.margins = bool(margins)
        self.margin_estimate = bool(margin_estimate)
        self.posterior = EvidencePosterior(refit_growth=refit_growth)
        self.grid = GridPosterior(refit_growth=refit_growth)
        self.scores = np.zeros(2)  # prequential log scores: evidence, grid
        self._pending = None  # (edges, failures, successes, (2 × edges) predictions) of the last selection

    # -- the two models' predictions ------------------------------------------------------

    def _means(self, offsets, edges: np.ndarray, f: np.ndarray, s: np.ndarray, mu=None) -> np.ndarray:
        """(2 × edges) posterior means: evidence (its Beta part's prior means ``mu`` if moved), grid.

        ``offsets``: :func:`~kgprobe.sampling.evidence.source_offsets` of the parameterized KG.
        """
        from kgprobe.sampling.evidence import posterior_mean

        z, lg = offsets
        return np.stack([posterior_mean(self.posterior.params, z[:, edges], lg, f, s, mu), self.grid.mean(f, s)])

    def moved_prior_means(self, pkg, offsets=None) -> np.ndarray | None:
        """Every edge's Beta-part prior mean moved by its margins; ``None`` without margins.

        As ``margin-focus`` moves ``focus``'s: the latent margin model
        (:mod:`kgprobe.sampling.margin`), started from the evidence posterior's prior
        predictive error, gives the edge's chance of a wrong next answer, and the Beta
        part's prior mean moves by its difference from that prior error. The atoms and
        the edge's own verdicts count as before. ``None`` (the evidence posterior as it
        is) with ``margins=False``, with probes that generate, or before
        :data:`~kgprobe.sampling.margin.MIN_EDGES_WITH_MARGINS` edges have a margin.
        ``offsets``: :func:`~kgprobe.sampling.evidence.source_offsets` of ``pkg``, when the
        caller has them already.
        """
        from kgprobe.sampling.margin import has_margins, run_margin_error_rates

        if not self.margins or not has_margins(pkg):
            return None
        mu = self.posterior.beta_mean(pkg, offsets)
        prior = self.posterior.prior_mean(pkg, mu)
        rate = run_margin_error_rates(pkg, prior)
        return np.clip(np.where(pkg.margin_count > 0, mu + (rate - prior), mu), _MU_CLIP, 1 - _MU_CLIP)

    def model_weights(self) -> np.ndarray:
        """(evidence, grid) weights: softmax of the prequential scores."""
        w = np.exp(self.scores - self.scores.max())
        return w / w.sum()

    def _absorb(self, pkg) -> None:
        """Score the last selection's predictions against the answers it got."""
        if self._pending is None:
            return
        edges, f0, s0, pred = self._pending
        wrong = (pkg.failures[edges] - f0).astype(np.float64)
        right = (pkg.successes[edges] - s0).astype(np.float64)
        pred = np.clip(pred, 1e-9, 1 - 1e-9)
        self.scores = self.scores + (wrong * np.log(pred) + right * np.log1p(-pred)).sum(axis=1)
        self._pending = None

    def estimate(self, pkg) -> np.ndarray:
        from kgprobe.sampling.evidence import source_offsets

        self._absorb(pkg)
        offsets = source_offsets(pkg)
        moved = self.moved_prior_means(pkg, offsets)
        evidence = self.posterior.estimate(pkg, moved, offsets)
        if moved is not None and self.margin_estimate:
            return evidence
        w = self.model_weights()
        return w[0] * evidence + w[1] * self.grid.estimate(pkg)

    def prior_estimate(self, pkg) -> np.ndarray:
        self._absorb(pkg)
        w = self.model_weights()
        none = np.zeros(1)
        return w[0] * self.posterior.prior_mean(pkg) + w[1] * float(self.grid.mean(none, none)[0])

    def select(self, pkg, n: int, rng: np.random.Generator) -> Selection:
        from kgprobe.sampling.evidence import source_offsets

        n = check_batch_size(pkg, n)
        self._absorb(pkg)
        self.posterior.maybe_fit(pkg)
        self.grid.maybe_fit(pkg)
        n, design, pool = self.design_draws(pkg, n, rng)
        w = self.model_weights()
        f = pkg.failures[pool].astype(np.float64)
        s = pkg.successes[pool].astype(np.float64)
        # The leave-one-out offsets once: every evidence-model figure of this pick reads them.
        offsets = source_offsets(pkg)
        moved = self.moved_prior_means(pkg, offsets)
        mu = None if moved is None else moved[pool]
        pick_grid = rng.random(pool.size) >= w[0]
        draws = self.posterior.draw(pkg, pool, rng, mu, offsets)
        draws[pick_grid] = self.grid.draw(f[pick_grid], s[pick_grid], rng)
        p = w @ self._means(offsets, pool, f, s, mu)
        m_wrong = w @ self._means(offsets, pool, f + 1, s, mu)
        m_right = w @ self._means(offsets, pool, f, s + 1, mu)
        chosen = rank_weak(draws, p * (1 - p) * (m_wrong - m_right) ** 2, pool, n - design.size, rng, self.threshold)
        sel = Selection.design_first(design, chosen)
        e = sel.edges
        fe, se = pkg.failures[e].copy(), pkg.successes[e].copy()
        # The evidence model's prediction is noted with the same moved prior it selected with.
        self._pending = (e, fe, se, self._means(offsets, e, fe.astype(np.float64), se.astype(np.float64),
                                                None if moved is None else moved[e]))
        return sel

    def state_dict(self) -> dict:
        state = {**self.posterior.state_dict(), "grid_weights": self.grid.weights.copy(),
                 "grid_fitted_at": self.grid._fitted_at, "scores": self.scores.copy()}
        if self._pending is not None:
            e, f0, s0, pred = self._pending
            state.update(pending_edges=e.copy(), pending_failures=f0.copy(), pending_successes=s0.copy(),
                         pending_predictions=pred.copy())
        return state

    def load_state_dict(self, state: dict) -> None:
        self.posterior.load_state_dict(state)
        # Checkpoints written before the grid model existed load as a fresh grid with even scores.
        if "grid_weights" in state:
            self.grid.load_state_dict({"weights": state["grid_weights"], "fitted_at": state["grid_fitted_at"]})
            self.scores = np.asarray(state["scores"], dtype=np.float64).copy()
        self._pending = None
        if "pending_edges" in state:
            self._pending = tuple(np.asarray(state[k]).copy() for k in (
                "pending_edges", "pending_failures", "pending_successes", "pending_predictions"))

"""The report's figures (matplotlib, Agg backend), returned as PNG bytes."""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def convergence_plot(history: Sequence[dict], estimate: dict | None = None) -> bytes:
    """Win / zero-sense / all-sense rate against queries spent, one point per round."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    q = [h["queries_spent"] for h in history]
    for key, label, style in (
        ("win_rate", "win rate", "-o"),
        ("zero_sense_rate", "zero-sense rate", "-s"),
        ("all_sense_rate", "all-sense rate", "-^"),
    ):
        ax.plot(q, [h["metrics"][key] for h in history], style, ms=3, label=label)
    if estimate:
        lo, hi = estimate.get("low"), estimate.get("high")
        ax.axhline(estimate["estimate"], color="gray", ls="--", lw=1, label="KG accuracy (unbiased)")
        if lo is not None and hi is not None:
            ax.axhspan(lo, hi, color="gray", alpha=0.12)
    ax.set_xlabel("model queries")
    ax.set_ylabel("share of probed edges")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title("Metrics over the run")
    return _png(fig)


def bar_plot(labels: Sequence[str], values: Sequence[float], counts: Sequence[int], title: str) -> bytes:
    """Horizontal bars of a rate per group (worst at the top), with the edge count as text."""
    plt = _plt()
    n = len(labels)
    fig, ax = plt.subplots(figsize=(7, 0.32 * n + 1.2))
    y = np.arange(n)[::-1]
    ax.barh(y, values, color=plt.cm.Reds(0.35 + 0.6 * np.asarray(values, dtype=float)))
    ax.set_yticks(y, labels, fontsize=8)
    for yi, v, c in zip(y, values, counts):
        ax.text(min(v + 0.01, 0.93), yi, f"{v:.0%} (n={c})", va="center", fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_xlabel("zero-sense rate (share of probed edges never answered right)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def dot_heatmap(
    rows: Sequence[str], cols: Sequence[str], zero_sense: np.ndarray, share: np.ndarray, title: str
) -> bytes:
    """KGLens fig. 6: dot colour = zero-sense rate of (row entity, predicate), size = share of the row's edges."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(0.55 * len(cols) + 3.0, 0.32 * len(rows) + 2.0))
    yy, xx = np.nonzero(~np.isnan(zero_sense))
    sc = ax.scatter(
        xx, len(rows) - 1 - yy, s=40 + 460 * share[yy, xx], c=zero_sense[yy, xx], cmap="Reds",
        vmin=0, vmax=1, edgecolors="k", linewidths=0.3,
    )
    ax.set_xticks(np.arange(len(cols)), cols, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(np.arange(len(rows))[::-1], rows, fontsize=8)
    ax.set_xlim(-0.7, len(cols) - 0.3)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(alpha=0.2)
    fig.colorbar(sc, ax=ax, label="zero-sense rate (darker = weaker)", shrink=0.8)
    ax.set_title(title)
    return _png(fig)

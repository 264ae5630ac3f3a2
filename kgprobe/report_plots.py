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


_LABELS = {"win_rate": "win rate", "zero_sense_rate": "zero-sense rate", "all_sense_rate": "all-sense rate"}
_MARKERS = {"win_rate": "o", "zero_sense_rate": "s", "all_sense_rate": "^"}


def series_styles(count: int) -> list[dict]:
    """Line styles of ``count`` rate series drawn in this order, such that none can hide another.

    Series that differ in some rounds may still coincide in others; each series is drawn
    wider and fainter than the one after it, with its own dash pattern and hollow markers
    of decreasing size, so where they overlap every earlier line shows around the later.
    """
    dashes = ["-", "--", ":"]
    return [{"linestyle": dashes[i % 3], "lw": 4.5 - 1.5 * i, "alpha": 0.55 + 0.2 * i, "zorder": 2 + i,
             "ms": 8 - 2 * i, "mfc": "none"} for i in range(count)]


def convergence_plot(history: Sequence[dict], accuracy_history: Sequence[dict] = (),
                     groups: Sequence[tuple[list[str], str]] | None = None) -> bytes:
    """Rates over probed edges against queries spent, one point per round, and the unbiased
    KG accuracy estimate as it stood after each round with its interval as a band.

    ``groups`` lists rate keys with identical values (see ``kgprobe.report.series_groups``):
    each group is drawn once, labelled with every rate it stands for.
    """
    from matplotlib.patches import Patch

    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    q = [h["queries_spent"] for h in history]
    groups = groups or [([k], "") for k in _LABELS]
    for (keys, _why), style in zip(groups, series_styles(len(groups))):
        label = " = ".join(_LABELS[k] for k in keys)
        ax.plot(q, [h["metrics"][keys[0]] for h in history], marker=_MARKERS[keys[0]], **style,
                label=label + " (probed edges)")
    handles, labels = ax.get_legend_handles_labels()
    if accuracy_history:
        qa = [a["queries_spent"] for a in accuracy_history]
        est = [a["estimate"] for a in accuracy_history]
        lo = [a["low"] for a in accuracy_history]
        hi = [a["high"] for a in accuracy_history]
        (line,) = ax.plot(qa, est, "-.", color="black", lw=1.0, ms=3, marker="D", zorder=10)
        band = ax.fill_between(qa, lo, hi, color="gray", alpha=0.2, lw=0)
        handles += [line, Patch(facecolor=band.get_facecolor()[0], alpha=0.2)]
        labels += ["KG accuracy, unbiased (all active edges)", "its 95% interval"]
    ax.set_xlabel("model queries spent")
    ax.set_ylabel("share of edges")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(handles, labels, fontsize=7, loc="best")
    ax.set_title("Metrics over the run")
    return _png(fig)


def bar_plot(labels: Sequence[str], values: Sequence[float], counts: Sequence[int], title: str,
             chance: Sequence[float | None] | None = None) -> bytes:
    """Horizontal bars of a rate per group (first at the top), with the edge count as text;
    ``chance`` draws each group's chance level as a black tick."""
    plt = _plt()
    n = len(labels)
    fig, ax = plt.subplots(figsize=(7, 0.32 * n + 1.2))
    y = np.arange(n)[::-1]
    vals = np.asarray(values, dtype=float)
    ax.barh(y, vals, color=plt.cm.Blues(0.35 + 0.6 * np.nan_to_num(vals)))
    ax.set_yticks(y, labels, fontsize=8)
    for yi, v, c in zip(y, values, counts):
        ax.text(min(v + 0.01, 0.93), yi, f"{v:.0%} (n={c})", va="center", fontsize=7)
    xlabel = "win rate (share of probed edges answered right more often than wrong)"
    if chance is not None:
        pts = [(c, yi) for c, yi in zip(chance, y) if c is not None]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker="|", s=160, color="black", zorder=3)
            xlabel += "\nblack tick: the predicate's chance level (a random guess)"
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
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

"""The study's figure: MSE over the top-k hardest edges against queries, one curve per sampler."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def plot_study(result, path, *, title: str = "") -> Path:
    """Write a PNG with one panel per top-k and brute-force epochs as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = result.top_k
    fig, axes = plt.subplots(1, len(ks), figsize=(6.0 * len(ks), 4.5), squeeze=False)
    epochs = int(math.floor(result.queries[-1] / result.num_active))
    for ax, k in zip(axes[0], ks):
        for lab in result.mse:
            ax.plot(result.queries, result.mean_curve(lab, k), label=lab, lw=1.6 if "focus" in lab else 1.1)
        for e in range(1, epochs + 1):
            ax.axvline(e * result.num_active, color="0.75", lw=0.8, ls="--")
            ax.text(e * result.num_active, 0.02, f" epoch {e}", rotation=90,
                    va="bottom", ha="right", fontsize=7, color="0.4", transform=ax.get_xaxis_transform())
        ax.set_yscale("log")
        ax.set_xlabel("model queries")
        ax.set_ylabel(f"MSE of θ over top-{k} hardest edges")
        ax.set_title(f"top-{k} ({len(result.seeds)} seeds, batch {result.batch})")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def mse_at_epochs(result, label: str, k: int, epochs) -> list[float]:
    """The seed-averaged MSE of ``label`` at each number of epochs (interpolated)."""
    curve = result.mean_curve(label, k)
    return [float(np.interp(e * result.num_active, result.queries, curve)) for e in epochs]

"""`commons advise --plot`: each team's demand distribution against its current and proposed quota.

One small panel per team and pool: the cumulative distribution of demand (the share of the time
the team asked for at most x GPUs), with the current nominal quota, the proposed one and the
proposed ceiling (nominal + borrow limit) as vertical lines. Where a quota line crosses the curve
is the share of time that quota covered the demand. Rendered in memory (Agg) to PNG bytes; writing
the file is the caller's job.
"""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from gpucommons.planning.advisor import Advice, TeamAdvice
from gpucommons.planning.usage_history import Demand

CURRENT, PROPOSED = "#555555", "#d62728"


def _curve(demand: Demand, active_only: bool) -> tuple[list[float], list[float]]:
    steps = [(g, s) for g, s in demand.seconds_at if g > 0 or not active_only]
    total = sum(s for _, s in steps) or 1.0
    xs, ys, running = [0.0], [0.0], 0.0
    for gpus, seconds in steps:
        xs.append(float(gpus))
        ys.append(running / total)
        running += seconds
        xs.append(float(gpus))
        ys.append(running / total)
    return xs, ys


def _panel(ax: Any, advice: Advice, team: TeamAdvice) -> None:
    demand = advice.demand_of(team.team, team.pool)
    active_only = not advice.rule.include_idle
    right = max(team.current.nominal, team.proposed.nominal, 1)
    if demand is not None:
        xs, ys = _curve(demand, active_only)
        ax.step(xs, ys, where="post", color="#1f77b4", linewidth=1.4, label="demand", zorder=3)
        right = max(right, demand.peak)
    ax.axvline(team.current.nominal, color=CURRENT, linestyle="--", linewidth=1.1, label="current nominal")
    ax.axvline(team.proposed.nominal, color=PROPOSED, linewidth=1.4, label="proposed nominal")
    ceiling = team.proposed.ceiling
    if team.status == "sized" and ceiling is not None and ceiling != team.proposed.nominal:
        ax.axvline(ceiling, color=PROPOSED, linestyle=":", linewidth=1.2, label="proposed nominal + borrow")
        right = max(right, ceiling)
    title = f"{team.team}" + (f" · {team.pool}" if len(advice.pools) > 1 else "")
    if team.covered_before is not None and team.covered_after is not None:
        title += f"\ncovered {team.covered_before:.0%} → {team.covered_after:.0%} of the time"
    elif team.status == "kept":
        title += "\nquota kept"
    ax.set_title(title, fontsize=8)
    ax.set_xlim(0, right * 1.05 + 1)
    ax.set_ylim(0, 1.02)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def render_png(advice: Advice, title: str) -> bytes:
    teams = list(advice.teams)
    cols = 4 if len(teams) > 6 else max(min(len(teams), 3), 1)
    rows = max(math.ceil(len(teams) / cols), 1)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.3 * cols, 2.5 * rows + 0.8), squeeze=False, layout="constrained"
    )
    for k, team in enumerate(teams):
        ax = axes[k // cols][k % cols]
        _panel(ax, advice, team)
        if k % cols == 0:
            ax.set_ylabel("share of time ≤ x", fontsize=8)
        if k // cols == rows - 1 or k + cols >= len(teams):
            ax.set_xlabel("GPUs demanded", fontsize=8)
    for k in range(len(teams), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    basis = "over all of the time" if advice.rule.include_idle else "while the team asked for GPUs"
    fig.suptitle(f"{title}\ndemand {basis} (cumulative) against quota", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for row in axes:  # the first panel may lack the ceiling line; collect every kind once
        for ax in row:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                if label not in labels:
                    handles.append(handle)
                    labels.append(label)
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()

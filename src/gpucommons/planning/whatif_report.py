"""The what-if HTML report: one self-contained file (inline SVG plots, no scripts, no network).

Plots: each team's GPUs over time against its quota (one panel per team, one line per variant),
and each team's wait-time distribution per variant (box plots on a log scale). Rendering happens in
memory (matplotlib's Agg backend into an SVG string); writing the file is the caller's job.
"""

from __future__ import annotations

import html
import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from gpucommons.planning.whatif import Comparison, summary_rows, team_rows

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
#: Variants often coincide (kueue and commons hold the same GPUs most of the time): line styles
#: keep each visible where colours overlap.
LINESTYLES = ("-", (0, (5, 2)), (0, (1, 1.5)), "-.")
DAY = 86400.0


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    # A fixed hash salt and no date keep the SVG identical from run to run.
    with matplotlib.rc_context({"svg.hashsalt": "gpucommons"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def usage_plot(comparison: Comparison) -> str:
    """Small multiples: per team, GPUs held over time for each variant, and the quota as a dashed line."""
    teams = comparison.team_names()
    rows, cols = _grid(len(teams))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.4 * rows), squeeze=False, sharex=True)
    unit = "GPUs" if comparison.summaries()[0].get("metered_resource", "gpus") == "gpus" else "CPUs"
    for k, team in enumerate(teams):
        ax = axes[k // cols][k % cols]
        quota = 0.0
        for v, result in enumerate(comparison.results):
            tl = result.outcome.timeline
            held = tl.held.get(team, [])
            xs = [(i + 0.5) * tl.bin_s / DAY for i in range(len(held))]
            # The first variant drawn on top: variants often coincide and it is the one asked about.
            zorder = 3 + len(comparison.results) - v
            ax.plot(xs, held, label=comparison.variants[v].label, zorder=zorder, **_style(v))
            quota = max(quota, tl.nominal.get(team, 0.0))
        ax.axhline(quota, color="black", linestyle="--", linewidth=1.0, label="quota")
        ax.set_title(f"{team} (quota {quota:g})", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if k % cols == 0:
            ax.set_ylabel(f"{unit} held", fontsize=8)
        if k // cols == rows - 1 or k + cols >= len(teams):
            ax.set_xlabel("days since first submit", fontsize=8)
            ax.tick_params(labelbottom=True)
    for k in range(len(teams), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    _legend(fig, axes)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return _svg(fig)


def _grid(n: int) -> tuple[int, int]:
    cols = 3 if n > 4 else max(n, 1)
    return math.ceil(n / cols), cols


def _legend(fig: Any, axes: Any) -> None:
    """One legend for the figure, from the fullest panel (a team with no jobs draws no lines)."""
    handles, labels = max(
        (ax.get_legend_handles_labels() for row in axes for ax in row), key=lambda hl: len(hl[1])
    )
    fig.legend(
        handles, labels, loc="upper center", ncol=min(max(len(labels), 1), 6), fontsize=8, frameon=False
    )


def _style(v: int) -> dict[str, Any]:
    return {"color": COLORS[v % len(COLORS)], "linestyle": LINESTYLES[v % len(LINESTYLES)], "linewidth": 1.4}


def wait_plot(comparison: Comparison) -> str:
    """Per team, the share of jobs that waited longer than x (x on a log scale), one line per variant.

    A complementary CDF rather than box plots: most jobs of most teams wait 0 s, and a box plot of
    such data is a flat line; the CCDF shows both the share that waited at all and the long tail.
    """
    teams = comparison.team_names()
    rows, cols = _grid(len(teams))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.4 * rows), squeeze=False, sharex=True)
    grid = [1.0 * 10 ** (k / 8) for k in range(0, 8 * 7 + 1)]  # 1 s .. 10^7 s (~116 days)
    for k, team in enumerate(teams):
        ax = axes[k // cols][k % cols]
        for v, result in enumerate(comparison.results):
            waits = sorted(
                run.first_start_s - run.job.submit_s
                for run in result.outcome.runs
                if run.job.team == team and run.first_start_s is not None
            )
            if not waits:
                continue
            n, i, share = len(waits), 0, []
            for x in grid:
                while i < n and waits[i] <= x:
                    i += 1
                share.append((n - i) / n)
            ax.plot(grid, share, label=comparison.variants[v].label, **_style(v))
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(team, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if k % cols == 0:
            ax.set_ylabel("share waiting > x", fontsize=8)
        if k // cols == rows - 1 or k + cols >= len(teams):
            ax.set_xlabel("wait x (s; 60 = 1 min, 3600 = 1 h, 86400 = 1 d)", fontsize=7)
            ax.tick_params(labelbottom=True)
    for k in range(len(teams), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="upper center", ncol=min(max(len(labels), 1), 6), fontsize=8, frameon=False
    )
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return _svg(fig)


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1280px;
color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border-bottom:1px solid #ddd;padding:.3rem .7rem;text-align:right}
th:first-child,td:first-child{text-align:left}thead th{background:#f4f4f4}
p.note{color:#555;font-size:.85rem;max-width:60rem}svg{max-width:100%;height:auto}
"""


def render_html(comparison: Comparison, title: str, trace_name: str) -> str:
    labels = [v.label for v in comparison.variants]
    jobs = comparison.summaries()[0]["jobs"] if comparison.results else 0
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='note'>Trace <code>{html.escape(trace_name)}</code>, {jobs:,} jobs, replayed by the GPU "
        "Commons simulator under each variant with the same engine code the live scheduler runs.</p>",
        "<h2>Cluster</h2>",
        _table(["metric", *labels], summary_rows(comparison)),
        "<p class='note'>Utilization counts GPU-seconds held (lost work included) between the first and last "
        "submission. The greedy FIFO reference is a work-conserving FIFO scheduler with backfill and no "
        "quotas: greedy, not a bound (a policy can do better). Idle while "
        "waiting is capacity left free while jobs that would have fitted in it waited.</p>",
        "<h2>Teams: wait p50 / p95 · finish-time fairness</h2>",
        _table(["team", *labels], team_rows(comparison)),
        "<p class='note'>Fairness is the team's total job completion time under the variant ÷ under "
        "<code>static</code> (each team confined to its quota): below 1 the team gains from sharing.</p>",
        "<h2>GPUs held over time against quota</h2>",
        usage_plot(comparison),
        "<h2>Wait-time distribution per team</h2>",
        "<p class='note'>Share of the team's jobs that waited longer than x before they first started.</p>",
        wait_plot(comparison),
        "</body></html>",
    ]
    return "\n".join(parts)

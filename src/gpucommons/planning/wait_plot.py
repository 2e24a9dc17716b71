"""`commons advise --plot` with a job trace: each team's p95 wait today and with the proposal.

Two panels, the fit days and the validation days; per team a grey bar (today's quotas) and a red
bar (the proposal, or today's again when the advice is to keep them), on a symmetric-log scale so
minutes and days both show. Rendered in memory (Agg) to PNG bytes; writing the file is the caller's.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from gpucommons.planning.replay_advice import ReplayAdvice

TODAY_COLOUR, PROPOSED_COLOUR = "#888888", "#d62728"


def render_wait_png(advice: ReplayAdvice, title: str) -> bytes:
    teams = list(advice.teams)
    labels = [f"{t.team} ({t.today}→{t.proposed})" for t in teams]
    fig, axes = plt.subplots(
        1, 2, figsize=(11, 0.42 * len(teams) + 1.8), sharey=True, squeeze=False, layout="constrained"
    )
    proposal = "proposal" if advice.chosen is not None else "proposal (keep today's)"
    panels = (
        (f"fit days ({advice.fit.days:.1f} d)", [t.fit_p95 for t in teams]),
        (
            f"validation days ({advice.validation.days:.1f} d, not seen by the search)",
            [t.validation_p95 for t in teams],
        ),
    )
    for ax, (name, waits) in zip(axes[0], panels, strict=True):
        ys = range(len(teams))
        before = [w[0] / 3600 for w in waits]
        after = [w[1] / 3600 for w in waits]
        ax.barh([y + 0.2 for y in ys], before, height=0.38, color=TODAY_COLOUR, label="today")
        ax.barh([y - 0.2 for y in ys], after, height=0.38, color=PROPOSED_COLOUR, label=proposal)
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("p95 wait (hours)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
        ax.invert_yaxis()
    axes[0][0].set_yticks(list(range(len(teams))), labels)
    fig.suptitle(f"{title}\nmean p95 wait: {advice.why}", fontsize=9)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()

"""A picture of the Grafana board's panels drawn from a real Prometheus (docs/img/grafana-board.png).

Grafana is not installable on the machines the suite runs on, so the monitoring test draws the board
itself: each panel at its grid position, each target queried from Prometheus over the last minutes
(`query_range`), time series as lines, stats as their last value, bar gauges as bars. It shows what
the board's expressions return on a live `commons up`; Grafana's own rendering differs in style.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

VARIABLES = {"$__rate_interval": "15s", "$team": ".*"}


def _query_range(url: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    answer = httpx.get(
        f"{url}/api/v1/query_range",
        params={"query": expr, "start": start, "end": end, "step": step},
        timeout=10,
    ).json()
    result = answer.get("data", {}).get("result", []) if answer.get("status") == "success" else []
    return result if isinstance(result, list) else []


def _legend(template: str, labels: dict[str, str]) -> str:
    out = template
    for key, value in labels.items():
        out = out.replace("{{" + key + "}}", value)
    return out


def render_board(board_path: Path, prometheus_url: str, out: Path, start: float, end: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    board = json.loads(board_path.read_text())
    panels = board["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit = 0.42  # inches per grid row
    fig = plt.figure(figsize=(16, rows * unit))
    fig.suptitle(
        f"{board['title']} (panels drawn from Prometheus by the test suite)", x=0.01, ha="left", fontsize=11
    )
    step = max(1.0, (end - start) / 120)
    for p in panels:
        g = p["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        bottom, height = 1 - (g["y"] + g["h"]) / rows, g["h"] / rows
        if p["type"] == "row":
            fig.text(left + 0.005, bottom + height / 2, p["title"], fontsize=12, weight="bold", va="center")
            continue
        ax = fig.add_axes((left + 0.035, bottom + 0.03, width - 0.045, height - 0.06))
        ax.set_title(p["title"], fontsize=8, loc="left")
        ax.tick_params(labelsize=6)
        series = [
            (
                _legend(t.get("legendFormat", ""), r["metric"]),
                [(float(t_), float(v)) for t_, v in r["values"]],
            )
            for t in p["targets"]
            for r in _query_range(prometheus_url, t["expr"], start, end, step)
        ]
        if p["type"] == "stat":
            ax.axis("off")
            text = "\n".join(f"{name}: {pts[-1][1]:.4g}" for name, pts in series if pts) or "no data"
            ax.text(0.5, 0.45, text, ha="center", va="center", fontsize=14 if len(series) <= 1 else 8)
        elif p["type"] == "bargauge":
            names = [name for name, pts in series if pts]
            values = [pts[-1][1] for _, pts in series if pts]
            ax.barh(
                names,
                values,
                color=["#c62828" if v >= 1 else "#ef8f00" if v >= 0.8 else "#2e7d32" for v in values],
            )
            ax.set_xlim(0, max([1.0, *values]))
        else:
            for name, pts in series:
                ax.plot([t_ - end for t_, _ in pts], [v for _, v in pts], label=name, linewidth=1.2)
            ax.set_xlabel("seconds before now", fontsize=6)
            if series:
                ax.legend(fontsize=5, loc="upper left")
            else:
                ax.text(0.5, 0.5, "no data yet", ha="center", va="center", fontsize=8, transform=ax.transAxes)
    fig.savefig(out, dpi=90)
    plt.close(fig)

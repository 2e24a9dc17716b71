"""Contract 5 of docs/design.md (JSON) and the per-team CSV of a chargeback."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Collection
from typing import Any

from gpucommons.chargeback.exports.amounts import hours_float, money_text, utc_seconds
from gpucommons.chargeback.result import ChargebackResult

CSV_COLUMNS = (
    "period_start",
    "period_end",
    "currency",
    "account",
    "account_type",
    "gpu_hours",
    "borrowed_gpu_hours",
    "lost_gpu_hours",
    "direct_cents",
    "idle_cents",
    "admin_cents",
    "total_cents",
    "total",
)


def to_dict(result: ChargebackResult, teams: Collection[str] | None = None) -> dict[str, Any]:
    """Contract 5 of docs/design.md, exactly: these keys and no others, teams sorted by name.

    `teams`: only these teams' entries (for a caller who may see only some); the cluster's cost and
    the platform's share stay whole, so the invariant then holds only over the full result.
    """
    return {
        "period": {"start": utc_seconds(result.period.start), "end": utc_seconds(result.period.end)},
        "currency": result.currency,
        "cluster_cost_cents": result.cluster_cost_cents,
        "platform_cents": result.platform_cents,
        "teams": {
            t.team: {
                "gpu_hours": hours_float(t.gpu_hours),
                "borrowed_gpu_hours": hours_float(t.borrowed_gpu_hours),
                "direct_cents": t.direct_cents,
                "idle_cents": t.idle_cents,
                "admin_cents": t.admin_cents,
                "total_cents": t.total_cents,
            }
            for t in result.teams
            if teams is None or t.team in teams
        },
    }


def to_json(result: ChargebackResult, teams: Collection[str] | None = None) -> str:
    return json.dumps(to_dict(result, teams), indent=2) + "\n"


def to_csv(result: ChargebackResult, teams: Collection[str] | None = None) -> str:
    """One row per team plus one `platform` row (what no team pays), so `total_cents` sums to the
    cluster's cost; `total` is the same amount as a decimal in `currency`.

    `teams`: only these teams' rows, and no platform row.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    start, end = utc_seconds(result.period.start), utc_seconds(result.period.end)
    for t in result.teams:
        if teams is not None and t.team not in teams:
            continue
        writer.writerow(
            [
                start,
                end,
                result.currency,
                t.team,
                "team",
                t.gpu_hours,
                t.borrowed_gpu_hours,
                t.lost_gpu_hours,
                t.direct_cents,
                t.idle_cents,
                t.admin_cents,
                t.total_cents,
                money_text(t.total_cents),
            ]
        )
    if teams is not None:
        return out.getvalue()
    idle_kept = sum(p.idle_to_platform_cents for p in result.pools)
    writer.writerow(
        [
            start,
            end,
            result.currency,
            "platform",
            "platform",
            "",
            "",
            "",
            0,
            idle_kept,
            result.admin_to_platform_cents,
            result.platform_cents,
            money_text(result.platform_cents),
        ]
    )
    return out.getvalue()

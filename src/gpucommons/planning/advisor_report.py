"""The advice as plain data (`commons advise --json`): every figure the table and the reasons use.

Shape (stable; GPUs are integers, shares are fractions of time in [0, 1]):

    {"rule": {...}, "history": {"kind": "samples", "start_s": 0, "end_s": 2678400, "step_s": 300},
     "pools": [{"pool", "capacity_gpus", "kept_gpus", "targets_gpus", "nominal_before", "nominal_after"}],
     "teams": [{"team", "pool", "status": "sized"|"kept", "reason",
                "current":  {"nominal", "borrow_limit", "lend_limit"},      # null = no limit
                "proposed": {"nominal", "borrow_limit", "lend_limit"},
                "demand": {"target", "p50", "p95", "peak", "reserve", "mean", "active_fraction",
                           "censored_fraction", "gpu_hours", "largest_job"} | null,
                "borrow_at_peak",                  # GPUs above nominal at the team's peak
                "covered_before", "covered_after"}],
     "ignored": [{"team", "pool", "gpu_hours", "why"}]}
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from gpucommons.planning.advisor import Advice, QuotaLimits
from gpucommons.sim.stats import tidy


def _limits(limits: QuotaLimits) -> dict[str, int | None]:
    return {"nominal": limits.nominal, "borrow_limit": limits.borrow_limit, "lend_limit": limits.lend_limit}


def advice_to_data(advice: Advice) -> dict[str, Any]:
    history = advice.history
    teams = []
    for t in advice.teams:
        demand = None
        if t.demand is not None:
            demand = {k: tidy(v) if isinstance(v, float) else v for k, v in asdict(t.demand).items()}
        teams.append(
            {
                "team": t.team,
                "pool": t.pool,
                "status": t.status,
                "reason": t.reason,
                "current": _limits(t.current),
                "proposed": _limits(t.proposed),
                "demand": demand,
                "borrow_at_peak": t.borrow_at_peak,
                "covered_before": None if t.covered_before is None else tidy(t.covered_before),
                "covered_after": None if t.covered_after is None else tidy(t.covered_after),
            }
        )
    return {
        "rule": {**asdict(advice.rule), "text": advice.rule.describe()},
        "history": {
            "kind": history.kind,
            "start_s": tidy(history.start_s),
            "end_s": tidy(history.end_s),
            "step_s": tidy(history.step_s),
            "teams": len({d.team for d in history.demands}),
        },
        "pools": [
            {
                "pool": p.pool,
                "capacity_gpus": p.capacity,
                "kept_gpus": p.kept,
                "targets_gpus": p.targets,
                "nominal_before": p.nominal_before,
                "nominal_after": p.nominal_after,
            }
            for p in advice.pools
        ],
        "teams": teams,
        "ignored": [
            {"team": i.team, "pool": i.pool, "gpu_hours": tidy(i.gpu_hours), "why": i.why}
            for i in advice.ignored
        ],
    }

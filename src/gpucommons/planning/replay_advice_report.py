"""Replay advice as plain data (`commons advise --json` with a job trace): every figure the table shows.

Shape (stable; seconds are floats rounded to 0.1 s, GPUs integers):

    {"method": "replay",
     "objective": {"name", "text", "max_regression", "exempt_below_s", "engine", "half_life_s",
                   "fit_window_s", "validate", "folds", "floor_share", "max_change", "whole_nodes",
                   "seed"},
     "windows": {"fit": {"start_s", "end_s", "jobs"}, "validation": {...}, "folds": [{...}, ...]},
     "search": {"replays", "stopped", "tried": [{"label", "nominal": {team: gpus}, "fit_mean_p95_s",
                "feasible"}]},
     "decision": {"proposal": true|false, "why", "chosen": label|null},
     "candidates": [{"label", "baseline": bool, "nominal": {...}, "fit": SCORE, "validation": SCORE,
                     "fit_feasible", "validation_feasible",
                     "folds": [{"mean_p95_s", "violation_s", "feasible"}, ...]}],
         SCORE = {"mean_p95_s", "violation_s", "never_started", "teams": {team: {"wait_p95_s", ...}}}
         (with `--folds` above 1, "validation" is the folds' jobs pooled, and "validation_feasible"
         means every fold keeps the rules)
     "teams": [{"team", "pool", "current": {"nominal"}, "proposed": {"nominal"},
                "fit_p95_s": [today, proposed], "validation_p95_s": [today, proposed],
                "violation_s": [today, proposed], "reason"}],
     "bootstrap": {"resamples", "blocks", "better_share", "change_low", "change_median",
                   "change_high", "text"} | null,
     "kept": [{"team", "pool", "why"}]}
"""

from __future__ import annotations

from typing import Any

from gpucommons.planning.quota_space import QuotaSpace, QuotaVector
from gpucommons.planning.replay_advice import Judged, ReplayAdvice
from gpucommons.planning.replay_score import ReplayScore, Window
from gpucommons.sim.stats import tidy


def _nominal(space: QuotaSpace, vector: QuotaVector) -> dict[str, int]:
    pools = len(space.pools) > 1
    return {(f"{e.team}/{e.pool}" if pools else e.team): vector[i] for i, e in enumerate(space.entries)}


def _score(score: ReplayScore) -> dict[str, Any]:
    return {
        "mean_p95_s": tidy(score.mean_p95_s, 1),
        "violation_s": tidy(score.violation_s, 1),
        "never_started": score.never_started,
        "preemptions": score.preemptions,
        "idle_while_waiting_gpu_hours": tidy(score.idle_while_waiting_gpu_hours, 1),
        "teams": {
            name: {
                "jobs": t.jobs,
                "wait_p50_s": tidy(t.wait_p50_s, 1),
                "wait_p95_s": tidy(t.wait_p95_s, 1),
                "violation_s": tidy(t.violation_s, 1),
                "never_started": t.never_started,
            }
            for name, t in sorted(score.teams.items())
            if t.jobs
        },
    }


def _window(window: Window) -> dict[str, Any]:
    return {"start_s": tidy(window.start_s), "end_s": tidy(window.end_s), "jobs": len(window.jobs)}


def _candidate(space: QuotaSpace, j: Judged, baselines: set[str]) -> dict[str, Any]:
    return {
        "label": j.label,
        "baseline": j.label in baselines,
        "nominal": _nominal(space, j.vector),
        "fit": _score(j.fit),
        "validation": _score(j.validation),
        "fit_feasible": j.fit_verdict.feasible,
        "validation_feasible": all(v.feasible for v in j.fold_verdicts),
        "folds": [
            {
                "mean_p95_s": tidy(f.mean_p95_s, 1),
                "violation_s": tidy(f.violation_s, 1),
                "feasible": v.feasible,
            }
            for f, v in zip(j.folds, j.fold_verdicts, strict=True)
        ],
    }


def replay_advice_to_data(advice: ReplayAdvice) -> dict[str, Any]:
    s = advice.settings
    space = advice.space
    baselines = set(advice.baselines)
    candidates = {j.vector: j for j in (*advice.baselines.values(), *advice.finalists)}
    return {
        "method": "replay",
        "objective": {
            "name": s.objective.value,
            "text": s.objective.describe(),
            "max_regression": s.max_regression,
            "exempt_below_s": s.exempt_below_s,
            "engine": s.engine,
            "half_life_s": s.half_life_s,
            "fit_window_s": s.fit_window_s,
            "validate": s.validate.describe(),
            "folds": s.folds,
            "floor_share": s.floor_share,
            "max_change": s.max_change.describe(),
            "whole_nodes": s.whole_nodes,
            "seed": s.seed,
        },
        "windows": {
            "fit": _window(advice.fit),
            "validation": _window(advice.validation),
            "folds": [_window(f) for f in advice.folds],
        },
        "search": {
            "replays": advice.replays,
            "stopped": advice.trace.stopped,
            "tried": [
                {
                    "label": t.label,
                    "nominal": _nominal(space, t.vector),
                    "fit_mean_p95_s": tidy(t.fit.mean_p95_s, 1),
                    "feasible": t.verdict.feasible,
                }
                for t in advice.trace.tried
            ],
        },
        "decision": {
            "proposal": advice.chosen is not None,
            "why": advice.why,
            "chosen": None if advice.chosen is None else advice.chosen.label,
        },
        "candidates": [_candidate(space, j, baselines) for j in candidates.values()],
        "teams": [
            {
                "team": t.team,
                "pool": t.pool,
                "current": {"nominal": t.today},
                "proposed": {"nominal": t.proposed},
                "fit_p95_s": [tidy(x, 1) for x in t.fit_p95],
                "validation_p95_s": [tidy(x, 1) for x in t.validation_p95],
                "violation_s": [tidy(x, 1) for x in t.violation],
                "reason": t.reason,
            }
            for t in advice.teams
        ],
        "bootstrap": None
        if advice.bootstrap is None
        else {
            "resamples": advice.bootstrap.resamples,
            "blocks": advice.bootstrap.blocks,
            "better_share": tidy(advice.bootstrap.better_share),
            "change_low": tidy(advice.bootstrap.change_low),
            "change_median": tidy(advice.bootstrap.change_median),
            "change_high": tidy(advice.bootstrap.change_high),
            "text": advice.bootstrap.describe(),
        },
        "kept": [{"team": team, "pool": pool, "why": why} for team, pool, why in advice.kept],
    }

"""A known past for a server's store: finished tasks with their events, ledger intervals, a
preemption, directory members. The history tests seed it before `commons up` starts, then check the
dashboard and the API against the numbers computed here from the same definition.

    seeds = history_seeds(now)                 # times relative to now, aligned on 30-minute buckets
    seed_store(database_url, seeds, now)       # writes them (the schema is migrated first)
    expected_held(seeds, "alpha", t0, t1)      # average GPUs alpha held over [t0, t1)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from gpucommons.store.db import Database
from gpucommons.store.history_models import PreemptionRow
from gpucommons.store.identity_models import DirectoryGroup, DirectoryUser, GroupMember
from gpucommons.store.migrate import upgrade
from gpucommons.store.models import TaskEventRow, TaskRow, UsageIntervalRow

BUCKET_S = 1800
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Seed:
    """A finished task: submitted, admitted after `wait_s`, held `gpus` over `[start, end)`."""

    task_id: str
    team: str
    gpus: int
    start: float
    end: float
    wait_s: float
    end_state: str = "succeeded"
    priority: str = "normal"
    #: The task that took its GPUs (a preemption at `end`), if any.
    preempted_by: str | None = None


def history_seeds(now: float) -> list[Seed]:
    """Four tasks in the last 24 hours on a pool of 8 GPUs where alpha and beta have 4 each:

    - h-alpha-big: alpha, 6 GPUs (2 above its quota) for 4 hours, ending 6 hours before the current bucket;
    - h-beta-mid:  beta, 2 GPUs for 6 hours, ending 2 hours before it;
    - h-alpha-old: alpha, 2 GPUs for 1 hour, 20 hours ago, preempted for h-beta-big;
    - h-beta-big:  beta, 4 GPUs for 4 hours, from the moment h-alpha-old was preempted.
    """
    b = (int(now) // BUCKET_S) * BUCKET_S
    return [
        Seed("h-alpha-big", "alpha", 6, b - 10 * HOUR, b - 6 * HOUR, wait_s=600),
        Seed("h-beta-mid", "beta", 2, b - 8 * HOUR, b - 2 * HOUR, wait_s=60),
        Seed(
            "h-alpha-old",
            "alpha",
            2,
            b - 20 * HOUR,
            b - 19 * HOUR,
            wait_s=120,
            end_state="preempted",
            preempted_by="h-beta-big",
        ),
        Seed("h-beta-big", "beta", 4, b - 19 * HOUR, b - 15 * HOUR, wait_s=1800),
    ]


def seed_intervals(seeds: list[Seed]) -> list[tuple[str, int, float, float]]:
    """The ledger the seeds make: (team, gpus, start, end); a preempted task runs again for a minute."""
    out = [(s.team, s.gpus, s.start, s.end) for s in seeds]
    out += [(s.team, s.gpus, s.end + 60, s.end + 120) for s in seeds if s.end_state == "preempted"]
    return out


def expected_held(seeds: list[Seed], team: str, t0: float, t1: float, quota: int = 4) -> tuple[float, float]:
    """(average GPUs held, average GPUs above `quota`) by `team` over `[t0, t1)`."""
    spans = [(g, a, b) for t, g, a, b in seed_intervals(seeds) if t == team]
    points = sorted({t0, t1, *(a for _, a, _ in spans), *(b for _, _, b in spans)})
    held = borrowed = 0.0
    for a, b in itertools.pairwise(points):
        if a < t0 or b > t1:
            continue
        used = sum(g for g, s, e in spans if s <= a and b <= e)
        held += used * (b - a)
        borrowed += max(0, used - quota) * (b - a)
    return held / (t1 - t0), borrowed / (t1 - t0)


def seed_store(
    database_url: str, seeds: list[Seed], now: float, members: dict[str, list[str]] | None = None
) -> None:
    """Write the seeds (and directory `members`: group -> user names) into a migrated store."""
    db = Database(database_url)
    try:
        upgrade(db)
        with db.session() as session:
            for seq, s in enumerate(seeds, start=1):
                submitted = s.start - s.wait_s
                requeued = s.end_state == "preempted"
                session.add(
                    TaskRow(
                        id=s.task_id,
                        seq=seq,
                        name=s.task_id,
                        team=s.team,
                        state="succeeded" if requeued else s.end_state,
                        priority_class=s.priority,
                        priority_value=100,
                        command=["true"],
                        gpus=s.gpus,
                        cpu_milli=0,
                        memory_mib=0,
                        checkpoint_mode="on-signal",
                        submitted_by="seed",
                        submitted_at=submitted,
                        queued_at=submitted,
                        admitted_at=s.start,
                        started_at=s.start,
                        finished_at=s.end,
                        restart_count=1 if requeued else 0,
                        preemptions=1 if requeued else 0,
                        cancel_requested=False,
                        lost_gpu_seconds=0.0,
                        message="",
                    )
                )
            session.flush()
            for s in seeds:
                submitted = s.start - s.wait_s
                steps = [
                    ("submitted", None, "pending", submitted),
                    ("transition", "pending", "admitted", s.start),
                    ("transition", "admitted", "running", s.start),
                ]
                if s.end_state == "preempted":
                    # preempted, requeued, and readmitted at once to finish its work later on
                    steps += [
                        ("transition", "running", "preempting", s.end),
                        ("transition", "preempting", "pending", s.end),
                        ("transition", "pending", "admitted", s.end + 60),
                        ("transition", "admitted", "running", s.end + 60),
                        ("transition", "running", "succeeded", s.end + 120),
                    ]
                else:
                    steps.append(("transition", "running", s.end_state, s.end))
                for kind, src, dst, at in steps:
                    session.add(
                        TaskEventRow(
                            task_id=s.task_id, at=at, kind=kind, from_state=src, to_state=dst, message=""
                        )
                    )
                session.add(
                    UsageIntervalRow(
                        task_id=s.task_id,
                        team=s.team,
                        pool="gpu",
                        gpus=s.gpus,
                        start=s.start,
                        end=s.end,
                        priority=s.priority,
                        borrowed_gpus=max(0, s.gpus - 4),
                        end_reason="preempted" if s.end_state == "preempted" else s.end_state,
                        lost_gpu_seconds=0.0,
                    )
                )
                if s.end_state == "preempted":
                    session.add(
                        UsageIntervalRow(
                            task_id=s.task_id,
                            team=s.team,
                            pool="gpu",
                            gpus=s.gpus,
                            start=s.end + 60,
                            end=s.end + 120,
                            priority=s.priority,
                            borrowed_gpus=0,
                            end_reason="succeeded",
                            lost_gpu_seconds=0.0,
                        )
                    )
                if s.preempted_by is not None:
                    by = next(x for x in seeds if x.task_id == s.preempted_by)
                    session.add(
                        PreemptionRow(
                            at=s.end,
                            victim_task_id=s.task_id,
                            victim_team=s.team,
                            victim_gpus=s.gpus,
                            victim_pool="gpu",
                            preemptor_task_id=by.task_id,
                            preemptor_team=by.team,
                            reason="reclaim",
                            message=f"reclaimed for {by.task_id}",
                        )
                    )
            for group, users in (members or {}).items():
                gid = f"g-{group}"
                session.add(
                    DirectoryGroup(
                        id=gid,
                        display_name=group,
                        display_name_key=group.casefold(),
                        attributes={},
                        created_at=now,
                        updated_at=now,
                    )
                )
                for user in users:
                    uid = f"u-{user}"
                    if session.get(DirectoryUser, uid) is None:
                        session.add(
                            DirectoryUser(
                                id=uid,
                                user_name=user,
                                user_name_key=user.casefold(),
                                display_name=user.title(),
                                active=True,
                                attributes={},
                                created_at=now,
                                updated_at=now,
                            )
                        )
                    session.add(GroupMember(group_id=gid, member_id=uid, added_at=now))
    finally:
        db.dispose()

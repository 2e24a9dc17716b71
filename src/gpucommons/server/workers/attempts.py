"""Rows to the engine's and the executor's types, and the few rules about an attempt's end.

Pure functions: the scheduler (and crash recovery) build engine requests, admissions and executor
handles from stored rows through these and nothing else; a row becomes an engine request through
the mapping the simulator uses too (`engine.requests.task_request`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.orm import Session

from gpucommons.backends.ports import ExitStatus, Handle
from gpucommons.domain.model import Policy
from gpucommons.domain.resources import Resources
from gpucommons.domain.stopping import StopReason
from gpucommons.domain.task import CheckpointMode, TaskState
from gpucommons.engine.requests import task_request as request_for
from gpucommons.engine.types import Admission, NodeSlice, Pending, PendingCode, TaskRequest
from gpucommons.ledger.interval import EndReason
from gpucommons.server.services.checkpoints import last_saved_at
from gpucommons.store.models import AttemptRow, TaskRow


def task_request(row: TaskRow, policy: Policy) -> TaskRequest:
    """The engine's request for a stored task: the row's fields through the one mapping the
    simulator uses too (`engine.requests`)."""
    return request_for(
        row.id,
        row.team,
        Resources(row.gpus, row.cpu_milli, row.memory_mib),
        row.priority_class,
        row.priority_value,
        seq=row.seq,
        queued_at=row.queued_at,
        pool=row.pool_request,
        policy=policy,
        stoppable=row.origin != "cluster",
        checkpointed=row.checkpoint_mode in (CheckpointMode.ON_SIGNAL.value, CheckpointMode.EVERY.value),
    )


def admission_of(row: TaskRow) -> Admission:
    """The engine's admission of a live task, from its current attempt (none: an empty one)."""
    attempt = row.attempt
    if attempt is None:
        return Admission(pool="", placement=(), borrowed=Resources())
    placement = tuple(
        NodeSlice(int(node), tuple(int(i) for i in idx)) for node, idx in (attempt.placement or [])
    )
    return Admission(
        pool=attempt.pool,
        placement=placement,
        borrowed=Resources(attempt.borrowed_gpus, attempt.borrowed_cpu_milli, attempt.borrowed_memory_mib),
    )


def pool_gpu_indices(admission: Admission) -> list[int]:
    """The admission's GPUs, numbered across the pool as `NodeSlice` numbers them."""
    return sorted(i for s in admission.placement for i in s.gpu_indices)


def handle_of(row: TaskRow) -> Handle | None:
    """The executor's handle of the task's current attempt, once it has started (and not ended)."""
    attempt = row.attempt
    if attempt is None or attempt.ended or attempt.pid is None or attempt.start_marker is None:
        return None
    return Handle(
        task_id=row.id,
        pid=attempt.pid,
        start_marker=attempt.start_marker,
        exit_file=Path(attempt.exit_file) if attempt.exit_file else None,
    )


def stop_reason_of(row: TaskRow) -> StopReason | None:
    """Why the current attempt is being stopped; None when it is not (or there is none)."""
    return StopReason.of(row.attempt.stop_reason) if row.attempt is not None else None


def begin_attempt(
    session: Session, row: TaskRow, admission: Admission, gpu_indices: list[int], at: float
) -> AttemptRow:
    """A new attempt of `row`, admitted at `at` where `admission` says: the task's current one."""
    borrowed = admission.borrowed
    attempt = AttemptRow(
        task_id=row.id,
        admitted_at=at,
        pool=admission.pool,
        placement=[[s.node, list(s.gpu_indices)] for s in admission.placement],
        gpu_indices=gpu_indices,
        borrowed_gpus=borrowed.gpus,
        borrowed_cpu_milli=borrowed.cpu_milli,
        borrowed_memory_mib=borrowed.memory_mib,
    )
    session.add(attempt)
    row.attempt = attempt
    row.admitted_at = at
    return attempt


def end_attempt(
    row: TaskRow,
    at: float,
    reason: EndReason,
    *,
    requeue: bool,
    exit_code: int | None = None,
    keep_token: bool = False,
) -> None:
    """The current attempt ended at `at` for `reason`: it stays as history. A task going back to
    the queue has no attempt until its next admission; a finished one keeps its last (where it
    ran). The attempt's credential dies with it, unless it is a cluster Job's (`keep_token`),
    which outlives Kueue's evictions; a cancel request is answered by the end of a finished task."""
    attempt = row.attempt
    if attempt is not None and not attempt.ended:
        attempt.ended_at = at
        attempt.end_reason = reason.value
        attempt.exit_code = exit_code
    if not keep_token:
        row.task_token_hash = None
    if requeue:
        row.attempt = None
        row.cancel_requested = False


def outcome(row: TaskRow, status: ExitStatus) -> tuple[TaskState, EndReason, str]:
    """Where an ended attempt goes: back to the queue (preempted) or to a final state, and why."""
    how = f"exit code {status.code}" if status.code is not None else f"signal {status.signal}"
    stop = stop_reason_of(row)
    if row.cancel_requested:
        return TaskState.CANCELLED, EndReason.CANCELLED, f"cancelled; the process ended with {how}"
    if stop is StopReason.PREEMPTED:
        return TaskState.PENDING, EndReason.PREEMPTED, f"preempted; the process ended with {how}; requeued"
    if stop is StopReason.NODE_LEFT:
        return (
            TaskState.PENDING,
            EndReason.PREEMPTED,
            f"stopped because its node left service; the process ended with {how}; requeued",
        )
    if status.lost is not None and stop is None:
        # The machine lost the work (a node failed): requeue what can resume, fail what cannot.
        if row.checkpoint_mode != CheckpointMode.NONE.value:
            return TaskState.PENDING, EndReason.PREEMPTED, f"{status.lost}; requeued"
        return TaskState.FAILED, EndReason.FAILED, f"{status.lost}; failed (the task declared no checkpoint)"
    if stop is StopReason.MAX_RUNTIME:
        return TaskState.FAILED, EndReason.FAILED, f"stopped at its class's max_runtime ({how})"
    if status.succeeded:
        return TaskState.SUCCEEDED, EndReason.SUCCEEDED, "succeeded (exit code 0)"
    return TaskState.FAILED, EndReason.FAILED, f"failed ({how})"


def lost_gpu_seconds(row: TaskRow, ended_at: float) -> float:
    """Work a preemption threw away: GPU-seconds from the last saved state to the stop signal.

    A task that saves on signal and stopped within its grace period lost nothing; one that was
    SIGKILLed, or that saves only periodically, lost what it did since its last reported checkpoint.
    """
    saved = last_saved_at(row.started_at, row.last_checkpoint_at)
    attempt = row.attempt
    requested = attempt.stop_requested_at if attempt is not None else None
    stop_at = requested if requested is not None else ended_at
    if saved is None or saved >= stop_at:
        return 0.0
    if row.checkpoint_mode == CheckpointMode.ON_SIGNAL.value and (
        attempt is None or attempt.killed_at is None
    ):
        return 0.0
    return (stop_at - saved) * row.gpus


def admitted_order(row: TaskRow) -> tuple[float, int]:
    return (row.admitted_at or row.queued_at, row.seq)


def reported_end(handle: Handle, status: ExitStatus | None = None) -> float | None:
    """When the attempt ended by the backend's own account (its end time, else its exit file's
    time), or None when it does not say."""
    if status is not None and status.ended_at is not None:
        return status.ended_at
    if handle.exit_file is not None:
        with contextlib.suppress(OSError):
            return handle.exit_file.stat().st_mtime
    return None


def ended_by(handle: Handle, status: ExitStatus, now: float, current: float) -> bool:
    """Whether an attempt the backend reports ended had ended by `now`, the instant a cycle decides
    at, `current` being the clock's reading as the cycle asks. Real time goes on while a cycle runs;
    an end between its instant and `current` belongs to the next cycle, or it would be settled
    before it happened and its ledger interval cut short. An end after `current` is another
    machine's clock running ahead of ours (a Slurm controller's, a kubelet's): waiting for it could
    hold the quota for as long as the skew, so it counts as ended now."""
    end = reported_end(handle, status)
    return end is None or end <= now or end > current


def ended_at(handle: Handle, now: float, started_at: float | None, status: ExitStatus | None = None) -> float:
    """When the attempt ended: the time the backend reports, else its exit file's time if there is
    one (both exact even after a server restart), else now."""
    end = reported_end(handle, status)
    at = now if end is None else min(now, end)
    if started_at is not None:
        at = max(at, started_at)
    return at


def with_out_of_service(
    pending: Mapping[str, Pending], out_of_service: Mapping[str, Mapping[int, str]]
) -> dict[str, Pending]:
    """The engine's reasons, where a task waits for a node, completed with the nodes out of service
    (`commons queue`: "... ; out of service: n2 down"), so a person sees why the cluster shrank."""
    notes = "; ".join(why for nodes in out_of_service.values() for _, why in sorted(nodes.items()))
    if not notes:
        return dict(pending)
    return {
        task_id: Pending(p.code, f"{p.message}; out of service: {notes}")
        if p.code is PendingCode.NO_NODE_FITS
        else p
        for task_id, p in pending.items()
    }

"""ORM rows of the control plane: tasks, their events, GPU allocations, usage intervals, policies.

Rows are storage, not the API (see `gpucommons.api.schemas`) and not the domain: services convert.
Times are float seconds since the epoch (UTC), the same clock the engine reasons in, identical on
SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from gpucommons.store.base import Base


class PolicyRow(Base):
    """Every policy ever applied; the one with the highest id is current."""

    __tablename__ = "policies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    applied_at: Mapped[float] = mapped_column(Float)
    applied_by: Mapped[str] = mapped_column(String(200), default="")
    cluster_name: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text)


class TaskRow(Base):
    """A submitted task; each time it holds resources is an `AttemptRow`, the current one `attempt`.

    `admitted_at`, `started_at`, `finished_at` and `exit_code` are the latest attempt's, kept on the
    task because every list shows and sorts by them.

    `state` is changed only by `server.services.lifecycle.switch_task_state`, which checks the
    transition table and writes a `TaskEventRow` in the same transaction.
    """

    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: Global submission sequence: the engine's tie-breaker, unique across the cluster.
    seq: Mapped[int] = mapped_column(Integer, unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    team: Mapped[str] = mapped_column(String(63), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    priority_class: Mapped[str] = mapped_column(String(63))
    priority_value: Mapped[int] = mapped_column(Integer)
    command: Mapped[list[str]] = mapped_column(JSON)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    cpu_milli: Mapped[int] = mapped_column(Integer, default=0)
    memory_mib: Mapped[int] = mapped_column(Integer, default=0)
    pool_request: Mapped[str | None] = mapped_column(String(63), nullable=True)
    checkpoint_mode: Mapped[str] = mapped_column(String(16), default="none")
    checkpoint_interval_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    submitted_by: Mapped[str] = mapped_column(String(200), default="")
    submitted_at: Mapped[float] = mapped_column(Float)
    #: When the task (re)entered its queue: the engine's `queued_at`.
    queued_at: Mapped[float] = mapped_column(Float)
    admitted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    preemptions: Mapped[int] = mapped_column(Integer, default=0)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    last_checkpoint_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    checkpoint_warned_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    lost_gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str] = mapped_column(Text, default="")
    #: The container image (cluster backends); None on the local backend.
    image: Mapped[str | None] = mapped_column(String(512), nullable=True)
    #: The cluster object the task is (`namespace/job`), once created; None on the local backend.
    cluster_ref: Mapped[str | None] = mapped_column(String(320), nullable=True, index=True)
    #: `commons`: submitted through GPU Commons; `cluster`: found running on the cluster (kubectl).
    origin: Mapped[str] = mapped_column(String(16), default="commons", server_default="commons")
    #: sha256 of the token the task's code holds (COMMONS_TOKEN in its environment): it may report
    #: checkpoints. An attempt's on the local and Slurm backends (gone when the attempt ends), the
    #: Job's on a cluster backend (it outlives Kueue's evictions); None when nothing runs.
    task_token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The current attempt (`AttemptRow.id`), or the last one of a finished task (where it ran);
    #: None while the task waits. No foreign key: the attempt's own `task_id` is the one that is
    #: enforced, and a key each way would leave no order to insert a backup's rows in.
    attempt_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    attempt: Mapped[AttemptRow | None] = relationship(
        primaryjoin="foreign(TaskRow.attempt_id) == AttemptRow.id",
        lazy="joined",
        post_update=True,
    )

    __table_args__ = (Index("ix_tasks_team_state", "team", "state"),)


class AttemptRow(Base):
    """One attempt of a task: from its admission (resources reserved) to its end, then kept as history.

    Where it ran, the process or cluster object it was, and its stop (`domain.stopping.StopFields`)
    belong here, not on the task: a task goes back to the queue with no attempt and its next
    admission makes a new row, so nothing of an ended attempt has to be reset by hand.
    """

    __tablename__ = "task_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    admitted_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: How it ended (`ledger.interval.EndReason` value); None while it lasts.
    end_reason: Mapped[str | None] = mapped_column(String(16), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pool: Mapped[str] = mapped_column(String(63))
    borrowed_gpus: Mapped[int] = mapped_column(Integer, default=0)
    borrowed_cpu_milli: Mapped[int] = mapped_column(Integer, default=0)
    borrowed_memory_mib: Mapped[int] = mapped_column(Integer, default=0)
    #: The engine's placement: [[node, [gpu index on that node, ...]], ...].
    placement: Mapped[list[Any]] = mapped_column(JSON, default=list)
    #: GPU indices within the pool (node * gpus_per_node + index on node).
    gpu_indices: Mapped[list[int]] = mapped_column(JSON, default=list)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start_marker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    exit_file: Mapped[str | None] = mapped_column(Text, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Why the attempt is being stopped: a `domain.stopping.StopReason` value, read back through
    #: `StopReason.of` (a value it does not know is UNKNOWN, so rows a newer version wrote never
    #: break this one; a backup copies the string as stored). Then the stop's steps (`StopFields`).
    stop_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    stop_requested_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    stop_deadline: Mapped[float | None] = mapped_column(Float, nullable=True)
    killed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    kills: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_kill_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    gave_up_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The pending task this one is being preempted for (the engine keeps its claim across cycles).
    preempted_by: Mapped[str | None] = mapped_column(String(32), nullable=True)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None


class TaskEventRow(Base):
    """Append-only history of a task: each state transition, checkpoint, signal and warning."""

    __tablename__ = "task_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    at: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    from_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")


class GpuAllocationRow(Base):
    """Which task holds which GPU. The primary key makes a double allocation impossible in the DB."""

    __tablename__ = "gpu_allocations"

    pool: Mapped[str] = mapped_column(String(63), primary_key=True)
    gpu_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    allocated_at: Mapped[float] = mapped_column(Float)


class UsageIntervalRow(Base):
    """The ledger (docs/design.md, contract 4): one row per attempt that held resources; `end` is NULL
    while open."""

    __tablename__ = "usage_intervals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    team: Mapped[str] = mapped_column(String(63), index=True)
    pool: Mapped[str] = mapped_column(String(63))
    gpus: Mapped[int] = mapped_column(Integer)
    start: Mapped[float] = mapped_column(Float, index=True)
    end: Mapped[float | None] = mapped_column(Float, nullable=True)
    priority: Mapped[str] = mapped_column(String(63))
    borrowed_gpus: Mapped[int] = mapped_column(Integer, default=0)
    #: `running` while open, then succeeded|failed|cancelled|preempted.
    end_reason: Mapped[str] = mapped_column(String(16), default="running")
    #: GPU-seconds of work a preemption threw away (since the task's last saved state).
    lost_gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)

    __table_args__ = (UniqueConstraint("task_id", "start", name="uq_usage_intervals_task_start"),)

"""The server's one settings class: environment variables `COMMONS_*`, overridable by `commons up` flags."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from gpucommons.backends.local.accounts import IsolationMode, default_home, isolation_mode
from gpucommons.domain.election import Sharing
from gpucommons.server.auth.throttle import DEFAULT_FAILURE_LIMIT, DEFAULT_WINDOW_S
from gpucommons.server.request_guard import DEFAULT_MAX_BODY_BYTES
from gpucommons.server.runtime import DEFAULT_GEN0_THRESHOLD

#: prometheus_client's multiprocess directory, which `commons up --workers N` sets for every process
#: before anything imports prometheus_client (`server.metrics`). Not a setting: the library reads it.
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="COMMONS_", extra="ignore")

    #: Where the database, task logs, checkpoints, workspaces and the admin token live.
    home: Path = Field(default_factory=default_home)
    #: SQLAlchemy URL; default: SQLite (WAL) at `$COMMONS_HOME/commons.db`.
    database_url: str | None = None
    #: Policy file applied at startup (when it differs from the stored current policy).
    policy: Path | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    #: `local` runs tasks as real processes; `timer` fakes each `sleep N` task with an in-process
    #: timer (for benchmarks of the control plane alone).
    executor: Literal["local", "timer"] = "local"
    #: Where tasks run: `local` (this machine; our engine admits), `slurm` (jobs on a Slurm cluster;
    #: our engine admits and places) or `kubernetes` (Jobs on a cluster where Kueue admits; needs
    #: PostgreSQL).
    backend: Literal["local", "slurm", "kubernetes"] = "local"
    #: Slurm: the cluster's slurm.conf (default: $SLURM_CONF, else Slurm's own default).
    slurm_conf: Path | None = None
    #: Slurm: only this partition's nodes are governed, and jobs are submitted to it.
    slurm_partition: str | None = None
    #: Kubernetes: the kubeconfig and context (default: $KUBECONFIG, ~/.kube/config, or the pod's
    #: service account in a cluster).
    kubeconfig: Path | None = None
    kube_context: str | None = None
    #: Kubernetes: the container image of tasks submitted without `--image`.
    default_image: str = ""
    #: Kubernetes: apply the policy's namespaces and Kueue objects at start and on `policy apply`.
    apply_policy: bool = False
    #: The URL tasks reach the server at (COMMONS_URL); default http://HOST:PORT.
    public_url: str | None = None
    #: Kubernetes: the key the server signs its Jobs' class grants with; every replica needs the
    #: same one (default: one generated into HOME/grant-key).
    grant_key: str | None = None
    #: What the server logs to stderr: debug, info, warning (default) or error.
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    #: The bootstrap admin token (created by `commons up` when absent).
    admin_token: str | None = None
    #: Longest the scheduler sleeps without an event: bounds exit polling and deadline enforcement.
    scheduler_tick_s: float = Field(0.5, gt=0, le=60)
    #: `/healthz` answers 503 when the leader's scheduler has not finished a cycle for this long (at
    #: least 4 ticks): its thread may be alive but stuck (a lock, a hung backend call), and the
    #: Kubernetes liveness probe should restart it. A healthy scheduler cycles every tick.
    scheduler_stall_s: float = Field(120.0, gt=0, le=86_400)
    #: `accounts`: each team's tasks under its own Unix account (needs root); `logical`: all tasks as
    #: the server's user; `auto`: accounts when running as root.
    isolation: Literal["auto", "accounts", "logical"] = "auto"
    #: Off in tests that drive cycles by hand (and then nothing is elected: this process acts alone).
    run_scheduler: bool = True
    #: Several `commons up` on one database? `single`: this process must be the only one — it takes
    #: the database's leadership lock at start or refuses to start (today's behaviour, and the only
    #: one SQLite allows); `shared`: every process serves the API, one leader runs the scheduler and
    #: the other background workers, a follower takes over when the leader dies (PostgreSQL);
    #: `auto`: `single` on SQLite, `shared` on PostgreSQL.
    leadership: Literal["auto", "single", "shared"] = "auto"
    #: API processes `commons up` runs on its one port (`server.api_workers`): this one and N−1
    #: followers that serve the API only. More than one needs shared leadership (PostgreSQL).
    workers: int = Field(1, ge=1, le=64)
    #: The garbage collector's young-generation threshold in `commons up` (server/runtime.py); 0
    #: leaves CPython's defaults alone (and start-up objects unfrozen).
    gc_threshold: int = Field(DEFAULT_GEN0_THRESHOLD, ge=0)
    #: Largest request body accepted, in bytes; a larger one is refused with 413 before it is read.
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024, le=1 << 30)
    #: Failed authentications one client address may make within `auth_failure_window_s` before its
    #: requests are answered 429 (0: no limit).
    auth_failure_limit: int = Field(DEFAULT_FAILURE_LIMIT, ge=0, le=1_000_000)
    auth_failure_window_s: float = Field(DEFAULT_WINDOW_S, gt=0, le=86_400)

    #: `GET /api/v1/events`: a comment line this often (seconds), so proxies keep the stream open;
    #: the stream's credential is checked again at each (a revoked token's stream ends).
    events_heartbeat_s: float = Field(15.0, gt=0, le=3600)
    #: `GET /api/v1/events`: longest a stream stays open (seconds); clients reconnect by themselves,
    #: resuming after the last event they saw.
    events_max_stream_s: float = Field(600.0, gt=0, le=86_400)

    def isolation_mode(self) -> IsolationMode:
        if self.isolation == "auto":
            return isolation_mode()
        return IsolationMode(self.isolation)

    def sharing(self) -> Sharing:
        """`leadership` resolved for this database; SQLite cannot be shared (one writer process)."""
        sqlite = self.resolved_database_url().startswith("sqlite")
        if self.leadership == "shared" and sqlite:
            raise ValueError(
                "COMMONS_LEADERSHIP=shared needs PostgreSQL: a SQLite database serves one server process"
            )
        sharing = (
            Sharing(self.leadership)
            if self.leadership != "auto"
            else (Sharing.SINGLE if sqlite else Sharing.SHARED)
        )
        if self.workers > 1 and sharing is not Sharing.SHARED:
            why = "a SQLite database serves one server process" if sqlite else "COMMONS_LEADERSHIP is single"
            raise ValueError(
                f"--workers {self.workers} (COMMONS_WORKERS) needs PostgreSQL with shared leadership: {why}; "
                "use one worker, or COMMONS_DATABASE_URL=postgresql+psycopg://…"
            )
        return sharing

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home / 'commons.db'}"

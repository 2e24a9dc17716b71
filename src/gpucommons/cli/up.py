"""`commons up`: the embedded platform in one process — API, scheduler, executor, dashboard.

With PostgreSQL several `commons up` may share one database: each serves the API, the one that holds
the leadership lock runs the scheduler (`server.workers.election`); the first lines say which role
this one has. A second `commons up` on a SQLite database refuses to start, saying why.

The one CLI module that imports the server (import-linter allows exactly this one).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpucommons.cli._client import fail
from gpucommons.cli.main import app
from gpucommons.policy import PolicyError

if TYPE_CHECKING:
    import uvicorn

    from gpucommons.server.context import ServerContext
    from gpucommons.server.settings import Settings

DEFAULT_POLICY = Path("examples/commons.yaml")


def check_can_listen(host: str, port: int) -> None:
    """Fail before starting anything when the address is taken (uvicorn would say so only later)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (pass --port)") from None


def admin_token(ctx: ServerContext) -> str:
    """The bootstrap admin token in HOME/admin-token (mode 0600): reused while valid, else a new one."""
    from gpucommons.server.auth import create_bootstrap_admin_token
    from gpucommons.server.auth.credentials import resolve_token

    path = ctx.settings.home / "admin-token"
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        with ctx.db.session() as session:
            if token and resolve_token(session, token, ctx.policies.policy, time.time()) is not None:
                return token
    token = create_bootstrap_admin_token(ctx.db)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def start_election(ctx: ServerContext) -> str:
    """Take the leadership now (the lifespan would do it a moment later) and say the role."""
    from gpucommons.domain.election import Role
    from gpucommons.server.workers.election import LeadershipRefused

    election = ctx.election
    if election is None:
        return "role: leader (the only server process)"
    try:
        role = election.start()
    except LeadershipRefused as exc:
        ctx.db.dispose()
        raise fail(str(exc)) from None
    lock = election.leadership.describe()
    if role is Role.LEADER:
        return f"role: leader (runs the scheduler; holds the {lock})"
    holder = election.leadership.holder()
    return (
        f"role: follower (the leader is {holder or 'another process'}; this process serves the API and "
        f"takes over within seconds when the leader goes; {lock})"
    )


def serve_with_workers(server: uvicorn.Server, settings: Settings) -> None:
    """Serve on one socket with `settings.workers - 1` follower processes beside this one."""
    from gpucommons.server.api_workers import ApiWorkers, listening_socket

    try:
        sock = listening_socket(settings.host, settings.port)
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        raise fail(f"cannot listen on {where}: {exc.strerror or exc} (pass --port)") from None
    # The workers serve the stored policy: this process has just applied the file, if it differed.
    workers = ApiWorkers(settings.model_copy(update={"policy": None}), sock, settings.workers - 1)
    workers.start()
    pids = workers.pids()
    named = ("pid " if len(pids) == 1 else "pids ") + ", ".join(map(str, pids))
    typer.echo(
        f"api workers: {settings.workers} processes on this port (this one and {named}, which serve the API "
        "as followers)"
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        workers.stop()
        sock.close()


@app.command()
def up(
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy", help="Policy file (default: the stored policy, else examples/commons.yaml)."
        ),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help="Data directory (default: $COMMONS_HOME; /var/lib/commons as root, else ~/.commons).",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to listen on.", show_default="127.0.0.1, or $COMMONS_HOST"),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=1, max=65535, help="Port to listen on.", show_default="8080, or $COMMONS_PORT"
        ),
    ] = None,
    executor: Annotated[
        str | None, typer.Option("--executor", help="local (real processes) or timer (benchmarks only).")
    ] = None,
    tick: Annotated[
        float | None, typer.Option("--tick", min=0.01, max=60, help="Longest pause of the scheduler (s).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            help="Where tasks run: local (this machine), slurm (jobs on a Slurm cluster) or kubernetes "
            "(Jobs that Kueue admits).",
            show_default="local, or $COMMONS_BACKEND",
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            help="Kubernetes: the kubeconfig file.",
            show_default="$KUBECONFIG, ~/.kube/config, or the pod's service account",
        ),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="Kubernetes: the kubeconfig context (default: current).")
    ] = None,
    image: Annotated[
        str | None,
        typer.Option("--image", help="Kubernetes: the container image of tasks submitted without one."),
    ] = None,
    apply_policy: Annotated[
        bool,
        typer.Option(
            "--apply-policy",
            help="Kubernetes: apply the policy's namespaces and Kueue objects at start and on policy apply.",
        ),
    ] = False,
    slurm_conf: Annotated[
        Path | None,
        typer.Option(
            "--slurm-conf",
            help="Slurm: the cluster's slurm.conf.",
            show_default="$SLURM_CONF, else Slurm's default",
        ),
    ] = None,
    partition: Annotated[
        str | None,
        typer.Option("--partition", help="Slurm: govern only this partition's nodes and submit to it."),
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option("--public-url", help="The URL tasks reach this server at (default: http://HOST:PORT)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="API processes on this port (PostgreSQL): this one and N-1 followers beside it that "
            "serve the API.",
            show_default="1, or $COMMONS_WORKERS",
        ),
    ] = None,
) -> None:
    """Start the server, the scheduler and the executor; print the URL and the admin token."""
    # Imported here so that every other command starts without loading the server.
    from gpucommons.backends.local.accounts import default_home
    from gpucommons.server.settings import Settings

    try:
        env = Settings()
    except ValueError as exc:
        raise fail(f"a COMMONS_* environment variable is invalid: {exc}") from None
    executor = executor or env.executor
    if executor not in ("local", "timer"):
        raise fail(f"--executor must be local or timer, not {executor!r}")
    backend = backend or env.backend
    if backend not in ("local", "slurm", "kubernetes"):
        raise fail(f"--backend must be local, slurm or kubernetes, not {backend!r}")
    slurm_conf = slurm_conf or env.slurm_conf
    if backend == "slurm" and slurm_conf is not None and not slurm_conf.is_file():
        raise fail(f"--slurm-conf {slurm_conf} is not a file")
    host = host or env.host
    port = port or env.port
    tick = tick or env.scheduler_tick_s
    home = (home or env.home or default_home()).expanduser().resolve()
    if policy is None and env.policy is not None:
        policy = env.policy
    if policy is None and not (home / "commons.db").exists() and not env.database_url:
        policy = DEFAULT_POLICY
    if policy is not None and not policy.exists():
        raise fail(f"policy file {policy} not found (pass --policy FILE)")
    check_can_listen(host, port)
    settings = env.model_copy(
        update={
            "home": home,
            "policy": policy.resolve() if policy else None,
            "host": host,
            "port": port,
            "executor": executor,
            "scheduler_tick_s": tick,
            "backend": backend,
            "kubeconfig": kubeconfig or env.kubeconfig,
            "kube_context": context or env.kube_context,
            "default_image": image or env.default_image,
            "apply_policy": apply_policy or env.apply_policy,
            "public_url": public_url or env.public_url,
            "slurm_conf": slurm_conf.resolve() if slurm_conf else None,
            "slurm_partition": partition or env.slurm_partition,
            "workers": workers or env.workers,
        }
    )
    from gpucommons.server.executors import BackendSetupError
    from gpucommons.server.runtime import log_to_stderr

    log_to_stderr(settings.log_level)

    try:
        settings.sharing()
    except ValueError as exc:
        raise fail(str(exc)) from None
    if settings.workers > 1:
        from gpucommons.server.api_workers import share_metrics

        share_metrics(home)
    from gpucommons.server.app import build_context, create_app

    try:
        ctx = build_context(settings)
    except PolicyError as error:
        for issue in error.issues:
            typer.echo(issue.format(error.source), err=True)
        raise fail(f"{error.source}: cannot start with this policy") from None
    except BackendSetupError as exc:
        raise fail(f"cannot start the {backend} backend: {exc}") from None
    role = start_election(ctx)
    token = admin_token(ctx)
    url = f"http://{host}:{port}"
    typer.echo(
        f"GPU Commons {ctx.policies.policy.cluster_name} on {url} (home {home}, executor {ctx.executor_name})"
    )
    typer.echo(role)
    typer.echo(f"admin token (also in {home / 'admin-token'}):")
    typer.echo(token)
    typer.echo(f"  export COMMONS_URL={url} COMMONS_TOKEN=$(cat {home / 'admin-token'})")
    # `CommonsServer` ends the event streams (`GET /api/v1/events`) when it stops: uvicorn would
    # otherwise wait for them before shutting down.
    from gpucommons.server.serving import commons_server

    server = commons_server(create_app(context=ctx), ctx, settings)
    if settings.workers == 1:
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
    else:
        serve_with_workers(server, settings)
    if not server.started:
        raise typer.Exit(3)  # what uvicorn.run exits with when the server could not start

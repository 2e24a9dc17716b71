"""The app factory: one FastAPI app with its store, policy, executor and scheduler.

`create_app(settings)` migrates the database, loads the policy, and wires everything. The app's
lifespan starts the election (`workers.election`): the process that holds the database's leadership
lock runs the scheduler and the other leader duties; the others serve the API and take over when the
leader goes. With several processes on one database (`Settings.leadership`), every process also
watches for policy versions applied through the others.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gpucommons import __version__
from gpucommons.backends.clock import SystemClock
from gpucommons.backends.local.accounts import IsolationMode
from gpucommons.backends.ports import Clock, Executor
from gpucommons.domain.election import Sharing
from gpucommons.server import views, web
from gpucommons.server.auth_wiring import install_auth
from gpucommons.server.cluster_metrics import ClusterCollector
from gpucommons.server.context import ServerContext
from gpucommons.server.errors import install_error_handlers
from gpucommons.server.executors import make_cluster_backend, make_executor
from gpucommons.server.metrics import Metrics
from gpucommons.server.observability import install_observability
from gpucommons.server.openapi import install_openapi
from gpucommons.server.policy_holder import PolicyHolder
from gpucommons.server.private_dirs import close_home, make_database_private, make_private_dirs
from gpucommons.server.request_guard import RequestGuard
from gpucommons.server.routers import cluster, events, health, invoices, tasks
from gpucommons.server.routers.queue_answers import QueueAnswers
from gpucommons.server.services import policies
from gpucommons.server.settings import Settings
from gpucommons.server.workers.cluster import ClusterWorker
from gpucommons.server.workers.election import ElectionWorker
from gpucommons.server.workers.launching import LaunchBuilder, TaskPaths
from gpucommons.server.workers.policy_watch import PolicyWatch
from gpucommons.server.workers.port import TaskWorker
from gpucommons.server.workers.scheduler import Scheduler
from gpucommons.store.db import Database
from gpucommons.store.leadership import leadership_for
from gpucommons.store.migrate import upgrade
from gpucommons.store.sequence import seq_allocator


def build_context(
    settings: Settings, executor: Executor | None = None, clock: Clock | None = None
) -> ServerContext:
    """Everything a server holds; `executor` and `clock` may be given (tests drive time by hand)."""
    settings.home.mkdir(parents=True, exist_ok=True)
    # Team accounts (root, local backend) cross the home to their workspaces; nobody else may enter it.
    close_home(settings.home, team_accounts=settings.isolation_mode() is IsolationMode.ACCOUNTS)
    make_private_dirs(settings.home)
    make_database_private(settings.resolved_database_url(), settings.home)
    clock = clock or SystemClock()
    sharing = settings.sharing()
    db = Database(settings.resolved_database_url())
    upgrade(db)
    policy, version = policies.load_at_startup(db, settings.policy, clock.now())
    holder = PolicyHolder(policy, version)
    metrics = Metrics()
    seq = seq_allocator(db)
    server_url = settings.public_url or f"http://{settings.host}:{settings.port}"
    worker: TaskWorker
    if executor is None and settings.backend == "kubernetes":
        cluster = make_cluster_backend(settings, policy, db)
        clustered = ClusterWorker(
            db,
            lambda: (holder.policy, holder.version),
            cluster,
            clock,
            TaskPaths(settings.home),
            next_seq=seq.next,
            server_url=server_url,
            default_image=settings.default_image,
            hooks=metrics,
            tick_s=settings.scheduler_tick_s,
            apply_policy=settings.apply_policy,
            standby=settings.run_scheduler,
        )
        # The governance check reads the spends the budget watcher hands the worker's state.
        cluster.use_spend(lambda: {t: clustered.state.team_spend(t) for t in holder.policy.team_names})
        worker, traits, mirror = clustered, cluster.traits, clustered.mirror
    else:
        executor = executor or make_executor(settings, clock)
        scheduler = Scheduler(
            db,
            lambda: (holder.policy, holder.version),
            executor,
            clock,
            LaunchBuilder(TaskPaths(settings.home), executor, server_url=server_url),
            tick_s=settings.scheduler_tick_s,
            hooks=metrics,
            shared_store=sharing is Sharing.SHARED,
            standby=settings.run_scheduler,
            next_seq=seq.next,
        )
        executor.on_exit(scheduler.wake)
        worker, traits, mirror = scheduler, executor.traits, scheduler.mirror
    metrics.watch_state(lambda: views.gauges(worker))
    metrics.registry.register(ClusterCollector(db, worker, clock))
    election = None
    if settings.run_scheduler:
        election = ElectionWorker(
            leadership_for(db, fallback_dir=settings.home), sharing=sharing, while_following=mirror
        )
        election.add_duty("the scheduler", worker.start, worker.stop)
    return ServerContext(
        settings=settings,
        db=db,
        policies=holder,
        clock=clock,
        seq=seq,
        traits=traits,
        executor_name=traits.name,
        metrics=metrics,
        scheduler=worker,
        sharing=sharing,
        election=election,
    )


def create_app(settings: Settings | None = None, *, context: ServerContext | None = None) -> FastAPI:
    ctx = context or build_context(settings or Settings())

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        watch = None
        ctx.events.reopen()
        if ctx.sharing is Sharing.SHARED:
            watch = PolicyWatch(ctx.db, ctx.policies, ctx.scheduler.wake)
            watch.start()
        if ctx.election is not None:
            if not ctx.election.running:  # `commons up` starts it before serving, to print the role
                ctx.election.start()
        else:
            ctx.scheduler.recover()
        try:
            yield
        finally:
            if ctx.election is not None:
                ctx.election.stop()
            ctx.events.close()
            ctx.scheduler.stop()
            ctx.submissions.stop()
            if watch is not None:
                watch.stop()

    app = FastAPI(
        title="GPU Commons",
        version=__version__,
        description="Share one GPU cluster between many ML teams: quotas, borrowing, preemption, chargeback.",
        lifespan=lifespan,
    )
    app.state.commons = ctx
    app.state.db = ctx.db
    app.state.policy = lambda: ctx.policies.policy
    #: The queue's answers, rendered once per published view (`routers.queue_answers`).
    app.state.queue_answers = QueueAnswers()
    #: Why each pending task waits, resolved once per published view (`views.WaitingMessages`).
    app.state.waiting_messages = views.WaitingMessages()
    install_error_handlers(app)
    settings = ctx.settings
    install_auth(
        app, failure_limit=settings.auth_failure_limit, failure_window_s=settings.auth_failure_window_s
    )
    app.include_router(health.router)
    app.include_router(tasks.router)
    app.include_router(events.router)
    app.include_router(cluster.router)
    app.include_router(invoices.router)
    app.include_router(web.router)
    install_observability(app)
    install_openapi(app)
    # Added last, so it runs first: before the audit, any credential check and any body read.
    app.add_middleware(RequestGuard, max_body_bytes=ctx.settings.max_body_bytes)
    return app

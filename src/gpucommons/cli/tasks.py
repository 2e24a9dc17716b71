"""`commons submit | tasks | logs | cancel | checkpoint`: tasks over the API."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from gpucommons.cli._client import api, err_console, fail
from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table, rich_table

if TYPE_CHECKING:  # pydantic models: imported by the commands that use them, not at start-up
    from gpucommons.api import schemas

console = Console(highlight=False, soft_wrap=True)

STATE_STYLE = {
    "pending": "yellow",
    "admitted": "cyan",
    "running": "green",
    "preempting": "magenta",
    "succeeded": "bold green",
    "failed": "red",
    "cancelled": "dim",
}


@app.command(context_settings={"allow_interspersed_args": False})
def submit(
    command: Annotated[list[str], typer.Argument(help="The command to run, after `--`.")],
    team: Annotated[str, typer.Option("--team", "-t", help="Team to run as (its quota is used).")],
    gpus: Annotated[int, typer.Option("--gpus", "-g", min=0, help="GPUs, all-or-nothing.")] = 1,
    cpus: Annotated[float, typer.Option("--cpus", min=0, help="CPU cores (for CPU quotas).")] = 0,
    memory_gib: Annotated[float, typer.Option("--memory-gib", min=0, help="Memory in GiB.")] = 0,
    priority: Annotated[str | None, typer.Option("--priority", "-p", help="Priority class name.")] = None,
    pool: Annotated[
        str | None, typer.Option("--pool", help="Pool to run in (default: the team's pools in order).")
    ] = None,
    name: Annotated[str, typer.Option("--name", "-n", help="A name to recognise the task by.")] = "",
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", help="How the task saves state: on-signal, or every:30m."),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option("--image", help="Container image (Kubernetes; default: the server's --image)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the task as JSON.")] = False,
) -> None:
    """Submit a task: `commons submit --team nlp --gpus 2 -- python train.py`. Prints its id last."""
    from gpucommons.api import schemas

    try:
        request = schemas.TaskSubmit(
            team=team,
            gpus=gpus,
            cpu_milli=round(cpus * 1000),
            memory_mib=round(memory_gib * 1024),
            command=command,
            name=name,
            priority=priority,
            pool=pool,
            checkpoint=checkpoint,
            image=image,
        )
    except ValueError as exc:
        raise fail(f"invalid submission: {exc}") from None
    with api() as client:
        task = client.submit(request)
    if as_json:
        print(task.model_dump_json())
    else:
        console.print(
            f"submitted {task.name} for team {task.team}: {task.gpus} GPU(s), class {task.priority}"
        )
    print(task.id)


TASK_COLUMNS = (
    Col("ID", keep=True),
    Col("TEAM", keep=True),
    Col("NAME", keep=True),
    Col("STATE", keep=True),
    Col("PRIO", drop=3),
    Col("GPUS", drop=4),
    Col("POOL", drop=2),
    Col("RESTARTS", drop=1, justify="right"),
    Col("MESSAGE", wrap=True),
)


def _rows(tasks: list[schemas.Task]) -> list[list[str]]:
    rows = []
    for t in tasks:
        style = STATE_STYLE.get(t.state, "")
        gpus = f"{t.gpus}" + (
            f" ({t.borrowed_gpus} borrowed)"
            if t.borrowed_gpus and t.state in ("running", "admitted", "preempting")
            else ""
        )
        rows.append(
            [
                t.id,
                t.team,
                escape(t.name),
                f"[{style}]{t.state}[/]",
                t.priority,
                gpus,
                t.assigned_pool or t.pool or "-",
                str(t.restart_count),
                escape(t.message),
            ]
        )
    return rows


@app.command("tasks")
def list_tasks(
    team: Annotated[str | None, typer.Option("--team", "-t", help="Only this team's tasks.")] = None,
    state: Annotated[
        list[str] | None, typer.Option("--state", "-s", help="Only tasks in this state (repeatable).")
    ] = None,
    watch: Annotated[
        bool,
        typer.Option("--watch", "-w", help="Refresh when a task changes (the server's events) until Ctrl-C."),
    ] = False,
    poll: Annotated[
        bool,
        typer.Option(
            "--poll", help="With --watch: refresh every 2 seconds instead (a proxy that buffers streams)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="A JSON list of task objects (stable fields).")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000)] = 200,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column, even when the terminal is narrow.")
    ] = False,
) -> None:
    """List tasks, newest first.

    Narrow terminals lose the least useful columns first; ids and names are never cut; piped output
    is plain text with every column."""
    with api() as client:
        if as_json:
            rows = client.tasks(team, state, limit)
            print(json.dumps([t.model_dump(mode="json") for t in rows], indent=2))
            return
        if not watch:
            print_table(console, TASK_COLUMNS, _rows(client.tasks(team, state, limit)), wide)
            return
        from gpucommons.cli._watch import EventFollower, Pacer

        follower = None if poll else EventFollower(client.copy(), team).start()
        pacer = Pacer(follower, lambda text: err_console.print(text, markup=False))
        try:
            if not console.is_terminal:
                # Piped: a new plain table at each change, each under the time it was taken.
                while True:
                    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
                    print_table(console, TASK_COLUMNS, _rows(client.tasks(team, state, limit)))
                    pacer.wait()

            def table() -> Table:
                return rich_table(TASK_COLUMNS, _rows(client.tasks(team, state, limit)), console.width, wide)

            with Live(table(), console=console, refresh_per_second=1) as live:
                while True:
                    pacer.wait()
                    live.update(table())
        except (KeyboardInterrupt, BrokenPipeError):
            return
        finally:
            if follower is not None:
                follower.stop()


@app.command()
def logs(
    task_id: Annotated[str, typer.Argument(help="The task's id.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the task ends.")
    ] = False,
) -> None:
    """Print a task's output (every attempt)."""
    with api() as client:
        try:
            for chunk in client.logs(task_id, follow=follow):
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
        except KeyboardInterrupt:
            return


@app.command()
def cancel(task_id: Annotated[str, typer.Argument(help="The task's id.")]) -> None:
    """Cancel a task: a pending one at once; a running one gets its signal, then SIGKILL after grace."""
    with api() as client:
        task = client.cancel(task_id)
    if task.state == "cancelled":
        console.print(f"{task.id} cancelled")
    else:
        console.print(f"{task.id} is stopping (it ends as cancelled when its process exits)")


@app.command()
def checkpoint(
    task_id: Annotated[str | None, typer.Argument(help="The task's id (default: $COMMONS_TASK_ID).")] = None,
    path: Annotated[str | None, typer.Option("--path", help="Where the checkpoint was written.")] = None,
    note: Annotated[str, typer.Option("--note", help="A short note for the task's events.")] = "",
) -> None:
    """Report that a task saved its state (call it from inside the task after each save)."""
    task_id = task_id or os.environ.get("COMMONS_TASK_ID")
    if not task_id:
        raise fail("no task id: pass one, or run inside a task (where COMMONS_TASK_ID is set)")
    with api() as client:
        task = client.checkpoint(task_id, path=path, note=note)
    console.print(f"checkpoint recorded for {task.id}")

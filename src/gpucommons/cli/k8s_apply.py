"""`commons k8s apply`: render the policy and write it to the cluster with server-side apply.

A server-side dry run of every object always comes first; `--dry-run` stops there. The cluster is
reached through the kubeconfig (the optional `kubernetes` client); every failure is one message and
exit status 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli.k8s import (
    GovernanceCheck,
    GpuResource,
    GroupPrefix,
    InternetEgress,
    NamespacePrefix,
    PoolLabel,
    k8s_app,
    load_policy_or_exit,
)
from gpucommons.cli.tables import Col, print_table

if TYPE_CHECKING:  # the renderer (YAML, pydantic) is imported by the command, not at CLI start-up
    from gpucommons.backends.kubernetes.apply import ApplyReport

console = Console(highlight=False, soft_wrap=True)

# Keyed by `Action` values: `Action` is a StrEnum, so `_STYLE[Action.CREATED]` finds "created" without
# importing the Kubernetes backend when the CLI starts.
_STYLE = {
    "created": "green",
    "configured": "yellow",
    "unchanged": "dim",
    "pruned": "red",
}
_DRY_WORDS = {
    "created": "would be created",
    "configured": "would be configured",
    "unchanged": "unchanged",
    "pruned": "would be pruned",
}


def _fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(1)


#: Kinds, namespaces and names whole; the note wraps.
REPORT_COLUMNS = (
    Col("KIND", keep=True),
    Col("NAMESPACE", keep=True),
    Col("NAME", keep=True),
    Col("RESULT", keep=True),
    Col("NOTE", wrap=True),
)


def report_rows(report: ApplyReport) -> list[list[str]]:
    rows = []
    for row in report.results:
        word = _DRY_WORDS[row.action] if report.dry_run else row.action.value
        cells = (row.kind, row.namespace or "-", row.name)
        rows.append([*map(escape, cells), f"[{_STYLE[row.action]}]{word}[/]", escape(row.note)])
    return rows


def summary_line(report: ApplyReport) -> str:
    from gpucommons.backends.kubernetes.apply import Action

    shown = [a for a in Action if a is not Action.PRUNED or report.count(a)]
    if report.dry_run:
        words = {Action.CREATED: "to create", Action.CONFIGURED: "to configure", Action.PRUNED: "to prune"}
        counts = ", ".join(f"{report.count(a)} {words.get(a, a.value)}" for a in shown)
        return f"server-side dry run, nothing was written: {counts}"
    counts = ", ".join(f"{report.count(a)} {a.value}" for a in shown)
    return f"applied with field manager gpucommons: {counts}"


@k8s_app.command("apply")
def apply_command(
    policy_file: Path = typer.Option(..., "--policy", "-p", help="The policy file (commons.yaml)."),
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)."
    ),
    context: str | None = typer.Option(None, "--context", help="Kubeconfig context (default: current)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only the server-side dry run: write nothing."),
    prune: bool = typer.Option(
        False, "--prune", help="Delete GPU Commons objects that the policy no longer renders."
    ),
    force: bool = typer.Option(
        False, "--force", help="Take over fields that another field manager owns (server-side apply force)."
    ),
    gpu_resource: GpuResource = "nvidia.com/gpu",
    namespace_prefix: NamespacePrefix = "team-",
    pool_label: PoolLabel = "gpucommons.io/pool",
    group_prefix: GroupPrefix = "",
    internet_egress: InternetEgress = True,
    governance_check: GovernanceCheck = True,
) -> None:
    """Render the policy and server-side apply it (dry run first; objects in dependency order)."""
    from gpucommons.backends.kubernetes import RenderError, RenderOptions, checked_render
    from gpucommons.backends.kubernetes.apply import ApplyOptions, PartiallyApplied, apply_manifests
    from gpucommons.backends.kubernetes.connection import KubeError, connect

    policy = load_policy_or_exit(policy_file, "nothing applied")
    render_options = RenderOptions(
        gpu_resource=gpu_resource,
        namespace_prefix=namespace_prefix,
        pool_label=pool_label,
        group_prefix=group_prefix,
        internet_egress=internet_egress,
        governance_check=governance_check,
    )
    try:
        objects = checked_render(policy, render_options)
    except RenderError as error:
        raise _fail(f"{error}\nnothing applied") from None
    try:
        api = connect(kubeconfig, context)
        report = apply_manifests(api, objects, ApplyOptions(dry_run=dry_run, prune=prune, force=force))
    except PartiallyApplied as error:
        raise _fail(f"error: {error}") from None
    except KubeError as error:
        raise _fail(f"error: {error}\nnothing was applied") from None
    print_table(console, REPORT_COLUMNS, report_rows(report))
    console.print(summary_line(report))

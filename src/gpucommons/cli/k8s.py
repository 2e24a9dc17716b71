"""`commons k8s render`: the policy as Kubernetes + Kueue manifests (pure file-in/file-out).

`k8s_app` is exported so that the control plane's `commons k8s apply` joins the same group.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpucommons.backends.kubernetes import RenderError, RenderOptions, render_files, render_stream
from gpucommons.cli.main import app
from gpucommons.policy import PolicyError, load_policy

k8s_app = typer.Typer(
    name="k8s",
    help="Compile the policy to Kubernetes objects (namespaces, RBAC, network policies, Kueue queues).",
    no_args_is_help=True,
)
app.add_typer(k8s_app, name="k8s")


@k8s_app.command("render")
def render_command(
    policy_file: Path = typer.Option(..., "--policy", "-p", help="The policy file (commons.yaml)."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write cluster.yaml, one file per team and kustomization.yaml here."
    ),
    gpu_resource: str = typer.Option("nvidia.com/gpu", help="The nodes' GPU resource name."),
    namespace_prefix: str = typer.Option("team-", help="Team namespaces are PREFIX + team name."),
    pool_label: str = typer.Option(
        "gpucommons.io/pool", help="Node label whose value names the node's pool."
    ),
    group_prefix: str = typer.Option("", help="Prefix your cluster's authentication adds to group names."),
    internet_egress: bool = typer.Option(
        True, "--internet-egress/--no-internet-egress", help="Let team pods reach non-private addresses."
    ),
) -> None:
    """Render the policy; without --out, print one YAML stream for `kubectl apply -f -`."""
    try:
        policy = load_policy(policy_file)
    except PolicyError as error:
        for issue in error.issues:
            typer.echo(issue.format(error.source), err=True)
        typer.echo(f"{error.source}: policy refused; nothing rendered", err=True)
        raise typer.Exit(1) from None
    options = RenderOptions(
        gpu_resource=gpu_resource,
        namespace_prefix=namespace_prefix,
        pool_label=pool_label,
        group_prefix=group_prefix,
        internet_egress=internet_egress,
    )
    try:
        if out is None:
            typer.echo(render_stream(policy, options), nl=False)
            return
        files = render_files(policy, options)
    except RenderError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"{out}: cannot write the manifests: {exc.strerror}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {len(files)} files to {out}: {', '.join(files)}")

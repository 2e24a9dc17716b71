"""`commons k8s render`: the policy as Kubernetes + Kueue manifests (pure file-in/file-out).

`k8s_app` is exported so that the control plane's `commons k8s apply` joins the same group.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpucommons.cli.main import app
from gpucommons.policy import PolicyError

if TYPE_CHECKING:
    from gpucommons.domain.model import Policy

k8s_app = typer.Typer(
    name="k8s",
    help="Compile the policy to Kubernetes objects (namespaces, RBAC, network policies, Kueue queues).",
    no_args_is_help=True,
)
app.add_typer(k8s_app, name="k8s")


# Site settings shared by `render` and `apply` (cli/k8s_apply.py): both must render the same objects.
GpuResource = Annotated[str, typer.Option(help="The nodes' GPU resource name.")]
NamespacePrefix = Annotated[str, typer.Option(help="Team namespaces are PREFIX + team name.")]
PoolLabel = Annotated[str, typer.Option(help="Node label whose value names the node's pool.")]
GroupPrefix = Annotated[str, typer.Option(help="Prefix your cluster's authentication adds to group names.")]
InternetEgress = Annotated[
    bool,
    typer.Option("--internet-egress/--no-internet-egress", help="Let team pods reach non-private addresses."),
]
GovernanceCheck = Annotated[
    bool,
    typer.Option(
        "--governance-check/--no-governance-check",
        help="List our governance AdmissionCheck (budgets, class rules) in every ClusterQueue.",
    ),
]


def load_policy_or_exit(policy_file: Path, nothing_done: str) -> Policy:
    """The policy, or every error on stderr and exit 1 (`nothing_done`: "nothing rendered")."""
    from gpucommons.policy import load_policy  # pydantic + YAML: imported when a command needs it

    try:
        return load_policy(policy_file)
    except PolicyError as error:
        for issue in error.issues:
            typer.echo(issue.format(error.source), err=True)
        typer.echo(f"{error.source}: policy refused; {nothing_done}", err=True)
        raise typer.Exit(1) from None


@k8s_app.command("render")
def render_command(
    policy_file: Path = typer.Option(..., "--policy", "-p", help="The policy file (commons.yaml)."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write cluster.yaml, one file per team and kustomization.yaml here."
    ),
    gpu_resource: GpuResource = "nvidia.com/gpu",
    namespace_prefix: NamespacePrefix = "team-",
    pool_label: PoolLabel = "gpucommons.io/pool",
    group_prefix: GroupPrefix = "",
    internet_egress: InternetEgress = True,
    governance_check: GovernanceCheck = True,
) -> None:
    """Render the policy; without --out, print one YAML stream for `kubectl apply -f -`."""
    from gpucommons.backends.kubernetes import RenderError, RenderOptions, render_files, render_stream

    policy = load_policy_or_exit(policy_file, "nothing rendered")
    options = RenderOptions(
        gpu_resource=gpu_resource,
        namespace_prefix=namespace_prefix,
        pool_label=pool_label,
        group_prefix=group_prefix,
        internet_egress=internet_egress,
        governance_check=governance_check,
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

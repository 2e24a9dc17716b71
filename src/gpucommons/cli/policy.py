"""`commons policy check FILE` and `commons policy schema`: pure file-in/file-out, no server needed.

`policy_app` is exported so that other modules (the control plane's `policy apply`) add commands to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from gpucommons.cli.main import app
from gpucommons.cli.tables import Col, print_table
from gpucommons.domain.model import DEFAULT_COHORT, Isolation, Policy, Quota
from gpucommons.domain.resources import UNLIMITED
from gpucommons.policy import PolicyError
from gpucommons.policy.durations import format_duration

policy_app = typer.Typer(
    name="policy",
    help="The policy file (commons.yaml): check it, print its JSON Schema, apply it to the server.",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")


@policy_app.command("check")
def check(
    file: Path = typer.Argument(..., help="The policy file to check, e.g. examples/commons.yaml."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing when the policy is good."),
    wide: bool = typer.Option(False, "--wide", help="Every column, even when the terminal is narrow."),
) -> None:
    """Validate FILE: exit 0 with a summary when good, exit 1 listing every problem when not."""
    from gpucommons.policy import load_policy  # pydantic + YAML: imported by the commands that load

    console = Console(highlight=False, soft_wrap=True)
    try:
        policy = load_policy(file)
    except PolicyError as error:
        for issue in error.issues:
            console.print(issue.format(error.source), markup=False)
        count = len(error.issues)
        console.print(
            f"{error.source}: policy refused ({count} problem{'s' if count != 1 else ''})", markup=False
        )
        raise typer.Exit(1) from None
    if not quiet:
        _print_summary(console, str(file), policy, wide)


@policy_app.command("schema")
def schema(
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the schema to this file instead."),
) -> None:
    """Print the policy file's JSON Schema, for editors (yaml-language-server) and other tools."""
    from gpucommons.policy import policy_json_schema

    text = json.dumps(policy_json_schema(), indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"{out}: cannot write the schema: {exc.strerror}", err=True)
        raise typer.Exit(1) from None


def _print_summary(console: Console, source: str, policy: Policy, wide: bool = False) -> None:
    pool_columns = (
        Col("pool", keep=True),
        Col("GPU", keep=True),
        Col("nodes × GPUs", justify="right"),
        Col("GPUs", justify="right"),
        Col("price/GPU-hour", drop=1, justify="right"),
    )
    pools = [
        [
            escape(pool.name),
            escape(pool.gpu_type),
            f"{pool.nodes} × {pool.gpus_per_node}",
            str(pool.capacity.gpus),
            f"{pool.price_per_gpu_hour} {policy.chargeback.currency}",
        ]
        for pool in policy.pools
    ]
    quota_columns = (
        Col("team", keep=True),
        Col("cohort", keep=True),
        *(Col(pool.name, keep=True, justify="right") for pool in policy.pools),
    )
    quotas = []
    for team in policy.teams:
        cells = [_quota_cell(team.quota(pool.name)) for pool in policy.pools]
        dedicated = team.isolation is Isolation.DEDICATED  # its own nodes: in no cohort
        label = escape(team.name) + (" (dedicated)" if dedicated else "")
        quotas.append([label, "—" if dedicated else escape(team.cohort), *cells])
    for cohort in policy.cohorts:
        if cohort.quotas:  # a cohort's own quota, shared by its subtree first
            cells = [_quota_cell(cohort.quota(pool.name)) for pool in policy.pools]
            quotas.append([f"cohort {escape(cohort.name)} (own)", escape(cohort.parent or "—"), *cells])
    used = [
        sum(t.nominal(p.name).gpus for t in policy.teams)
        + sum(q.nominal.gpus for c in policy.cohorts if (q := c.quota(p.name)) is not None)
        for p in policy.pools
    ]
    quotas.append(
        [
            "Σ nominal / capacity",
            "",
            *(f"{u} / {p.capacity.gpus}" for u, p in zip(used, policy.pools, strict=True)),
        ]
    )
    classes = ", ".join(
        f"{c.name} {c.value}"
        + ("" if c.preemptible else " (not preemptible)")
        + f" grace {format_duration(c.grace_period_s)}"
        for c in sorted(policy.priority_classes, key=lambda c: -c.value)
    )
    print_table(console, pool_columns, pools, wide, "Pools")
    print_table(console, quota_columns, quotas, wide, "GPU quotas: nominal (borrow limit / lend limit)")
    console.print(f"Priority classes: {classes}; default {policy.default_priority_class}", markup=False)
    cohorts = [c.name + (f" ⊂ {c.parent}" if c.parent else "") for c in policy.cohorts]
    console.print(f"Cohorts: {', '.join(cohorts) or DEFAULT_COHORT}", markup=False)
    console.print(
        f"{source}: policy OK ({_count(len(policy.pools), 'pool')}, {_count(len(policy.teams), 'team')}, "
        f"{_count(len(policy.priority_classes), 'priority class')})",
        markup=False,
    )


def _quota_cell(quota: Quota | None) -> str:
    if quota is None:
        return "—"
    borrow = "∞" if quota.borrow_limit.gpus >= UNLIMITED else str(quota.borrow_limit.gpus)
    lend = "all" if quota.lend_limit.gpus >= UNLIMITED else str(quota.lend_limit.gpus)
    return f"{quota.nominal.gpus} ({borrow} / {lend})"


def _count(n: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("s") else "s")
    return f"{n} {noun if n == 1 else plural}"

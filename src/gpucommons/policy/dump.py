"""`Policy` → YAML text that `parse_policy` reads back into an equal `Policy`.

The server's `policy apply` stores and shows the policy it runs; tests use the round trip to prove
that nothing is lost between the file and the domain. Prices and percentages are written exactly
(`2.50`, never `2.5000000001`), durations in their shortest unit, unlimited limits left out.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import yaml

from gpucommons.domain.model import (
    AdminSplit,
    Cohort,
    Isolation,
    Policy,
    Pool,
    PriorityClass,
    Quota,
    Team,
)
from gpucommons.domain.resources import UNLIMITED, Resources
from gpucommons.policy.convert import MIB_PER_GIB, MILLI_PER_CPU
from gpucommons.policy.durations import format_duration

#: libyaml's emitter when PyYAML has it (several times faster on large policies).
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _PolicyDumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Writes Decimals as exact numbers and never uses anchors (shared defaults would get `&id001`)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_decimal(dumper: yaml.SafeDumper, value: Decimal) -> yaml.ScalarNode:
    text = f"{value:f}"
    tag = "tag:yaml.org,2002:float" if "." in text else "tag:yaml.org,2002:int"
    return dumper.represent_scalar(tag, text)


_PolicyDumper.add_representer(Decimal, _represent_decimal)


def _cpus(milli: int) -> Decimal:
    return (Decimal(milli) / MILLI_PER_CPU).normalize() if milli % MILLI_PER_CPU else Decimal(milli // 1000)


def _gib(mib: int) -> Decimal:
    return (Decimal(mib) / MIB_PER_GIB).normalize() if mib % MIB_PER_GIB else Decimal(mib // MIB_PER_GIB)


def _pool(pool: Pool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": pool.name,
        "gpu_type": pool.gpu_type,
        "nodes": pool.nodes,
        "gpus_per_node": pool.gpus_per_node,
        "price_per_gpu_hour": pool.price_per_gpu_hour,
    }
    if pool.cpu_milli_per_node:
        out["cpus_per_node"] = _cpus(pool.cpu_milli_per_node)
    if pool.memory_mib_per_node:
        out["memory_gib_per_node"] = _gib(pool.memory_mib_per_node)
    if pool.slurm is not None:
        slurm: dict[str, Any] = {}
        if pool.slurm.partition is not None:
            slurm["partition"] = pool.slurm.partition
        if pool.slurm.features:
            slurm["features"] = list(pool.slurm.features)
        out["slurm"] = slurm
    return out


def _priority_class(cls: PriorityClass) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": cls.name,
        "value": cls.value,
        "preemptible": cls.preemptible,
        "grace_period": format_duration(cls.grace_period_s),
        "min_runtime": format_duration(cls.min_runtime_s),
        "checkpoint_required": cls.checkpoint_required,
        "budget_exempt": cls.budget_exempt,
        "signal": cls.signal,
    }
    if cls.max_runtime_s is not None:
        out["max_runtime"] = format_duration(cls.max_runtime_s)
    if cls.teams:
        out["teams"] = list(cls.teams)
    if cls.roles:
        out["roles"] = list(cls.roles)
    return out


def _limit(limit: Resources) -> int | dict[str, Any] | None:
    """None when unlimited everywhere; a number when only GPUs are limited; else a mapping."""
    if limit.cpu_milli == UNLIMITED and limit.memory_mib == UNLIMITED:
        return None if limit.gpus == UNLIMITED else limit.gpus
    out: dict[str, Any] = {}
    if limit.gpus != UNLIMITED:
        out["gpus"] = limit.gpus
    if limit.cpu_milli != UNLIMITED:
        out["cpus"] = _cpus(limit.cpu_milli)
    if limit.memory_mib != UNLIMITED:
        out["memory_gib"] = _gib(limit.memory_mib)
    return out


def _quota(quota: Quota, dedicated: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"gpus": quota.nominal.gpus}
    if quota.nominal.cpu_milli:
        out["cpus"] = _cpus(quota.nominal.cpu_milli)
    if quota.nominal.memory_mib:
        out["memory_gib"] = _gib(quota.nominal.memory_mib)
    if not dedicated:  # a dedicated team's zero limits follow from its isolation
        for key, limit in (("borrow_limit", quota.borrow_limit), ("lend_limit", quota.lend_limit)):
            written = _limit(limit)
            if written is not None:
                out[key] = written
    return out


def _team(team: Team) -> dict[str, Any]:
    dedicated = team.isolation is Isolation.DEDICATED
    out: dict[str, Any] = {
        "name": team.name,
        "groups": list(team.groups),
        "admin_groups": list(team.admin_groups),
        "cohort": team.cohort,
        "quota": {q.pool: _quota(q, dedicated) for q in team.quotas},
        "preemption": {
            "reclaim": str(team.preemption.reclaim),
            "borrow_within_cohort": str(team.preemption.borrow_within_cohort),
            "within_team": str(team.preemption.within_team),
        },
        "fair_share_weight": team.fair_share_weight,
        "isolation": str(team.isolation),
    }
    if team.budget is not None:
        out["budget"] = {"monthly": team.budget.monthly, "enforce": str(team.budget.enforce)}
    return out


def _cohort(cohort: Cohort) -> dict[str, Any]:
    out: dict[str, Any] = {"name": cohort.name, "parent": cohort.parent}
    if cohort.quotas:
        out["quotas"] = {q.pool: _quota(q, dedicated=False) for q in cohort.quotas}
    return out


def policy_to_data(policy: Policy) -> dict[str, Any]:
    """The policy as plain data in the file's shape (every default written out)."""
    chargeback = policy.chargeback
    split: str | dict[str, Decimal] = (
        dict(chargeback.admin_percentages)
        if chargeback.admin_split is AdminSplit.FIXED
        else str(chargeback.admin_split)
    )
    return {
        "cluster": {"name": policy.cluster_name, "pools": [_pool(p) for p in policy.pools]},
        "priority_classes": [_priority_class(c) for c in policy.priority_classes],
        "default_priority_class": policy.default_priority_class,
        "cohorts": [_cohort(c) for c in policy.cohorts],
        "teams": [_team(t) for t in policy.teams],
        "scheduling": {
            "mode": str(policy.scheduling.mode),
            "queueing": str(policy.scheduling.queueing),
            "checkpoint_aware": policy.scheduling.checkpoint_aware,
            "usage_half_life": format_duration(policy.scheduling.usage_half_life_s),
        },
        "identity": {
            "admin_groups": list(policy.identity.admin_groups),
            "finance_groups": list(policy.identity.finance_groups),
        },
        "chargeback": {
            "currency": chargeback.currency,
            "idle": str(chargeback.idle),
            "admin_cost": {"monthly": chargeback.admin_monthly, "split": split},
            "borrowed_rate": chargeback.borrowed_rate,
        },
    }


def dump_policy(policy: Policy) -> str:
    """YAML text of `policy`; `parse_policy(dump_policy(p)) == p` for every policy `parse_policy` returns."""
    text: str = yaml.dump(
        policy_to_data(policy),
        Dumper=_PolicyDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=110,
    )
    return text

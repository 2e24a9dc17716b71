"""Cross-checks: the rules a schema cannot express, because they relate one part of the file to another.

Each check is a small function over the validated parts that returns findings `(path, sentence)`;
`run_checks` runs them all, so a refused file lists every problem at once.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal

from gpucommons.domain.model import DEFAULT_COHORT, BorrowWithinCohortPolicy, Isolation, ReclaimPolicy
from gpucommons.domain.resources import UNLIMITED
from gpucommons.policy.class_access import class_access_rules
from gpucommons.policy.convert import (
    MIB_PER_GIB,
    MILLI_PER_CPU,
    limit_resources,
    nominal_resources,
)
from gpucommons.policy.salvage import Parts
from gpucommons.policy.schema import PoolSpec, QuotaSpec, ResourceLimitSpec
from gpucommons.policy.yaml_source import Path, format_path

Finding = tuple[Path, str]
Check = Callable[[Parts], Iterable[Finding]]


def _plain(value: Decimal) -> str:
    """`80`, `0.5`: no exponent, no trailing zeros."""
    return str(int(value)) if value == value.to_integral_value() else f"{value.normalize():f}"


def _show_amount(component: str, amount: int) -> str:
    if component == "cpu_milli":
        return _plain(Decimal(amount) / MILLI_PER_CPU) + " CPUs"
    if component == "memory_mib":
        return _plain(Decimal(amount) / MIB_PER_GIB) + " GiB of memory"
    return f"{amount} GPU" + ("" if amount == 1 else "s")


def duplicate_names(parts: Parts) -> Iterator[Finding]:
    """Pools, priority classes, cohorts and teams are looked up by name: each name once."""
    lists: list[tuple[str, str, Path]] = [
        ("pool", "pools", ("cluster", "pools")),
        ("priority class", "priority_classes", ("priority_classes",)),
        ("cohort", "cohorts", ("cohorts",)),
        ("team", "teams", ("teams",)),
    ]
    for kind, key, where in lists:
        first: dict[str, int] = {}
        for index, name in parts.names.get(key, []):
            if name in first:
                earlier = format_path((*where, first[name]))
                yield (*where, index, "name"), f"{kind} {name!r} is already defined at {earlier}"
            else:
                first[name] = index


def unknown_references(parts: Parts) -> Iterator[Finding]:
    """Every name used must be defined: pools in quotas, cohorts, the default priority class."""
    pools = [p.name for _, p in parts.pools]
    classes = [c.name for _, c in parts.priority_classes]
    cohorts = [c.name for _, c in parts.cohorts]
    known_cohorts = {*cohorts, DEFAULT_COHORT}
    if parts.default_priority_class is not None and parts.default_priority_class not in classes:
        yield (
            ("default_priority_class",),
            (
                f"unknown priority class {parts.default_priority_class!r}"
                + _choices("priority classes", classes)
            ),
        )
    for index, team in parts.teams:
        if team.cohort is not None and team.cohort not in known_cohorts:
            yield (
                ("teams", index, "cohort"),
                _unknown("cohort", team.cohort, "cohorts", [*cohorts, DEFAULT_COHORT]),
            )
        for pool in team.quota:
            if pool not in pools:
                yield ("teams", index, "quota", pool), _unknown("pool", pool, "pools", pools)
    for index, cohort in parts.cohorts:
        if cohort.parent is not None and cohort.parent not in known_cohorts:
            yield (
                ("cohorts", index, "parent"),
                (_unknown("parent cohort", cohort.parent, "cohorts", [*cohorts, DEFAULT_COHORT])),
            )
        for pool in cohort.quotas:
            if pool not in pools:
                yield ("cohorts", index, "quotas", pool), _unknown("pool", pool, "pools", pools)


def cohort_limits_need_a_parent(parts: Parts) -> Iterator[Finding]:
    """A cohort's borrow and lend limits are towards its parent: a root cohort has none to borrow
    from or lend to (Kueue's Cohort webhook refuses them)."""
    for index, cohort in parts.cohorts:
        if cohort.parent is not None:
            continue
        for pool, quota in cohort.quotas.items():
            for key in ("borrow_limit", "lend_limit"):
                if getattr(quota, key) is not None:
                    yield (
                        ("cohorts", index, "quotas", pool, key),
                        (
                            f"cohort {cohort.name!r} has no parent, so it has nothing to borrow from or lend "
                            f"to: remove {key} (or give the cohort a parent)"
                        ),
                    )


def cohort_cycles(parts: Parts) -> Iterator[Finding]:
    """Cohorts form a tree: following `parent` must end at a root, never come back."""
    parent_of = {c.name: c.parent for _, c in parts.cohorts}
    index_of: dict[str, int] = {}
    for index, cohort in parts.cohorts:
        index_of.setdefault(cohort.name, index)
    reported: set[str] = set()
    for _, cohort in parts.cohorts:
        chain: list[str] = []
        name: str | None = cohort.name
        while name is not None and name in parent_of and name not in chain:
            chain.append(name)
            name = parent_of[name]
        if name is None or name not in chain:
            continue
        cycle = chain[chain.index(name) :]
        if reported.intersection(cycle):
            continue
        reported.update(cycle)
        start = min(cycle, key=lambda n: index_of[n])
        ordered = cycle[cycle.index(start) :] + cycle[: cycle.index(start)]
        if len(ordered) == 1:
            message = f"cohort {start!r} names itself as its parent"
        else:
            message = f"cohorts {' → '.join([*ordered, start])} form a cycle: a cohort cannot contain itself"
        yield ("cohorts", index_of[start], "parent"), message


def lend_limits_within_nominal(parts: Parts) -> Iterator[Finding]:
    """A team can only lend what it is guaranteed (Kueue's webhook: lendingLimit <= nominalQuota)."""
    for index, team in parts.teams:
        for pool, quota in team.quota.items():
            if quota.lend_limit is None:
                continue
            nominal = nominal_resources(quota).as_dict()
            lend = limit_resources(quota.lend_limit).as_dict()
            for component, amount in lend.items():
                if amount != UNLIMITED and amount > nominal[component]:
                    path: Path = ("teams", index, "quota", pool, "lend_limit")
                    if isinstance(quota.lend_limit, ResourceLimitSpec):
                        path = (*path, _file_key(component))
                    yield (
                        path,
                        (
                            f"lend_limit {_show_amount(component, amount)} is above the nominal quota of "
                            f"{_show_amount(component, nominal[component])}: a team can only lend what it has"
                        ),
                    )


def dedicated_teams_stay_alone(parts: Parts) -> Iterator[Finding]:
    """A dedicated team has its own whole nodes and neither lends nor borrows."""
    gpus_per_node = {p.name: p.gpus_per_node for _, p in parts.pools}
    for index, team in parts.teams:
        if team.isolation is not Isolation.DEDICATED:
            continue
        for pool, quota in team.quota.items():
            for key in ("borrow_limit", "lend_limit"):
                if getattr(quota, key) is not None:
                    yield (
                        ("teams", index, "quota", pool, key),
                        (
                            f"a dedicated team neither borrows nor lends: remove {key} "
                            "(or make the team's isolation shared)"
                        ),
                    )
            per_node = gpus_per_node.get(pool)
            if per_node and quota.gpus % per_node:
                yield (
                    ("teams", index, "quota", pool, "gpus"),
                    (
                        f"a dedicated team holds whole nodes: {_show_amount('gpus', quota.gpus)} is not "
                        f"a multiple of the {per_node} GPUs per node of pool {pool!r}"
                    ),
                )


def quotas_within_capacity(parts: Parts) -> Iterator[Finding]:
    """Guaranteed means guaranteed: Σ nominal (teams' and cohorts' own) in a pool cannot exceed what
    the pool has."""
    quotas: dict[str, list[tuple[str, QuotaSpec]]] = defaultdict(list)
    for _, team in parts.teams:
        for pool, quota in team.quota.items():
            quotas[pool].append((team.name, quota))
    for _, cohort in parts.cohorts:  # a cohort's own quota is guaranteed capacity too
        for pool, quota in cohort.quotas.items():
            quotas[pool].append((f"cohort {cohort.name}", quota))
    for index, spec in parts.pools:
        entries = quotas.get(spec.name, [])
        for component, capacity, node_text in _capacities(spec):
            total = sum(nominal_resources(q).as_dict()[component] for _, q in entries)
            if total <= capacity:
                continue
            with_cohorts = any(owner.startswith("cohort ") for owner, _ in entries)
            owners = "teams' and cohorts'" if with_cohorts else "teams'"
            shares = ", ".join(
                f"{team} {_show_amount(component, nominal_resources(q).as_dict()[component])}"
                for team, q in entries
                if nominal_resources(q).as_dict()[component]
            )
            yield (
                ("cluster", "pools", index),
                (
                    f"the {owners} nominal quotas in pool {spec.name!r} add up to "
                    f"{_show_amount(component, total)} ({shares}), above the pool's "
                    f"{_show_amount(component, capacity)} ({node_text})"
                ),
            )


def _capacities(pool: PoolSpec) -> Iterator[tuple[str, int, str]]:
    yield "gpus", pool.nodes * pool.gpus_per_node, f"{pool.nodes} nodes × {pool.gpus_per_node} GPUs"
    if pool.cpus_per_node is not None:
        per_node = int(pool.cpus_per_node * MILLI_PER_CPU)
        yield "cpu_milli", pool.nodes * per_node, f"{pool.nodes} nodes × {pool.cpus_per_node} CPUs"
    if pool.memory_gib_per_node is not None:
        per_node = int(pool.memory_gib_per_node * MIB_PER_GIB)
        yield "memory_mib", pool.nodes * per_node, f"{pool.nodes} nodes × {pool.memory_gib_per_node} GiB"


def exact_units(parts: Parts) -> Iterator[Finding]:
    """CPUs are counted in milli-CPUs and memory in MiB; anything finer cannot be scheduled exactly."""
    amounts: list[tuple[Path, str, Decimal | None]] = []
    for index, pool in parts.pools:
        where: Path = ("cluster", "pools", index)
        amounts += [
            ((*where, "cpus_per_node"), "cpus", pool.cpus_per_node),
            ((*where, "memory_gib_per_node"), "memory_gib", pool.memory_gib_per_node),
        ]
    owned: list[tuple[Path, dict[str, QuotaSpec]]] = [
        (("teams", i, "quota"), t.quota) for i, t in parts.teams
    ]
    owned += [(("cohorts", i, "quotas"), c.quotas) for i, c in parts.cohorts]
    for prefix, quota_map in owned:
        for pool_name, quota in quota_map.items():
            where = (*prefix, pool_name)
            amounts += [
                ((*where, "cpus"), "cpus", quota.cpus),
                ((*where, "memory_gib"), "memory_gib", quota.memory_gib),
            ]
            for key in ("borrow_limit", "lend_limit"):
                limit = getattr(quota, key)
                if isinstance(limit, ResourceLimitSpec):
                    amounts += [
                        ((*where, key, "cpus"), "cpus", limit.cpus),
                        ((*where, key, "memory_gib"), "memory_gib", limit.memory_gib),
                    ]
    for path, kind, amount in amounts:
        if amount is None:
            continue
        scale, unit = (MILLI_PER_CPU, "a milli-CPU (0.001)") if kind == "cpus" else (MIB_PER_GIB, "one MiB")
        if (amount * scale) % 1:
            yield path, f"{amount} is finer than {unit}: round it"


def runtimes_consistent(parts: Parts) -> Iterator[Finding]:
    """A class whose tasks are stopped after max_runtime cannot promise a longer min_runtime."""
    for index, cls in parts.priority_classes:
        if cls.max_runtime is not None and cls.min_runtime > cls.max_runtime:
            yield (
                ("priority_classes", index, "min_runtime"),
                (f"min_runtime ({cls.min_runtime}s) is longer than max_runtime ({cls.max_runtime}s)"),
            )


def preemption_words_kueue_accepts(parts: Parts) -> Iterator[Finding]:
    """Kueue refuses borrow_within_cohort without reclaim (a CEL rule on ClusterQueue); so do we."""
    for index, team in parts.teams:
        rules = team.preemption
        if (
            rules.reclaim is ReclaimPolicy.NEVER
            and rules.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER
        ):
            yield (
                ("teams", index, "preemption", "borrow_within_cohort"),
                (
                    f"borrow_within_cohort: {rules.borrow_within_cohort} needs reclaim other than never "
                    "(Kueue refuses this combination): set reclaim to lower_priority or any"
                ),
            )


def admin_percentages(parts: Parts) -> Iterator[Finding]:
    """Fixed admin-cost percentages name real teams and share out exactly 100%."""
    if parts.chargeback is None:
        return
    split = parts.chargeback.admin_cost.split
    if not isinstance(split, dict):
        return
    where: Path = ("chargeback", "admin_cost", "split")
    teams = [t.name for _, t in parts.teams]
    for team in split:
        if team not in teams:
            yield (*where, team), f"unknown team {team!r}" + _choices("teams", teams)
    total = sum(split.values(), Decimal(0))
    if total != 100:
        yield where, f"fixed admin-cost percentages must add up to 100, they add up to {total}"


def slurm_pools_distinct(parts: Parts) -> Iterator[Finding]:
    """Two pools that name the same Slurm partition and features would claim the same nodes."""
    first: dict[tuple[str | None, frozenset[str]], str] = {}
    for index, pool in parts.pools:
        if pool.slurm is None:
            continue
        key = (pool.slurm.partition, frozenset(pool.slurm.features))
        if key in first:
            yield (
                ("cluster", "pools", index, "slurm"),
                f"pool {first[key]!r} already takes the same Slurm nodes: give each pool its own "
                "partition or features",
            )
        else:
            first[key] = pool.name


CHECKS: tuple[Check, ...] = (
    duplicate_names,
    unknown_references,
    cohort_cycles,
    lend_limits_within_nominal,
    cohort_limits_need_a_parent,
    dedicated_teams_stay_alone,
    quotas_within_capacity,
    exact_units,
    runtimes_consistent,
    preemption_words_kueue_accepts,
    admin_percentages,
    class_access_rules,
    slurm_pools_distinct,
)


def run_checks(parts: Parts) -> list[Finding]:
    return [finding for check in CHECKS for finding in check(parts)]


def _file_key(component: str) -> str:
    return {"gpus": "gpus", "cpu_milli": "cpus", "memory_mib": "memory_gib"}[component]


def _unknown(what: str, name: str, kind: str, names: list[str]) -> str:
    """`unknown cohort 'reserch'; did you mean 'research'? (defined cohorts: ...)`."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {name!r}{hint}{_choices(kind, names)}"


def _choices(kind: str, names: list[str]) -> str:
    unique = list(dict.fromkeys(names))
    return f" (defined {kind}: {', '.join(unique)})" if unique else f" (no {kind} are defined)"

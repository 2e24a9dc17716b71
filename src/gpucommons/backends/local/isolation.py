"""How far apart the teams are on this machine, said plainly (pure: facts in, sentences out).

`commons doctor` prints this so that a team with regulated data gets an honest answer to "is
logical isolation enough for us?": what separates its work from other teams' (API roles, its own
Unix account and 0770 workspace when the server runs as root, dedicated GPUs), and what does not
(one machine, one kernel, one GPU driver, one network).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucommons.backends.local.accounts import IsolationMode
from gpucommons.backends.local.hostfacts import HostFacts, PathFacts, TeamFacts
from gpucommons.domain.model import Isolation, Policy, Team
from gpucommons.engine.placement import NodeMap


@dataclass(frozen=True, slots=True)
class TeamIsolation:
    team: str
    isolation: str
    account: str | None
    workspace: str
    workspace_mode: str | None
    #: "pool h100: node 3 (GPUs 24-31)" for each pool where the team owns whole nodes.
    dedicated: tuple[str, ...]
    separated_by: tuple[str, ...]
    #: What does not separate this team in particular (`IsolationReport.shared_by_all` adds the rest).
    gaps: tuple[str, ...]
    verdict: str


@dataclass(frozen=True, slots=True)
class IsolationReport:
    mode: IsolationMode
    user: str
    teams: tuple[TeamIsolation, ...]
    shared_by_all: tuple[str, ...]
    answer: str

    def not_separated(self, team: TeamIsolation) -> tuple[str, ...]:
        """Everything that does not separate `team` from the others: its own gaps, then the shared."""
        return (*team.gaps, *self.shared_by_all)


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def dedicated_nodes(policy: Policy) -> dict[str, tuple[str, ...]]:
    """Per dedicated team, the nodes and GPU numbers the engine reserves for it (as it places them)."""
    owners = NodeMap(policy).pools
    found: dict[str, list[str]] = {}
    for pool in policy.pools:
        per_node = pool.gpus_per_node
        nodes_of: dict[str, list[int]] = {}
        for node, owner in enumerate(owners[pool.name].owner):
            if owner:
                nodes_of.setdefault(owner, []).append(node)
        for team, nodes in nodes_of.items():
            lo, hi = min(nodes), max(nodes)
            found.setdefault(team, []).append(
                f"pool {pool.name}: node{'s' if len(nodes) > 1 else ''} {_span(lo, hi)} "
                f"(GPUs {_span(lo * per_node, (hi + 1) * per_node - 1)})"
            )
    return {team: tuple(items) for team, items in found.items()}


def shared_by_all(facts: HostFacts, inventory_source: str) -> tuple[str, ...]:
    """What no team is separated from on this machine, whatever its settings."""
    shared = [
        "the same machine and the same Linux kernel: a kernel or driver exploit crosses every boundary",
        "no network isolation: tasks share the host's network, can reach each other's open ports, "
        "and can reach the server's API (which still demands a token)",
        "no CPU or memory limits: one team's task can slow down or starve the others",
    ]
    if facts.gpu_devices:
        open_to_all = [d.path for d in facts.gpu_devices if d.mode is not None and d.mode & 0o006]
        shared.append(
            "the same NVIDIA driver; "
            + (
                f"{len(open_to_all)} GPU device node(s) ({', '.join(open_to_all[:3])}…) may be opened by "
                "every account, so CUDA_VISIBLE_DEVICES is a convention, not a barrier"
                if open_to_all
                else "GPU device nodes are not open to every account"
            )
        )
    elif inventory_source == "virtual":
        shared.append("no GPUs on this machine (virtual inventory): GPU separation is not exercised here")
    else:
        shared.append("the same NVIDIA driver; GPU assignment by CUDA_VISIBLE_DEVICES is a convention")
    if not facts.proc_hidepid:
        shared.append(
            "process lists: /proc is mounted without hidepid, so every account sees every task's "
            "command line (put no secrets in commands)"
        )
    if facts.mode is IsolationMode.ACCOUNTS:
        shared.append("/tmp and /dev/shm: files are created private (umask 007), but their names are visible")
    if facts.exposed_files:
        shared.append(
            f"server files other accounts can read: {', '.join(facts.exposed_files)} (chmod 600 them)"
        )
    return tuple(shared)


def _separated_by(team: Team, tf: TeamFacts, facts: HostFacts, dedicated: tuple[str, ...]) -> list[str]:
    groups = ", ".join(team.groups) or "none"
    admins = ", ".join(team.admin_groups) or "none"
    items = [
        f"API roles: only members of its groups ({groups}; admins: {admins}), platform admins and "
        "finance (costs only) see its tasks, logs and usage"
    ]
    if facts.mode is IsolationMode.ACCOUNTS and tf.account is not None:
        state = "exists" if tf.account_exists else "created at its first task"
        items.append(
            f"its own Unix account {tf.account} ({state}): other teams' tasks cannot read its files "
            "or signal its processes"
        )
        ws = tf.workspace
        if ws.exists:
            items.append(f"workspace {ws.path}, mode {ws.mode_text}, owner {ws.owner}")
        else:
            items.append(f"workspace {ws.path} (mode 0770, created at its first task)")
    if dedicated:
        items.append("dedicated GPUs, never shared, it neither lends nor borrows: " + "; ".join(dedicated))
    return items


def _gaps(team: Team, tf: TeamFacts, facts: HostFacts, dedicated: tuple[str, ...]) -> list[str]:
    gaps = []
    if facts.mode is IsolationMode.LOGICAL:
        gaps.append(
            f"files and processes: every task runs as {facts.user}, so any task can read every team's "
            "workspace, checkpoints and logs and signal their processes (the server is not root)"
        )
    elif tf.workspace.exists and tf.workspace.mode is not None and tf.workspace.mode & 0o007:
        gaps.append(f"its workspace is mode {tf.workspace.mode_text}: other accounts have access (chmod 770)")
    if team.isolation is Isolation.SHARED:
        gaps.append(
            "GPUs: shared with other teams over time (borrowing and lending); GPU Commons does not "
            "scrub GPU memory between tasks"
        )
    elif not dedicated:
        gaps.append("dedicated isolation is set, but no whole node is reserved (nominal quota 0?)")
    return gaps


def _verdict(team: Team, facts: HostFacts, dedicated: tuple[str, ...]) -> str:
    if facts.mode is IsolationMode.LOGICAL:
        return (
            "logical isolation only: it prevents mistakes, not a colleague who wants the data; "
            "not enough for regulated data"
        )
    if dedicated:
        return (
            "own account, workspace and GPUs, on a shared kernel, driver and network: for regulated "
            "data, give it its own machine (or its own nodes with network policies on Kubernetes)"
        )
    return (
        "files and processes separated by Unix accounts; GPUs, kernel, driver and network shared: "
        "fine between teams that trust each other, not enough for regulated data"
    )


def assess_isolation(policy: Policy, facts: HostFacts, inventory_source: str) -> IsolationReport:
    common = shared_by_all(facts, inventory_source)
    dedicated = dedicated_nodes(policy)
    by_team = {tf.team: tf for tf in facts.teams}
    teams = []
    for team in policy.teams:
        tf = by_team.get(team.name) or TeamFacts(team.name, None, False, PathFacts(team.name, False))
        mine = dedicated.get(team.name, ())
        teams.append(
            TeamIsolation(
                team=team.name,
                isolation=str(team.isolation),
                account=tf.account,
                workspace=tf.workspace.path,
                workspace_mode=tf.workspace.mode_text if tf.workspace.exists else None,
                dedicated=mine,
                separated_by=tuple(_separated_by(team, tf, facts, mine)),
                gaps=tuple(_gaps(team, tf, facts, mine)),
                verdict=_verdict(team, facts, mine),
            )
        )
    return IsolationReport(facts.mode, facts.user, tuple(teams), common, _answer(facts))


def _answer(facts: HostFacts) -> str:
    if facts.mode is IsolationMode.LOGICAL:
        return (
            "Is logical isolation enough for regulated data? No. Here teams are kept apart only by the "
            "API: every task runs as the same Unix user on one machine. Run the server as root so each "
            "team gets its own account and workspace, and put regulated data on its own machine or on "
            "a Kubernetes cluster (a namespace per team, RBAC, network policies, dedicated nodes)."
        )
    return (
        "Is this enough for regulated data? Usually not on its own. Teams have separate Unix accounts "
        "and private workspaces, and dedicated teams their own GPUs, but every team shares this "
        "machine's kernel, GPU driver and network. For regulated data use a separate machine, or a "
        "Kubernetes cluster with a namespace per team, RBAC, default-deny network policies and "
        "dedicated nodes — and check with your compliance team what the regulation requires."
    )

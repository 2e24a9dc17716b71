"""The isolation report: what separates each team, what does not, and the plain answer."""

from __future__ import annotations

from gpucommons.backends.local.accounts import IsolationMode
from gpucommons.backends.local.hostfacts import HostFacts, PathFacts, TeamFacts
from gpucommons.backends.local.isolation import assess_isolation, dedicated_nodes
from gpucommons.domain import Isolation, Policy, Pool, PriorityClass, Quota, Resources, Team

H100 = Pool("h100", "H100", nodes=4, gpus_per_node=8)
POLICY = Policy(
    cluster_name="t",
    pools=(H100,),
    priority_classes=(PriorityClass("default", 0),),
    default_priority_class="default",
    teams=(
        Team(
            "health",
            (Quota("h100", Resources(gpus=16)),),
            groups=("ml-health",),
            isolation=Isolation.DEDICATED,
        ),
        Team("nlp", (Quota("h100", Resources(gpus=8)),), groups=("ml-nlp",), admin_groups=("nlp-leads",)),
    ),
)


def facts(mode: IsolationMode, **kw: object) -> HostFacts:
    teams = tuple(
        TeamFacts(
            t.name,
            f"commons-{t.name}" if mode is IsolationMode.ACCOUNTS else None,
            True,
            PathFacts(f"/h/workspaces/{t.name}", True, 0o770, f"commons-{t.name}"),
        )
        for t in POLICY.teams
    )
    fields: dict[str, object] = {
        "user": "root" if mode is IsolationMode.ACCOUNTS else "alice",
        "mode": mode,
        "teams": teams,
        "gpu_devices": (),
        "proc_hidepid": False,
        "exposed_files": (),
    }
    fields.update(kw)
    return HostFacts(**fields)  # type: ignore[arg-type]


def test_dedicated_team_owns_the_highest_nodes_as_the_engine_places_them() -> None:
    assert dedicated_nodes(POLICY) == {"health": ("pool h100: nodes 2-3 (GPUs 16-31)",)}


def test_root_mode_names_account_workspace_and_dedicated_gpus_for_each_team() -> None:
    report = assess_isolation(POLICY, facts(IsolationMode.ACCOUNTS), "nvidia-smi")
    health, nlp = report.teams
    assert any("its own Unix account commons-health" in s for s in health.separated_by)
    assert any("mode 0770, owner commons-health" in s for s in health.separated_by)
    assert any("dedicated GPUs" in s and "nodes 2-3" in s for s in health.separated_by)
    assert any("ml-nlp; admins: nlp-leads" in s for s in nlp.separated_by)
    assert not any("dedicated" in s for s in nlp.separated_by)
    assert any(g.startswith("GPUs: shared with other teams") for g in nlp.gaps)
    assert health.gaps == ()
    everything = report.not_separated(health)
    for shared in ("same Linux kernel", "no network isolation", "no CPU or memory limits", "hidepid"):
        assert any(shared in s for s in everything), shared
    assert "not enough for regulated data" in nlp.verdict
    assert "its own machine" in health.verdict


def test_logical_mode_says_every_task_runs_as_one_user_and_is_not_enough() -> None:
    report = assess_isolation(POLICY, facts(IsolationMode.LOGICAL), "virtual")
    for team in report.teams:
        assert not any("Unix account" in s for s in team.separated_by)
        assert any("every task runs as alice" in g for g in team.gaps)
        assert team.verdict.startswith("logical isolation only")
    assert report.answer.startswith("Is logical isolation enough for regulated data? No.")
    assert any("virtual inventory" in s for s in report.shared_by_all)


def test_world_open_gpu_devices_and_readable_server_files_are_called_out() -> None:
    devices = (PathFacts("/dev/nvidia0", True, 0o666, "root"), PathFacts("/dev/nvidia1", True, 0o666, "root"))
    report = assess_isolation(
        POLICY,
        facts(
            IsolationMode.ACCOUNTS, gpu_devices=devices, proc_hidepid=True, exposed_files=("/h/commons.db",)
        ),
        "nvml",
    )
    assert any("2 GPU device node(s)" in s and "convention, not a barrier" in s for s in report.shared_by_all)
    assert any("/h/commons.db" in s and "chmod 600" in s for s in report.shared_by_all)
    assert not any("hidepid" in s for s in report.shared_by_all)


def test_a_workspace_open_to_others_is_a_gap() -> None:
    loose = facts(IsolationMode.ACCOUNTS)
    teams = tuple(
        TeamFacts(t.team, t.account, True, PathFacts(t.workspace.path, True, 0o777, "root"))
        for t in loose.teams
    )
    report = assess_isolation(POLICY, facts(IsolationMode.ACCOUNTS, teams=teams), "nvml")
    assert any("mode 0777: other accounts have access" in g for g in report.teams[1].gaps)

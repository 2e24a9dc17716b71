"""The policy as Slurm accounts, users and QOS: the desired objects, their rendering, and the plan
that brings an accounting database in line."""

from __future__ import annotations

import shlex

import pytest

from gpucommons.backends.slurm.accounts import (
    AccountingError,
    AccountingOptions,
    desired_accounting,
    team_account,
)
from gpucommons.backends.slurm.accounts_plan import AccountingReadError, Action, parse_current, plan
from gpucommons.backends.slurm.accounts_render import render_commands, render_load_file
from gpucommons.domain.model import Policy
from gpucommons.policy import parse_policy

POLICY = """
cluster:
  name: demo
  pools:
    - {name: h100, gpu_type: H100, nodes: 2, gpus_per_node: 8}
    - {name: a100, gpu_type: A100, nodes: 2, gpus_per_node: 8}
cohorts: [{name: research}]
teams:
  - {name: nlp, groups: [ml-nlp], admin_groups: [ml-nlp-leads], cohort: research,
     quota: {h100: {gpus: 8}, a100: {gpus: 4}}}
  - {name: vision, groups: [ml-vision], quota: {h100: {gpus: 8}}}
"""
MEMBERS = {"ml-nlp": ["alice", "bob"], "ml-nlp-leads": ["alice", "carol"], "ml-vision": ["dave"]}


@pytest.fixture
def policy() -> Policy:
    return parse_policy(POLICY)


def test_an_account_per_team_under_one_parent_with_the_members_of_its_groups(policy: Policy) -> None:
    acc = desired_accounting(policy, MEMBERS)
    assert [(a.name, a.parent, a.organization) for a in acc.accounts] == [
        ("gpucommons", "root", "gpucommons"),
        ("nlp", "gpucommons", "research"),
        ("vision", "gpucommons", "cluster"),
    ]
    assert [(u.user, u.account) for u in acc.users] == [
        ("alice", "nlp"),
        ("bob", "nlp"),
        ("carol", "nlp"),
        ("commons-nlp", "nlp"),
        ("dave", "vision"),
        ("commons-vision", "vision"),
    ]
    assert acc.qos == () and acc.notes == ()
    assert acc.account_of("vision") == "vision"


def test_with_qos_direct_sbatch_users_are_capped_at_the_nominal_quota_and_our_jobs_are_not(
    policy: Policy,
) -> None:
    acc = desired_accounting(policy, MEMBERS, AccountingOptions(qos=True))
    assert [(q.name, q.gpu_limit) for q in acc.qos] == [
        ("gpucommons", None),
        ("commons-nlp", 12),
        ("commons-vision", 8),
    ]
    nlp = acc.accounts[1]
    assert (nlp.qos, nlp.default_qos) == (("commons-nlp",), "commons-nlp")
    runner = next(u for u in acc.users if u.user == "commons-nlp")
    assert (runner.qos, runner.default_qos) == (("gpucommons",), "gpucommons")
    alice = next(u for u in acc.users if u.user == "alice")
    assert alice.qos == () and alice.default_qos is None  # inherits the account's capped QOS


def test_a_group_with_no_known_members_is_noted(policy: Policy) -> None:
    acc = desired_accounting(policy, {"ml-nlp": ["alice"]})
    assert acc.notes == (
        "group ml-nlp-leads (team nlp) has no members here: its users get no Slurm account",
        "group ml-vision (team vision) has no members here: its users get no Slurm account",
    )


def test_two_teams_on_one_account_name_are_refused() -> None:
    clash = parse_policy(POLICY.replace("name: vision", "name: NLP"))
    with pytest.raises(AccountingError, match="team NLP and team nlp would both be Slurm account 'nlp'"):
        desired_accounting(clash, MEMBERS)
    assert team_account("ML.Vision", AccountingOptions(account_prefix="gc-")) == "gc-ml.vision"


def test_render_prints_sacctmgr_commands_in_dependency_order(policy: Policy) -> None:
    text = render_commands(desired_accounting(policy, MEMBERS, AccountingOptions(qos=True)), "commons.yaml")
    commands = [shlex.split(line) for line in text.splitlines() if not line.startswith("#")]
    assert all(c[:2] == ["sacctmgr", "-i"] for c in commands)
    kinds = [c[3] for c in commands]
    assert kinds == ["qos"] * 3 + ["account"] * 3 + ["user"] * 6
    assert commands[1] == [
        "sacctmgr",
        "-i",
        "add",
        "qos",
        "commons-nlp",
        "Description=plain sbatch jobs of team nlp",
        "GrpTRES=gres/gpu=12",
    ]
    assert commands[4][5:] == [
        "Parent=gpucommons",
        "Description=GPU Commons team nlp",
        "Organization=research",
        "QOS=commons-nlp",
        "DefaultQOS=commons-nlp",
    ]


def test_render_writes_a_load_file_with_the_qos_commands_on_top(policy: Policy) -> None:
    text = render_load_file(desired_accounting(policy, MEMBERS, AccountingOptions(qos=True)), "slurmc")
    lines = text.splitlines()
    assert (
        "#   sacctmgr -i add qos commons-vision 'Description=plain sbatch jobs of team vision' "
        "GrpTRES=gres/gpu=8" in lines
    )
    body = [line for line in lines if not line.startswith("#")]
    assert body[:4] == [
        "Cluster - 'slurmc'",
        "Parent - 'root'",
        "Account - 'gpucommons':Description='GPU Commons teams':Organization='gpucommons'",
        "Parent - 'gpucommons'",
    ]
    assert "User - 'alice':DefaultAccount='nlp'" in body
    assert "User - 'commons-nlp':DefaultAccount='nlp':QOS='gpucommons':DefaultQOS='gpucommons'" in body
    assert body.index("Parent - 'nlp'") < body.index("User - 'alice':DefaultAccount='nlp'")


# Listings as `sacctmgr --noheader --parsable2 show ...` prints them (Slurm keeps text in lower case).
QOS = """normal|normal qos|
gpucommons|jobs gpu commons admitted (its engine keeps them within quota)|
commons-nlp|plain sbatch jobs of team nlp|gres/gpu=8
commons-old|plain sbatch jobs of team old|gres/gpu=4
"""
ACCOUNTS = """root|default root account|root
gpucommons|gpu commons teams|gpucommons
nlp|gpu commons team nlp|cluster
old|gpu commons team old|cluster
"""
ASSOCIATIONS = "\n".join(
    [
        "c1|root|||normal|",
        "c1|root||root|normal|",
        "c1|gpucommons|root||normal|",
        "c1|nlp|gpucommons||commons-nlp|commons-nlp",
        "c1|nlp||alice|commons-nlp|commons-nlp",
        "c1|nlp||mallory|commons-nlp|commons-nlp",
        "c1|nlp||commons-nlp|gpucommons|gpucommons",
        "c1|old|gpucommons||commons-old|commons-old",
        "c1|old||erin|commons-old|commons-old",
    ]
)


def test_plan_creates_what_is_missing_updates_what_differs_and_leaves_the_rest(policy: Policy) -> None:
    desired = desired_accounting(policy, MEMBERS, AccountingOptions(qos=True))
    current = parse_current(QOS, ACCOUNTS, ASSOCIATIONS)
    changes = {(c.kind, c.name): c for c in plan(desired, current)}
    assert changes[("qos", "gpucommons")].action is Action.UNCHANGED
    nlp_qos = changes[("qos", "commons-nlp")]
    assert (nlp_qos.action, nlp_qos.args) == (
        Action.UPDATE,
        ("modify", "qos", "commons-nlp", "set", "GrpTRES=gres/gpu=12"),
    )
    assert changes[("qos", "commons-vision")].action is Action.CREATE
    nlp = changes[("account", "nlp")]
    assert nlp.action is Action.UPDATE and nlp.args[-1] == "Organization=research"
    assert changes[("account", "vision")].action is Action.CREATE
    assert changes[("user", "alice in nlp")].action is Action.UNCHANGED
    assert changes[("user", "commons-nlp in nlp")].action is Action.UNCHANGED
    assert changes[("user", "bob in nlp")].args == ("add", "user", "bob", "Account=nlp")
    assert not any(c.action is Action.REMOVE for c in changes.values())


def test_prune_removes_only_what_is_ours_and_gone(policy: Policy) -> None:
    desired = desired_accounting(policy, MEMBERS, AccountingOptions(qos=True))
    current = parse_current(QOS, ACCOUNTS, ASSOCIATIONS)
    removals = [(c.kind, c.name) for c in plan(desired, current, prune=True) if c.action is Action.REMOVE]
    assert removals == [
        ("user", "mallory in nlp"),
        ("user", "erin in old"),
        ("account", "old"),
        ("qos", "commons-old"),
    ]


def test_a_user_whose_default_account_goes_is_given_another_first(policy: Policy) -> None:
    desired = desired_accounting(policy, {"ml-vision": ["erin"]})
    current = parse_current(
        "",
        "gpucommons|gpu commons teams|gpucommons\nold|gpu commons team old|cluster\n",
        "c1|gpucommons|root||normal|\nc1|old|gpucommons||normal|\nc1|old||erin|normal|\n"
        "c1|vision|gpucommons||normal|\nc1|vision||erin|normal|\n",
        "erin|old\n",
    )
    changes = [
        (c.action, c.name, c.args)
        for c in plan(desired, current, prune=True)
        if c.action is not Action.UNCHANGED
    ]
    assert changes[-3:] == [
        (
            Action.UPDATE,
            "erin default account",
            ("modify", "user", "where", "Name=erin", "set", "DefaultAccount=vision"),
        ),
        (Action.REMOVE, "erin in old", ("remove", "user", "where", "Name=erin", "Account=old")),
        (Action.REMOVE, "old", ("remove", "account", "where", "Name=old")),
    ]


def test_an_applied_plan_leaves_nothing_to_do(policy: Policy) -> None:
    desired = desired_accounting(policy, {"ml-nlp": ["alice"]})
    current = parse_current(
        "normal|normal qos|\n",
        "gpucommons|gpu commons teams|gpucommons\nnlp|gpu commons team nlp|research\n"
        "vision|gpu commons team vision|cluster\n",
        "c1|gpucommons|root||normal|\nc1|nlp|gpucommons||normal|\nc1|vision|gpucommons||normal|\n"
        "c1|nlp||alice|normal|\nc1|nlp||commons-nlp|normal|\nc1|vision||commons-vision|normal|\n",
    )
    assert {c.action for c in plan(desired, current, prune=True)} == {Action.UNCHANGED}


def test_associations_of_another_cluster_do_not_count() -> None:
    current = parse_current("", "", "c1|nlp||alice|normal|\nc2|nlp||bob|normal|\n", cluster="c2")
    assert [a.user for a in current.associations] == ["bob"]


def test_a_listing_with_the_wrong_columns_is_refused() -> None:
    with pytest.raises(AccountingReadError, match="does not have 6 fields"):
        parse_current("", "", "c1|nlp|alice\n")

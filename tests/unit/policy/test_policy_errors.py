"""A bad policy is refused with every problem at once, each at its path and line, in a plain sentence."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from decimal import Decimal

import pytest
from policy_helpers import MINIMAL, issue_at, issues_of

from gpucommons.policy import PolicyError, parse_policy

BASE = """\
cluster:
  name: demo
  pools:
    - {name: h100, gpu_type: H100, nodes: 4, gpus_per_node: 8, price_per_gpu_hour: 2.50}
    - {name: a100, gpu_type: A100, nodes: 2, gpus_per_node: 8}
priority_classes:
  - {name: production, value: 1000, preemptible: false}
  - {name: training, value: 500, grace_period: 5m}
default_priority_class: training
cohorts:
  - {name: company}
  - {name: research, parent: company}
teams:
  - name: nlp
    cohort: research
    quota:
      h100: {gpus: 16, borrow_limit: 8, lend_limit: 12}
  - name: vision
    cohort: research
    quota:
      h100: {gpus: 8}
      a100: {gpus: 8}
chargeback:
  admin_cost: {monthly: 3000, split: weighted}
"""


def test_the_base_of_these_cases_is_valid() -> None:
    assert parse_policy(BASE).team_names == ("nlp", "vision")


@dataclass(frozen=True)
class Case:
    """`old` → `new` in BASE must be refused with an issue at `path` on `line` whose message has `words`."""

    name: str
    old: str
    new: str
    path: str
    line: int
    words: str


CASES = [
    Case(
        "unknown key in a team",
        "    cohort: research\n    quota:\n      h100: {gpus: 16",
        "    cohrt: research\n    quota:\n      h100: {gpus: 16",
        "teams[0].cohrt",
        15,
        "did you mean 'cohort'",
    ),
    Case("unknown top-level key", "chargeback:\n", "chargebak:\n", "chargebak", 23, "unknown key"),
    Case(
        "unknown key in a quota",
        "h100: {gpus: 8}",
        "h100: {gpu: 8}",
        "teams[1].quota.h100.gpu",
        21,
        "did you mean 'gpus'",
    ),
    Case(
        "unknown pool in a quota",
        "a100: {gpus: 8}",
        "h200: {gpus: 8}",
        "teams[1].quota.h200",
        22,
        "unknown pool 'h200'; did you mean 'h100'?",
    ),
    Case(
        "unknown cohort of a team",
        "    cohort: research\n    quota:\n      h100: {gpus: 8}",
        "    cohort: reserch\n    quota:\n      h100: {gpus: 8}",
        "teams[1].cohort",
        19,
        "unknown cohort 'reserch'; did you mean 'research'?",
    ),
    Case(
        "unknown parent cohort",
        "parent: company",
        "parent: dept",
        "cohorts[1].parent",
        12,
        "unknown parent cohort 'dept'",
    ),
    Case(
        "unknown default priority class",
        "default_priority_class: training",
        "default_priority_class: experiment",
        "default_priority_class",
        9,
        "unknown priority class",
    ),
    Case(
        "duplicate pool",
        "{name: a100, gpu_type: A100",
        "{name: h100, gpu_type: A100",
        "cluster.pools[1].name",
        5,
        "already defined at cluster.pools[0]",
    ),
    Case(
        "duplicate team",
        "  - name: vision",
        "  - name: nlp",
        "teams[1].name",
        18,
        "team 'nlp' is already defined",
    ),
    Case(
        "duplicate priority class",
        "{name: training, value: 500",
        "{name: production, value: 500",
        "priority_classes[1].name",
        8,
        "priority class 'production' is already defined",
    ),
    Case(
        "duplicate cohort",
        "{name: research, parent: company}",
        "{name: company, parent: company}",
        "cohorts[1].name",
        12,
        "cohort 'company' is already defined",
    ),
    Case(
        "negative nominal",
        "h100: {gpus: 8}",
        "h100: {gpus: -8}",
        "teams[1].quota.h100.gpus",
        21,
        "cannot be negative",
    ),
    Case(
        "negative price",
        "price_per_gpu_hour: 2.50",
        "price_per_gpu_hour: -2.50",
        "cluster.pools[0].price_per_gpu_hour",
        4,
        "cannot be negative",
    ),
    Case(
        "fractional GPUs",
        "h100: {gpus: 8}",
        "h100: {gpus: 7.5}",
        "teams[1].quota.h100.gpus",
        21,
        "whole number",
    ),
    Case(
        "lend limit above nominal",
        "lend_limit: 12}",
        "lend_limit: 20}",
        "teams[0].quota.h100.lend_limit",
        17,
        "lend_limit 20 GPUs is above the nominal quota of 16 GPUs",
    ),
    Case(
        "quota sum above pool capacity",
        "h100: {gpus: 8}\n      a100",
        "h100: {gpus: 24}\n      a100",
        "cluster.pools[0]",
        4,
        "add up to 40 GPUs (nlp 16 GPUs, vision 24 GPUs), above the pool's 32 GPUs",
    ),
    Case(
        "dedicated team with limits",
        "  - name: nlp\n",
        "  - name: nlp\n    isolation: dedicated\n",
        "teams[0].quota.h100.borrow_limit",
        18,
        "a dedicated team neither borrows nor lends",
    ),
    Case(
        "dedicated team on part of a node",
        "  - name: vision\n    cohort: research\n    quota:\n      h100: {gpus: 8}",
        "  - name: vision\n    isolation: dedicated\n    cohort: research\n    quota:\n      h100: {gpus: 4}",
        "teams[1].quota.h100.gpus",
        22,
        "holds whole nodes",
    ),
    Case(
        "cohort cycle",
        "  - {name: company}",
        "  - {name: company, parent: research}",
        "cohorts[0].parent",
        11,
        "company → research → company form a cycle",
    ),
    Case(
        "cohort is its own parent",
        "parent: company}",
        "parent: research}",
        "cohorts[1].parent",
        12,
        "names itself as its parent",
    ),
    Case(
        "bad duration",
        "grace_period: 5m",
        "grace_period: 5x",
        "priority_classes[1].grace_period",
        8,
        "30s, 5m, 2h, 7d",
    ),
    Case(
        "borrowed rate above one",
        "chargeback:\n",
        "chargeback:\n  borrowed_rate: 1.5\n",
        "chargeback.borrowed_rate",
        24,
        "above 0 and at most 1",
    ),
    Case(
        "borrowed rate zero",
        "chargeback:\n",
        "chargeback:\n  borrowed_rate: 0\n",
        "chargeback.borrowed_rate",
        24,
        "above 0 and at most 1",
    ),
    Case(
        "admin percentages not adding up",
        "split: weighted",
        "split: {nlp: 60, vision: 30}",
        "chargeback.admin_cost.split",
        24,
        "must add up to 100, they add up to 90",
    ),
    Case(
        "admin percentage for an unknown team",
        "split: weighted",
        "split: {nlp: 60, cv: 40}",
        "chargeback.admin_cost.split.cv",
        24,
        "unknown team 'cv'",
    ),
    Case(
        "bad admin split word",
        "split: weighted",
        "split: fair",
        "chargeback.admin_cost.split",
        24,
        "'weighted' or 'even'",
    ),
    Case(
        "quota naming a pool twice",
        "      a100: {gpus: 8}",
        "      h100: {gpus: 8}",
        "teams[1].quota.h100",
        22,
        "appears twice in teams[1].quota (first on line 21)",
    ),
    Case(
        "bad preemption word",
        "    cohort: research\n    quota:\n      h100: {gpus: 16",
        "    cohort: research\n    preemption: {reclaim: always}\n    quota:\n      h100: {gpus: 16",
        "teams[0].preemption.reclaim",
        16,
        "'never', 'lower_priority' or 'any'",
    ),
    Case(
        "borrow within cohort without reclaim",
        "    cohort: research\n    quota:\n      h100: {gpus: 16",
        "    cohort: research\n    preemption: {borrow_within_cohort: lower_priority}\n"
        "    quota:\n      h100: {gpus: 16",
        "teams[0].preemption.borrow_within_cohort",
        16,
        "needs reclaim other than never",
    ),
    Case(
        "missing required key",
        "{name: a100, gpu_type: A100, nodes: 2, ",
        "{name: a100, nodes: 2, ",
        "cluster.pools[1].gpu_type",
        5,
        "required key 'gpu_type' is missing",
    ),
    Case(
        "name with a space",
        "  - name: vision",
        "  - name: computer vision",
        "teams[1].name",
        18,
        "not a valid name",
    ),
    Case(
        "min runtime longer than max runtime",
        "grace_period: 5m}",
        "grace_period: 5m, min_runtime: 2h, max_runtime: 1h}",
        "priority_classes[1].min_runtime",
        8,
        "longer than max_runtime",
    ),
    Case(
        "cpus finer than a milli-CPU",
        "h100: {gpus: 8}",
        "h100: {gpus: 8, cpus: 0.0001}",
        "teams[1].quota.h100.cpus",
        21,
        "finer than a milli-CPU",
    ),
    Case(
        "uncatchable stop signal",
        "grace_period: 5m}",
        "grace_period: 5m, signal: SIGKILL}",
        "priority_classes[1].signal",
        8,
        "'SIGTERM'",
    ),
    Case(
        "lowercase currency",
        "chargeback:\n",
        "chargeback:\n  currency: usd\n",
        "chargeback.currency",
        24,
        "three capital letters",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_problem_is_reported_at_its_path_and_line(case: Case) -> None:
    assert case.old in BASE, f"case {case.name!r} edits text that is not in BASE"
    issues = issues_of(BASE.replace(case.old, case.new, 1))
    issue = issue_at(issues, case.path)
    assert issue.line == case.line, issue
    assert case.words in issue.message, issue


def test_cpu_quota_above_a_declared_cpu_capacity_is_refused() -> None:
    text = BASE.replace(
        "{name: a100, gpu_type: A100, nodes: 2, gpus_per_node: 8}",
        "{name: a100, gpu_type: A100, nodes: 2, gpus_per_node: 8, cpus_per_node: 32}",
    )
    text = text.replace("a100: {gpus: 8}", "a100: {gpus: 8, cpus: 80}")
    issue = issue_at(issues_of(text), "cluster.pools[1]")
    assert "add up to 80 CPUs" in issue.message and "64 CPUs" in issue.message


def test_cpu_quota_is_not_checked_in_a_pool_without_declared_cpus() -> None:
    parse_policy(BASE.replace("a100: {gpus: 8}", "a100: {gpus: 8, cpus: 80}"))


def test_every_problem_is_reported_at_once_in_file_order() -> None:
    text = (
        BASE.replace("lend_limit: 12}", "lend_limit: 20}")
        .replace("a100: {gpus: 8}", "h200: {gpus: 8}")
        .replace("  - name: vision", "  - name: nlp")
        .replace("grace_period: 5m", "grace_period: soon")
        .replace(
            "    cohort: research\n    quota:\n      h100: {gpus: 16",
            "    cohrt: research\n    quota:\n      h100: {gpus: 16",
        )
    )
    issues = issues_of(text)
    assert [i.path for i in issues] == [
        "priority_classes[1].grace_period",
        "teams[0].cohrt",
        "teams[0].quota.h100.lend_limit",
        "teams[1].name",
        "teams[1].quota.h200",
    ]
    assert [i.line for i in issues] == sorted(i.line or 0 for i in issues)


def test_a_typo_in_one_team_does_not_hide_the_problems_of_its_other_keys() -> None:
    text = BASE.replace(
        "h100: {gpus: 16, borrow_limit: 8, lend_limit: 12}",
        "h100: {gpus: 16, borrow_limt: 8, lend_limit: 20}\n      h300: {gpus: 1}",
    )
    paths = {i.path for i in issues_of(text)}
    assert {"teams[0].quota.h100.borrow_limt", "teams[0].quota.h300"} <= paths


def test_yaml_syntax_error_is_reported_with_its_line() -> None:
    issues = issues_of(MINIMAL.replace("  name: tiny\n", "  name: tiny\n  pools: [oops\n", 1))
    assert len(issues) == 1
    assert issues[0].message.startswith("YAML syntax error")
    assert issues[0].line is not None and issues[0].line >= 3


def test_tab_indentation_is_a_syntax_error_not_a_crash() -> None:
    issues = issues_of("cluster:\n\tname: x\n")
    assert issues[0].line == 2 and "YAML" in issues[0].message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("# nothing\n", "empty"),
        ("- a\n- b\n", "mapping of sections"),
        ("42\n", "mapping of sections"),
    ],
)
def test_empty_or_non_mapping_files_are_refused_plainly(text: str, words: str) -> None:
    issues = issues_of(text)
    assert len(issues) == 1 and words in issues[0].message


def test_missing_sections_are_named() -> None:
    issues = issues_of("scheduling: {}\n")
    assert {i.path for i in issues} == {"cluster", "teams"}
    assert all("is missing" in i.message for i in issues)


def test_a_list_where_a_mapping_belongs_is_a_sentence_not_a_traceback() -> None:
    issue = issue_at(issues_of(MINIMAL.replace("h100: {gpus: 8}", "h100: [8]")), "teams[0].quota.h100")
    assert "mapping" in issue.message


def test_recursive_yaml_alias_is_refused() -> None:
    issues = issues_of("cluster: &a\n  name: x\n  pools: *a\nteams: []\n")
    assert issues  # refused without RecursionError


def test_policy_error_text_lists_file_line_path_and_message() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(BASE.replace("lend_limit: 12}", "lend_limit: 20}"), source="team.yaml")
    text = str(caught.value)
    assert "team.yaml:17: teams[0].quota.h100.lend_limit: lend_limit 20 GPUs" in text
    assert caught.value.source == "team.yaml"


def test_prices_are_read_exactly_from_the_text() -> None:
    text = MINIMAL.replace("price_per_gpu_hour: 2.50", "price_per_gpu_hour: 0.1")
    assert parse_policy(textwrap.dedent(text)).pool("h100").price_per_gpu_hour == Decimal("0.1")


def test_control_character_is_a_yaml_error_with_its_line() -> None:
    issues = issues_of(MINIMAL.replace("name: tiny", "name: ti\x1fny"))
    assert len(issues) == 1 and issues[0].line == 2 and "characters are not allowed" in issues[0].message


@pytest.mark.parametrize(
    ("old", "new", "path", "words"),
    [
        ("{gpus: 8}", "{gpus: 8, borrow_limit: yes}", "teams[0].quota.h100.borrow_limit", "not true"),
        ("nodes: 2", "nodes: 40000000000000", "cluster.pools[0].nodes", "at most 1000000000000"),
        ("h100: {gpus: 8}", "1: {gpus: 8}", "teams[0].quota.1", "a key must be text"),
    ],
)
def test_booleans_absurd_amounts_and_non_text_keys_are_refused(
    old: str, new: str, path: str, words: str
) -> None:
    issue = issue_at(issues_of(MINIMAL.replace(old, new)), path)
    assert words in issue.message


def test_an_empty_list_of_priority_classes_is_refused() -> None:
    issue = issue_at(issues_of(MINIMAL + "priority_classes: []\n"), "priority_classes")
    assert "must not be empty" in issue.message


def test_a_malformed_default_class_gets_one_error_not_two() -> None:
    issues = issues_of(MINIMAL + "default_priority_class: 'bad name!'\n")
    assert [i.path for i in issues] == ["default_priority_class"]
    assert "not a valid name" in issues[0].message

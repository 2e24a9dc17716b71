"""What the AdmissionCheck `gpucommons-governance` answers (pure: `governance.decide`)."""

from __future__ import annotations

import pytest
from governance_helpers import SPENT, policy, workload

from gpucommons.backends.kubernetes.governance import (
    CLASS_GRANT_ANNOTATION,
    CheckState,
    Verdict,
    class_grant,
    decide,
    is_our_note,
    pending_note,
    retry_after_seconds,
)

KEY = b"shared by the server and the controller"
APPROVED = "approved by GPU Commons: priority class 'training', team nlp"
NOT_OURS = "namespace kube-system is not a GPU Commons team's: no rules apply"
RESERVED = "priority class 'production' is reserved for team admins of team recsys"
HELD = (
    "held by GPU Commons: team nlp has spent 1,000.00 USD of its hard monthly budget of 1,000.00 USD; "
    "its new tasks wait until the budget is raised or the month ends"
)


@pytest.mark.parametrize(
    ("namespace", "cls", "spend", "state", "message"),
    [
        (
            "team-nlp",
            "training",
            {},
            CheckState.READY,
            "approved by GPU Commons: priority class 'training', team nlp",
        ),
        ("team-nlp", "training", {"nlp": SPENT - 1}, CheckState.READY, None),
        ("team-nlp", "training", {"nlp": SPENT}, CheckState.RETRY, HELD),
        ("team-nlp", None, {"nlp": SPENT}, CheckState.RETRY, HELD),  # no class: the default's rules
        ("team-nlp", "hotfix", {"nlp": 10 * SPENT}, CheckState.READY, None),  # budget_exempt
        ("team-vision", "training", {"vision": 10 * SPENT}, CheckState.READY, None),  # soft budget
        ("team-recsys", "training", {"recsys": 10 * SPENT}, CheckState.READY, None),  # no budget
        ("team-vision", "vision-only", {}, CheckState.READY, None),
        (
            "team-nlp",
            "vision-only",  # the Kubernetes name of vision_only
            {},
            CheckState.REJECTED,
            "priority class 'vision_only' is reserved for team vision; team 'nlp' may not use it",
        ),
        (
            "team-nlp",
            "production",
            {"nlp": SPENT},  # the class rule first: retrying would not help
            CheckState.REJECTED,
            f"{RESERVED}; team 'nlp' may not use it",
        ),
        (
            "team-recsys",
            "production",
            {},
            CheckState.REJECTED,
            f"{RESERVED}; a Job created outside GPU Commons carries no identity to check that rule "
            "against: submit the task with `commons submit`",
        ),
        (
            "team-nlp",
            "urgent",
            {},
            CheckState.REJECTED,
            "priority class 'urgent' is not a GPU Commons priority class (production, training, hotfix, "
            "vision-only): label the Job kueue.x-k8s.io/priority-class with one of them",
        ),
        (
            "kube-system",
            "urgent",
            {},
            CheckState.READY,
            "namespace kube-system is not a GPU Commons team's: no rules apply",
        ),
        ("default", "training", {"nlp": 10 * SPENT}, CheckState.READY, None),
    ],
)
def test_the_verdict_table(
    namespace: str, cls: str | None, spend: dict[str, int], state: CheckState, message: str | None
) -> None:
    verdict = decide(workload(namespace, cls), policy(), spend)
    assert verdict.state is state
    if message is not None:
        assert verdict.message == message


def test_a_pod_priority_class_is_not_one_of_ours() -> None:
    obj = workload("team-nlp", "training", group="scheduling.k8s.io", kind="PriorityClass")
    verdict = decide(obj, policy(), {})
    assert verdict.state is CheckState.REJECTED
    assert verdict.message.startswith("pod priority class 'training' is not a GPU Commons priority class")


def _granted(obj: dict, grant: str) -> dict:
    obj["spec"]["podSets"][0]["template"]["metadata"]["annotations"] = {CLASS_GRANT_ANNOTATION: grant}
    return obj


def test_a_job_the_server_signed_passes_a_roles_rule() -> None:
    job = "commons-t0a1b2c3d4e"  # the owner of the recorded Workload
    signed = _granted(
        workload("team-recsys", "production"), class_grant(KEY, "team-recsys", job, "production")
    )
    assert decide(signed, policy(), {}, grant_key=KEY).state is CheckState.READY
    assert decide(signed, policy(), {}).state is CheckState.REJECTED, "no key: nothing proves the roles"
    assert decide(signed, policy(), {}, grant_key=b"another key").state is CheckState.REJECTED


@pytest.mark.parametrize(
    ("namespace", "job", "cls"),
    [
        ("team-recsys", "commons-tother", "production"),  # copied from another Job
        ("team-nlp", "commons-t0a1b2c3d4e", "production"),  # from another namespace
        ("team-recsys", "commons-t0a1b2c3d4e", "training"),  # for another class
    ],
)
def test_a_copied_or_forged_grant_does_not(namespace: str, job: str, cls: str) -> None:
    forged = _granted(workload("team-recsys", "production"), class_grant(KEY, namespace, job, cls))
    assert decide(forged, policy(), {}, grant_key=KEY).state is CheckState.REJECTED
    assert decide(
        _granted(workload("team-recsys", "production"), "v1:00"), policy(), {}, grant_key=KEY
    ).state is (CheckState.REJECTED)


def test_the_teams_rule_holds_even_for_a_signed_job() -> None:
    job = "commons-t0a1b2c3d4e"
    signed = _granted(workload("team-nlp", "production"), class_grant(KEY, "team-nlp", job, "production"))
    assert decide(signed, policy(), {}, grant_key=KEY).state is CheckState.REJECTED


def test_retry_backs_off_as_kueue_does_and_stops_at_an_hour() -> None:
    assert [retry_after_seconds(n) for n in (0, 1, 2, 5, 6, 100)] == [60, 120, 240, 1920, 3600, 3600]


def test_the_note_of_a_waiting_workload_says_what_the_check_will_answer() -> None:
    held = Verdict(CheckState.RETRY, HELD)
    assert pending_note(held) == HELD and is_our_note(HELD)
    rejected = pending_note(Verdict(CheckState.REJECTED, "priority class 'x' is reserved for team a"))
    assert rejected is not None and is_our_note(rejected) and rejected.endswith("reserved for team a")
    assert pending_note(Verdict(CheckState.READY, "approved")) is None
    assert not is_our_note("Reset to Pending after eviction. Previously: Retry")


def test_jobs_the_server_creates_carry_the_grant_on_their_pod_template() -> None:
    from gpucommons.backends.kubernetes.jobs import JobOptions, JobTask, task_job

    task = JobTask("t1", "recsys", ("serve",), "ghcr.io/acme/serve:1", 4, "production")
    job = task_job(policy(), task, JobOptions(grant_key=KEY))
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    grant = class_grant(KEY, "team-recsys", "commons-t1", "production")
    assert annotations == {CLASS_GRANT_ANNOTATION: grant}
    assert "annotations" not in task_job(policy(), task)["spec"]["template"]["metadata"]

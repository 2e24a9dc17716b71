"""Server-side apply of the rendered policy against the fake cluster (gpucommons.testing.fake_k8s)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from k8s_client_helpers import EXAMPLE, example_objects, fake_cluster

from gpucommons.backends.kubernetes import RenderOptions, checked_render
from gpucommons.backends.kubernetes.apply import (
    Action,
    ApplyOptions,
    FieldConflict,
    Forbidden,
    KueueMissing,
    PartiallyApplied,
    Refused,
    apply_manifests,
)
from gpucommons.backends.kubernetes.connection import ClientMissing, connect
from gpucommons.backends.kubernetes.kinds import apply_order
from gpucommons.policy import load_policy

pytestmark = pytest.mark.timeout(60)


def _kind_and_name(path: str) -> str:
    return path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]


def test_first_apply_creates_everything_after_a_complete_dry_run(tmp_path: Path) -> None:
    objects = example_objects()
    with fake_cluster(tmp_path) as (fake, api):
        report = apply_manifests(api, objects, ApplyOptions())
    assert {r.action for r in report.results} == {Action.CREATED}
    assert len(report.results) == len(objects)
    patches = [r for r in fake.requests if r.method == "PATCH"]
    dry = [i for i, r in enumerate(patches) if r.param("dryRun") == "All"]
    real = [i for i, r in enumerate(patches) if r.param("dryRun") is None]
    assert len(real) == len(objects)
    assert max(dry) < min(real), "every dry run comes before the first write"
    for request in patches:
        assert request.headers["content-type"] == "application/apply-patch+yaml"
        assert request.query["fieldManager"] == ["gpucommons"]
        assert "force" not in request.query


def test_objects_are_written_in_dependency_order(tmp_path: Path) -> None:
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, example_objects(), ApplyOptions())
    order = [_kind_and_name(r.path) for r in fake.writes()]

    def first(prefix: str) -> int:
        return min(i for i, o in enumerate(order) if o.startswith(prefix))

    def last(prefix: str) -> int:
        return max(i for i, o in enumerate(order) if o.startswith(prefix))

    for before in ("resourceflavors/", "workloadpriorityclasses/", "cohorts/", "admissionchecks/"):
        assert last(before) < first("clusterqueues/")
    assert last("clusterqueues/") < first("localqueues/")
    assert last("namespaces/") < min(first("rolebindings/"), first("networkpolicies/"), first("localqueues/"))
    assert order.index("cohorts/company") < order.index("cohorts/research")


def test_parent_cohorts_come_first_whatever_the_render_order() -> None:
    child = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "lab"}}
    child["spec"] = {"parentName": "dept"}
    parent = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "dept"}}
    parent["spec"] = {"parentName": "company"}
    root = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "company"}}
    assert [o["metadata"]["name"] for o in apply_order([child, parent, root])] == ["company", "dept", "lab"]


def test_a_second_apply_changes_nothing_and_says_so(tmp_path: Path) -> None:
    objects = example_objects()
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, objects, ApplyOptions())
        versions = {p: o["metadata"]["resourceVersion"] for p, o in fake.objects.items()}
        writes = len(fake.writes())
        report = apply_manifests(api, objects, ApplyOptions())
        assert {p: o["metadata"]["resourceVersion"] for p, o in fake.objects.items()} == versions
        assert len(fake.writes()) == writes, "what the dry run found unchanged is not sent again"
    assert report.count(Action.UNCHANGED) == len(objects)


def test_a_changed_quota_configures_only_that_teams_queue(tmp_path: Path) -> None:
    changed = EXAMPLE.read_text().replace("a100: {gpus: 8, lend_limit: 4}", "a100: {gpus: 6, lend_limit: 4}")
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, example_objects(), ApplyOptions())
        report = apply_manifests(api, example_objects(changed, tmp_path), ApplyOptions())
        queue = fake.objects["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/vision"]
    configured = [(r.kind, r.name, r.note) for r in report.results if r.action is Action.CONFIGURED]
    path = "spec.resourceGroups[0].flavors[a100].resources[nvidia.com/gpu].nominalQuota"
    assert configured == [("ClusterQueue", "vision", f"{path}: 8 → 6")]
    a100 = queue["spec"]["resourceGroups"][0]["flavors"][0]
    assert a100["name"] == "a100" and a100["resources"][0]["nominalQuota"] == 6
    assert queue["metadata"]["generation"] == 2


def test_dry_run_writes_nothing_and_reports_what_would_be_created(tmp_path: Path) -> None:
    objects = example_objects()
    with fake_cluster(tmp_path) as (fake, api):
        report = apply_manifests(api, objects, ApplyOptions(dry_run=True))
        assert fake.objects == {}
        assert fake.writes() == []
    assert report.dry_run and report.count(Action.CREATED) == len(objects)
    inside_new = [r for r in report.results if r.namespace]
    assert inside_new and all("new namespace" in r.note for r in inside_new)
    assert not any(r.note for r in report.results if not r.namespace)


def test_dry_run_against_an_applied_cluster_shows_the_one_change(tmp_path: Path) -> None:
    changed = EXAMPLE.read_text().replace("queueing: best_effort_fifo", "queueing: strict_fifo")
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, example_objects(), ApplyOptions())
        before = {p: o["metadata"]["resourceVersion"] for p, o in fake.objects.items()}
        report = apply_manifests(api, example_objects(changed, tmp_path), ApplyOptions(dry_run=True))
        assert {p: o["metadata"]["resourceVersion"] for p, o in fake.objects.items()} == before
    assert sorted(r.name for r in report.results if r.action is Action.CONFIGURED) == [
        "nlp",
        "recsys",
        "vision",
    ]
    notes = {r.note for r in report.results if r.action is Action.CONFIGURED}
    assert notes == {"spec.queueingStrategy: BestEffortFIFO → StrictFIFO"}
    assert not any("new namespace" in r.note for r in report.results)  # the server checked everything


def test_a_field_owned_by_another_manager_stops_the_apply_before_any_write(tmp_path: Path) -> None:
    objects = example_objects()
    queue = next(o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "nlp")
    edited = {**queue, "spec": {**queue["spec"], "queueingStrategy": "StrictFIFO"}}
    with fake_cluster(tmp_path) as (fake, api):
        fake.seed("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp", edited, manager="kubectl-edit")
        with pytest.raises(FieldConflict) as caught:
            apply_manifests(api, objects, ApplyOptions())
        assert fake.writes() == []
    message = str(caught.value)
    assert "ClusterQueue nlp" in message and ".spec.queueingStrategy" in message
    assert '"kubectl-edit"' in message and "--force" in message


def test_force_takes_the_conflicting_fields_over(tmp_path: Path) -> None:
    objects = example_objects()
    queue = next(o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "nlp")
    edited = {**queue, "spec": {**queue["spec"], "queueingStrategy": "StrictFIFO"}}
    with fake_cluster(tmp_path) as (fake, api):
        fake.seed("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp", edited, manager="kubectl-edit")
        report = apply_manifests(api, objects, ApplyOptions(force=True))
        stored = fake.objects["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp"]
        owners = fake.field_owners("ClusterQueue", "nlp")[".spec.queueingStrategy"]
        assert all(r.query.get("force") == ["true"] for r in fake.requests if r.method == "PATCH")
    assert stored["spec"]["queueingStrategy"] == "BestEffortFIFO" and owners == {"gpucommons"}
    assert [r.name for r in report.results if r.action is Action.CONFIGURED] == ["nlp"]


def test_a_cluster_without_kueue_is_refused_with_install_instructions(tmp_path: Path) -> None:
    with fake_cluster(tmp_path, kueue=False) as (fake, api), pytest.raises(KueueMissing) as caught:
        apply_manifests(api, example_objects(), ApplyOptions())
    assert "install Kueue v0.19.2 or later first" in str(caught.value)
    assert [r.path for r in fake.requests] == ["/apis/kueue.x-k8s.io/v1beta2"]


def test_rbac_refusal_names_the_verb_and_resource_and_writes_nothing(tmp_path: Path) -> None:
    with fake_cluster(tmp_path, forbidden={("patch", "clusterqueues")}) as (fake, api):
        with pytest.raises(Forbidden) as caught:
            apply_manifests(api, example_objects(), ApplyOptions())
        assert fake.writes() == []
    message = str(caught.value)
    assert 'cannot patch resource "clusterqueues" in API group "kueue.x-k8s.io"' in message
    assert "platform admin" in message


def test_a_webhook_refusal_in_the_dry_run_leaves_the_cluster_untouched(tmp_path: Path) -> None:
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/vision"
    field = "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"
    refusal = (
        "status_invalid",
        {"kind": "ClusterQueue", "group": "kueue.x-k8s.io", "name": "vision", "field": field},
    )
    with fake_cluster(tmp_path, refusals={path: refusal}) as (fake, api):
        with pytest.raises(Refused) as caught:
            apply_manifests(api, example_objects(), ApplyOptions())
        assert fake.writes() == []
    assert str(caught.value).startswith("ClusterQueue vision: the cluster refused it:")
    assert "must be less than or equal to the nominalQuota" in str(caught.value)


def test_expired_credentials_are_reported_as_such(tmp_path: Path) -> None:
    with fake_cluster(tmp_path) as (fake, api):
        fake.token = "rotated"
        with pytest.raises(Refused, match="401 Unauthorized"):
            apply_manifests(api, example_objects(), ApplyOptions())


def test_a_write_refused_after_a_clean_dry_run_says_how_far_it_got(tmp_path: Path) -> None:
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp"
    refusal = (
        "status_forbidden",
        {
            "subject": 'clusterqueues.kueue.x-k8s.io "nlp"',
            "user": "alice",
            "verb": "patch",
            "plural": "clusterqueues",
            "group": "kueue.x-k8s.io",
            "scope": "at the cluster scope",
            "name": "nlp",
        },
    )
    objects = example_objects()
    with fake_cluster(tmp_path, write_refusals={path: refusal}) as (fake, api):
        with pytest.raises(PartiallyApplied) as caught:
            apply_manifests(api, objects, ApplyOptions())
        written = len(fake.objects)
    order = [o["metadata"]["name"] for o in apply_order(objects)]
    assert written == order.index("nlp") > 0
    assert f"{written} of {len(objects)} objects were applied before this error" in str(caught.value)
    assert "apply again" in str(caught.value)


def _without_recsys() -> str:
    text = EXAMPLE.read_text()
    return text[: text.index("  - name: recsys")] + text[text.index("scheduling:") :]


def test_prune_deletes_only_labelled_objects_the_policy_no_longer_renders(tmp_path: Path) -> None:
    foreign = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-platform"}}
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, example_objects(), ApplyOptions())
        fake.seed("/api/v1/namespaces/ml-platform", foreign, manager="kubectl")
        report = apply_manifests(api, example_objects(_without_recsys(), tmp_path), ApplyOptions(prune=True))
        remaining = set(fake.objects)
        deletes = [r for r in fake.writes() if r.method == "DELETE"]
    pruned = [(r.kind, r.namespace, r.name) for r in report.results if r.action is Action.PRUNED]
    assert pruned == [("ClusterQueue", "", "recsys"), ("Namespace", "", "team-recsys")]
    assert [d.param("propagationPolicy") for d in deletes] == ["Background", "Background"]
    assert "/api/v1/namespaces/ml-platform" in remaining
    assert not any("recsys" in p for p in remaining)


def test_turning_the_governance_check_off_drops_it_from_the_queues_and_prunes_it(tmp_path: Path) -> None:
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, example_objects(), ApplyOptions())
        without = checked_render(load_policy(EXAMPLE), RenderOptions(governance_check=False))
        report = apply_manifests(api, without, ApplyOptions(prune=True))
        nlp = fake.get("ClusterQueue", "nlp")
        check = fake.get("AdmissionCheck", "gpucommons-governance")
    pruned = [(r.kind, r.name) for r in report.results if r.action is Action.PRUNED]
    assert pruned == [("AdmissionCheck", "gpucommons-governance")]
    assert nlp is not None and "admissionChecksStrategy" not in nlp["spec"]
    assert check is None


def test_prune_in_a_dry_run_deletes_nothing(tmp_path: Path) -> None:
    with fake_cluster(tmp_path) as (fake, api):
        apply_manifests(api, example_objects(), ApplyOptions())
        before = set(fake.objects)
        report = apply_manifests(
            api, example_objects(_without_recsys(), tmp_path), ApplyOptions(prune=True, dry_run=True)
        )
        assert set(fake.objects) == before
        assert all(r.param("dryRun") == "All" for r in fake.requests if r.method == "DELETE")
    assert report.count(Action.PRUNED) == 2


def test_prune_without_the_right_to_list_is_refused_before_any_write(tmp_path: Path) -> None:
    with fake_cluster(tmp_path, forbidden={("list", "networkpolicies")}) as (fake, api):
        with pytest.raises(Forbidden, match='cannot list resource "networkpolicies"'):
            apply_manifests(api, example_objects(), ApplyOptions(prune=True))
        assert fake.writes() == []


def test_a_missing_kubernetes_client_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ClientMissing, match=r"pip install 'gpucommons\[kubernetes\]'"):
        connect()

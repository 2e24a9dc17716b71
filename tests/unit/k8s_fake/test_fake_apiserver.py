"""The fake API server answers the real `kubernetes` client as a cluster would: watches with
bookmarks and 410 Gone, selectors, server-side apply conflicts, optimistic concurrency, logs,
the visibility API and injected faults."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_k8s_helpers import JOB, NAMESPACE, job_from_shape, setup_nlp

from gpucommons.testing.fake_k8s import FakeCluster
from gpucommons.testing.fake_k8s.fields import remove_path

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster(time_scale=0, bookmark_interval=0.1) as fake:
        yield fake


@pytest.fixture
def api(cluster: FakeCluster, tmp_path: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig(tmp_path)), client_configuration=configuration)
    return client.ApiClient(configuration)


def _namespace(cluster: FakeCluster, name: str = NAMESPACE) -> None:
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": {"a": "1"},
    }


def test_resource_versions_come_from_one_counter_and_lists_are_consistent(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    first = core.create_namespaced_config_map(NAMESPACE, _cm("one"))
    second = core.create_namespaced_config_map(NAMESPACE, _cm("two"))
    assert int(second.metadata.resource_version) == int(first.metadata.resource_version) + 1
    listed = core.list_namespaced_config_map(NAMESPACE)
    assert listed.metadata.resource_version == second.metadata.resource_version
    assert first.metadata.uid != second.metadata.uid and first.metadata.creation_timestamp is not None


def test_label_and_field_selectors_filter_lists(cluster: FakeCluster, api: client.ApiClient) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(NAMESPACE, _cm("a", {"team": "nlp", "tier": "gold"}))
    core.create_namespaced_config_map(NAMESPACE, _cm("b", {"team": "cv"}))
    core.create_namespaced_config_map(NAMESPACE, _cm("c"))

    def names(**selectors: str) -> list[str]:
        return [i.metadata.name for i in core.list_namespaced_config_map(NAMESPACE, **selectors).items]

    assert names(label_selector="team=nlp") == ["a"]
    assert names(label_selector="team!=nlp") == ["b", "c"]
    assert names(label_selector="team in (nlp,cv)") == ["a", "b"]
    assert names(label_selector="team") == ["a", "b"]
    assert names(label_selector="!team") == ["c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_config_map(NAMESPACE, field_selector="data.a=1")
    assert refused.value.status == 400 and "field label not supported" in refused.value.body


def test_workloads_select_by_cluster_queue(cluster: FakeCluster, api: client.ApiClient) -> None:
    setup_nlp(cluster)
    cluster.create(job_from_shape())
    cluster.advance(1)
    custom = client.CustomObjectsApi(api)
    found = custom.list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "workloads", field_selector="status.admission.clusterQueue=nlp"
    )
    other = custom.list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "workloads", field_selector="status.admission.clusterQueue=cv"
    )
    assert len(found["items"]) == 1 and other["items"] == []


def test_a_watch_streams_changes_and_bookmarks_from_a_resource_version(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    start = core.list_namespaced_config_map(NAMESPACE).metadata.resource_version
    events: list[tuple[str, str]] = []

    def run() -> None:
        stream = watch.Watch().stream(
            core.list_namespaced_config_map,
            NAMESPACE,
            resource_version=start,
            allow_watch_bookmarks=True,
            timeout_seconds=2,
        )
        for event in stream:
            name = event["object"].metadata.name if event["type"] != "BOOKMARK" else ""
            events.append((event["type"], name))

    thread = threading.Thread(target=run)
    thread.start()
    cluster.wait_for(lambda: any(r.param("watch") for r in cluster.requests), "the watch")
    core.create_namespaced_config_map(NAMESPACE, _cm("a"))
    core.patch_namespaced_config_map("a", NAMESPACE, {"data": {"a": "2"}})
    core.delete_namespaced_config_map("a", NAMESPACE)
    thread.join(timeout=10)
    changes = [e for e in events if e[0] != "BOOKMARK"]
    assert changes == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert ("BOOKMARK", "") in events


def test_a_watch_from_a_compacted_version_gets_410_and_resumes_after_a_relist(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    old = core.list_namespaced_config_map(NAMESPACE).metadata.resource_version
    core.create_namespaced_config_map(NAMESPACE, _cm("a"))
    cluster.store.compact()
    stream = watch.Watch().stream(
        core.list_namespaced_config_map, NAMESPACE, resource_version=old, timeout_seconds=1
    )
    with pytest.raises(ApiException) as gone:
        next(iter(stream))
    assert gone.value.status == 410 and "too old resource version" in str(gone.value.reason)
    with pytest.raises(ApiException) as listed:
        core.list_namespaced_config_map(NAMESPACE, resource_version=old, resource_version_match="Exact")
    assert listed.value.status == 410 and json.loads(listed.value.body)["reason"] == "Expired"
    fresh = core.list_namespaced_config_map(NAMESPACE)
    seen: list[str] = []

    def resume() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_config_map,
            NAMESPACE,
            resource_version=fresh.metadata.resource_version,
            timeout_seconds=2,
        ):
            seen.append(f"{event['type']} {event['object'].metadata.name}")

    thread = threading.Thread(target=resume)
    thread.start()
    time.sleep(0.2)
    core.create_namespaced_config_map(NAMESPACE, _cm("b"))
    thread.join(timeout=10)
    assert seen == ["ADDED b"]


def test_server_side_apply_conflicts_name_the_owner_and_force_takes_the_field(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    _namespace(cluster)
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/settings"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"mode": "a"}}

    def apply(manager: str, data: dict[str, str], force: bool = False) -> Any:
        query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
        return api.call_api(
            *api.param_serialize(
                "PATCH",
                path,
                query_params=query,
                body={**body, "data": data},
                header_params={"Content-Type": "application/apply-patch+yaml"},
                auth_settings=["BearerToken"],
            )
        )

    assert apply("alice", {"mode": "a"}).status == 201
    conflict = apply("bob", {"mode": "b"})
    conflict.read()
    assert conflict.status == 409
    status = json.loads(conflict.data)
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice" using v1: .data.mode'
    forced = apply("bob", {"mode": "b"}, force=True)
    forced.read()
    assert forced.status == 200 and cluster.field_owners("ConfigMap", "settings", NAMESPACE)[
        ".data.mode"
    ] == {"bob"}
    shared = apply("alice", {"mode": "b", "extra": "x"})
    shared.read()
    assert cluster.field_owners("ConfigMap", "settings", NAMESPACE)[".data.mode"] == {"alice", "bob"}
    dropped = apply("alice", {"mode": "b"})
    dropped.read()
    assert "extra" not in json.loads(dropped.data)["data"], (
        "a field its only manager stops applying is removed"
    )


def test_a_stale_resource_version_is_a_conflict(cluster: FakeCluster, api: client.ApiClient) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map(NAMESPACE, _cm("a"))
    core.patch_namespaced_config_map("a", NAMESPACE, {"data": {"a": "2"}})
    created.data = {"a": "3"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("a", NAMESPACE, created)
    assert conflict.value.status == 409 and "the object has been modified" in conflict.value.body


def test_dry_run_writes_nothing(cluster: FakeCluster, api: client.ApiClient) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    before = cluster.store.resource_version
    core.create_namespaced_config_map(NAMESPACE, _cm("a"), dry_run="All")
    assert cluster.get("ConfigMap", "a", NAMESPACE) is None and cluster.store.resource_version == before


def test_injected_5xx_and_hangs_hit_only_the_named_verb_and_resource(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    cluster.faults.fail_next("list", "configmaps", n=2, code=503)
    for _ in range(2):
        with pytest.raises(ApiException) as failed:
            core.list_namespaced_config_map(NAMESPACE)
        assert failed.value.status == 503
    core.create_namespaced_config_map(NAMESPACE, _cm("a"))
    assert len(core.list_namespaced_config_map(NAMESPACE).items) == 1
    cluster.faults.fail_next("create", "configmaps", code=500)
    with pytest.raises(ApiException) as internal:
        core.create_namespaced_config_map(NAMESPACE, _cm("b"))
    assert internal.value.status == 500 and json.loads(internal.value.body)["reason"] == "InternalError"
    cluster.faults.hang_next("get", "configmaps", n=10, seconds=5)
    started = time.monotonic()
    with pytest.raises(Exception, match=r"timed out"):
        core.read_namespaced_config_map("a", NAMESPACE, _request_timeout=0.3)
    assert time.monotonic() - started < 3
    cluster.faults.clear()
    assert core.read_namespaced_config_map("a", NAMESPACE).data == {"a": "1"}
    assert [f[2] for f in cluster.faults.fired][:4] == ["status", "status", "status", "hang"]


def test_dropped_watches_end_and_expired_watches_get_an_error_event(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    _namespace(cluster)
    core = client.CoreV1Api(api)
    ended = threading.Event()

    def run() -> None:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, NAMESPACE, timeout_seconds=30):
            pass
        ended.set()

    thread = threading.Thread(target=run)
    thread.start()
    cluster.wait_for(lambda: any(r.param("watch") for r in cluster.requests), "the watch")
    cluster.faults.drop_watches()
    assert ended.wait(5), "the stream ends when the server drops it"
    cluster.faults.expire_next_watches()
    version = core.list_namespaced_config_map(NAMESPACE).metadata.resource_version
    with pytest.raises(ApiException) as gone:
        next(
            iter(
                watch.Watch().stream(
                    core.list_namespaced_config_map, NAMESPACE, resource_version=version, timeout_seconds=5
                )
            )
        )
    assert gone.value.status == 410


def test_pod_logs_are_served_and_followed_until_the_container_ends(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    cluster.clock.set_scale(50)
    setup_nlp(cluster)
    cluster.program(NAMESPACE, JOB, run_seconds=20, lines=["epoch 1 done"])
    cluster.create(job_from_shape())
    pod = cluster.wait_for(
        lambda: next(
            (p for p in cluster.pods_of(NAMESPACE, JOB) if p["status"].get("phase") == "Running"), None
        ),
        "a running pod",
    )
    core = client.CoreV1Api(api)
    followed = core.read_namespaced_pod_log(
        pod["metadata"]["name"], NAMESPACE, follow=True, _preload_content=False
    )
    text = b"".join(followed.stream()).decode()
    assert "started: python -m trainer.main" in text and "epoch 1 done" in text
    assert text.rstrip().endswith("container trainer exited with code 0")


def test_the_visibility_api_lists_pending_workloads_with_positions(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    setup_nlp(cluster)
    for name in ("commons-big", "commons-second", "commons-third"):
        cluster.create(job_from_shape(job=name, gpus=32 if name == "commons-big" else 8))
        cluster.advance(1)

    def get(path: str) -> Any:
        answer = api.call_api(*api.param_serialize("GET", path, auth_settings=["BearerToken"]))
        answer.read()
        return json.loads(answer.data)

    summary = get("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/nlp/pendingworkloads")
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert [
        (i["metadata"]["ownerReferences"][0]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in summary["items"]
    ] == [
        ("commons-second", 0, 0),
        ("commons-third", 1, 1),
    ]
    local = get(
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/localqueues/default/pendingworkloads"
    )
    assert [i["priority"] for i in local["items"]] == [500, 500]


def test_deleting_a_job_in_background_takes_its_pods_and_workload(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    setup_nlp(cluster)
    cluster.create(job_from_shape())
    cluster.advance(5)
    assert cluster.pods_of(NAMESPACE, JOB) and cluster.workload_of(NAMESPACE, JOB)
    client.BatchV1Api(api).delete_namespaced_job(JOB, NAMESPACE, propagation_policy="Background")
    cluster.advance(31)
    assert cluster.list("Pod", NAMESPACE) == [] and cluster.list("Workload", NAMESPACE) == []


def test_deleting_a_job_without_a_policy_orphans_its_pods_and_finishes_its_workload(
    cluster: FakeCluster, api: client.ApiClient
) -> None:
    setup_nlp(cluster)
    cluster.create(job_from_shape())
    cluster.advance(5)
    client.BatchV1Api(api).delete_namespaced_job(JOB, NAMESPACE)
    cluster.advance(1)
    [pod] = cluster.list("Pod", NAMESPACE)
    [workload] = cluster.list("Workload", NAMESPACE)
    assert pod["status"]["phase"] == "Running" and "ownerReferences" not in pod["metadata"]
    finished = next(c for c in workload["status"]["conditions"] if c["type"] == "Finished")
    assert (finished["reason"], finished["message"]) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
    )


def test_an_applied_keyed_item_left_with_nothing_but_its_key_is_removed_whole() -> None:
    """A manager that stops applying `admissionChecks[name=a]` (its only field the key) drops the item,
    not just its `name`: the API server would not keep `{}` (it fails the CRD's `required: [name]`)."""
    obj = {"spec": {"strategy": {"admissionChecks": [{"name": "a"}, {"name": "b"}]}}}
    item = (("f", "spec"), ("f", "strategy"), ("f", "admissionChecks"), ("k", '{"name":"a"}'))
    remove_path(obj, (*item, ("f", "name")))
    assert obj == {"spec": {"strategy": {"admissionChecks": [{"name": "b"}]}}}

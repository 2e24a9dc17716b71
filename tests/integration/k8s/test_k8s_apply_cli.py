"""`commons k8s apply` end to end: kubeconfig → the official client → HTTP on loopback → the fake cluster.

Every failure is one message on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucommons.cli.main import app
from gpucommons.testing.fake_k8s import FakeCluster

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "commons.yaml"
runner = CliRunner(env={"COLUMNS": "200"})  # wide enough that rich folds no table cell
pytestmark = pytest.mark.timeout(120)


def _apply(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["k8s", "apply", "--policy", str(EXAMPLE), *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_dry_run_prints_what_would_be_created_and_writes_nothing(tmp_path: Path) -> None:
    with FakeCluster() as fake:
        code, out, err = _apply("--kubeconfig", str(fake.kubeconfig(tmp_path)), "--dry-run")
        assert fake.objects == {}
    assert code == 0, err
    assert "would be created" in out and "ClusterQueue" in out and "team-nlp" in out
    assert "server-side dry run, nothing was written: 42 to create, 0 to configure, 0 unchanged" in out


def test_apply_then_apply_again_reports_created_then_unchanged(tmp_path: Path) -> None:
    with FakeCluster() as fake:
        kubeconfig = str(fake.kubeconfig(tmp_path, context="prod"))
        first = _apply("--kubeconfig", kubeconfig, "--context", "prod")
        second = _apply("--kubeconfig", kubeconfig, "--context", "prod")
        stored = len(fake.objects)
    assert first[0] == 0 and second[0] == 0, first[2] + second[2]
    assert f"{stored} created, 0 configured, 0 unchanged" in first[1]
    assert f"0 created, 0 configured, {stored} unchanged" in second[1]
    assert "applied with field manager gpucommons" in second[1]


def test_prune_removes_a_team_that_left_the_policy(tmp_path: Path) -> None:
    smaller = tmp_path / "smaller.yaml"
    text = EXAMPLE.read_text()
    smaller.write_text(text[: text.index("  - name: recsys")] + text[text.index("scheduling:") :])
    with FakeCluster() as fake:
        kubeconfig = str(fake.kubeconfig(tmp_path))
        assert _apply("--kubeconfig", kubeconfig)[0] == 0
        result = runner.invoke(
            app, ["k8s", "apply", "-p", str(smaller), "--kubeconfig", kubeconfig, "--prune"]
        )
        remaining = set(fake.objects)
    assert result.exit_code == 0, result.stderr
    assert "pruned" in result.stdout
    assert "/api/v1/namespaces/team-recsys" not in remaining
    assert "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/recsys" not in remaining
    assert "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/nlp" in remaining


def test_no_kubeconfig_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = _apply()
    assert code == 1
    assert "no kubeconfig found" in err and "--kubeconfig" in err


def test_a_missing_kubeconfig_file_is_named(tmp_path: Path) -> None:
    code, _, err = _apply("--kubeconfig", str(tmp_path / "nope"))
    assert code == 1 and "nope: no such kubeconfig file" in err


def test_an_unknown_context_is_named(tmp_path: Path) -> None:
    with FakeCluster() as fake:
        code, _, err = _apply("--kubeconfig", str(fake.kubeconfig(tmp_path)), "--context", "staging")
    assert code == 1 and "'staging'" in err


def test_an_unreachable_cluster_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with FakeCluster() as fake:
        kubeconfig = fake.kubeconfig(tmp_path)
    kubeconfig.write_text(kubeconfig.read_text().replace(fake.url, f"http://127.0.0.1:{port}"))
    code, _, err = _apply("--kubeconfig", str(kubeconfig))
    assert code == 1
    assert f"cannot reach the Kubernetes API server at http://127.0.0.1:{port}" in err
    assert "connection refused" in err


def test_a_cluster_without_kueue_is_refused(tmp_path: Path) -> None:
    with FakeCluster(kueue=False) as fake:
        code, _, err = _apply("--kubeconfig", str(fake.kubeconfig(tmp_path)))
    assert code == 1 and "install Kueue v0.19.2 or later first" in err


def test_rbac_forbidden_is_a_clear_error(tmp_path: Path) -> None:
    with FakeCluster(forbidden={("patch", "namespaces")}) as fake:
        code, _, err = _apply("--kubeconfig", str(fake.kubeconfig(tmp_path)))
        assert fake.writes() == []
    assert code == 1
    assert 'User "alice@example.com" cannot patch resource "namespaces"' in err


def test_a_conflict_suggests_force(tmp_path: Path) -> None:
    with FakeCluster() as fake:
        fake.seed(
            "/api/v1/namespaces/team-nlp",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": "team-nlp",
                    "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
                },
            },
            manager="helm",
        )
        code, _, err = _apply("--kubeconfig", str(fake.kubeconfig(tmp_path)))
        forced = _apply("--kubeconfig", str(fake.kubeconfig(tmp_path)), "--force")
        label = fake.objects["/api/v1/namespaces/team-nlp"]["metadata"]["labels"]
    assert code == 1 and '"helm"' in err and "--force" in err
    assert forced[0] == 0 and label["pod-security.kubernetes.io/enforce"] == "baseline"


def test_a_bad_policy_applies_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("lend_limit: 12", "lend_limit: 99"))
    result = runner.invoke(app, ["k8s", "apply", "-p", str(bad), "--kubeconfig", str(tmp_path / "unused")])
    assert result.exit_code == 1 and "policy refused; nothing applied" in result.stderr

"""`commons k8s render`: a YAML stream on stdout, or files in --out; a bad policy renders nothing."""

from __future__ import annotations

from pathlib import Path

import yaml
from k8s_render_helpers import EXAMPLE
from typer.testing import CliRunner

from gpucommons.cli.main import app

runner = CliRunner()


def test_render_prints_one_yaml_stream() -> None:
    result = runner.invoke(app, ["k8s", "render", "--policy", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds.count("ClusterQueue") == 3 and kinds.count("Namespace") == 3
    assert kinds.count("AdmissionCheck") == 1
    assert "&id" not in result.stdout  # no YAML anchors


def test_render_without_the_governance_check() -> None:
    result = runner.invoke(app, ["k8s", "render", "--policy", str(EXAMPLE), "--no-governance-check"])
    assert result.exit_code == 0, result.output
    assert "AdmissionCheck" not in result.stdout and "admissionChecksStrategy" not in result.stdout


def test_render_out_writes_cluster_team_and_kustomization_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["k8s", "render", "--policy", str(EXAMPLE), "--out", str(tmp_path / "k8s")])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (tmp_path / "k8s").iterdir())
    assert names == [
        "cluster.yaml",
        "kustomization.yaml",
        "team-nlp.yaml",
        "team-recsys.yaml",
        "team-vision.yaml",
    ]
    kustomization = yaml.safe_load((tmp_path / "k8s" / "kustomization.yaml").read_text())
    assert set(kustomization["resources"]) == set(names) - {"kustomization.yaml"}
    team = list(yaml.safe_load_all((tmp_path / "k8s" / "team-nlp.yaml").read_text()))
    assert team[0]["kind"] == "Namespace"
    assert all(d["metadata"].get("namespace") == "team-nlp" for d in team[1:])


def test_render_refuses_a_bad_policy_with_its_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("lend_limit: 12", "lend_limit: 99"))
    result = runner.invoke(app, ["k8s", "render", "--policy", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "lend_limit 99 GPUs is above the nominal quota of 16 GPUs" in result.output
    assert not (tmp_path / "out").exists()


def test_render_reports_kubernetes_name_collisions(tmp_path: Path) -> None:
    clash = tmp_path / "clash.yaml"
    clash.write_text(
        EXAMPLE.read_text()
        .replace("  - name: recsys ", "  - name: NLP ")
        .replace("- name: recsys\n", "- name: NLP\n")
    )
    result = runner.invoke(app, ["k8s", "render", "--policy", str(clash)])
    assert result.exit_code == 1
    assert "both become 'nlp'" in result.output

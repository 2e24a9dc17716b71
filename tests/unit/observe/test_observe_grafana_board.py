"""deploy/grafana/gpu-commons.json follows Grafana's dashboard schema and its PromQL parses.

The schema check reads the board with `grafana-foundation-sdk`, whose models are generated from
Grafana's own dashboard schema, writes it back, and requires every key to survive: a key the schema
does not know would be dropped. Whether each expression names only metrics the server exports is
checked against a live server in tests/e2e/observe.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucommons.testing.promql import MISSING, metric_names, promtool

BOARD = Path(__file__).parents[3] / "deploy" / "grafana" / "gpu-commons.json"
#: Grafana's variables, replaced by values Prometheus accepts (as Grafana does before it queries).
VARIABLES = {"$__rate_interval": "1m", "$team": ".*", "${datasource}": "prometheus"}


def board() -> dict[str, Any]:
    data = json.loads(BOARD.read_text())
    assert isinstance(data, dict)
    return data


def expressions(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in data["panels"] for t in p.get("targets", [])]


def with_values(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Keys of `before` missing from `after`, and values that changed (defaults `after` adds are fine)."""
    if isinstance(before, dict):
        if not isinstance(after, dict):
            return [f"{path}: not an object any more"]
        out = [f"{path}.{k}: dropped" for k in before if k not in after]
        for k, v in before.items():
            if k in after:
                out += differences(v, after[k], f"{path}.{k}")
        return out
    if isinstance(before, list):
        if not isinstance(after, list) or len(after) != len(before):
            return [f"{path}: list changed"]
        return [
            x
            for i, (a, b) in enumerate(zip(before, after, strict=True))
            for x in differences(a, b, f"{path}[{i}]")
        ]
    return [] if before == after else [f"{path}: {before!r} became {after!r}"]


def test_the_board_reads_and_writes_back_through_grafanas_schema_models_unchanged() -> None:
    models = pytest.importorskip(
        "grafana_foundation_sdk.models.dashboard", reason="pip install grafana-foundation-sdk"
    )
    encoder = pytest.importorskip("grafana_foundation_sdk.cog.encoder")
    raw = board()
    parsed = models.Dashboard.from_json(raw)
    back = json.loads(json.dumps(parsed, cls=encoder.JSONEncoder))
    assert differences(raw, back) == []
    assert raw["uid"] == "gpu-commons" and raw["schemaVersion"] >= 36


def test_the_board_has_a_row_each_for_cluster_teams_queue_and_costs_on_a_24_column_grid() -> None:
    data = board()
    rows = [p["title"] for p in data["panels"] if p["type"] == "row"]
    assert rows == ["Cluster", "Teams", "Queue", "Costs"]
    cells: set[tuple[int, int]] = set()
    for p in data["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids))
    for p in data["panels"]:
        if p["type"] != "row":
            assert p["targets"] and p["datasource"]["uid"] == "${datasource}", p["title"]


def test_every_expression_of_the_board_parses_as_promql(tmp_path: Path) -> None:
    tool = promtool()
    if tool is None:
        pytest.skip(MISSING)
    exprs = expressions(board())
    rules = {
        "groups": [
            {
                "name": "board",
                "rules": [
                    {"record": f"board:expr_{i}", "expr": with_values(e)} for i, (_, e) in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "board-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        [str(tool), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for title, expr in exprs:
        assert metric_names(expr), f"{title}: no metric in {expr!r}"

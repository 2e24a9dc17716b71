"""A model comparison as JSON (each scenario is a full contract-5 result) or as an HTML table."""

from __future__ import annotations

import json
from typing import Any

from jinja2 import Environment, StrictUndefined

from gpucommons.chargeback.compare import Comparison
from gpucommons.chargeback.exports.contract import to_dict
from gpucommons.domain.money import format_cents


def comparison_to_dict(comparison: Comparison) -> dict[str, Any]:
    return {
        "period": to_dict(comparison.scenarios[0].result)["period"] if comparison.scenarios else {},
        "currency": comparison.currency,
        "scenarios": [
            {
                "idle": s.idle.value,
                "admin_split": s.admin_split.value,
                "current": s.current,
                "chargeback": to_dict(s.result),
            }
            for s in comparison.scenarios
        ],
    }


def comparison_to_json(comparison: Comparison) -> str:
    return json.dumps(comparison_to_dict(comparison), indent=2) + "\n"


_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Chargeback models compared, {{ c.period.label }}</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem; color: #1b1f23; }
  table { border-collapse: collapse; }
  th, td { padding: 0.35rem 0.7rem; border-bottom: 1px solid #ddd; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
  tr.current { background: #eef6ff; font-weight: 600; }
</style>
</head>
<body>
<h1>Chargeback models compared, {{ c.period.label }}</h1>
<p>Each row is the same period's bill under one idle policy and admin split (amounts in {{ c.currency }}).
The highlighted row is the model the policy uses today.</p>
<table>
<thead><tr><th>Idle policy</th><th>Admin split</th>{% for t in c.teams %}<th>{{ t }}</th>{% endfor %}
<th>Platform</th><th>Cluster cost</th></tr></thead>
<tbody>
{% for s in c.scenarios %}<tr{% if s.current %} class="current"{% endif %}><td>{{ s.idle }}</td>
<td>{{ s.admin_split }}</td>{% for t in c.teams %}<td class="num">{{ money(c.total(s, t)) }}</td>{% endfor %}
<td class="num">{{ money(s.result.platform_cents) }}</td>
<td class="num">{{ money(s.result.cluster_cost_cents) }}</td></tr>
{% endfor %}
</tbody>
</table>
</body>
</html>
"""
_COMPILED = Environment(autoescape=True, undefined=StrictUndefined).from_string(_TEMPLATE)


def render_comparison_html(comparison: Comparison) -> str:
    return _COMPILED.render(c=comparison, money=lambda cents: format_cents(cents, comparison.currency))

"""A team's invoice as a self-contained HTML page (no scripts, no external resources)."""

from __future__ import annotations

from decimal import Decimal

from jinja2 import Environment, StrictUndefined

from gpucommons.chargeback.explain import PLATFORM_SENTENCE, direct_cost_sentence, idle_share_sentence
from gpucommons.chargeback.invoice import Invoice, build_invoice
from gpucommons.chargeback.result import ChargebackResult
from gpucommons.domain.money import format_cents
from gpucommons.ledger.interval import format_utc

_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Invoice {{ inv.invoice_id }}</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; color: #1b1f23; }
  h1 { font-size: 1.5rem; margin-bottom: 0.2rem; }
  .meta { color: #555; margin-top: 0; }
  table { border-collapse: collapse; width: 100%; margin: 1rem 0 1.5rem; }
  th, td { padding: 0.35rem 0.6rem; border-bottom: 1px solid #ddd; text-align: left; }
  td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
  tr.total td { font-weight: 700; border-top: 2px solid #1b1f23; border-bottom: none; }
  .note { color: #555; font-size: 0.9rem; }
</style>
</head>
<body>
<h1>Invoice {{ inv.invoice_id }}</h1>
<p class="meta">Team <strong>{{ inv.team }}</strong> · cluster {{ inv.cluster_name }} ·
period {{ inv.period.label }} ({{ start }} to {{ end }}, end excluded) · amounts in {{ inv.currency }}</p>
{% if not inv.in_policy %}<p class="note">This team is in the usage ledger but not in the policy:
all of its GPU-time counts as borrowed.</p>{% endif %}

<h2>GPU-hours by pool</h2>
<table>
<thead><tr><th>Pool</th><th>GPU type</th><th class="num">Quota (GPUs)</th><th class="num">GPU-hours</th>
<th class="num">Owned</th><th class="num">Borrowed</th><th class="num">Price per GPU-hour</th>
<th class="num">Direct cost</th><th class="num">Idle share</th></tr></thead>
<tbody>
{% for p in inv.pools %}<tr><td>{{ p.pool }}</td><td>{{ p.gpu_type }}</td>
<td class="num">{{ p.nominal_gpus }}</td>
<td class="num">{{ hours(p.gpu_hours) }}</td><td class="num">{{ hours(p.owned_gpu_hours) }}</td>
<td class="num">{{ hours(p.borrowed_gpu_hours) }}</td><td class="num">{{ p.price_per_gpu_hour }}</td>
<td class="num">{{ amount(p.direct_cents) }}</td><td class="num">{{ amount(p.idle_cents) }}</td></tr>
{% else %}<tr><td colspan="9">No GPU use and no quota in this period.</td></tr>{% endfor %}
</tbody>
</table>

<h2>GPU-hours by priority class</h2>
<table>
<thead><tr><th>Pool</th><th>Priority class</th><th class="num">GPU-hours</th></tr></thead>
<tbody>
{% for c in inv.classes %}<tr><td>{{ c.pool }}</td><td>{{ c.priority }}</td>
<td class="num">{{ hours(c.gpu_hours) }}</td></tr>
{% else %}<tr><td colspan="3">No GPU use in this period.</td></tr>{% endfor %}
</tbody>
</table>

<h2>Summary</h2>
<table>
<tbody>
<tr><td>GPU-hours: {{ hours(inv.gpu_hours) }} ({{ hours(inv.owned_gpu_hours) }} owned,
{{ hours(inv.borrowed_gpu_hours) }} borrowed at {{ inv.borrowed_rate }}× the price)</td><td></td></tr>
<tr><td>Direct cost</td><td class="num">{{ money(inv.direct_cents) }}</td></tr>
<tr><td>Idle share (idle policy: {{ inv.idle_policy }})</td>
<td class="num">{{ money(inv.idle_cents) }}</td></tr>
<tr><td>Admin share (split: {{ inv.admin_split }})</td>
<td class="num">{{ money(inv.admin_cents) }}</td></tr>
<tr><td>Lost work from preemption: {{ hours(inv.lost_gpu_hours) }} GPU-hours
(≈ {{ money(inv.lost_value_cents) }} at list price, already part of the direct cost)</td>
<td class="num">—</td></tr>
<tr class="total"><td>Total</td><td class="num">{{ money(inv.total_cents) }}</td></tr>
</tbody>
</table>
<p class="note">{{ direct_note }}</p>
<p class="note">{{ idle_note }}</p>
<p class="note">{{ platform_note }} Amounts are rounded to the cent by largest remainder.</p>
</body>
</html>
"""

_ENV = Environment(autoescape=True, undefined=StrictUndefined, keep_trailing_newline=True)
_COMPILED = _ENV.from_string(_TEMPLATE)


def _hours(value: Decimal) -> str:
    return f"{value:,.2f}"


def render_invoice(invoice: Invoice) -> str:
    return _COMPILED.render(
        inv=invoice,
        start=format_utc(invoice.period.start),
        end=format_utc(invoice.period.end),
        hours=_hours,
        money=lambda cents: format_cents(cents, invoice.currency),
        amount=lambda cents: f"{Decimal(cents).scaleb(-2):,.2f}",
        direct_note=direct_cost_sentence(invoice.borrowed_rate),
        idle_note=idle_share_sentence(invoice.idle_policy),
        platform_note=PLATFORM_SENTENCE,
    )


def render_invoice_html(result: ChargebackResult, team: str) -> str:
    """The HTML invoice of `team` for the result's period (KeyError for a team not in the result)."""
    return render_invoice(build_invoice(result, team))

"""The sentences that say what a chargeback's parts are, in one place for invoices and the dashboard.

Finance and team leads read "idle share" and "kept by the platform" on every invoice; each gets one
sentence that names the policy's own rule, so the invoice, its PDF and the dashboard say the same.
"""

from __future__ import annotations

from decimal import Decimal

from gpucommons.domain.model import IdlePolicy

_IDLE_SPLIT = {
    IdlePolicy.USAGE: "in proportion to each team's GPU-hours in the pool",
    IdlePolicy.QUOTA: "in proportion to the guaranteed quota each team left unused",
    IdlePolicy.EVEN: "equally between the teams with a quota in the pool",
    IdlePolicy.PLATFORM: "to no team: the platform keeps all of it",
}


def idle_share_sentence(idle: IdlePolicy) -> str:
    return (
        "Idle share: what the pool's GPUs cost while nobody used them (its capacity cost minus every "
        f"team's direct cost), split by the policy's idle rule '{idle.value}', {_IDLE_SPLIT[idle]}."
    )


PLATFORM_SENTENCE = (
    "Kept by the platform: the part of the cluster's cost charged to no team — idle cost the rule gives "
    "to nobody, admin cost when no team ran anything, and what teams missing from the policy leave — so "
    "that the teams' totals and the platform's part add up to the cluster's cost to the cent."
)


def direct_cost_sentence(borrowed_rate: Decimal) -> str:
    return (
        "Direct cost: owned GPU-hours at the pool's price, borrowed GPU-hours (the team's use above its "
        f"quota, integrated over time) at {borrowed_rate}× the price."
    )


BUDGET_SENTENCE = (
    "A budget counts the team's direct cost so far this month; idle and admin shares are known only "
    "when the month ends, so a team's total cost is higher than what its budget shows."
)

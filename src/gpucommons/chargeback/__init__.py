"""Chargeback: who pays what, to the cent (docs/design.md, "Chargeback rules"; contract 5).

Pure: no files, clocks or databases. Give it a policy, ledger intervals and a period; get back a
`ChargebackResult` whose parts add up to the cluster's cost exactly.
"""

from gpucommons.chargeback.allocate import (
    ChargebackError,
    admin_cost_cents,
    allocate,
    compute_chargeback,
    pool_cost_cents,
)
from gpucommons.chargeback.bill import BillError, read_bill_csv
from gpucommons.chargeback.result import (
    ChargebackResult,
    ClassUsage,
    CostSource,
    PoolCharge,
    TeamCharge,
    TeamPoolCharge,
)
from gpucommons.chargeback.rounding import largest_remainder, round_half_even

__all__ = [
    "BillError",
    "ChargebackError",
    "ChargebackResult",
    "ClassUsage",
    "CostSource",
    "PoolCharge",
    "TeamCharge",
    "TeamPoolCharge",
    "admin_cost_cents",
    "allocate",
    "compute_chargeback",
    "largest_remainder",
    "pool_cost_cents",
    "read_bill_csv",
    "round_half_even",
]

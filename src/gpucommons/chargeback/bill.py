"""An imported bill: what the cluster really cost per pool for the period (`--bill bill.csv`).

CSV with the header `pool,amount`; `amount` in the policy's currency (e.g. `1234.56`). A pool listed
in the bill costs that amount (rule 1); a pool the bill leaves out is priced from the policy.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterable
from decimal import Decimal, InvalidOperation

from gpucommons.ledger.csv_io import LineIssue


class BillError(ValueError):
    """The bill file was refused; `issues` names each bad line."""

    def __init__(self, issues: Iterable[LineIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__(
            f"the bill has {len(self.issues)} problem(s):\n" + "\n".join(str(i) for i in self.issues)
        )


def read_bill_csv(lines: Iterable[str], *, pools: Collection[str] | None = None) -> dict[str, Decimal]:
    """Read `pool,amount` rows into pool -> amount (currency units, exact decimals)."""
    reader = csv.reader(lines)
    header = [h.strip() for h in next(reader, [])]
    if "pool" not in header or "amount" not in header:
        raise BillError([LineIssue(1, "the header must name the columns pool,amount")])
    i_pool, i_amount = header.index("pool"), header.index("amount")
    known = frozenset(pools) if pools is not None else None
    amounts: dict[str, Decimal] = {}
    first_line: dict[str, int] = {}
    issues: list[LineIssue] = []
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        line = reader.line_num
        if len(row) != len(header):
            issues.append(
                LineIssue(line, f"expected {len(header)} fields as in the header, found {len(row)}")
            )
            continue
        pool, text = row[i_pool].strip(), row[i_amount].strip()
        if not pool:
            issues.append(LineIssue(line, "must not be empty", "pool"))
            continue
        if known is not None and pool not in known:
            issues.append(
                LineIssue(line, f"{pool!r} is not a pool of the policy ({', '.join(sorted(known))})", "pool")
            )
            continue
        if pool in amounts:
            issues.append(LineIssue(line, f"{pool!r} is already billed on line {first_line[pool]}", "pool"))
            continue
        try:
            amount = Decimal(text)
        except InvalidOperation:
            issues.append(LineIssue(line, f"{text!r} is not an amount (e.g. 1234.56)", "amount"))
            continue
        if not amount.is_finite() or amount < 0:
            issues.append(LineIssue(line, f"{text!r} must be an amount of money, zero or more", "amount"))
            continue
        amounts[pool] = amount
        first_line[pool] = line
    if issues:
        raise BillError(issues)
    return amounts

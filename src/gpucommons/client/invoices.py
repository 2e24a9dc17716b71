"""Costs over HTTP: a month's chargeback or one team's invoice, and budgets (`/api/v1/invoices`,
`/api/v1/budgets`). Functions over `CommonsClient` so the client's own module stays one per owner."""

from __future__ import annotations

from typing import Any

from gpucommons.client.http import CommonsClient

INVOICE_FORMATS = ("json", "csv", "focus", "html", "pdf")


def fetch_invoice(client: CommonsClient, month: str, team: str | None = None, fmt: str = "json") -> bytes:
    """The body of `GET /api/v1/invoices` as bytes (text formats are UTF-8; pdf is binary)."""
    params = {"month": month, "format": fmt}
    if team:
        params["team"] = team
    return client._request("GET", "/api/v1/invoices", params=params).content


def fetch_budgets(client: CommonsClient) -> list[dict[str, Any]]:
    body = client._request("GET", "/api/v1/budgets").json()
    return [dict(item) for item in body] if isinstance(body, list) else []

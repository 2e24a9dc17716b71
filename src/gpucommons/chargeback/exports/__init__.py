"""Chargeback exports: contract 5 JSON (docs/design.md), CSV, FOCUS 1.2, HTML and PDF invoices,
model comparisons.

All renderers are pure: they return `str` or `bytes`; the caller writes them where it wants.

The re-exports are lazy (PEP 562): the PDF renderer pulls in fpdf (~0.2-1 s to import) and the HTML
ones jinja2, so `from gpucommons.chargeback.exports import to_json` must not pay for them — least of
all the `commons` CLI, which every command (and every task's `commons checkpoint`) starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucommons._lazy import lazy_exports

if TYPE_CHECKING:
    from gpucommons.chargeback.exports.compare import (
        comparison_to_dict,
        comparison_to_json,
        render_comparison_html,
    )
    from gpucommons.chargeback.exports.contract import CSV_COLUMNS, to_csv, to_dict, to_json
    from gpucommons.chargeback.exports.focus import FOCUS_COLUMNS, FOCUS_MANDATORY, to_focus_csv
    from gpucommons.chargeback.exports.invoice_html import render_invoice_html
    from gpucommons.chargeback.exports.invoice_pdf import render_invoice_pdf

_PACKAGE = "gpucommons.chargeback.exports"

#: Public name -> the submodule that defines it, imported on first access.
_LAZY = {
    "CSV_COLUMNS": f"{_PACKAGE}.contract",
    "FOCUS_COLUMNS": f"{_PACKAGE}.focus",
    "FOCUS_MANDATORY": f"{_PACKAGE}.focus",
    "comparison_to_dict": f"{_PACKAGE}.compare",
    "comparison_to_json": f"{_PACKAGE}.compare",
    "render_comparison_html": f"{_PACKAGE}.compare",
    "render_invoice_html": f"{_PACKAGE}.invoice_html",
    "render_invoice_pdf": f"{_PACKAGE}.invoice_pdf",
    "to_csv": f"{_PACKAGE}.contract",
    "to_dict": f"{_PACKAGE}.contract",
    "to_focus_csv": f"{_PACKAGE}.focus",
    "to_json": f"{_PACKAGE}.contract",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "CSV_COLUMNS",
    "FOCUS_COLUMNS",
    "FOCUS_MANDATORY",
    "comparison_to_dict",
    "comparison_to_json",
    "render_comparison_html",
    "render_invoice_html",
    "render_invoice_pdf",
    "to_csv",
    "to_dict",
    "to_focus_csv",
    "to_json",
]

"""Chargeback exports: contract 5 JSON, CSV, FOCUS 1.2, HTML and PDF invoices, model comparisons.

All renderers are pure: they return `str` or `bytes`; the caller writes them where it wants.
"""

from gpucommons.chargeback.exports.compare import (
    comparison_to_dict,
    comparison_to_json,
    render_comparison_html,
)
from gpucommons.chargeback.exports.contract import CSV_COLUMNS, to_csv, to_dict, to_json
from gpucommons.chargeback.exports.focus import FOCUS_COLUMNS, FOCUS_MANDATORY, to_focus_csv
from gpucommons.chargeback.exports.invoice_html import render_invoice_html
from gpucommons.chargeback.exports.invoice_pdf import render_invoice_pdf

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

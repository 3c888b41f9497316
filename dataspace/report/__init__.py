"""Reports of runs: the paper's tables and figures, an HTML report, a trace viewer.

>>> from dataspace.report import build_report  # doctest: +SKIP
>>> build_report(["file:///data/store/runs/demo"]).html  # doctest: +SKIP
'file:///data/store/runs/demo/report.html'
"""

from dataspace.report.basic import render_html, render_markdown, write_basic_report
from dataspace.report.build import ReportOutput, build_from_sources, build_report, report_main

__all__ = [
    "ReportOutput",
    "build_from_sources",
    "build_report",
    "render_html",
    "render_markdown",
    "report_main",
    "write_basic_report",
]

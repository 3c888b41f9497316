"""Reports of runs: the paper's tables and figures, an HTML report, a trace viewer.

One module per concept: ``load`` (reading runs), ``tables`` and ``characteristics`` (the
numbers), ``plots`` (figures), ``page`` (HTML building blocks), ``render`` (the report's
HTML and Markdown), ``conversation`` and ``native_trace`` (reading an attempt's trace,
``dataspace.traces``, into what a reader follows), ``trace_render`` (an attempt's trace
page), ``tracepages`` (writing every attempt's page for a report, in threads or worker
processes), ``audit`` (the failure audit's section), ``build`` (putting it together) and
``basic`` (the page written at the end of a run when the full report cannot be built). Test
data lives in ``dataspace.testing.synthetic``.

>>> from dataspace.report import build_report  # doctest: +SKIP
>>> build_report(["file:///data/store/runs/demo"]).html  # doctest: +SKIP
'file:///data/store/runs/demo/report.html'
"""

from dataspace.report.basic import write_basic_report
from dataspace.report.build import ReportOutput, build_from_sources, build_report

__all__ = [
    "ReportOutput",
    "build_from_sources",
    "build_report",
    "write_basic_report",
]

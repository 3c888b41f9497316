"""Trace-page worker process: ``python -m dataspace.report._worker``.

Reads a pickled ``(jobs, out_folder, report_key)`` batch on stdin, writes the pages, and
answers with the pickled list of problems on stdout. Started only by
``dataspace.report.tracepages`` with batches it made itself.
"""

from __future__ import annotations

import pickle
import sys


def main() -> int:
    """Render one batch."""
    from dataspace.report.tracepages import render_pages

    jobs, out, report_key = pickle.load(sys.stdin.buffer)
    problems = render_pages(jobs, out, report_key)
    sys.stdout.buffer.write(pickle.dumps(problems))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

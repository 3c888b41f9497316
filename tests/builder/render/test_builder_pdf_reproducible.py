import time

from builder.render.pdf import markdown_to_pdf


def test_pdf_bytes_are_reproducible():
    """Guards release fingerprints: a rebuilt PDF must not carry a new date or /ID."""
    md = "# Ledger\n\n## 2105-01-02\n\nPatient 10006 received 2.5 mg 你好 at 08:00."
    a = markdown_to_pdf(md, title="Ledger", language="zh")
    time.sleep(1.1)
    assert markdown_to_pdf(md, title="Ledger", language="zh") == a

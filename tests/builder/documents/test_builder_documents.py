"""Fact-grounded documents: every required cell recovered from the artifact itself."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import pytest

from builder.documents.assembly import DocumentOptions, DocumentRejected, render_document
from builder.documents.blocks import build_blocks, column_domains
from builder.documents.coverage import DocumentManifest, read_document
from builder.documents.plan import check_plan, plan_document
from builder.documents.templates import TemplateWriter
from builder.documents.validators import Alignment, split_paragraphs, validate_section
from builder.documents.writers import LlmWriter, SectionRequest
from builder.render.pdf import pdf_paragraphs
from builder.tables import compare_rows, read_tables
from dataspace.testing.scripted_server import ScriptedServer
from tests.builder.conftest import scripted_client


def _recover(doc, table, fmt):
    """Read the table back from the artifact bytes alone (plus the ledger manifest)."""
    manifest = DocumentManifest.from_json(json.loads(json.dumps(doc.manifest.to_json())))
    paragraphs = (
        split_paragraphs(doc.markdown.decode("utf-8"))
        if fmt == "markdown"
        else pdf_paragraphs(doc.pdf)
    )
    reading = read_document(paragraphs, manifest)
    return reading


@pytest.mark.parametrize("table_name", ["lab_results", "fund_nav"])
@pytest.mark.parametrize("null_policy", ["state", "omit"])
@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_cell_is_recovered_from_markdown_and_pdf(
    ward_tables, table_name, null_policy, language
):
    table = ward_tables[table_name]
    opts = DocumentOptions(language=language, null_policy=null_policy, seed=7, block_cells=12)
    doc = render_document(table, options=opts, formats=("markdown", "pdf"))
    assert len(doc.blocks) > 1  # several blocks: anchors must join sections
    for fmt in ("markdown", "pdf"):
        reading = _recover(doc, table, fmt)
        required = sum(1 for row in table.rows for v in row if v is not None)
        assert reading.required == required
        assert len(reading.recovered) == required, reading.missing
        assert reading.conflicts == [] and reading.errors == []
        assert compare_rows(table, table.schema.columns, reading.rows) is None
    assert doc.pages >= 1 and doc.coverage["pdf"].ok


def test_bundled_tables_round_trip_through_documents(bundled_dbs):
    """Every documentable table of both bundled databases, in its own language."""
    checked = 0
    for path in bundled_dbs.values():
        conn = sqlite3.connect(path)
        tables = read_tables(conn)
        conn.close()
        for n, table in enumerate(tables):
            if len(table.rows) * len(table.schema.columns) > 700:
                continue
            fmt = "pdf" if n % 2 else "markdown"
            doc = render_document(table, options=DocumentOptions(seed=n), formats=("markdown", fmt))
            reading = _recover(doc, table, fmt)
            assert not reading.missing and not reading.conflicts and not reading.errors
            assert compare_rows(table, table.schema.columns, reading.rows) is None, table.name
            checked += 1
    assert checked >= 12


def test_documents_are_long_form_prose_with_context(ward_tables):
    doc = render_document(
        ward_tables["lab_results"], options=DocumentOptions(language="en", seed=3, block_cells=10)
    )
    text = doc.markdown.decode()
    assert text.startswith("# ") and text.count("\n## ") == len(doc.blocks)
    assert "Field guide:" in text
    assert "|" not in text  # prose, not a table dump
    zh = render_document(ward_tables["fund_nav"], options=DocumentOptions(language="zh", seed=3))
    assert "字段说明" in zh.markdown.decode()


def _block(ward_tables, name="lab_results"):
    table = ward_tables[name]
    plan = plan_document(
        table, language="en", seed=1, null_policy="state", small_cells=0, block_cells=14
    )
    blocks = build_blocks(table, plan)
    return table, plan, blocks[0]


def _good(plan, block):
    return TemplateWriter(distractor_share=0.0).write(SectionRequest(plan=plan, block=block))


def test_validator_rejects_a_changed_number(ward_tables):
    _table, plan, block = _block(ward_tables)
    reply = _good(plan, block)
    assert validate_section(block, reply.section, reply.alignments, null_policy="state") == []
    cell = next(c for c in block.cells if c.kind == "decimal" and c.value is not None)
    wrong = f"{cell.value + 1:.1f}"
    aligned = next(a.surface for a in reply.alignments if a.cell_id == cell.cell_id)
    section = reply.section.replace(aligned, wrong, 1)
    alignments = tuple(
        Alignment(cell_id=a.cell_id, surface=wrong if a.cell_id == cell.cell_id else a.surface)
        for a in reply.alignments
    )
    errors = validate_section(block, section, alignments, null_policy="state")
    assert any(cell.cell_id in e and "source value" in e for e in errors), errors


def test_validator_rejects_a_dropped_precision_and_a_missing_cell(ward_tables):
    _table, plan, block = _block(ward_tables)
    reply = _good(plan, block)
    cell = next(c for c in block.cells if c.kind == "decimal" and c.value == 151.0)
    alignments = [
        Alignment(cell_id=a.cell_id, surface="151" if a.cell_id == cell.cell_id else a.surface)
        for a in reply.alignments
    ]
    errors = validate_section(
        block, reply.section.replace("151.0", "151"), alignments, null_policy="state"
    )
    assert any("drops precision" in e for e in errors)
    missing = [a for a in reply.alignments if a.cell_id != cell.cell_id]
    errors = validate_section(block, reply.section, missing, null_policy="state")
    assert any(cell.cell_id in e and "missing" in e for e in errors)


def test_validator_rejects_a_second_value_for_a_field(ward_tables):
    _table, plan, block = _block(ward_tables)
    reply = _good(plan, block)
    cell = next(c for c in block.cells if c.kind == "decimal" and c.value is not None)
    # a competing statement in the record's paragraph
    paras = reply.section.split("\n\n")
    i = next(k for k, p in enumerate(paras) if str(cell.value) in p)
    paras[i] += " An earlier draft gave 999.25 instead."
    errors = validate_section(block, "\n\n".join(paras), reply.alignments, null_policy="state")
    assert any("999.25" in e and "competing" in e for e in errors), errors
    # the same cell aligned to two different values
    twice = (*reply.alignments, Alignment(cell_id=cell.cell_id, surface="1.5"))
    errors = validate_section(block, reply.section, twice, null_policy="state")
    assert any(cell.cell_id in e for e in errors)


def test_validator_rejects_a_competing_category(ward_tables):
    table = ward_tables["lab_results"]
    plan = plan_document(
        table, language="en", seed=1, null_policy="omit", small_cells=1000, block_cells=100
    )
    block = build_blocks(table, plan)[0]
    reply = _good(plan, block)
    domains = column_domains(table, ["flag", "valueuom"])
    assert (
        validate_section(
            block, reply.section, reply.alignments, null_policy="omit", domains=domains
        )
        == []
    )
    paras = reply.section.split("\n\n")
    i = next(k for k, p in enumerate(paras) if "142456" in p)
    paras[i] += " Some staff marked it abnormal."
    errors = validate_section(
        block, "\n\n".join(paras), reply.alignments, null_policy="omit", domains=domains
    )
    assert any("'abnormal'" in e and "another value" in e for e in errors), errors


def test_bad_plans_are_rejected(ward_tables):
    table = ward_tables["lab_results"]
    plan = plan_document(table, language="en", seed=1)
    assert check_plan(plan, table) == []
    bad = replace(plan, anchors=("subject_id",))
    assert any("do not identify" in e for e in check_plan(bad, table))
    bad = replace(plan, clusters=(plan.clusters[0][1:], *plan.clusters[1:]))
    assert any("in 0 clusters" in e for e in check_plan(bad, table))
    bad = replace(plan, batches=((0, 1), (1, 2, 3, 4, 5, 6)))
    assert any("exactly once" in e for e in check_plan(bad, table))
    with pytest.raises(DocumentRejected, match="bad plan"):
        render_document(table, plan=replace(plan, anchors=("flag",)))


def _reply(plan, block, *, change=None, drop=None):
    good = _good(plan, block)
    section, alignments = good.section, list(good.alignments)
    if change:
        old, new = change
        section = section.replace(old, new, 1)
        alignments = [
            Alignment(cell_id=a.cell_id, surface=new if a.surface == old else a.surface)
            for a in alignments
        ]
    if drop:
        alignments = [a for a in alignments if a.cell_id != drop]
    return json.dumps(
        {
            "section": section,
            "alignments": [{"cell_id": a.cell_id, "surface": a.surface} for a in alignments],
        },
        ensure_ascii=False,
    )


def test_llm_writer_replies_are_validated_and_regenerated(ward_tables):
    """Guards the regeneration loop: a changed number and an omitted cell are sent back
    with the validator's errors; the third reply passes."""
    table = ward_tables["lab_results"]
    opts = DocumentOptions(
        language="en", seed=2, null_policy="state", block_cells=100, max_attempts=3
    )
    plan = plan_document(
        table,
        language="en",
        seed=2,
        null_policy="state",
        block_cells=100,
        pass_order="horizontal",
        small_cells=1000,
    )
    block = build_blocks(table, plan)[0]
    steps = [
        {"content": _reply(plan, block, change=("151.0", "152.0"))},
        {"content": "```json\n" + _reply(plan, block, drop="r1.valuenum") + "\n```"},
        {"content": _reply(plan, block)},
    ]
    with ScriptedServer({"B001": steps}) as server:
        writer = LlmWriter(scripted_client(server.url))
        doc = render_document(
            table, options=opts, writer=writer, plan=plan, formats=("markdown", "pdf")
        )
        feedback = [r.body["messages"][-1]["content"] for r in server.requests[1:]]
    assert doc.blocks[0].attempts == 3
    assert "152.0" in feedback[0] and "151.0" in feedback[0]
    assert "r1.valuenum" in feedback[1] and "missing" in feedback[1]
    assert doc.coverage["pdf"].ok and doc.writer == "llm"
    assert doc.ledger()["regenerated"][0]["attempts"] == 3


def test_llm_writer_that_never_complies_rejects_the_document(ward_tables):
    table = ward_tables["lab_results"]
    plan = plan_document(table, language="en", seed=2, small_cells=1000, block_cells=100)
    block = build_blocks(table, plan)[0]
    bad = _reply(plan, block, change=("151.0", "151.00"))
    with ScriptedServer(
        {"B001": [{"content": "not json"}, {"content": bad}, {"content": bad}]}
    ) as server:
        writer = LlmWriter(scripted_client(server.url))
        with pytest.raises(DocumentRejected, match=r"B001: .*rejected 3 times"):
            render_document(
                table,
                options=DocumentOptions(max_attempts=3, block_cells=100),
                writer=writer,
                plan=plan,
            )

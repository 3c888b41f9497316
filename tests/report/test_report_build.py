"""Building reports from synthetic runs: outputs, missing metadata, comparisons, CLI."""

from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest

from dataspace.cli.report import main as report_main
from dataspace.errors import ConfigError
from dataspace.report import build_from_sources, build_report, write_basic_report
from dataspace.report.load import RunSource
from dataspace.runs.results import rows_to_parquet
from dataspace.store import open_store
from dataspace.testing.synthetic import SyntheticAgent, default_agents, write_synthetic_run

TABLES = {
    "accuracy",
    "efficiency",
    "efficiency_paper",
    "timings",
    "characteristics",
    "characteristics_long",
    "overlap",
    "overlap_agents",
    "spread",
    "pareto",
    "failures",
    "harnesses",
    "per_task",
    "pass_at_k",  # the synthetic run has models under several harnesses
    "pairwise",
    "harness_pairs",
    "attempt_agreement",
    "unsolved",
}


@pytest.fixture(scope="module")
def store_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-store")
    store = open_store(str(root), fsync=False)
    write_synthetic_run(store, "demo", agents=default_agents(4), tasks=24, attempts=2, seed=3)
    write_synthetic_run(
        store, "official", agents=default_agents(2), tasks=12, seed=4, metadata=False
    )
    return root


def test_report_writes_html_markdown_tables_figures_and_traces(store_root, tmp_path):
    out = tmp_path / "out"
    res = build_report([str(store_root / "runs" / "demo")], out=str(out))
    assert res.html == (out / "report.html").as_uri()
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert set(res.tables) == TABLES
    for name in TABLES:
        csv = pd.read_csv(out / "report" / "tables" / f"{name}.csv")
        parquet = pd.read_parquet(out / "report" / "tables" / f"{name}.parquet")
        assert len(csv) == len(parquet) == len(res.data[name])
    assert set(res.figures) == {"accuracy", "pareto", "spread", "gaps", "passk"}
    for name in res.figures:
        assert (out / "report" / "figures" / f"{name}.svg").read_text().startswith("<?xml")
        assert f'id="fig-{name}"' in html
    assert html.count("<svg") == len(res.figures)  # inline, not linked
    assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', html)  # nothing fetched
    assert '<link rel="stylesheet"' not in html
    rows = pd.read_parquet(store_root / "runs" / "demo" / "results.parquet")
    with_trace = int((rows["status"] != "infrastructure_error").sum())
    assert res.traces == with_trace
    assert len(list((out / "report" / "traces" / "demo").rglob("*.html"))) == with_trace
    assert html.count('class="att ') == len(rows)
    assert "## Accuracy per agent" in md and "![" in md
    assert "report/figures/pareto.svg" in md


def test_accuracy_keeps_infrastructure_failures_apart(store_root):
    res = build_report([str(store_root / "runs" / "demo")], out=None, traces="none")
    acc = res.data["accuracy"]
    rows = pd.read_parquet(store_root / "runs" / "demo" / "results.parquet")
    for r in acc.itertuples():
        mine = rows[rows["agent"] == r.label]
        infra = int((mine["status"] == "infrastructure_error").sum())
        assert r.infra_failures == infra
        assert r.correct == int(mine["passed"].fillna(False).sum())
        assert r.accuracy_pct == pytest.approx(100 * r.correct / len(mine))
        if infra:
            assert r.accuracy_excl_infra_pct == pytest.approx(100 * r.correct / (len(mine) - infra))
    assert acc["infra_failures"].sum() > 0  # the synthetic run has some
    eff = res.data["efficiency"].set_index("label")
    measured = rows[rows["status"] != "infrastructure_error"].groupby("agent").size()
    for agent, n in measured.items():
        assert eff.loc[agent, "measured_attempts"] == n
    assert any("infrastructure failures" in n for n in res.notes)


def test_missing_metadata_leaves_breakdowns_out_with_a_note(store_root, tmp_path):
    """The official release carries no annotations: no crash, a note, no Table 12."""
    res = build_report([str(store_root / "runs" / "official")], out=str(tmp_path))
    assert res.data["characteristics"].empty
    assert any("No task metadata" in n for n in res.notes)
    assert "gaps" not in res.figures
    html = (tmp_path / "report.html").read_text()
    assert "Left out: no task carries the annotations" in html
    assert "No task metadata" in html


def test_release_metadata_fills_breakdowns_and_partial_metadata_is_noted(store_root, tmp_path):
    release = tmp_path / "release"
    (release / "metadata").mkdir(parents=True)
    for i in range(1, 13):
        md = {"answer_rows": 1 if i % 2 else 4}
        if i <= 6:
            md["order_sensitive"] = i % 3 == 0
        (release / "metadata" / f"task_{i}.json").write_text(json.dumps(md))
    (release / "metadata" / "task_99.json").write_text("{not json")
    res = build_report(
        [str(store_root / "runs" / "official")],
        out=str(tmp_path / "out"),
        release=str(release),
        traces="none",
    )
    wide = res.data["characteristics"]
    assert set(wide["characteristic"]) == {"Answer rows", "Row order"}
    assert wide.loc[wide["characteristic"] == "Answer rows", "N"].sum() == 12
    assert any("Row order: 6 of 12 tasks lack" in n for n in res.notes)
    assert any("Join: left out" in n for n in res.notes)
    assert any("task_99.json" in n and "unreadable" in n for n in res.notes)


def test_several_runs_compared_with_colliding_agent_names(store_root, tmp_path):
    res = build_report(
        [str(store_root / "runs" / "demo"), str(store_root / "runs" / "official")],
        out=str(tmp_path),
        traces="none",
    )
    labels = set(res.data["accuracy"]["label"])
    assert {"demo/model-1", "official/model-1", "demo/model-2", "official/model-2"} <= labels
    assert "model-1-smolagents" in labels  # unique names stay short
    assert len(res.data["overlap"]) == 5


def test_trace_pages_are_kept_when_they_exist(store_root, tmp_path):
    out = str(tmp_path / "out")
    first = build_report([str(store_root / "runs" / "official")], out=out)
    assert first.traces > 0 and first.traces_kept == 0
    second = build_report([str(store_root / "runs" / "official")], out=out)
    assert second.traces == 0 and second.traces_kept == first.traces
    again = build_report([str(store_root / "runs" / "official")], out=out, traces="all")
    assert again.traces == first.traces


def test_trace_pages_by_worker_processes_match_threads(store_root, tmp_path, monkeypatch):
    """Guards the worker-process path: same pages as the in-process threads."""
    import dataspace.report.tracepages as tp

    run = str(store_root / "runs" / "official")
    monkeypatch.setattr(tp, "MIN_JOBS_FOR_PROCESSES", 10**9)
    threads = build_report([run], out=str(tmp_path / "t"), traces="all")
    monkeypatch.setattr(tp, "MIN_JOBS_FOR_PROCESSES", 1)
    monkeypatch.setattr(tp, "_process_count", lambda runs, out, n: 2)
    procs = build_report([run], out=str(tmp_path / "p"), traces="all")
    assert procs.traces == threads.traces > 0
    pages_t = sorted(
        p.relative_to(tmp_path / "t")
        for p in (tmp_path / "t" / "report" / "traces").rglob("*.html")
    )
    pages_p = sorted(
        p.relative_to(tmp_path / "p")
        for p in (tmp_path / "p" / "report" / "traces").rglob("*.html")
    )
    assert pages_t == pages_p
    page = pages_p[0]
    assert (tmp_path / "t" / page).read_bytes() == (tmp_path / "p" / page).read_bytes()


def test_report_defaults_to_the_run_folder_and_works_on_any_store():
    store = open_store("memory://report-build-test")
    write_synthetic_run(
        store, "m", agents=[SyntheticAgent(name="solo", skill=0.9)], tasks=5, folder="runs/m"
    )
    res = build_from_sources(
        [RunSource(store=store, prefix="runs/m")], out_store=store, out_prefix="runs/m"
    )
    assert res.html == "memory://report-build-test/runs/m/report.html"
    assert store.exists("runs/m/report.html")
    assert store.exists("runs/m/report/tables/accuracy.csv")
    assert res.traces == 5
    assert any(k.startswith("runs/m/report/traces/m/solo/") for k in store.list("runs/m/"))


def test_a_folder_without_results_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        build_report([str(tmp_path)])
    msg = str(err.value)
    assert "results.parquet" in msg and "\n" not in msg
    (tmp_path / "results.parquet").write_bytes(b"not parquet")
    with pytest.raises(ConfigError, match="not a readable results file"):
        build_report([str(tmp_path)])
    with pytest.raises(ConfigError, match="no run given"):
        build_report([])


def test_a_run_without_attempts_gives_an_empty_report(tmp_path):
    store = open_store(str(tmp_path))
    store.put_bytes("results.parquet", rows_to_parquet([]))
    res = build_report([str(tmp_path)])
    assert res.notes == ("The runs hold no attempts.",)
    assert (tmp_path / "report.html").is_file()


def test_report_main_command_line(store_root, tmp_path, capsys):
    code = report_main(
        [str(store_root / "runs" / "official"), "--out", str(tmp_path), "--traces", "none"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"report:   {(tmp_path / 'report.html').as_uri()}" in out
    assert "note:" in out
    assert report_main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dataspace report: error: ") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        report_main(["--traces", "some"])


def test_write_basic_report_writes_the_full_report_and_falls_back(store_root, tmp_path):
    store = open_store(str(store_root), fsync=False)
    paths = write_basic_report(store, "runs/official", {"run_id": "official"})
    assert paths == [
        (store_root / "runs" / "official" / name).as_uri() for name in ("report.md", "report.html")
    ]
    assert "Per-task outcomes" in (store_root / "runs" / "official" / "report.html").read_text()
    # no results file yet: the basic page from the summary
    summary = {
        "run_id": "r0",
        "attempts": 1,
        "wall_seconds": 1.0,
        "tasks": 3,
        "scored_tasks": 1,
        "unscored_tasks": 2,
        "agents": {
            "gold": {
                "harness": "gold",
                "model": None,
                "attempts": 1,
                "scored": 1,
                "passed": 1,
                "accuracy": 1.0,
                "status_counts": {"submitted": 1},
            }
        },
    }
    empty = open_store(str(tmp_path))
    paths = write_basic_report(empty, "runs/r0", summary)
    assert "100.00" in (tmp_path / "runs" / "r0" / "report.md").read_text()
    for name in ("report.md", "report.html"):
        text = (tmp_path / "runs" / "r0" / name).read_text()
        assert "1 scored of 3 tasks, 2 unscored (no gold)." in text
    assert len(paths) == 2


def test_tables_round_trip_through_csv(store_root, tmp_path):
    res = build_report([str(store_root / "runs" / "demo")], out=str(tmp_path), traces="none")
    csv = (tmp_path / "report" / "tables" / "efficiency_paper.csv").read_text()
    back = pd.read_csv(io.StringIO(csv))
    assert list(back.columns) == [
        "agent",
        "Acc. (%)",
        "Tokens (K)",
        "Cost (USD)",
        "Actions",
        "Latency (s)",
    ]
    assert len(back) == len(res.data["accuracy"])


def test_without_matplotlib_the_report_has_tables_and_a_note(store_root, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    res = build_report([str(store_root / "runs" / "official")], out=str(tmp_path), traces="none")
    assert res.figures == {}
    assert any("matplotlib is not installed" in n for n in res.notes)
    assert (tmp_path / "report.html").read_text().count("<svg") == 0


def test_a_failing_worker_process_falls_back_to_threads(store_root, tmp_path, monkeypatch):
    """Guards the fallback: a worker that cannot start costs no trace page."""
    import sys

    import dataspace.report.tracepages as tp

    monkeypatch.setattr(tp, "_process_count", lambda runs, out, n: 2)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    res = build_report([str(store_root / "runs" / "official")], out=str(tmp_path), traces="all")
    pages = list((tmp_path / "report" / "traces").rglob("*.html"))
    assert res.traces == len(pages) > 0
    assert (
        res.notes
        == build_report(
            [str(store_root / "runs" / "official")], out=str(tmp_path), traces="none"
        ).notes
    )


def test_the_harness_section_compares_harnesses_with_the_model_fixed(store_root, tmp_path):
    res = build_report([str(store_root / "runs" / "demo")], out=str(tmp_path / "o"))
    table = res.data["harnesses"]
    assert not table.empty
    for model, grp in table.groupby("model"):
        assert grp["harness"].nunique() >= 2, model
        assert list(grp["accuracy_pct"]) == sorted(grp["accuracy_pct"], reverse=True)
    assert all(table["end_states"].str.len() > 0)
    md = (tmp_path / "o" / "report.md").read_text()
    assert "## Harnesses with the backbone fixed" in md


def test_runs_of_different_releases_are_refused_unless_allowed(store_root, tmp_path):
    """Guards: `dataspace report RUN1 RUN2` over two releases matched tasks by id, silently."""
    import subprocess
    import sys

    runs = [store_root / "runs" / "demo", store_root / "runs" / "official"]
    for run, fp in zip(runs, ("aaaa1111bbbb2222", "cccc3333dddd4444"), strict=True):
        doc = {"schema_version": "1.0", "identity": {"release_fingerprint": fp}}
        (run / "spec.json").write_text(json.dumps(doc))
    try:

        def report(*extra):
            return subprocess.run(
                [sys.executable, "-m", "dataspace.cli", "report", *map(str, runs), *extra],
                capture_output=True,
                text=True,
                timeout=300,
            )

        res = report("--out", str(tmp_path / "a"), "--traces", "none")
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert "different releases: demo (aaaa1111bbbb), official (cccc3333dddd)" in res.stderr
        assert "--allow-mixed" in res.stderr
        assert not (tmp_path / "a" / "report.html").exists()
        res = report("--out", str(tmp_path / "b"), "--traces", "none", "--allow-mixed")
        assert res.returncode == 0, res.stderr
        assert "note:     Mixed releases" in res.stdout
        html = (tmp_path / "b" / "report.html").read_text()
        assert html.index("Mixed releases") < html.index('<h2 id="accuracy"')
        # one release: no refusal, no banner
        (runs[1] / "spec.json").write_text((runs[0] / "spec.json").read_text())
        res = report("--out", str(tmp_path / "c"), "--traces", "none")
        assert res.returncode == 0, res.stderr
        assert "Mixed" not in (tmp_path / "c" / "report.html").read_text()
    finally:
        for run in runs:
            (run / "spec.json").unlink()


def test_a_trace_page_depends_only_on_its_own_attempt(store_root, tmp_path):
    """Guards: a page's numbers followed the dtype of their column over the whole table."""
    from dataspace.report.load import OutFolder, read_run
    from dataspace.report.tracepages import page_row, write_attempt_page
    from dataspace.runs.results import read_rows

    run = store_root / "runs" / "demo"
    res = build_report([str(run)], out=str(tmp_path / "a"), traces="all")
    assert res.traces > 0
    df = read_run(RunSource(store=open_store(str(run)))).results
    assert df["input_tokens"].dtype == float  # a column with nulls: every value a float
    records = read_rows((run / "results.parquet").read_bytes())
    framed = df.to_dict("records")
    for rec, row in zip(records, framed, strict=True):
        assert page_row(rec.to_dict()) == page_row(row)
    ran = next(r for r in records if r.input_tokens)
    out = OutFolder(store=open_store(str(tmp_path / "b")))
    source = RunSource(store=open_store(str(run)))
    assert write_attempt_page(source, out, ran.to_dict(), report_key="report.html")
    rel = f"report/traces/demo/{ran.agent}/{ran.task_id}-{ran.attempt}.html"
    alone = (tmp_path / "b" / rel).read_bytes()
    assert alone == (tmp_path / "a" / rel).read_bytes()
    assert f"<td>{ran.input_tokens:,}</td>".encode() in alone


def test_stale_trace_pages_are_written_again(store_root, tmp_path):
    """A page whose content key differs (an older format, another row) is rewritten."""
    out = tmp_path / "out"
    run = str(store_root / "runs" / "official")
    first = build_report([run], out=str(out))
    pages = sorted((out / "report" / "traces").rglob("*.html"))
    original = pages[0].read_bytes()
    head, _, rest = original.partition(b"\n")
    pages[0].write_bytes(head + b"\n" + rest.partition(b"\n")[2])  # as an older version wrote
    pages[1].write_bytes(original.replace(b"page ", b"page 0", 1))  # another content key
    again = build_report([run], out=str(out))
    assert (again.traces, again.traces_kept) == (2, first.traces - 2)
    assert pages[0].read_bytes() == original

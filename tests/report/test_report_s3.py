"""A report over runs kept in S3 (moto's server on 127.0.0.1), through the public API."""

from __future__ import annotations

import pytest

from dataspace.report import build_report
from dataspace.store import open_store
from dataspace.testing.synthetic import default_agents, write_synthetic_run

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def s3_endpoint():
    pytest.importorskip("moto")
    from dataspace.testing import create_bucket, moto_s3_server

    with moto_s3_server() as endpoint:
        create_bucket(endpoint, "bench")
        yield endpoint


def test_report_from_an_s3_run_uri(s3_endpoint, tmp_path, monkeypatch):
    from dataspace.testing import TEST_CREDENTIALS, s3_test_options

    store = open_store("s3://bench/results", **s3_test_options(s3_endpoint))
    write_synthetic_run(store, "cloud", agents=default_agents(3), tasks=6, seed=9)
    # the command line gives only URIs: the endpoint and credentials come from the
    # environment, as on a cluster
    monkeypatch.setenv("DATASPACE_S3_ENDPOINT", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_CREDENTIALS["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_CREDENTIALS["secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_CREDENTIALS["region"])
    res = build_report(["s3://bench/results/runs/cloud"])  # written next to the run
    assert res.html == "s3://bench/results/runs/cloud/report.html"
    assert store.exists("runs/cloud/report.html")
    assert store.exists("runs/cloud/report/tables/efficiency.parquet")
    pages = [k for k in store.list("runs/cloud/report/traces/") if k.endswith(".html")]
    assert len(pages) == res.traces > 0
    local = build_report(["s3://bench/results/runs/cloud"], out=str(tmp_path), traces="none")
    assert (tmp_path / "report.html").read_text().count("<svg") == len(local.figures)

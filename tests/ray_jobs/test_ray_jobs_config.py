"""The entrypoints' flags: what changes between one machine and a cluster is a flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataspace.errors import ConfigError
from dataspace.runs.spec import load_spec
from dataspace.testing.releases import write_tiny_release
from ray_jobs import build, report, run, sweep
from ray_jobs._common import parse_options

SPEC = """schema_version: '1.0'
run_id: cfg
release: {release}
store: file://{store}
agents: [{{name: gold, harness: gold}}]
sandbox: {{backend: local, cpus: 1, memory: 1GiB}}
concurrency: 2
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    release = write_tiny_release(tmp_path / "release", tasks=1)
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(release=release, store=tmp_path / "store"))
    return path


def test_flags_override_only_what_differs_on_a_cluster(spec_file: Path) -> None:
    cfg = run.parse_args(
        [
            str(spec_file),
            "--store",
            "s3://bench/store",
            "--sandbox-backend",
            "kubernetes",
            "-o",
            "namespace=sb",
            "-o",
            "max_pending=8",
            "--ray-address",
            "127.0.0.1:6379",
            "--concurrency",
            "64",
        ]
    )
    spec = run.resolve_spec(cfg)
    base = load_spec(spec_file)
    assert spec.store == "s3://bench/store"
    assert spec.sandbox.backend == "kubernetes"
    assert dict(spec.sandbox.options) == {"namespace": "sb", "max_pending": 8}
    assert (spec.ray_address, spec.concurrency) == ("127.0.0.1:6379", 64)
    assert (spec.agents, spec.limits, spec.release) == (base.agents, base.limits, base.release)


def test_a_release_given_as_a_store_uri_is_synced_once(spec_file: Path, tmp_path: Path) -> None:
    from dataspace.store import open_store

    store = open_store("memory://ray-jobs-release")
    local = tmp_path / "release"
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        store.put_file(path.relative_to(local).as_posix(), path)
    cache = tmp_path / "release-cache"
    argv = [str(spec_file), "--release", "memory://ray-jobs-release", "--release-cache", str(cache)]
    first = run.resolve_spec(run.parse_args(argv))
    synced = Path(first.release)
    assert synced.is_relative_to(cache)
    assert (synced / "input" / "task_1" / "task.json").is_file()
    assert (synced / "output" / "task_1" / "gold.csv").is_file()
    assert run.resolve_spec(run.parse_args(argv)).release == first.release


def test_bad_flags_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_options(["novalue"], flag="-o")
    with pytest.raises(SystemExit):
        build.parse_args(["--source", "no-colon", "--dest", "x"])
    with pytest.raises(SystemExit):
        sweep.parse_args([])
    assert "--run-id" in capsys.readouterr().err
    assert run.main(["/nonexistent/spec.yaml"]) == 2
    assert "cannot read run spec" in capsys.readouterr().err


def test_every_entrypoint_parses_its_documented_example() -> None:
    cfg = build.parse_args(
        [
            "--source",
            "bundled:finance",
            "--source",
            "ehrsql:/data/ehrsql",
            "--dest",
            "/data/rel",
            "--upload",
            "s3://b/releases/v1",
        ]
    )
    assert cfg.sources == (("bundled", "finance"), ("ehrsql", "/data/ehrsql"))
    assert report.parse_args(["s3://b/store/runs/r1", "--out", "s3://b/reports"]).runs == (
        "s3://b/store/runs/r1",
    )
    assert sweep.parse_args(["--run-id", "r1", "-o", "namespace=sb"]).options == {"namespace": "sb"}

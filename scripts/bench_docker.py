"""Benchmark the docker sandbox backend: one attempt's container, phase by phase.

Each run creates a container over a small workspace (``docker run`` until the container's
init, output folder and runtime manifest are reachable: ``create``), runs ``true`` twice,
starts the workbench Python (``python3 -c pass``), writes an answer file, collects the
output folder and removes the container (``close``). Prints the median and p90 of each
phase over the runs.

    PYTHONPATH=. .venv/bin/python scripts/bench_docker.py [--runs 10] [--image IMAGE]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dataspace.sandbox import SandboxSpec, get_backend

PHASES = ("create", "exec_true", "exec_again", "exec_python", "write_file", "collect", "close")


def one_run(backend, workspace: Path, dest: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    t = time.perf_counter()
    box = backend.create(SandboxSpec(workspace=workspace))
    times["create"] = time.perf_counter() - t
    for name, command in (("exec_true", "true"), ("exec_again", "true"),
                          ("exec_python", ["python3", "-c", "pass"])):  # fmt: skip
        t = time.perf_counter()
        result = box.exec(command)
        times[name] = time.perf_counter() - t
        assert result.exit_code == 0, result.stderr
    t = time.perf_counter()
    box.write_file("prediction.csv", b"a\n1\n")
    times["write_file"] = time.perf_counter() - t
    t = time.perf_counter()
    box.collect(dest)
    times["collect"] = time.perf_counter() - t
    t = time.perf_counter()
    box.close()
    times["close"] = time.perf_counter() - t
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--image", default=None, help="the runtime image (default: the backend's)")
    args = parser.parse_args()
    backend = get_backend("docker", **({"image": args.image} if args.image else {}))
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        (workspace / "data.csv").write_text("id,name\n1,alpha\n")
        runs = [one_run(backend, workspace, Path(tmp) / f"out-{i}") for i in range(args.runs)]
    print(f"docker backend, image {backend.image}, daemon {backend.server}, {args.runs} runs")
    for phase in PHASES:
        values = sorted(run[phase] for run in runs)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"  {phase:12s} median {statistics.median(values) * 1000:7.1f} ms   "
              f"p90 {p90 * 1000:7.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()

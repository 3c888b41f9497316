"""Benchmark the local sandbox: the life of one sandbox, phase by phase, and its memory.

Each run is one attempt's sandbox with the Data Workbench Runtime: it creates a sandbox
over a 10 MB workspace (staged by a mount, timed inside ``create`` and reported apart as
``stage``), runs ``true`` twice (the first command of a sandbox pays for its first entry
into fresh cgroups), starts the workbench Python (``python3 -c pass``) and a workbench
tool (``pdftotext -v``), writes a small answer file, collects the output folder and
closes the sandbox. Every command passes the seccomp filter and enters the sandbox's user
namespace, so ``exec_again`` is what they cost per command. Then N sandboxes are opened at once
to measure the controller's RSS per live sandbox, and the proportional memory (PSS) of
each sandbox's two init processes on the host.

    .venv/bin/python scripts/bench_sandbox.py [--runs 20] [--open 20] [--enforcement auto]
        [--isolation-cost N]

``--isolation-cost N`` then times N single commands (``true``) in one sandbox with the
seccomp filter and, interleaved, N in a sandbox of a backend without it, and prints both
medians and p90s: what the filter costs per command. (Every command also enters the
sandbox's user namespace; that cost is in both figures and in ``exec_again``.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dataspace.sandbox import SandboxSpec
from dataspace.sandbox.local import LocalBackend, LocalSandbox

PHASES = (
    "create",
    "stage",
    "exec_true",
    "exec_again",
    "exec_python",
    "exec_tool",
    "write_file",
    "collect",
    "close",
    "total",
)


def make_workspace(root: Path, megabytes: int) -> Path:
    workspace = root / "workspace"
    workspace.mkdir()
    block = bytes(range(256)) * 4096  # 1 MiB
    for index in range(megabytes):
        (workspace / f"part_{index:02d}.bin").write_bytes(block)
    (workspace / "table.csv").write_text(
        "id,value\n" + "".join(f"{i},{i * 3}\n" for i in range(1000))
    )
    return workspace


def one_run(backend: LocalBackend, workspace: Path, dest: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    start = time.perf_counter()
    sandbox = backend.create(SandboxSpec(workspace=workspace))
    times["create"] = time.perf_counter() - start
    times["stage"] = float(sandbox.info()["timings"]["workspace_bind_seconds"])  # type: ignore[index]
    mark = time.perf_counter()
    result = sandbox.exec("true")
    times["exec_true"] = time.perf_counter() - mark
    if result.exit_code != 0:
        raise SystemExit(f"exec true failed: {result}")
    mark = time.perf_counter()
    sandbox.exec("true")
    times["exec_again"] = time.perf_counter() - mark
    for phase, command in (("exec_python", "python3 -c pass"), ("exec_tool", "pdftotext -v")):
        mark = time.perf_counter()
        result = sandbox.exec(command)
        times[phase] = time.perf_counter() - mark
        if result.exit_code != 0:
            raise SystemExit(f"{command} failed: {result}")
    mark = time.perf_counter()
    sandbox.write_file("prediction.csv", b"id,value\n1,3\n")
    times["write_file"] = time.perf_counter() - mark
    mark = time.perf_counter()
    sandbox.collect(dest)
    times["collect"] = time.perf_counter() - mark
    mark = time.perf_counter()
    sandbox.close()
    times["close"] = time.perf_counter() - mark
    times["total"] = time.perf_counter() - start
    return times


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def status_kib(pid: int | str, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory_per_sandbox(backend: LocalBackend, workspace: Path, count: int) -> None:
    warm = backend.create(SandboxSpec(workspace=workspace))  # imports and threads in place
    warm.exec("true")
    warm.close()
    before = status_kib("self", "VmRSS")
    sandboxes: list[LocalSandbox] = []
    try:
        for _ in range(count):
            sandbox = backend.create(SandboxSpec(workspace=workspace))
            sandbox.exec("true")
            sandboxes.append(sandbox)
        after = status_kib("self", "VmRSS")
        inits = [
            pss_kib(s._init.pid) + pss_kib(int(s.info()["init_pid"]))  # type: ignore[union-attr, arg-type]
            for s in sandboxes
        ]
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    print(f"\n{count} sandboxes open at once")
    print(
        f"  controller RSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB with them open"
    )
    print(f"  controller RSS per live sandbox: {(after - before) / count:.0f} KiB")
    print(
        f"  host memory of each sandbox's init pair (PSS): {statistics.mean(inits) / 1024:.1f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--open", type=int, default=20, help="sandboxes open at once for RSS")
    parser.add_argument("--workspace-mb", type=int, default=10)
    parser.add_argument("--enforcement", default="auto")
    parser.add_argument(
        "--isolation-cost", type=int, default=0, help="commands timed with/without seccomp"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as temp:
        root = Path(temp)
        root.chmod(0o755)
        workspace = make_workspace(root, args.workspace_mb)
        backend = LocalBackend(state_dir=root / "state", enforcement=args.enforcement)
        one_run(backend, workspace, root / "warmup")
        runs = [one_run(backend, workspace, root / f"collected-{i}") for i in range(args.runs)]
        print(
            f"local sandbox, enforcement {backend.enforcement}, {args.runs} runs, "
            f"{args.workspace_mb} MB workspace"
        )
        print(f"{'phase':<12}{'median ms':>11}{'p90 ms':>9}")
        for phase in PHASES:
            values = [run[phase] * 1000 for run in runs]
            print(f"{phase:<12}{statistics.median(values):>11.2f}{percentile(values, 0.9):>9.2f}")
        memory_per_sandbox(backend, workspace, args.open)
        if args.isolation_cost:
            isolation_cost(backend, root, workspace, args.isolation_cost, args.enforcement)


def isolation_cost(
    backend: LocalBackend, root: Path, workspace: Path, n: int, enforcement: str
) -> None:
    """Per-command time with and without the seccomp filter, interleaved."""
    plain = LocalBackend(state_dir=root / "state-plain", enforcement=enforcement, seccomp=False)
    boxes = {
        "seccomp": backend.create(SandboxSpec(workspace=workspace)),
        "no seccomp": plain.create(SandboxSpec(workspace=workspace)),
    }
    times: dict[str, list[float]] = {name: [] for name in boxes}
    try:
        for box in boxes.values():
            box.exec("true")
        for _ in range(n):
            for name, box in boxes.items():
                mark = time.perf_counter()
                box.exec("true")
                times[name].append((time.perf_counter() - mark) * 1000)
    finally:
        for box in boxes.values():
            box.close()
    print(f"per command ({n} each, interleaved){'median ms':>12}{'p90 ms':>9}")
    for name, values in times.items():
        print(f"  {name:<33}{statistics.median(values):>10.2f}{percentile(values, 0.9):>9.2f}")


if __name__ == "__main__":
    main()

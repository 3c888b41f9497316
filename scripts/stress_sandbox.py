"""Run the sandbox test suite again and again under CPU load; print how many passed in a row.

Two busy loops (one per core of the reference machine) run for the whole time, so the
suite meets the scheduling delays a loaded CI machine has. Stops at the first failing run
(its output is kept in ``--log``), after ``--runs`` runs or once ``--seconds`` have passed.

    .venv/bin/python scripts/stress_sandbox.py [--runs 200] [--seconds 0] [--busy 2]
        [--log stress-sandbox.log] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUSY = "while True:\n    pass\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--seconds", type=float, default=0.0, help="stop after this long (0: no limit)"
    )
    parser.add_argument("--busy", type=int, default=2, help="busy loops to run meanwhile")
    parser.add_argument("--log", default="stress-sandbox.log")
    parser.add_argument("pytest_args", nargs="*", default=["tests/sandbox"])
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the busy loops
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    started = time.monotonic()
    passed = 0
    failed = False
    durations: list[float] = []
    try:
        while passed < args.runs:
            if args.seconds and time.monotonic() - started > args.seconds:
                break
            mark = time.monotonic()
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                 *args.pytest_args],
                cwd=REPO, capture_output=True, text=True, check=False,
            )  # fmt: skip
            durations.append(time.monotonic() - mark)
            if run.returncode != 0:
                Path(args.log).write_text(run.stdout + run.stderr)
                failed = True
                break
            passed += 1
            last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
            print(f"run {passed}: {last}", flush=True)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    mean = sum(durations) / len(durations) if durations else 0.0
    print(
        f"{passed} passed in a row under {args.busy} busy loops"
        + (f"; run {passed + 1} failed (output in {args.log})" if failed else "")
        + f"; {mean:.0f} s per run"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark the evaluator on the cases that stress column alignment.

Prints, per case, the wall time of scoring one task (reading both CSVs included) and the
scoring process's peak resident memory. Each case runs in a fresh process.

    .venv/bin/python scripts/bench_evaluator.py                 # all cases
    .venv/bin/python scripts/bench_evaluator.py --cases c d     # some cases
    .venv/bin/python scripts/bench_evaluator.py --official PATH/evaluate.py --timeout 120

``--official`` also times an official ``evaluate.py`` (loaded from that path at run time) on
the same files, giving up after ``--timeout`` seconds.

Cases:
  a  12,962 rows x 6 mixed-type columns, columns permuted and rows shuffled (passes)
  b  100,000 rows x 3 columns, permuted and shuffled (passes)
  c  8 same-typed integer columns in reversed order, 2,000 rows (passes, last permutation)
  d  9 same-typed text columns, 300 rows, one column's values shuffled (no mapping passes)
  e  64 mixed-type columns x 1,000 rows, permuted and shuffled (passes)
  f  8 integer columns sharing one value multiset, 2,000 rows, shuffled (passes)
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
root, official = Path(sys.argv[1]), sys.argv[2]
if official:
    import importlib.util
    spec = importlib.util.spec_from_file_location("official_evaluator", official)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    config = module.load_task_config(root / "task_1.json")
    run = lambda: module.evaluate_task(config=config, prediction_path=root / "prediction.csv",
                                       gold_path=root / "gold.csv").to_dict()
else:
    sys.path.insert(0, sys.argv[3])
    import evaluator
    config = evaluator.load_config(root / "task_1.json")
    run = lambda: evaluator.evaluate_task(config=config, prediction_path=root / "prediction.csv",
                                          gold_path=root / "gold.csv").to_dict()
start = time.perf_counter()
verdict = run()
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "passed": verdict["passed"],
                  "error_code": verdict["error_code"]}))
"""

Column = tuple[dict[str, object], Callable[[random.Random, int], str]]


def _text(rng: random.Random, i: int) -> str:
    return f"name-{rng.randrange(10**9):09d}"


def _integer(rng: random.Random, i: int) -> str:
    return str(rng.randrange(-(10**6), 10**6))


def _decimal(rng: random.Random, i: int) -> str:
    return f"{rng.uniform(-1e5, 1e5):.4f}"


def _day(rng: random.Random, i: int) -> str:
    return (date(2000, 1, 1) + timedelta(days=rng.randrange(9000))).isoformat()


def _moment(rng: random.Random, i: int) -> str:
    return f"{_day(rng, i)}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z"


def _flag(rng: random.Random, i: int) -> str:
    return rng.choice(["true", "false"])


MIXED: list[Column] = [
    ({"type": "text"}, _text),
    ({"type": "number", "comparison": {"mode": "integer"}}, _integer),
    ({"type": "number", "comparison": {"mode": "decimal_places", "digits": 2}}, _decimal),
    ({"type": "date"}, _day),
    ({"type": "datetime"}, _moment),
    ({"type": "boolean"}, _flag),
]


def _write_case(
    root: Path,
    specs: list[dict[str, object]],
    gold: list[list[str]],
    prediction: list[list[str]],
    *,
    order_sensitive: bool = False,
) -> None:
    columns = [{"gold_index": i, "gold_name": f"g{i}", **spec} for i, spec in enumerate(specs)]
    config = {
        "schema_version": "1.0",
        "task_id": "task_1",
        "order_sensitive": order_sensitive,
        "columns": columns,
    }
    (root / "task_1.json").write_text(json.dumps(config), encoding="utf-8")
    for name, header, rows in (
        ("gold.csv", [f"g{i}" for i in range(len(specs))], gold),
        ("prediction.csv", [f"p{i}" for i in range(len(specs))], prediction),
    ):
        with (root / name).open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)


def _permuted(
    rng: random.Random, gold: list[list[str]], order: list[int], shuffle: bool
) -> list[list[str]]:
    rows = [[row[j] for j in order] for row in gold]
    if shuffle:
        rng.shuffle(rows)
    return rows


def build(case: str, root: Path, rng: random.Random) -> None:
    """Write ``task_1.json``, ``gold.csv`` and ``prediction.csv`` for one case."""
    if case in ("a", "b", "e"):
        rows, width = {"a": (12_962, 6), "b": (100_000, 3), "e": (1_000, 64)}[case]
        chosen = [MIXED[i % len(MIXED)] for i in range(width)]
        gold = [[make(rng, r) for _, make in chosen] for r in range(rows)]
        order = list(range(width))
        rng.shuffle(order)
        _write_case(root, [spec for spec, _ in chosen], gold, _permuted(rng, gold, order, True))
    elif case == "c":
        spec = MIXED[1][0]
        gold = [[_integer(rng, r) for _ in range(8)] for r in range(2_000)]
        _write_case(root, [spec] * 8, gold, _permuted(rng, gold, list(range(7, -1, -1)), False))
    elif case == "d":
        spec = MIXED[0][0]
        gold = [[_text(rng, r) for _ in range(9)] for r in range(300)]
        prediction = _permuted(rng, gold, list(range(8, -1, -1)), True)
        values = [row[4] for row in prediction]
        rng.shuffle(values)
        for row, value in zip(prediction, values, strict=True):
            row[4] = value
        _write_case(root, [spec] * 9, gold, prediction)
    elif case == "f":
        spec = MIXED[1][0]
        base = [_integer(rng, r) for r in range(2_000)]
        columns = []
        for _ in range(8):
            values = base[:]
            rng.shuffle(values)
            columns.append(values)
        gold = [list(row) for row in zip(*columns, strict=True)]
        order = list(range(8))
        rng.shuffle(order)
        _write_case(root, [spec] * 8, gold, _permuted(rng, gold, order, True))
    else:
        raise SystemExit(f"unknown case {case!r}")


def measure(root: Path, official: str, timeout: float) -> dict[str, object]:
    """Score the case in a fresh process; its timing, peak memory and verdict."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(root), official, str(REPO)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": None, "note": f"gave up after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"seconds": None, "note": done.stderr.strip().splitlines()[-1]}
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=["a", "b", "c", "d", "e", "f"])
    parser.add_argument("--official", default="", help="path of an official evaluate.py")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    print(f"{'case':<5}{'evaluator':<11}{'seconds':>9}{'peak MB':>9}  verdict")
    for case in args.cases:
        with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
            root = Path(tmp)
            build(case, root, random.Random(f"{args.seed}-{case}"))
            runs = [("ours", "")] + ([("official", args.official)] if args.official else [])
            for label, official in runs:
                result = measure(root, official, args.timeout)
                if result.get("seconds") is None:
                    print(f"{case:<5}{label:<11}{'-':>9}{'-':>9}  {result['note']}")
                    continue
                verdict = "passed" if result["passed"] else result["error_code"]
                print(
                    f"{case:<5}{label:<11}{result['seconds']:>9.3f}"
                    f"{result['peak_mb']:>9.1f}  {verdict}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

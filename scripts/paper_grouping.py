"""Which of the paper's six backbones are told apart, on outcomes consistent with its figures.

The paper reports, for DataSpace-Agent on 410 tasks, each backbone's accuracy (Grok 4.5
66.34%, GPT-5.6 Sol 64.63%, Kimi K3 53.41%, MiMo-V2.5 39.27%, Claude Sonnet 5 32.93%,
MiniMax M3 28.54%) and that 56 tasks are solved by all six, 76 by none (an oracle union of
334). Per-task outcomes are not published, so this script synthesizes a matrix that
reproduces every one of those figures exactly: 56 tasks solved by all, 76 by none, and on
the 278 others each backbone solves its remaining count (272 - 56 for Grok 4.5, ...), the
tasks chosen by a shared latent ease plus per-backbone noise (seeded), so that the
backbones agree on easy and hard tasks as real ones do; every middle task is then solved
by at least one and at most five backbones. The report's own statistics
(``dataspace.stats``: exact McNemar per pair, Holm across the 15 pairs, a compact
letter display) then give the grouping.

    python scripts/paper_grouping.py [--seed N] [--level 0.95]

Different seeds give different matrices consistent with the same figures; the script
prints how stable each pair's verdict is across ``--seeds`` of them.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from dataspace import stats
from dataspace.runs.plan import PAPER_BACKBONES, PAPER_TASKS

SOLVED_BY_ALL = 56
SOLVED_BY_NONE = 76


def correct_counts() -> dict[str, int]:
    """Correct tasks per backbone from the paper's accuracies (e.g. 66.34% of 410 = 272)."""
    return {name: round(f.accuracy_pct / 100 * PAPER_TASKS) for name, f in PAPER_BACKBONES.items()}


def synthesize(seed: int, noise: float = 1.0) -> dict[str, dict[str, list[bool]]]:
    """Backbone -> task -> [passed], consistent with the paper's counts (see the docstring)."""
    rng = np.random.default_rng(seed)
    names = list(PAPER_BACKBONES)
    counts = correct_counts()
    n_mid = PAPER_TASKS - SOLVED_BY_ALL - SOLVED_BY_NONE
    ease = rng.normal(size=n_mid)
    solved = np.zeros((len(names), n_mid), dtype=bool)
    for b, name in enumerate(names):
        score = ease + noise * rng.normal(size=n_mid)
        solved[b, np.argsort(-score)[: counts[name] - SOLVED_BY_ALL]] = True
    # repair: every middle task solved by 1..5 backbones, each backbone's count kept
    for _ in range(10 * n_mid):
        per = solved.sum(axis=0)
        empty = np.flatnonzero(per == 0)
        full = np.flatnonzero(per == len(names))
        if not len(empty) and not len(full):
            break
        if len(empty):
            t = empty[0]
            donors = [
                (b, u) for b in range(len(names)) for u in np.flatnonzero(solved[b]) if per[u] >= 2
            ]
            b, u = donors[int(rng.integers(len(donors)))]
            solved[b, u], solved[b, t] = False, True
        else:
            t = full[0]
            b = int(rng.integers(len(names)))
            takers = [u for u in np.flatnonzero(~solved[b]) if per[u] < len(names) - 1]
            u = takers[int(rng.integers(len(takers)))]
            solved[b, t], solved[b, u] = False, True
    out: dict[str, dict[str, list[bool]]] = {}
    for b, name in enumerate(names):
        mine: dict[str, list[bool]] = {}
        k = 1
        for _ in range(SOLVED_BY_ALL):
            mine[f"task_{k}"] = [True]
            k += 1
        for _ in range(SOLVED_BY_NONE):
            mine[f"task_{k}"] = [False]
            k += 1
        for t in range(n_mid):
            mine[f"task_{k}"] = [bool(solved[b, t])]
            k += 1
        out[name] = mine
    return out


def check(outcomes: dict[str, dict[str, list[bool]]]) -> None:
    """The synthesized matrix reproduces the paper's figures exactly."""
    counts = correct_counts()
    tasks = list(next(iter(outcomes.values())))
    per_task = [sum(outcomes[n][t][0] for n in outcomes) for t in tasks]
    assert len(tasks) == PAPER_TASKS
    assert per_task.count(len(outcomes)) == SOLVED_BY_ALL, per_task.count(len(outcomes))
    assert per_task.count(0) == SOLVED_BY_NONE
    for name, per in outcomes.items():
        assert sum(v[0] for v in per.values()) == counts[name], name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=20, help="matrices for the stability count")
    p.add_argument("--level", type=float, default=stats.DEFAULT_LEVEL)
    args = p.parse_args(argv)
    outcomes = synthesize(args.seed)
    check(outcomes)
    labels = sorted(outcomes, key=lambda n: -PAPER_BACKBONES[n].accuracy_pct)
    pairs = stats.pairwise(outcomes, labels, args.level)
    groups = stats.groups_of(pairs, labels)
    print(f"paper leaderboard, {PAPER_TASKS} tasks, level {args.level:g}, seed {args.seed}")
    print(f"{'backbone':<16} {'accuracy % [Wilson interval]':<28} group")
    for name in labels:
        c = sum(v[0] for v in outcomes[name].values())
        iv = stats.wilson(c, PAPER_TASKS, args.level)
        text = f"{100 * iv.estimate:.2f} [{100 * iv.low:.2f}, {100 * iv.high:.2f}]"
        print(f"{name:<16} {text:<28} {groups[name]}")
    print()
    stable: dict[tuple[str, str], int] = {}
    for s in range(args.seeds):
        other = stats.pairwise(synthesize(s), labels, args.level)
        for r in other.itertuples():
            stable[(r.a, r.b)] = stable.get((r.a, r.b), 0) + int(bool(r.different))
    print(
        f"{'pair':<34} {'diff [interval] points':<26} {'only a/b':<9} {'Holm p':<9} "
        f"differ  (differ in n of {args.seeds} matrices)"
    )
    for r in pairs.itertuples():
        d = f"{r.difference_pp:+.2f} [{r.difference_low_pp:+.2f}, {r.difference_high_pp:+.2f}]"
        p_text = f"{r.p_holm:.3g}" if r.p_holm > 0 else "<1e-12"
        verdict = "yes" if r.different else "no"
        print(
            f"{r.a + ' vs ' + r.b:<34} {d:<26} {f'{r.a_only}/{r.b_only}':<9} "
            f"{p_text:<9} {verdict:<7} ({stable[(r.a, r.b)]})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

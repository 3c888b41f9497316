"""Uncertainty and significance for the report: intervals, paired tests, groups, sample sizes.

Every figure the report prints is an estimate from a sample of tasks, so each comes with an
interval at the report's level (``DEFAULT_LEVEL``, 95%), and every comparison of two agents
says whether the difference is more than noise. The statistics are SciPy's (``scipy.stats``):
its exact binomial test, Wilson interval, bootstrap and normal quantiles, which are all this
needs; statsmodels would add a second, heavier dependency for the same few functions.

- **Accuracy** (correct / scored attempts): the Wilson score interval (the formula of
  ``binomtest(...).proportion_ci(method="wilson")``, computed directly: the same numbers
  without the test's p-value), which keeps its coverage near the
  nominal level for small samples and rates near 0 or 1, where the normal interval fails.
  With several attempts per task the attempts are counted as trials, as the accuracy is.
- **Means** (tokens, cost, latency, tool actions): a percentile bootstrap over *tasks*:
  tasks are resampled with all their attempts (``scipy.stats.bootstrap`` over per-task sums
  and counts, ``paired=True``; the same draws and numbers, computed without its per-call
  overhead), so attempts of one task are never treated as independent.
  Resampling is seeded (``SEED``): the same results give the same intervals.
- **pass@k and pass^k** with several attempts per task: the unbiased estimators
  ``1 - C(n-c, k)/C(n, k)`` and ``C(c, k)/C(n, k)`` per task, averaged over tasks, with a
  bootstrap interval over tasks.
- **Two agents** are compared on the scored tasks both ran (their intersection, whose size
  is reported): the difference in accuracy with a paired bootstrap interval over tasks, and
  the exact McNemar test, i.e. the exact binomial test of the discordant pairs (attempt i
  of one agent against attempt i of the other on the same task) against 1/2. Across all
  pairs the p-values are adjusted with Holm's step-down method, which controls the
  family-wise error rate at ``1 - level`` without assuming independence.
- **Groups**: agents no adjusted test separates share a letter (a compact letter display,
  Piepho's insert-and-absorb algorithm): two agents with no letter in common differ.
- **Sample size**: the tasks x attempts needed to tell a difference apart, from the
  variance of the per-task differences split into a between-task part (fixed whatever the
  attempts) and a within-task part (shrinks with attempts).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

logger = logging.getLogger(__name__)

DEFAULT_LEVEL = 0.95
"""The confidence level of every interval and test, unless the report is asked otherwise."""
SEED = 27
"""The bootstrap's seed: intervals are deterministic for the same results."""
RESAMPLES = 2000
"""Bootstrap resamples per interval."""
POWER = 0.8
"""The power the sample-size estimate asks for."""


class Interval(NamedTuple):
    """An estimate with the bounds of its interval (NaN when it cannot be computed)."""

    estimate: float
    low: float
    high: float


NAN = float("nan")
EMPTY = Interval(NAN, NAN, NAN)


def check_level(level: float) -> float:
    """The level itself when it lies strictly between 0 and 1.

    Raises:
        ValueError: a level outside (0, 1), with the fix.

    >>> check_level(0.9)
    0.9
    """
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level {level!r}: give a confidence level between 0 and 1, e.g. 0.95")
    return float(level)


def wilson(correct: int, n: int, level: float = DEFAULT_LEVEL) -> Interval:
    """The proportion ``correct / n`` with its Wilson score interval.

    SciPy's ``binomtest(correct, n).proportion_ci(method="wilson")`` formula, operation for
    operation (the same numbers), without the test's p-value that SciPy computes first.

    >>> [round(x, 4) for x in wilson(272, 410)]
    [0.6634, 0.6163, 0.7075]
    >>> wilson(0, 0).estimate != wilson(0, 0).estimate  # NaN: no trials
    True
    """
    if n <= 0:
        return EMPTY
    k, n = int(correct), int(n)
    if not 0 <= k <= n:
        raise ValueError(f"wilson: {k} correct of {n} trials; correct must lie in 0..{n}")
    z = _z_two_sided(check_level(level))
    # Newcombe (1998), as scipy.stats._binomtest._binom_wilson_conf_int computes it
    p = k / n
    denom = 2 * (n + z**2)
    center = (2 * n * p + z**2) / denom
    q = 1 - p
    delta = z / denom * math.sqrt(4 * n * p * q + z**2)
    low = 0.0 if k == 0 else center - delta
    high = 1.0 if k == n else center + delta
    return Interval(correct / n, float(low), float(high))


@functools.lru_cache(maxsize=16)
def _z_two_sided(level: float) -> Any:
    """The normal quantile of a two-sided interval at ``level`` (SciPy's ``ndtri``)."""
    from scipy.special import ndtri

    return ndtri(0.5 + 0.5 * level)


def _rng(seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed)


def cluster_mean(
    sums: Sequence[float],
    counts: Sequence[float],
    level: float = DEFAULT_LEVEL,
    *,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> Interval:
    """The mean ``sum(sums) / sum(counts)`` with a bootstrap interval over clusters (tasks).

    Args:
        sums: per task, the sum of the measure over its attempts.
        counts: per task, how many attempts were measured.
        level: the confidence level.
        seed: the resampling seed.
        resamples: how many bootstrap resamples.

    >>> est, lo, hi = cluster_mean([1.0, 2.0, 3.0, 4.0], [1, 1, 1, 1])
    >>> est, lo <= est <= hi
    (2.5, True)
    """
    import numpy as np

    s = np.asarray(sums, dtype=float)
    c = np.asarray(counts, dtype=float)
    keep = ~np.isnan(s) & (c > 0)
    s, c = s[keep], c[keep]
    if len(s) == 0:
        return EMPTY
    est = float(s.sum() / c.sum())
    if len(s) < 2:
        return Interval(est, NAN, NAN)
    if np.allclose(s / c, s[0] / c[0]):
        return Interval(est, est, est)  # no spread: the bootstrap has nothing to resample
    low, high = _percentile_interval(s, c, check_level(level), seed, resamples)
    return Interval(est, low, high)


def _percentile_interval(
    s: Any, c: Any, level: float, seed: int, resamples: int
) -> tuple[float, float]:
    """``scipy.stats.bootstrap`` of ``sum(s) / sum(c)``, paired, percentile: the same numbers.

    The same draws (``integers(0, n, (resamples, n))`` from a fresh generator, shared by
    every interval over ``n`` tasks), the same sums and the same quantiles as SciPy's,
    without its per-call validation. A resample's sum is taken over the resampled array
    (NumPy's pairwise summation, as SciPy does) unless every value is a whole number small
    enough to be summed exactly in any order: then it is the resample's counts of each task
    times the values (one matrix product, the same sums). With every count 1 the resampled
    counts sum to ``n`` exactly.
    """
    import numpy as np

    n = len(s)
    theta = _resampled_sums(s, n, seed, resamples)
    if np.all(c == 1.0):
        theta = theta / np.full(theta.shape, float(n))
    else:
        theta = theta / _resampled_sums(c, n, seed, resamples)
    alpha = np.asarray((1 - level) / 2, dtype=theta.dtype)
    low, high = _linear_quantiles(theta, alpha, 1 - alpha)
    return low, high


def _resampled_sums(x: Any, n: int, seed: int, resamples: int) -> Any:
    """Each resample's sum of ``x`` (one per row of the resampled indices)."""
    import numpy as np

    if _sums_exactly(x):
        # NumPy's own loop, not BLAS (whose threads would spin on a shared machine)
        return np.einsum("ij,j->i", _resample_counts(n, seed, resamples), x)
    return x[..., _resample_indices(n, seed, resamples)].sum(axis=-1)


def _sums_exactly(x: Any) -> bool:
    """Every value a whole number (no negative zero) and every resample's sum below 2**53.

    Then any order of summation gives the same sum, exactly.
    """
    import numpy as np

    if not np.all(np.isfinite(x)) or not np.all(x == np.trunc(x)):
        return False
    if np.any((x == 0) & np.signbit(x)):
        return False
    return float(np.abs(x).max(initial=0.0)) * len(x) < 2.0**53


def _linear_quantiles(theta: Any, *ps: Any) -> tuple[float, ...]:
    """``scipy.stats.quantile(theta, ps, method="linear")`` of a 1-d array without NaN.

    Hyndman and Fan's method 7 as SciPy computes it (``jg = p * n + 1 - p``, the order
    statistics at ``floor(jg) - 1`` and ``floor(jg)`` weighted by ``jg % 1``), the order
    statistics found by partitioning instead of sorting (the same values).
    """
    import numpy as np

    if np.isnan(theta).any():
        return tuple(float("nan") for _ in ps)
    n = np.asarray(theta.shape[-1], dtype=theta.dtype)
    p = np.stack(ps, axis=-1)
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g[j < 0] = 0
    j = np.clip(j, 0.0, n - 1).astype(np.int64)
    jp1 = np.clip(jp1, 0.0, n - 1).astype(np.int64)
    y = np.partition(theta, np.unique(np.concatenate((j, jp1))))
    res = (1 - g) * y[j] + g * y[jp1]
    return tuple(float(v) for v in res)


@functools.lru_cache(maxsize=8)
def _resample_indices(n: int, seed: int, resamples: int) -> Any:
    idx = _rng(seed).integers(0, n, (resamples, n), dtype="int64", endpoint=False)
    idx.setflags(write=False)
    return idx


@functools.lru_cache(maxsize=8)
def _resample_counts(n: int, seed: int, resamples: int) -> Any:
    """How many times each task is drawn in each resample (as floats, for the product)."""
    import numpy as np

    idx = _resample_indices(n, seed, resamples)
    rows = np.arange(resamples, dtype=np.int64)[:, None] * n
    counts = np.bincount((idx + rows).ravel(), minlength=resamples * n)
    out = counts.reshape(resamples, n).astype(float)
    out.setflags(write=False)
    return out


def bootstrap_mean(
    values: Sequence[float],
    level: float = DEFAULT_LEVEL,
    *,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> Interval:
    """The mean of per-task values with a percentile bootstrap interval over tasks.

    >>> bootstrap_mean([0.5, 0.5, 0.5])
    Interval(estimate=0.5, low=0.5, high=0.5)
    """
    return cluster_mean(values, [1.0] * len(values), level, seed=seed, resamples=resamples)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for a task with ``n`` attempts of which ``c`` passed.

    >>> round(pass_at_k(3, 1, 1), 4)
    0.3333
    >>> pass_at_k(3, 1, 3)
    1.0
    >>> pass_at_k(3, 0, 2)
    0.0
    """
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} attempts")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (all of k attempts pass) for a task with ``c`` of ``n`` passed.

    >>> pass_hat_k(3, 2, 2), pass_hat_k(3, 3, 3), pass_hat_k(3, 1, 2)
    (0.3333333333333333, 1.0, 0.0)
    """
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} attempts")
    return math.comb(c, k) / math.comb(n, k)


def pass_k_interval(
    per_task: Iterable[tuple[int, int]],
    k: int,
    *,
    every: bool = False,
    level: float = DEFAULT_LEVEL,
    seed: int = SEED,
) -> tuple[Interval, int]:
    """pass@k (``every=False``) or pass^k (``every=True``) over tasks with at least k attempts.

    Returns the interval and how many tasks it is over.
    """
    fn = pass_hat_k if every else pass_at_k
    vals = [fn(int(n), int(c), k) for n, c in per_task if n >= k]
    return bootstrap_mean(vals, level, seed=seed), len(vals)


# ---- two agents -----------------------------------------------------------------------------


class PairedOutcome(NamedTuple):
    """Two agents on the scored tasks they share."""

    tasks: int  # shared scored tasks
    pairs: int  # attempt pairs (attempt i of each agent on the same task)
    a_only: int  # pairs where only the first agent passed
    b_only: int  # pairs where only the second passed
    accuracy_a: float
    accuracy_b: float
    difference: Interval  # accuracy_a - accuracy_b over the shared tasks (a fraction)
    p_value: float  # exact McNemar


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Exact McNemar p-value: the two-sided binomial test of the discordant pairs at 1/2.

    >>> mcnemar_exact(0, 0)
    1.0
    >>> round(mcnemar_exact(10, 2), 4)
    0.0386
    """
    return _mcnemar(int(a_only), int(b_only))


@functools.lru_cache(maxsize=4096)
def _mcnemar(a_only: int, b_only: int) -> float:
    """The test of :func:`mcnemar_exact` (the same counts recur: pairs of harnesses).

    ``scipy.stats.binomtest(a_only, n, 0.5).pvalue`` step for step (its two-sided search
    for the other tail, on the same ``scipy.special`` binomial functions), so the same
    number to the last bit, without importing ``scipy.stats`` (a second of a command's
    start on a busy machine).
    """
    from scipy.special import _ufuncs as scu  # what scipy.stats.binom evaluates

    n, k, p = a_only + b_only, a_only, 0.5
    if n == 0:
        return 1.0

    def pmf(x: float) -> float:
        return float(scu._binom_pmf(x, n, p))

    def cdf(x: float) -> float:  # binom.cdf: 1 at and beyond n, 0 below 0
        return 1.0 if x >= n else 0.0 if x < 0 else float(scu._binom_cdf(math.floor(x), n, p))

    def sf(x: float) -> float:  # binom.sf: 0 at and beyond n, 1 below 0
        return 0.0 if x >= n else 1.0 if x < 0 else float(scu._binom_sf(math.floor(x), n, p))

    d = pmf(k)
    rerr = 1 + 1e-7
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = _search_binom(lambda x: -pmf(x), -d * rerr, math.ceil(p * n), n)
        y = n - ix + int(d * rerr == pmf(ix))
        pval = cdf(k) + sf(n - y)
    else:
        ix = _search_binom(pmf, d * rerr, 0, math.floor(p * n))
        y = ix + 1
        pval = cdf(y - 1) + sf(k - 1)
    return min(1.0, pval)


def _search_binom(a: Callable[[float], float], d: float, lo: int, hi: int) -> int:
    """SciPy's ``_binary_search_for_binom_tst``: the i in [lo, hi] with a(i) <= d < a(i+1)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        midval = a(mid)
        if midval < d:
            lo = mid + 1
        elif midval > d:
            hi = mid - 1
        else:
            return mid
    return lo if a(lo) <= d else lo - 1


def paired_outcome(
    a: Mapping[str, Sequence[bool]],
    b: Mapping[str, Sequence[bool]],
    level: float = DEFAULT_LEVEL,
    *,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> PairedOutcome:
    """Compare two agents on their shared tasks.

    Args:
        a: task -> the first agent's outcomes, by attempt number.
        b: task -> the second agent's outcomes, by attempt number.
        level: the confidence level of the difference's interval.
        seed: the resampling seed.
        resamples: how many bootstrap resamples.
    """
    shared = sorted(set(a) & set(b))
    a_only = b_only = pairs = 0
    diffs: list[float] = []
    ma: list[float] = []
    mb: list[float] = []
    for t in shared:
        xa, xb = list(a[t]), list(b[t])
        if not xa or not xb:
            continue
        for pa, pb in zip(xa, xb, strict=False):
            pairs += 1
            a_only += int(bool(pa) and not pb)
            b_only += int(bool(pb) and not pa)
        ra, rb = sum(map(bool, xa)) / len(xa), sum(map(bool, xb)) / len(xb)
        ma.append(ra)
        mb.append(rb)
        diffs.append(ra - rb)
    if not diffs:
        return PairedOutcome(0, 0, 0, 0, NAN, NAN, EMPTY, 1.0)
    return PairedOutcome(
        tasks=len(diffs),
        pairs=pairs,
        a_only=a_only,
        b_only=b_only,
        accuracy_a=sum(ma) / len(ma),
        accuracy_b=sum(mb) / len(mb),
        difference=bootstrap_mean(diffs, level, seed=seed, resamples=resamples),
        p_value=mcnemar_exact(a_only, b_only),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p_values[i])))
        out[i] = round(running, 12)
    return out


def letter_groups(labels: Sequence[str], different: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A compact letter display: agents sharing a letter are not told apart.

    Args:
        labels: agents, best first (letters are handed out in this order).
        different: the pairs a test separates.

    >>> letter_groups(["a", "b", "c"], [("a", "c")])
    {'a': 'a', 'b': 'ab', 'c': 'b'}
    >>> letter_groups(["a", "b"], [])
    {'a': 'a', 'b': 'a'}
    """
    order = list(labels)
    columns: list[set[str]] = [set(order)] if order else []
    for x, y in different:
        split: list[set[str]] = []
        for col in columns:
            if x in col and y in col:
                split += [col - {x}, col - {y}]
            else:
                split.append(col)
        # absorb: a column inside another says nothing more
        uniq: list[set[str]] = []
        for col in sorted(split, key=len, reverse=True):
            if col and not any(col <= other for other in uniq):
                uniq.append(col)
        columns = uniq
    rank = {lab: i for i, lab in enumerate(order)}
    columns.sort(key=lambda col: sorted(rank[m] for m in col))
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = {lab: "" for lab in order}
    for i, col in enumerate(columns):
        mark = letters[i] if i < len(letters) else f"[{i}]"
        for lab in order:
            if lab in col:
                out[lab] += mark
    return out


def pairwise(
    outcomes: Mapping[str, Mapping[str, Sequence[bool]]],
    labels: Sequence[str],
    level: float = DEFAULT_LEVEL,
    *,
    seed: int = SEED,
) -> Any:
    """Every pair of agents: paired difference, exact McNemar, Holm-adjusted p, verdict.

    Args:
        outcomes: label -> task -> outcomes by attempt number (scored attempts only).
        labels: agents, best first.
        level: the confidence level (tests at ``1 - level`` after Holm's correction).
        seed: the resampling seed.

    Returns:
        A DataFrame with one row per pair (``a`` listed before ``b`` in ``labels``).
    """
    import pandas as pd

    rows = []
    for i, x in enumerate(labels):
        for y in labels[i + 1 :]:
            po = paired_outcome(outcomes.get(x, {}), outcomes.get(y, {}), level, seed=seed)
            rows.append(
                {
                    "a": x,
                    "b": y,
                    "shared_tasks": po.tasks,
                    "pairs": po.pairs,
                    "a_only": po.a_only,
                    "b_only": po.b_only,
                    "accuracy_a_pct": 100 * po.accuracy_a,
                    "accuracy_b_pct": 100 * po.accuracy_b,
                    "difference_pp": 100 * po.difference.estimate,
                    "difference_low_pp": 100 * po.difference.low,
                    "difference_high_pp": 100 * po.difference.high,
                    "p_mcnemar": po.p_value,
                }
            )
    cols = [
        "a",
        "b",
        "shared_tasks",
        "pairs",
        "a_only",
        "b_only",
        "accuracy_a_pct",
        "accuracy_b_pct",
        "difference_pp",
        "difference_low_pp",
        "difference_high_pp",
        "p_mcnemar",
        "p_holm",
        "different",
    ]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    df["p_holm"] = holm(list(df["p_mcnemar"]))
    df["different"] = (df["p_holm"] < 1.0 - check_level(level)) & (df["shared_tasks"] > 0)
    return df[cols]


def groups_of(pairs: Any, labels: Sequence[str]) -> dict[str, str]:
    """The letter groups implied by a ``pairwise`` table."""
    diff = [(str(r.a), str(r.b)) for r in pairs.itertuples() if bool(r.different)]
    return letter_groups(labels, diff)


# ---- results frames --------------------------------------------------------------------------


def scored_outcomes(df: Any) -> dict[str, dict[str, list[bool]]]:
    """Label -> task -> outcomes ordered by attempt number, over scored attempts only."""
    from dataspace.status import AttemptStatus

    d = df[df["passed"].notna() & (df["status"] != AttemptStatus.NOT_SCHEDULED.value)]
    d = d.sort_values(["label", "task_id", "attempt"], kind="stable")
    out: dict[str, dict[str, list[bool]]] = {}
    for lab, task, passed in zip(d["label"], d["task_id"], d["passed"], strict=True):
        out.setdefault(str(lab), {}).setdefault(str(task), []).append(bool(passed))
    return out


def attempts_needed(
    a: Mapping[str, Sequence[bool]],
    b: Mapping[str, Sequence[bool]],
    *,
    difference: float | None = None,
    level: float = DEFAULT_LEVEL,
    power: float = POWER,
    attempts: Sequence[int] = (1, 2, 3, 5),
) -> Any:
    """Tasks needed, per attempts per task, to tell two agents apart by ``difference``.

    The per-task difference of the two agents' pass rates has a between-task variance
    (how differently the agents fare on different tasks; more attempts do not shrink it)
    and a within-task variance (the Bernoulli noise of each attempt, divided by the
    attempts). Both are estimated from the observed results on the shared tasks; with one
    attempt per task they cannot be told apart and all of it is taken as between-task (so
    more attempts are not credited). Tasks needed for a two-sided test at ``1 - level`` with
    ``power``: ``(z_{1-alpha/2} + z_power)^2 * (var_between + var_within / m) / difference^2``.

    Args:
        a: task -> outcomes of the first agent.
        b: task -> outcomes of the second agent.
        difference: the difference in pass rate to detect (a fraction); default the
            observed one (5 points when that is zero).
        level: the confidence level of the test.
        power: the chance of telling the difference apart when it is real.
        attempts: the attempts per task to size for.

    Returns:
        A NamedTuple-like dict: ``difference``, ``observed``, ``tasks`` (shared), ``rows``
        (attempts per task, tasks needed, total attempts), ``within_known``.
    """
    import numpy as np
    from scipy.special import ndtri  # scipy.stats.norm.ppf, the same values

    shared = [t for t in sorted(set(a) & set(b)) if a[t] and b[t]]
    if len(shared) < 2:
        return None
    ra = np.array([np.mean(a[t]) for t in shared])
    rb = np.array([np.mean(b[t]) for t in shared])
    na = np.array([len(a[t]) for t in shared], dtype=float)
    nb = np.array([len(b[t]) for t in shared], dtype=float)
    d = ra - rb
    observed = float(d.mean())
    within_known = bool((na > 1).any() or (nb > 1).any())
    if within_known:
        wa = np.where(na > 1, ra * (1 - ra) * na / np.maximum(na - 1, 1), 0.0)
        wb = np.where(nb > 1, rb * (1 - rb) * nb / np.maximum(nb - 1, 1), 0.0)
        within = float((wa + wb).mean())
        between = max(0.0, float(d.var(ddof=1)) - float((wa / na + wb / nb).mean()))
    else:
        within, between = 0.0, float(d.var(ddof=1))
    target = difference if difference else (abs(observed) or 0.05)
    z = float(ndtri(1 - (1 - check_level(level)) / 2) + ndtri(power))
    rows = []
    for m in attempts:
        var = between + within / m
        need = max(2, math.ceil(z * z * var / (target * target))) if var > 0 else 2
        rows.append({"attempts": int(m), "tasks": int(need), "total_attempts": int(need * m)})
    return {
        "difference": float(target),
        "observed": observed,
        "tasks": len(shared),
        "between_variance": between,
        "within_variance": within,
        "within_known": within_known,
        "rows": rows,
    }


__all__ = [
    "DEFAULT_LEVEL",
    "EMPTY",
    "POWER",
    "RESAMPLES",
    "SEED",
    "Interval",
    "PairedOutcome",
    "attempts_needed",
    "bootstrap_mean",
    "check_level",
    "cluster_mean",
    "groups_of",
    "holm",
    "letter_groups",
    "mcnemar_exact",
    "paired_outcome",
    "pairwise",
    "pass_at_k",
    "pass_hat_k",
    "pass_k_interval",
    "scored_outcomes",
    "wilson",
]

"""The report's statistics: interval coverage, the exact McNemar test, Holm, letter groups."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from dataspace import stats

RUNS = 1000


def test_wilson_intervals_cover_known_rates_93_to_97_percent_of_1000_runs():
    """Guards the accuracy interval: 95% Wilson intervals cover the true rate 93-97%."""
    rng = np.random.default_rng(1)
    for rate, n in ((0.6634, 410), (0.2854, 410), (0.5, 60), (0.85, 60)):
        correct = rng.binomial(n, rate, size=RUNS)
        hits = 0
        for c in correct:
            iv = stats.wilson(int(c), n, 0.95)
            hits += iv.low <= rate <= iv.high
        assert 0.93 <= hits / RUNS <= 0.97, (rate, n, hits)


def test_bootstrap_mean_and_paired_difference_cover_known_values():
    """Guards the bootstrap intervals over tasks (means, paired differences): 93-97% coverage."""
    rng = np.random.default_rng(2)
    # mean cost per task from a skewed (log-normal) distribution with a known mean
    mu, sigma, n = -2.0, 0.8, 200
    truth = float(np.exp(mu + sigma**2 / 2))
    hits = 0
    for i in range(RUNS):
        x = rng.lognormal(mu, sigma, size=n)
        iv = stats.bootstrap_mean(list(x), 0.95, seed=i, resamples=400)
        hits += iv.low <= truth <= iv.high
    assert 0.93 <= hits / RUNS <= 0.97, hits
    # two agents on the same tasks: per-task difficulty shared, true difference 0.10
    hits = 0
    for i in range(RUNS):
        easy = rng.uniform(0.2, 0.8, size=150)
        a = rng.random(150) < np.clip(easy + 0.05, 0, 1)
        b = rng.random(150) < np.clip(easy - 0.05, 0, 1)
        po = stats.paired_outcome(
            {f"t{j}": [bool(a[j])] for j in range(150)},
            {f"t{j}": [bool(b[j])] for j in range(150)},
            0.95,
            seed=i,
            resamples=400,
        )
        hits += po.difference.low <= 0.10 <= po.difference.high
    assert 0.93 <= hits / RUNS <= 0.97, hits


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_wilson_bounds_are_scipys_to_the_last_bit(level):
    """Guards the accuracy interval's closed form: the numbers of SciPy's Wilson interval."""
    for n in (1, 2, 3, 7, 60, 410, 1230):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
            assert stats.wilson(k, n, level) == (k / n, float(ci.low), float(ci.high)), (k, n)


@pytest.mark.parametrize(
    "kind", ["whole numbers", "whole numbers per several attempts", "fractions", "thirds"]
)
def test_cluster_bootstrap_is_scipys_paired_percentile_bootstrap_to_the_last_bit(kind):
    """Guards the means' intervals: the numbers of ``scipy.stats.bootstrap`` with the same draws.

    Whole numbers are summed per resample as counts times values, fractions over the
    resampled array: both must give SciPy's bounds exactly.
    """
    from scipy.stats import bootstrap

    rng = np.random.default_rng(5)
    n = 137
    s, c = {
        "whole numbers": (rng.integers(0, 90_000, n).astype(float), np.ones(n)),
        "whole numbers per several attempts": (
            rng.integers(0, 60, n).astype(float),
            rng.integers(1, 4, n).astype(float),
        ),
        "fractions": (rng.lognormal(0.0, 1.0, n), rng.integers(1, 4, n).astype(float)),
        "thirds": (rng.integers(-3, 4, n) / 3, np.ones(n)),
    }[kind]
    for level in (0.9, 0.95):
        res = bootstrap(
            (s, c),
            lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis),
            paired=True,
            vectorized=True,
            method="percentile",
            n_resamples=stats.RESAMPLES,
            rng=np.random.default_rng(stats.SEED),
            confidence_level=level,
        )
        iv = stats.cluster_mean(list(s), list(c), level)
        assert (iv.low, iv.high) == (res.confidence_interval.low, res.confidence_interval.high)


def test_intervals_are_deterministic_for_the_same_results():
    x = [0.1, 0.5, 0.2, 0.9, 0.3]
    assert stats.bootstrap_mean(x) == stats.bootstrap_mean(x)


@pytest.mark.parametrize(("a_only", "b_only"), [(0, 0), (1, 0), (10, 2), (7, 7), (3, 19), (40, 25)])
def test_mcnemar_p_values_equal_scipys_exact_binomial_test_on_the_discordant_pairs(a_only, b_only):
    """Guards the pairwise test: exact McNemar = binomtest(discordant, p=1/2), two-sided."""
    rng = np.random.default_rng(a_only * 100 + b_only)
    both = int(rng.integers(0, 30))
    neither = int(rng.integers(0, 30))
    outcomes_a, outcomes_b = {}, {}
    cases = [(True, False)] * a_only + [(False, True)] * b_only
    cases += [(True, True)] * both + [(False, False)] * neither
    for j, (x, y) in enumerate(cases):
        outcomes_a[f"task_{j}"] = [x]
        outcomes_b[f"task_{j}"] = [y]
    po = stats.paired_outcome(outcomes_a, outcomes_b)
    assert (po.a_only, po.b_only, po.tasks) == (a_only, b_only, len(cases))
    expected = binomtest(a_only, a_only + b_only, 0.5).pvalue if a_only + b_only else 1.0
    assert po.p_value == pytest.approx(expected, rel=1e-12)


def test_mcnemar_is_scipys_binomtest_to_the_last_bit_for_every_count_pair():
    """Guards the SciPy-free exact test: every split of up to 150 discordant pairs, and
    a sweep at the sizes of a full benchmark, give binomtest's p-value exactly."""
    pairs = [(k, n - k) for n in range(151) for k in range(n + 1)]
    pairs += [(k, n - k) for n in (410, 1230, 4510) for k in range(0, n + 1, 37)]
    for a_only, b_only in pairs:
        n = a_only + b_only
        expected = binomtest(a_only, n, 0.5).pvalue if n else 1.0
        assert stats.mcnemar_exact(a_only, b_only) == expected, (a_only, b_only)


def test_the_sample_size_quantiles_are_scipys_normal_quantiles():
    """Guards ``ndtri`` standing for ``scipy.stats.norm.ppf`` (the same values)."""
    from scipy.special import ndtri
    from scipy.stats import norm

    qs = np.linspace(0.0005, 0.9995, 1999)
    assert np.array_equal(ndtri(qs), norm.ppf(qs))


def test_pairs_are_compared_on_their_shared_tasks_only():
    a = {"t1": [True], "t2": [True], "t3": [False]}
    b = {"t2": [False], "t3": [False], "t4": [True]}
    po = stats.paired_outcome(a, b)
    assert po.tasks == 2 and po.a_only == 1 and po.b_only == 0
    assert po.accuracy_a == 0.5 and po.accuracy_b == 0.0


def test_holm_matches_the_step_down_definition():
    p = [0.001, 0.02, 0.04, 0.3]
    assert stats.holm(p) == [0.004, 0.06, 0.08, 0.3]
    assert stats.holm([0.5, 0.6]) == [1.0, 1.0]


def test_letter_groups_separate_only_what_the_tests_separate():
    labels = ["a", "b", "c", "d"]
    assert stats.letter_groups(labels, [("a", "d"), ("b", "d")]) == {
        "a": "a",
        "b": "a",
        "c": "ab",
        "d": "b",
    }
    assert set(stats.letter_groups(labels, []).values()) == {"a"}
    g = stats.letter_groups(labels, [(x, y) for i, x in enumerate(labels) for y in labels[i + 1 :]])
    assert len(set(g.values())) == 4


def test_pass_hat_k_and_pass_at_k_bounds():
    per = [(3, 3), (3, 0), (3, 1), (3, 2)]
    at, n = stats.pass_k_interval(per, 2)
    every, _ = stats.pass_k_interval(per, 2, every=True)
    assert n == 4
    assert at.estimate == pytest.approx((1 + 0 + 2 / 3 + 1) / 4)
    assert every.estimate == pytest.approx((1 + 0 + 0 + 1 / 3) / 4)
    assert at.low <= at.estimate <= at.high


def test_attempts_needed_shrinks_with_attempts_when_attempts_disagree():
    rng = np.random.default_rng(3)
    a = {f"t{j}": list(rng.random(3) < 0.6) for j in range(80)}
    b = {f"t{j}": list(rng.random(3) < 0.5) for j in range(80)}
    need = stats.attempts_needed(a, b, difference=0.10)
    assert need["within_known"] and need["difference"] == 0.10
    tasks = [r["tasks"] for r in need["rows"]]
    assert tasks == sorted(tasks, reverse=True) and tasks[0] > tasks[-1]
    # z^2 (var_b + var_w / m) / d^2 by hand
    z = 1.959963984540054 + 0.8416212335729143
    r1 = need["rows"][0]
    assert r1["tasks"] == int(
        np.ceil(z * z * (need["between_variance"] + need["within_variance"]) / 0.01)
    )


def test_a_bad_level_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="between 0 and 1"):
        stats.wilson(1, 2, 95)


def test_paper_grouping_script_prints_the_leaderboards_groups():
    """Guards scripts/paper_grouping.py: outcomes match the paper's figures; groups printed."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "paper_grouping.py"
    p = subprocess.run(
        [sys.executable, str(script), "--seeds", "2"], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    lines = {ln.split("  ")[0].strip(): ln for ln in p.stdout.splitlines()}
    assert lines["Grok 4.5"].endswith(" a") and lines["GPT-5.6 Sol"].endswith(" a")
    assert lines["Kimi K3"].endswith(" b")
    assert "66.34 [61.63, 70.75]" in lines["Grok 4.5"]
    assert "Grok 4.5 vs GPT-5.6 Sol" in p.stdout and "no" in lines["Grok 4.5 vs GPT-5.6 Sol"]

"""Paired tests (monitor/paired.py) on constructed pairs with known answers: McNemar, DeLong (binary
and multiclass macro), the paired t test on absolute errors (regression)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.paired import mcnemar, paired_delong, paired_errors, paired_macro_delong


def exact_two_sided(k: int, n: int) -> float:
    """Two-sided exact binomial(n, 1/2) p-value of the smaller count k, by the textbook sum."""
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


@pytest.mark.parametrize("only_a, only_b, both, neither", [(0, 10, 30, 5), (2, 8, 50, 0), (5, 5, 10, 10), (0, 0, 7, 3)])
def test_mcnemar_counts_discordant_rows_and_gives_the_exact_p_value(only_a, only_b, both, neither):
    a = np.array([True] * only_a + [False] * only_b + [True] * both + [False] * neither)
    b = np.array([False] * only_a + [True] * only_b + [True] * both + [False] * neither)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(a))  # pairing is by row, not by position in the constructed blocks
    result = mcnemar(a[order], b[order])
    assert (result.only_a, result.only_b, result.difference) == (only_a, only_b, only_b - only_a)
    n = only_a + only_b
    assert result.p_value == pytest.approx(exact_two_sided(min(only_a, only_b), n) if n else 1.0)


def test_mcnemar_known_values():
    assert mcnemar([False] * 10, [True] * 10).p_value == pytest.approx(2 / 1024)
    assert mcnemar([True, True] + [False] * 8, [False, False] + [True] * 8).p_value == pytest.approx(112 / 1024)
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar([True], [True, False])


def brute_force_delong(y, a, b):
    """DeLong's paired test written out with the O(m n) kernel, as in the 1988 paper."""
    y = np.asarray(y, bool)

    def components(s):
        pos, neg = s[y][:, None], s[~y][None, :]
        psi = (pos > neg) + 0.5 * (pos == neg)
        return psi.mean(), psi.mean(axis=1), psi.mean(axis=0)

    (auc_a, v10a, v01a), (auc_b, v10b, v01b) = components(np.asarray(a, float)), components(np.asarray(b, float))
    s10, s01 = np.cov([v10a, v10b]), np.cov([v01a, v01b])
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / y.sum() + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / (~y).sum()
    z = (auc_b - auc_a) / math.sqrt(var)
    return auc_a, auc_b, var, math.erfc(abs(z) / math.sqrt(2))


def test_paired_delong_matches_the_textbook_computation_with_ties():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 1000)
    a = np.round(y * 0.3 + rng.normal(0, 1, 1000), 1)   # rounded: ties within and across classes
    b = np.round(y * 1.5 + rng.normal(0, 1, 1000), 1)
    got = paired_delong(y, a, b)
    auc_a, auc_b, var, p = brute_force_delong(y, a, b)
    assert (got.auc_a, got.auc_b) == (pytest.approx(auc_a), pytest.approx(auc_b))
    assert got.variance == pytest.approx(var) and got.p_value == pytest.approx(p)
    assert got.difference > 0 and got.p_value < 0.01          # B separates the classes far better
    swapped = paired_delong(y, b, a)
    assert swapped.difference == pytest.approx(-got.difference) and swapped.p_value == pytest.approx(got.p_value)


def test_paired_delong_of_a_model_with_itself_finds_no_difference():
    rng = np.random.default_rng(4)
    y, s = rng.integers(0, 2, 200), rng.random(200)
    same = paired_delong(y, s, s)
    assert same.difference == 0 and same.p_value == 1.0
    # A monotone transform ranks the same: same AUC, nothing to test.
    assert paired_delong(y, s, s ** 3).p_value == 1.0
    assert paired_delong([1, 0, 0, 0], [0.9, 0.1, 0.2, 0.3], [0.2, 0.1, 0.5, 0.3]) is None  # one positive


def test_paired_errors_is_the_textbook_paired_t_test_on_absolute_errors():
    rng = np.random.default_rng(5)
    y = rng.normal(100, 15, 400)
    a = y + rng.normal(0, 6, 400)       # champion: MAE about 4.8
    b = y + rng.normal(0, 3, 400)       # a clearly better challenger: about 2.4
    got = paired_errors(y, a, b)
    d = np.abs(b - y) - np.abs(a - y)
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    from scipy.stats import t as student
    assert got.mae_a == pytest.approx(np.abs(a - y).mean()) and got.mae_b == pytest.approx(np.abs(b - y).mean())
    assert got.p_value == pytest.approx(2 * student.sf(abs(t), len(d) - 1))
    assert got.difference < 0 and got.p_value < 1e-6
    swapped = paired_errors(y, b, a)
    assert swapped.difference == pytest.approx(-got.difference) and swapped.p_value == pytest.approx(got.p_value)


def test_paired_errors_of_a_model_with_itself_or_an_equal_one_finds_no_difference():
    rng = np.random.default_rng(6)
    y = rng.normal(0, 1, 300)
    a = y + rng.normal(0, 1, 300)
    same = paired_errors(y, a, a)
    assert same.difference == 0 and same.p_value == 1.0
    other = y + rng.normal(0, 1, 300)   # as good, different errors: no significant difference
    assert paired_errors(y, a, other).p_value > 0.05
    assert paired_errors([], [], []).p_value == 1.0
    with pytest.raises(ValueError, match="differ in length"):
        paired_errors([1.0, 2.0], [1.0, 2.0], [1.0])


def test_paired_macro_delong_averages_the_per_class_paired_tests():
    rng = np.random.default_rng(7)
    y = rng.integers(0, 5, 600)
    a = rng.dirichlet(np.ones(5), 600) + 0.1 * np.eye(5)[y]      # weakly informative
    b = rng.dirichlet(np.ones(5), 600) + 2.0 * np.eye(5)[y]      # strongly informative
    got = paired_macro_delong(y, a, b)
    per_class = [paired_delong(y == k, a[:, k], b[:, k]) for k in range(5)]
    assert got.auc_a == pytest.approx(np.mean([c.auc_a for c in per_class]))
    assert got.auc_b == pytest.approx(np.mean([c.auc_b for c in per_class]))
    assert got.variance == pytest.approx(sum(c.variance for c in per_class) / 25)
    assert got.auc_b > got.auc_a + 0.05 and got.p_value < 1e-6
    same = paired_macro_delong(y, a, a)
    assert same.difference == 0 and same.p_value == 1.0
    assert paired_macro_delong(np.zeros(10, dtype=int), a[:10], b[:10]) is None   # one class present

"""Paired tests (monitor/paired.py) on constructed pairs with known answers."""
from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.paired import mcnemar, paired_delong


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

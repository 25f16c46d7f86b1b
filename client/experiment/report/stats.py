"""95% intervals: of a mean (Student's t) and of the difference of two independent means (Welch),
so that a difference between configurations can be told from noise."""

from __future__ import annotations

import statistics

# Student's t, 97.5% quantile, for 1..30 degrees of freedom (a 95% interval of a mean)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def ci95(values: list[float]) -> tuple[float, float] | None:
    """Returns (mean, half-width of its 95% t interval), or None below two values."""
    if len(values) < 2:
        return None
    df = len(values) - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.96
    return statistics.fmean(values), t * statistics.stdev(values) / len(values) ** 0.5


def diff_ci95(a: list[float], b: list[float]) -> tuple[float, float] | None:
    """Returns (mean(b) - mean(a), half-width of its 95% Welch interval) for two independent
    samples, or None when either has fewer than two values. The t quantile is taken at the
    Welch degrees of freedom rounded down (a little wider than exact)."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(b) - statistics.fmean(a)
    if va + vb == 0:
        return diff, 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    k = max(1, int(df))
    t = _T975[k - 1] if k <= len(_T975) else 1.96
    return diff, t * (va + vb) ** 0.5

"""Reproducible performance measurements: each ``bench_*`` module compares candidates side by side
in one run and reports ratios, because these machines are shared and absolute times are noise."""

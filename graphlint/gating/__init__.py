"""Gating commits on a report: baselines of accepted findings, `--diff` to changed files,
and the pass/fail verdict of a report written earlier (`graphlint gate`).
"""

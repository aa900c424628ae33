#!/usr/bin/env bash
# Gate a change on graphlint: run the static check (and the runtime harness where torch sees
# CUDA), write the report, and exit non-zero on violations. Copy it into your repository and
# call it from any CI system:
#
#   bash ci/gate.sh [ARGS...]      # ARGS go to `graphlint check` (paths, --select, --diff REV, ...)
#
# Environment:
#   GRAPHLINT_REPORT_DIR  folder for the reports (default: graphlint-report)
#   GRAPHLINT_BASELINE    baseline file, used when it exists (default: graphlint-baseline.json)
#   GRAPHLINT_RUNTIME     auto (default: when torch.cuda.is_available()), 1 (always) or 0 (never)
#   GRAPHLINT             the graphlint command (default: graphlint)
#   PYTHON                the Python that has torch, for the CUDA probe (default: python)
#
# Writes $GRAPHLINT_REPORT_DIR/graphlint.json (the report `graphlint gate` reads) and
# graphlint.sarif (for code scanning); on GitHub Actions it also prints annotations.
# Exit: 0 pass, 1 violations, 2 graphlint could not run or the report could not be read.
set -uo pipefail

graphlint=${GRAPHLINT:-graphlint}
python=${PYTHON:-python}
out=${GRAPHLINT_REPORT_DIR:-graphlint-report}
baseline=${GRAPHLINT_BASELINE:-graphlint-baseline.json}
runtime=${GRAPHLINT_RUNTIME:-auto}
report="$out/graphlint.json"

case "$runtime" in
  1|yes|true) runtime=1 ;;
  0|no|false) runtime=0 ;;
  auto)
    # The CPU emulation would also run, but on a GPU-less runner the static check is the gate.
    if [ "$("$python" -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null)" = "True" ]; then
      runtime=1
    else
      runtime=0
    fi ;;
  *) echo "gate.sh: GRAPHLINT_RUNTIME must be auto, 1 or 0 (got '$runtime')" >&2; exit 2 ;;
esac

args=(check)
# `--runtime` runs the config's `runtime-target` (exit 2 when none is set).
if [ "$runtime" = 1 ]; then
  args+=(--runtime)
  echo "gate.sh: CUDA is available: the runtime harness runs too" >&2
fi
args+=(--format json --output "$report")
if [ -f "$baseline" ]; then
  args+=(--baseline "$baseline")
fi

mkdir -p "$out" || exit 2
rm -f "$report"
"$graphlint" "${args[@]}" "$@"
checked=$?
if [ ! -f "$report" ]; then
  echo "gate.sh: graphlint check exited $checked without writing $report" >&2
  exit 2
fi

"$graphlint" gate "$report" --format sarif --output "$out/graphlint.sarif" --exit-zero || exit 2
if [ "${GITHUB_ACTIONS:-}" = "true" ]; then
  "$graphlint" gate "$report" --format github --exit-zero || exit 2
fi
"$graphlint" gate "$report"
verdict=$?
# A check that could not finish (exit 2) stays an error even if what it wrote would pass.
if [ "$checked" -ge 2 ]; then
  exit "$checked"
fi
exit "$verdict"

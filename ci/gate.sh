#!/usr/bin/env bash
# Gate a change on graphlint: run the static check (and the runtime harness where torch sees
# CUDA), write the report, and exit non-zero on violations. Copy it into your repository and
# call it from any CI system:
#
#   bash ci/gate.sh [ARGS...]      # ARGS go to `graphlint check` (paths, --select, --diff REV, ...)
#
# Environment:
#   GRAPHLINT_REPORT_DIR  folder for the reports (default: graphlint-report; a relative one must
#                         lie inside the current folder; links are refused)
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

# What torch sees, said as it is found: "yes", "no" or "no torch".
probe_cuda() {
  local seen
  seen=$("$python" -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null)
  case "$seen" in
    True) echo yes ;;
    False) echo no ;;
    *) echo "no torch" ;;
  esac
}

case "$runtime" in
  1|yes|true)
    runtime=1
    echo "gate.sh: GRAPHLINT_RUNTIME=$GRAPHLINT_RUNTIME: the runtime harness runs (CUDA seen by $python: $(probe_cuda))" >&2 ;;
  0|no|false) runtime=0 ;;
  auto)
    # The CPU emulation would also run, but on a GPU-less runner the static check is the gate.
    cuda=$(probe_cuda)
    if [ "$cuda" = yes ]; then
      runtime=1
      echo "gate.sh: torch in $python sees CUDA: the runtime harness runs too" >&2
    else
      runtime=0
      echo "gate.sh: CUDA seen by $python: $cuda: the static check alone is the gate" >&2
    fi ;;
  *) echo "gate.sh: GRAPHLINT_RUNTIME must be auto, 1 or 0 (got '$runtime')" >&2; exit 2 ;;
esac

args=(check)
# `--runtime` runs the config's `runtime-target` (exit 2 when none is set).
if [ "$runtime" = 1 ]; then
  args+=(--runtime)
fi
args+=(--format json --output "$report")
if [ -f "$baseline" ]; then
  args+=(--baseline "$baseline")
fi

# The reports are written only as regular files, never through a link: a link committed at the
# report path (graphlint-report -> /etc, graphlint.json -> ~/.bashrc) would have them written
# wherever it points. A relative report folder must also stay inside the current folder.
refuse_link() {
  if [ -L "$1" ]; then
    echo "gate.sh: $1 is a symbolic link: refusing to write the report through it" >&2
    exit 2
  fi
}
refuse_link "$out"
mkdir -p "$out" || exit 2
case "$out" in
  /*) ;;
  *)
    inside=$(cd "$out" && pwd -P)
    case "$inside/" in
      "$(pwd -P)"/*) ;;
      *) echo "gate.sh: $out resolves to $inside, outside the checkout: refused" >&2; exit 2 ;;
    esac ;;
esac
for written in "$report" "$out/graphlint.sarif"; do
  refuse_link "$written"
  if [ -e "$written" ] && [ ! -f "$written" ]; then
    echo "gate.sh: $written exists and is not a regular file: refused" >&2
    exit 2
  fi
done
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

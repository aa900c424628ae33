#!/usr/bin/env bash
# `graphlint runtime --compile` on cuda:0 over the planted targets and the bundled DSV4 step (tiny
# and bench), as measured for the README. Usage: bench/compile_gpu.sh OUT_DIR [SECONDS]
# Five processes at once (the risky targets alone, so a poisoned CUDA context loses only them);
# each target's summary line is in OUT_DIR/<group>.log, its report in OUT_DIR/<group>/.
set -u
out=$1; limit=${2:-265}
T=tests/runtime/targets
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=3
mkdir -p "$out"
run() { local name=$1; shift; timeout "$limit" python3 bench/compile_targets.py "$out/$name" "$@" --device cuda:0 --steps 20 > "$out/$name.log" 2>&1; }
run bench graph-safe --option config=bench &
run planted $T/clean.py:make $T/clean_module.py:make $T/item_sync.py:make $T/frozen_scalar.py:make \
  $T/dynamic_output.py:make $T/stale_input.py:make $T/other_device.py:make &
run tiny graph-safe reference &
run missed $T/missed_syncs.py:make &
run side $T/other_device.py:make_side_stream &
wait

#!/usr/bin/env bash
# What this repository claims on CUDA, in one command on the GPU machine (device tool, one H200):
# the CUDA-marked tests, the cross-check of both halves on the bundled reference port and on two
# hf: targets, the compiled path of the bundled step, and the fast ten of the hf matrix.
#   bench/h200_checks.sh [tests|crosscheck|compile|matrix|matrix_all|probe ...]   (default: the first four;
#   results in $OUT; matrix_all runs every architecture in SHARDS processes at once)
# Needs the wheels of ../shared/tools/gpu-wheels.sh in .whl (libcst, which the machine lacks).
set -uo pipefail
OUT=${OUT:-/tmp/h200}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target .site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/.site
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee "$OUT/versions.txt"
parts=${*:-tests crosscheck compile matrix}
for part in $parts; do
  case $part in
    tests)
      python3 -m pytest -q -p no:cacheprovider -m "cuda or multigpu" --continue-on-collection-errors tests 2>&1 | tail -15 > "$OUT/cuda_tests.txt" ;;
    crosscheck)
      for target in reference hf:llama "hf:mixtral --option experts=eager"; do
        name=$(echo "$target" | tr -c 'A-Za-z0-9\n' '_' | cut -c1-40)
        # shellcheck disable=SC2086
        timeout 240 graphlint runtime $target --lint --device cuda:0 --steps 64 -o "$OUT/cross_$name.json" \
          > "$OUT/cross_$name.txt" 2>&1
        echo "$target rc=$?" >> "$OUT/crosscheck_rc.txt"
      done ;;
    compile)
      timeout 300 graphlint runtime default --compile --device cuda:0 > "$OUT/compile.txt" 2>&1
      echo "compile rc=$?" >> "$OUT/compile.txt" ;;
    matrix)
      timeout 540 python3 bench/hf_runtime_matrix.py --out "$OUT/matrix" --fast --markdown > "$OUT/matrix.txt" 2>&1
      echo "matrix rc=$?" >> "$OUT/matrix.txt" ;;
    matrix_all)
      # Every architecture, SHARDS processes sharing the GPU (times are indicative only then).
      shards=${SHARDS:-6}
      for k in $(seq 0 $((shards - 1))); do
        timeout "${MATRIX_S:-520}" python3 bench/hf_runtime_matrix.py --out "$OUT/matrix_all" --device cuda:0 \
          --shard "$k/$shards" > "$OUT/matrix_all_$k.txt" 2>&1 &
      done
      wait
      python3 - "$OUT/matrix_all" <<'PY' > "$OUT/matrix_all.md"
import glob, json, subprocess, sys
rows = []
for name in sorted(glob.glob(sys.argv[1] + "/summary_*.json")):
    rows += json.load(open(name))
json.dump(rows, open(sys.argv[1] + "/summary.json", "w"), indent=1, default=str)
print(subprocess.run([sys.executable, "bench/hf_runtime_matrix.py", "--out", sys.argv[1], "--table-from",
                      sys.argv[1] + "/summary.json", "--device", "cuda:0"], capture_output=True, text=True).stdout)
PY
      ;;
    probe)
      python3 bench/probe_tensor_index.py > "$OUT/probe_tensor_index.txt" 2>&1 ;;
  esac
done

#!/usr/bin/env bash
# What this repository claims on CUDA, in one command on the GPU machine (device tool, one H200):
# the CUDA-marked tests, the cross-check of both halves on the bundled reference port and on two
# hf: targets, the compiled path of the bundled step, and the fast ten of the hf matrix.
#   bench/h200_checks.sh [tests|crosscheck|compile|matrix ...]   (default: all; results in $OUT)
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
  esac
done

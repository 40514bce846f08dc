#!/usr/bin/env bash
# Runs the whole test suite under each CPU configuration that changes float32 kernels
# (oneDNN instruction-set caps, oneDNN off, 1 and 8 intra-op threads) and prints, per
# configuration, the largest reordering error any test saw, in ulps of scale (see
# tests/support/numerics.py). About 3 minutes per configuration on 2 cores; logs in $OUT.
#
#   bash scripts/numerics_matrix.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/elmo-numerics}
mkdir -p "$out"
status=0
run() {
  local name=$1; shift
  rm -f "$out/$name.jsonl"
  echo "== $name: $*"
  env "$@" ELMO_TESTS_NUMERICS_LOG="$out/$name.jsonl" python3 -m pytest -q -p no:cacheprovider \
    >"$out/$name.log" 2>&1 || status=1
  tail -n 1 "$out/$name.log"
}
run default ELMO_TESTS_MATRIX=1
run avx2 ONEDNN_MAX_CPU_ISA=AVX2
run sse41 ONEDNN_MAX_CPU_ISA=SSE41
run onednn_off TF_ENABLE_ONEDNN_OPTS=0
run threads1 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1
run threads8 TF_NUM_INTRAOP_THREADS=8
python3 - "$out" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    rows = [json.loads(line) for line in open(path)]
    worst = max(rows, key=lambda r: r["ulps_of_scale"])
    name = os.path.basename(path)[:-6]
    print(f"{name:11s} {worst['ulps_of_scale']:5.2f} ulps ({worst['max_abs_error']:.2e}) "
          f"{worst['test']}")
PY
exit $status

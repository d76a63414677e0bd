#!/usr/bin/env bash
# The chip run: the gate on a TPU host's own chip, with the chip's own clock, in one command (never in CI).
#
#   bash scripts/chip_run.sh [--out DIR]          # DIR: artifacts/chip-run by default
#
# DIR (relative to the folder it is run from) is made by the run, or is one an earlier chip run made: the
# run replaces only what its manifest (DIR/chip-run.manifest) lists, and refuses a folder holding anything
# else in one line, exit 2 (scripts/chip_out.py). An empty folder is taken too.
#
# Steps, each under `timeout` within CHIP_RUN_BUDGET seconds (default 570: the whole run under 10 minutes):
#   1. host        a TPU chip must be present (scripts/tpu_host.py), else one line and exit 2
#   2. gate        the structure, invariant and correctness tiers as `tox -e tpu` runs them (one process:
#                  the chip belongs to the process that opened it) -> DIR/results.json
#   3. throughput  the paired ratios and efficiencies on the device clock, against the committed
#                  baselines -> DIR/results-throughput.json, DIR/benchmark.json
#   4. baselines   the efficiency baselines measured again and recorded into DIR/candidates/<target>/
#                  efficiency/, never into snapshots/: review them, then copy them there and commit
#   5. times       each catalog program that runs on one chip (CHIP_RUN_CONFIGS, default f32,bf16), as many
#                  as the budget leaves time for (the rest named in its last line and the record): its
#                  optimized HLO, its device time per call and per op, its wall time, the cost model's
#                  prediction -> DIR/device-times.json, DIR/hlo/ (scripts/chip_times.py), and its table
#   6. report      python -m invariants report of steps 2-3 -> DIR/report.md
# The exit status is the first failing step's (the ratchets the report lists are xfails, not failures).
#
# Environment: CHIP_RUN_BUDGET (570), CHIP_RUN_CONFIGS (f32,bf16), CHIP_RUN_GATE_ARGS (more options of both
# gate steps, e.g. "--targets tpu-v5e"), CHIP_RUN_TARGET (tpu-v5e: the target the chip is, for the
# predictions). To rehearse on a host without a chip: CHIP_RUN_PLATFORM=cpu (JAX_PLATFORMS of every step;
# tpu otherwise) with CHIP_RUN_TRACES=DIR, recorded traces that stand in for the chip in step 5.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/artifacts/chip-run"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "chip_run: --out needs a folder" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) printf 'chip_run: unknown argument %q (see --help)\n' "$1" >&2; exit 2 ;;
  esac
done
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac  # the caller's folder, before the cd below
cd "$ROOT" || exit 2
PLATFORM="${CHIP_RUN_PLATFORM:-tpu}"
BUDGET="${CHIP_RUN_BUDGET:-570}"
CONFIGS="${CHIP_RUN_CONFIGS:-f32,bf16}"
TARGET="${CHIP_RUN_TARGET:-tpu-v5e}"
# A number for the arithmetic below, checked as text first: bash arithmetic runs what a value holds
# ($(...) in an array index), so anything else is one line before any of it.
if ! [[ "$BUDGET" =~ ^[0-9]{1,6}$ ]]; then
  printf 'chip_run: CHIP_RUN_BUDGET=%q: not a whole number of seconds (at most 6 digits)\n' "$BUDGET" >&2
  exit 2
fi
BUDGET=$((10#$BUDGET))
read -r -a GATE_ARGS <<<"${CHIP_RUN_GATE_ARGS:-}"
START=$(date +%s)
if [ "$PLATFORM" = tpu ] && ! python "$ROOT/scripts/tpu_host.py"; then
  exit 2
fi
# One run at a time in a folder: a second one's claim would remove what the first has made. The lock (an
# flock on the folder, held by this shell and its steps) is taken before the claim where the folder is there.
hold() { command -v flock >/dev/null || return 0; exec 9<"$OUT" && flock -n 9; }
busy() { printf 'chip_run: --out %q: another chip run is writing there\n' "$OUT" >&2; exit 2; }
if [ -d "$OUT" ] && ! hold; then busy; fi
python "$ROOT/scripts/chip_out.py" claim "$OUT" || exit 2
hold || busy
seal() { python "$ROOT/scripts/chip_out.py" seal "$OUT"; }
trap seal EXIT
export JAX_PLATFORMS="$PLATFORM" INVARIANTS_DUMP_DIR="$OUT/dumps"
rc=0

left() { echo $((BUDGET - ($(date +%s) - START))); }
step() {  # step NAME COMMAND...: runs within what is left of the budget; the first failure's status stays
  local name=$1 s t
  shift
  t=$(left)
  if [ "$t" -le 5 ]; then
    echo "chip_run: $name: not run, the budget of ${BUDGET} s is spent" >&2
    [ "$rc" -eq 0 ] && rc=124
    return
  fi
  echo "chip_run: $name (at most ${t} s)" >&2
  timeout --kill-after=10 "$t" "$@"
  s=$?
  if [ "$s" -eq 5 ]; then s=0; fi  # pytest: nothing selected in this tier
  if [ "$s" -ne 0 ]; then echo "chip_run: $name: exit status $s" >&2; fi
  if [ "$rc" -eq 0 ]; then rc=$s; fi
  seal
}

step gate python -m pytest invariants/gate -p no:xdist -p no:cacheprovider -q \
  --ignore=invariants/gate/test_throughput.py --results-json="$OUT/results.json" "${GATE_ARGS[@]}"
step throughput python -m pytest invariants/gate/test_throughput.py -p no:xdist -p no:cacheprovider -q -rs \
  --results-json="$OUT/results-throughput.json" --benchmark-json="$OUT/benchmark.json" "${GATE_ARGS[@]}"
step baselines python -m pytest invariants/gate/test_throughput.py -p no:xdist -p no:cacheprovider -q \
  -m efficiency --record-baselines --snapshot-dir "$OUT/candidates" --benchmark-disable "${GATE_ARGS[@]}"
# The times step starts no program it cannot finish in what is left (less the report's share), and keeps
# what it timed: a budget too short for the whole catalog is a shorter table, not a lost one.
TIMES=(python "$ROOT/scripts/chip_times.py" --out "$OUT" --configs "$CONFIGS" --target "$TARGET"
  --seconds "$(($(left) > 40 ? $(left) - 30 : 5))")
[ -n "${CHIP_RUN_TRACES:-}" ] && TIMES+=(--traces "$CHIP_RUN_TRACES")
step times "${TIMES[@]}"
reports=()
for f in "$OUT/results.json" "$OUT/results-throughput.json"; do [ -e "$f" ] && reports+=("$f"); done
if [ "${#reports[@]}" -gt 0 ]; then
  step report python -m invariants report "${reports[@]}" --out "$OUT/report.md"
fi
echo "chip_run: exit $rc in $(($(date +%s) - START)) s; everything is in $OUT" >&2
exit "$rc"

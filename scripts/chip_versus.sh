#!/usr/bin/env bash
# versus on a TPU host's own chip, timed, in one command (never in CI): how long `tox -e tpu`'s versus step
# takes, whether identical sides pass, and whether a slowdown on the device is caught.
#
#   bash scripts/chip_versus.sh [--out DIR] [--slowdown FRACTION | --no-slowdown] [--runs N] [-- MORE VERSUS OPTIONS]
#
# Runs `python -m invariants versus --baseline current --candidate current` with the versus step's default
# programs and targets (JAX_PLATFORMS=tpu, as `tox -e tpu` sets it; --json and --out into DIR):
#   1. same      both sides this installation, N times (--runs, default 1): expect exit 0 each time
#   2. slowdown  the same, the candidate's workers with INVARIANTS_VERSUS_SLOWDOWN=FRACTION (default 0.01:
#                each call does that fraction more work on the chip): expect exit 1 (a confirmed failure)
#                where the slowdown reached clears --threshold (1.01 on the device clock); --no-slowdown: none.
#                Each program's line says the slowdown its calls met ("candidate slowed +1.50%"), measured
#                when its pass was sized: a pass compiled beside a program can change how that program
#                itself is compiled, so what it reached is measured, not assumed
# For each run one line: its wall time, its exit status and the record's reasons (else "no regression");
# then per program its device ratio, interval and verdict, and how its rounds were taken (fresh worker pairs
# x blocks). versus's own progress goes to DIR/<run>.log, its record to DIR/<run>.json and DIR/<run>.md.
# The exit status: 0 when every `same` run exited 0 and the slowdown run (if any) exited 1, else 1; 2 bad
# usage.
# Needs jax with libtpu, and equinox (the eqx_embedding programs) where this package is not installed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
OUT="$ROOT/artifacts/chip-versus"
SLOWDOWN=0.01
RUNS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "chip_versus: --out needs a folder" >&2; exit 2; }; OUT="$2"; shift 2 ;;
    --slowdown) [[ $# -ge 2 && "$2" =~ ^0?\.[0-9]*[1-9][0-9]*$ ]] \
      || { echo "chip_versus: --slowdown needs a fraction in (0, 1), e.g. 0.01" >&2; exit 2; }
      SLOWDOWN="$2"; shift 2 ;;
    --no-slowdown) SLOWDOWN=""; shift ;;
    --runs) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || { echo "chip_versus: --runs needs a count" >&2; exit 2; }
      RUNS="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "chip_versus: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
export JAX_PLATFORMS="${JAX_PLATFORMS:-tpu}"
rc=0

one() {  # one NAME EXPECTED [VERSUS OPTIONS...]: a timed versus run, its line and its programs' lines
  local name=$1 expected=$2 t0 t1 s
  shift 2
  rm -f "$OUT/$name.json" "$OUT/$name.md"
  t0=$(date +%s.%N)
  python -m invariants versus --baseline current --candidate current \
    --json "$OUT/$name.json" --out "$OUT/$name.md" "$@" >/dev/null 2>"$OUT/$name.log"
  s=$?
  t1=$(date +%s.%N)
  python - "$OUT/$name.json" "$name" "$(echo "$t1 - $t0" | bc)" "$s" <<'EOF'
import json, sys
path, name, seconds, status = sys.argv[1:]
try:
    record = json.load(open(path))
except (OSError, ValueError):
    print(f"{name}: {float(seconds):.1f} s, exit {status}, no record (see its .log)")
    sys.exit()
said = "; ".join(record.get("reasons") or []) or "no regression"
print(f"{name}: {float(seconds):.1f} s, exit {status}: {said}")
for t in record.get("timing", []):
    r = t["results"].get(t["clock"], {})
    slowed = "".join(f"; {role} slowed {x:+.2%}" for role, x in (t.get("slowed") or {}).items())
    print(f"  {t['program']}: {t['clock']} ratio {r.get('median', 0):.4f} [{r.get('low', 0):.4f}, "
          f"{r.get('high', 0):.4f}] {t['verdict']} ({t.get('sampling', '')}){slowed}; attempts {t['attempts']}")
EOF
  if [ "$s" -ne "$expected" ]; then
    echo "chip_versus: $name exited $s, expected $expected (progress: $OUT/$name.log)" >&2
    rc=1
  fi
}

for i in $(seq 1 "$RUNS"); do
  one "same-$i" 0 "$@"
done
[ -z "$SLOWDOWN" ] || one slowdown 1 --candidate-env "INVARIANTS_VERSUS_SLOWDOWN=$SLOWDOWN" "$@"
exit $rc

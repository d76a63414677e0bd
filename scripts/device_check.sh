#!/usr/bin/env bash
# The device check: what only a real NVIDIA GPU can say, in one prepared run (never in CI).
#
# jaxlib 0.10.2 compiles the f32 scatter-add of an embedding gradient on sm_80/86/89 to a compare-and-swap
# loop where 0.10.1 used a native atomic add (openxla/xla#46225). The gate reads that from the PTX ahead of
# time; this script measures it on the GPU of this host, and records the GPU runtime snapshots of both
# releases. Run it from the repository root (it changes into it itself); it finishes within 10 minutes
# (DEVICE_CHECK_BUDGET, default 570 s, every step under `timeout`).
#
#   bash scripts/device_check.sh [--dry-run] [--out DIR]
#
# Steps:
#   1. gpu       nvidia-smi must list a GPU (else one line, exit 2)
#   2. env A     a uv environment of jax[cuda12]==BASELINE (NVIDIA's runtime wheels), reused when its marker
#   3. env B     matches; the same for CANDIDATE (DEVICE_CHECK_CACHE, default ~/.cache/.../device-envs)
#   4. timing    scripts/device_scatter_timing.py: grad(take) scatter-add, f32 and bf16, all-equal / zipf 1.1 /
#                uniform indices, paired interleaved wall clock, both releases -> DIR/scatter-timing.{json,md}
#   5. gate A    the structure and invariant tiers on the GPU runtime target (grad_take, take, grad_naive,
#   6. gate B    train_take; f32, bf16), recording snapshots into DIR/snapshots-VERSION (never snapshots/)
#   7. findings  the section between <!-- device-check:begin --> and <!-- device-check:end --> of
#                docs/findings.md, replaced with the figures (appended when missing)
#
# Environment: DEVICE_CHECK_BASELINE (0.10.1), DEVICE_CHECK_CANDIDATE (0.10.2), DEVICE_CHECK_BUDGET (570),
# DEVICE_CHECK_CACHE, DEVICE_CHECK_PYTHON (the interpreter uv builds on: 3.12), DEVICE_CHECK_INDEX_URL
# (https://pypi.org/simple), DEVICE_CHECK_NVIDIA_SMI (nvidia-smi), DEVICE_CHECK_FINDINGS (docs/findings.md),
# DEVICE_CHECK_TIMING_ARGS (more arguments of the timing script). To rehearse the steps on a CPU host:
# DEVICE_CHECK_PLATFORM=cpu (JAX_PLATFORMS of every step; cuda otherwise) with prepared environments.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/scripts/device_check.sh"
BASELINE="${DEVICE_CHECK_BASELINE:-0.10.1}"
CANDIDATE="${DEVICE_CHECK_CANDIDATE:-0.10.2}"
BUDGET="${DEVICE_CHECK_BUDGET:-570}"
CACHE="${DEVICE_CHECK_CACHE:-$HOME/.cache/jax-embedding-invariants/device-envs}"
BASE_PYTHON="${DEVICE_CHECK_PYTHON:-3.12}"
INDEX_URL="${DEVICE_CHECK_INDEX_URL:-https://pypi.org/simple}"
NVIDIA_SMI="${DEVICE_CHECK_NVIDIA_SMI:-nvidia-smi}"
PROGRAMS="grad_take,take,grad_naive,train_take"
CONFIGS="f32,bf16"
FINDINGS="${DEVICE_CHECK_FINDINGS:-$ROOT/docs/findings.md}"
PLATFORM="${DEVICE_CHECK_PLATFORM:-cuda}"
read -r -a TIMING_ARGS <<<"${DEVICE_CHECK_TIMING_ARGS:-}"
# The suite's own test dependencies, as invariants/releases/environments.py SUITE_DEPS (a unit test keeps them equal).
SUITE_DEPS=(pytest syrupy pytest-benchmark packaging scipy)

die() {
  echo "device_check: $*" >&2
  exit 2
}
# A number for the arithmetic below, checked as text first: bash arithmetic runs what a value holds
# ($(...) in an array index).
[[ "$BUDGET" =~ ^[0-9]{1,6}$ ]] \
  || die "DEVICE_CHECK_BUDGET=$(printf %q "$BUDGET"): not a whole number of seconds (at most 6 digits)"
BUDGET=$((10#$BUDGET))

# --------------------------------------------------------------------------------------------------------
# Internal commands, each run under `timeout` by a step below.

requirements() {
  printf '%s\n' "jax[cuda12]==$1" "jaxlib==$1" numpy equinox "${SUITE_DEPS[@]}"
}

# build_env VERSION ENV: reuse ENV when its marker lists these requirements and its jax imports, else build it
# (in a partial folder, moved into place once it sees the GPU: a failed build leaves nothing behind).
build_env() {
  local version=$1 env=$2 uv want partial
  want="$(requirements "$version")"
  if [[ -x "$env/bin/python" && -f "$env/device-check-env.txt" ]] \
    && [[ "$(cat "$env/device-check-env.txt")" == "$want" ]] \
    && "$env/bin/python" -c "import sys, jax, jax_cuda12_plugin; sys.exit(jax.__version__ != '$version')"; then
    echo "  reusing $env"
    return 0
  fi
  uv="$(command -v uv)" || die "uv not found (pip install uv); it builds the per-release environments"
  partial="$env.partial-$$"
  rm -rf "$partial"
  mkdir -p "$(dirname "$env")"
  trap 'rm -rf "$partial"' EXIT
  trap 'exit 143' TERM INT
  "$uv" venv -q --python "$BASE_PYTHON" "$partial"
  mapfile -t reqs < <(requirements "$version")
  "$uv" pip install -q --python "$partial/bin/python" --index-url "$INDEX_URL" "${reqs[@]}"
  JAX_PLATFORMS=$PLATFORM "$partial/bin/python" -c "import jax; d = jax.devices()[0]; \
assert d.platform == {'cuda': 'gpu'}.get('$PLATFORM', '$PLATFORM'), d; print('  jax', jax.__version__, d.device_kind)" \
    || die "jax[cuda12]==$version installs but sees no $PLATFORM device"
  echo "$want" >"$partial/device-check-env.txt"
  rm -rf "$env"
  mv "$partial" "$env"
  trap - EXIT
  echo "  built $env"
}

# gate_args VERSION ENV: the gate on the GPU runtime target, snapshots recorded into OUT_DIR only.
gate_args() {
  printf '%s\n' env -u XLA_FLAGS "JAX_PLATFORMS=$PLATFORM" XLA_PYTHON_CLIENT_PREALLOCATE=false "PYTHONPATH=$ROOT" \
    "$2/bin/python" -m pytest invariants/gate/test_structure.py invariants/gate/test_invariants.py \
    invariants/gate/test_correctness.py -q \
    -p no:cacheprovider --targets runtime --programs "$PROGRAMS" --configs "$CONFIGS" --snapshot-update \
    --snapshot-dir "$OUT_DIR/snapshots-$1" --results-json "$OUT_DIR/results-$1.json" \
    --hlo-dump-dir "$OUT_DIR/hlo-$1"
}

case "${1:-}" in
  --build-env)
    build_env "$2" "$3"
    exit 0
    ;;
  --gate) # VERSION ENV OUT_DIR: its output goes to OUT_DIR/gate-VERSION.log
    OUT_DIR=$4
    cd "$ROOT"
    mapfile -t cmd < <(gate_args "$2" "$3")
    exec "${cmd[@]}" >"$OUT_DIR/gate-$2.log" 2>&1
    ;;
esac

# --------------------------------------------------------------------------------------------------------
# The run.

DRY_RUN=0
OUT_DIR="$ROOT/artifacts/device-check"
while (($#)); do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --out)
      [[ $# -ge 2 ]] || die "--out needs a folder"
      OUT_DIR="$2"
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1' (known: --dry-run, --out DIR, --help)" ;;
  esac
  shift
done
[[ "$OUT_DIR" == /* ]] || OUT_DIR="$PWD/$OUT_DIR"
ENV_A="$CACHE/jax-$BASELINE-cuda12"
ENV_B="$CACHE/jax-$CANDIDATE-cuda12"
GPU_QUERY=("$NVIDIA_SMI" "--query-gpu=name,driver_version" "--format=csv,noheader")

# No GPU: one line, before anything is printed, created or installed.
if ((!DRY_RUN)); then
  command -v "$NVIDIA_SMI" >/dev/null 2>&1 \
    || die "no NVIDIA GPU visible ($NVIDIA_SMI not found); run this on an NVIDIA host, or --dry-run to list its steps"
  GPU="$(timeout 20 "${GPU_QUERY[@]}" 2>/dev/null | head -n1)" || true
  [[ -n "${GPU:-}" ]] || die "no NVIDIA GPU visible ($NVIDIA_SMI lists none)"
  mkdir -p "$OUT_DIR"
fi
DEADLINE=$((SECONDS + BUDGET))
STEP=0

# step NAME SECONDS CMD...: print it; unless --dry-run, run it under timeout, capped by what is left. A
# failure is one line (with the step) and the step's exit status.
step() {
  local name=$1 limit=$2 left rc=0
  shift 2
  STEP=$((STEP + 1))
  left=$((DEADLINE - SECONDS))
  ((limit < left)) || limit=$left
  printf '==> step %d: %s (timeout %ss):' "$STEP" "$name" "$limit"
  printf ' %q' "$@"
  printf '\n'
  ((DRY_RUN)) && return 0
  ((limit > 0)) || die "step $STEP ($name): out of time (DEVICE_CHECK_BUDGET=$BUDGET s)"
  timeout --kill-after=10 "$limit" "$@" || rc=$?
  if ((rc != 0)); then
    echo "device_check: step $STEP ($name) failed: exit $rc$( ((rc == 124)) && echo " (timed out after ${limit}s)")" >&2
  fi
  return "$rc"
}

cd "$ROOT"
echo "device_check: jax $BASELINE against jax $CANDIDATE on this host's GPU; figures in $OUT_DIR;" \
  "budget ${BUDGET}s$( ((DRY_RUN)) && echo '; dry run: nothing is run')"

step "gpu: nvidia-smi lists a GPU" 20 "${GPU_QUERY[@]}"

for pair in "$BASELINE:$ENV_A" "$CANDIDATE:$ENV_B"; do
  step "env: jax[cuda12]==${pair%%:*} built or reused with uv" 140 bash "$SELF" --build-env "${pair%%:*}" "${pair#*:}"
  echo "    installs: $(requirements "${pair%%:*}" | tr '\n' ' ')into ${pair#*:}"
done

step "timing: grad(take) scatter-add, f32 and bf16, all-equal/zipf-1.1/uniform, $BASELINE vs $CANDIDATE" 150 \
  env -u XLA_FLAGS "JAX_PLATFORMS=$PLATFORM" "$ENV_A/bin/python" "$ROOT/scripts/device_scatter_timing.py" \
  --platform "$PLATFORM" --baseline-python "$ENV_A/bin/python" --candidate-python "$ENV_B/bin/python" \
  --budget 100 --out "$OUT_DIR/scatter-timing.json" --md "$OUT_DIR/scatter-timing.md" "${TIMING_ARGS[@]}"

# The gate's exit status is a finding (an invariant may fail on this GPU), not a reason to stop.
declare -A GATE_RC=()
for pair in "$BASELINE:$ENV_A" "$CANDIDATE:$ENV_B"; do
  version=${pair%%:*}
  rc=0
  step "gate: GPU runtime snapshots, jax $version" 60 bash "$SELF" --gate "$version" "${pair#*:}" "$OUT_DIR" \
    || rc=$?
  GATE_RC[$version]=$rc
  echo "    runs: $(gate_args "$version" "${pair#*:}" | tr '\n' ' ')"
  ((DRY_RUN)) || echo "    exit $rc: $(tail -n1 "$OUT_DIR/gate-$version.log")"
done

SECTION="$OUT_DIR/findings-section.md"
if ((!DRY_RUN)); then
  {
    echo "## Device check: the embedding gradient's scatter-add on a GPU"
    echo
    echo "Measured by \`scripts/device_check.sh\` on ${GPU} ($(date -u +%Y-%m-%d)), jax $BASELINE against"
    echo "$CANDIDATE (\`jax[cuda12]\`, NVIDIA's runtime wheels)."
    echo
    cat "$OUT_DIR/scatter-timing.md"
    echo
    for version in "$BASELINE" "$CANDIDATE"; do
      echo "- gate on the GPU runtime target, jax $version (\`--programs $PROGRAMS --configs $CONFIGS\`):" \
        "exit ${GATE_RC[$version]}, \`$(tail -n1 "$OUT_DIR/gate-$version.log")\`; snapshots in" \
        "\`$(basename "$OUT_DIR")/snapshots-$version\`"
    done
  } >"$SECTION"
fi
step "findings: replace the device-check section of $(basename "$FINDINGS")" 15 \
  "$ENV_A/bin/python" "$ROOT/scripts/device_scatter_timing.py" --findings "$FINDINGS" --section "$SECTION"
if ((DRY_RUN)); then
  echo "device_check: dry run: $STEP steps listed, none run"
else
  echo "device_check: done in ${SECONDS}s; figures in $OUT_DIR, section in $FINDINGS"
fi

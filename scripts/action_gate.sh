#!/usr/bin/env bash
# The steps of action.yml after the install: `action_gate.sh cache-key` writes the compile cache's key and
# folder as step outputs (key, dir); `action_gate.sh` runs `python -m invariants gate` on the project's spec
# folders, writes the report to the job summary, and exits with the gate's status; `action_gate.sh merge
# FILE...` is the merge job of .github/workflows/gate-shards.yml: the report of every shard's results file
# in the job summary, and its exit status (2 where a shard is missing or repeated).
#
# Inputs, as action.yml passes them (environment variables):
#   INPUT_SPEC_DIRS     spec folders, one per line (required)
#   INPUT_SNAPSHOT_DIR  --snapshot-dir (default: snapshots)
#   INPUT_TARGETS       --targets (empty: the gate's default, every target)
#   INPUT_CATALOG       "true" runs the catalog too; "false" (the default) passes --no-catalog
#   INPUT_ARGS          more arguments for the gate, split on whitespace
#   INPUT_COMPILE_CACHE "true" (the default) reads and writes the compile cache; "false": INVARIANTS_NO_CACHE=1
#   INPUT_SHARD         "K/N": shard K of N (--shard); its results file is for the merge job, which reports,
#                       and a shard with nothing to do (pytest's 5, its results file written) passes
#   GATE_PYTHON         the interpreter the action set up and installed the gate in (required: never the
#                       python first on PATH, which may be another environment's)
#   GITHUB_STEP_SUMMARY the job summary the report is appended to (unset: the report goes to stdout)
#   GITHUB_OUTPUT       where the step outputs are written (unset: not written)
# The results file and the report go to artifacts/action/ in the working directory: each run writes into a
# folder of its own there and moves its files onto results.json and report.md once written, so that its
# summary and status are its own and an earlier run's files stay until this run has its own.
#
# Exit status: the gate's (0 passed, 1 a failure, 2 bad input, 4 targets asked for that cannot compile
# here, 128+N stopped by signal N); 2 where it exited 0 having checked nothing (no results written); if
# the gate passed but the report says otherwise (nothing passed, an item exploded) or could not be
# written, the report command's. Bad input to this script itself is one line and 2.
set -uo pipefail

say() { printf 'action_gate: %s\n' "$*" >&2; }
if [ -z "${GATE_PYTHON:-}" ]; then
  say "GATE_PYTHON is unset: the action passes the Python that setup-python installed the gate in (steps.python.outputs.python-path)"
  exit 2
fi
python="$GATE_PYTHON"
# A tool problem is bad input (2), never a failure of the gate (1) or the shell's 127.
if ! [ -f "$python" ] || ! [ -x "$python" ]; then
  say "GATE_PYTHON=$(printf %q "$python"): no Python there (not an executable file)"
  exit 2
fi
if ! "$python" -c "import invariants" >/dev/null 2>&1; then
  say "GATE_PYTHON=$(printf %q "$python"): the gate is not installed in it (import invariants fails); install it there (the action's install step)"
  exit 2
fi

# One step output, NAME=VALUE on a line of its own. A value with a line break in it would write outputs
# of its own choosing after it: refused, in one line naming where it came from.
output() {
  [ -n "${GITHUB_OUTPUT:-}" ] || return 0
  case "$2" in
    *$'\n'* | *$'\r'*) say "$3 holds a line break; it cannot be written as the step output '$1'"; exit 2 ;;
  esac
  printf '%s=%s\n' "$1" "$2" >> "$GITHUB_OUTPUT"
}

summarize() {  # the job summary: a first line with the verdict of exit status $1, then the file $3 or line $2
  local summary="${GITHUB_STEP_SUMMARY:-/dev/stdout}" verdict="passed"
  [ "$1" -ne 0 ] && verdict="failed (exit status $1)"
  printf '## jax-embedding-invariants gate%s: %s\n\n' "$4" "$verdict" >> "$summary"
  if [ -n "$2" ]; then
    printf '%s\n' "$2" >> "$summary"
  else
    cat "$3" >> "$summary"
  fi
}

if [ "${1:-}" = "merge" ]; then
  shift
  if [ "$#" -eq 0 ]; then
    say "merge: no results file given; give every shard's"
    exit 2
  fi
  report="merged-report.md"
  "$python" -m invariants report "$@" --out "$report" --plot merged-report.png
  rc=$?
  if [ -f "$report" ]; then
    summarize "$rc" "" "$report" ", $# shards"
  else
    summarize "$rc" "No report: the shards' results could not be merged (see the log's last line)." "" ", $# shards"
  fi
  exit "$rc"
fi

if [ "${1:-}" = "cache-key" ]; then
  key="$("$python" -m invariants cache key)" || exit $?
  # Read whole, with its trailing line breaks (a command substitution drops them, and the folder with them).
  dir="$("$python" -m invariants cache where; rc=$?; printf x; exit $rc)" || exit $?
  dir="${dir%x}"
  output dir "${dir%$'\n'}" "the compile cache's folder (INVARIANTS_CACHE_DIR, else below HOME)"
  output key "$key" "the compile cache's key"
  exit 0
fi

spec_args=()
while IFS= read -r line; do
  dir="$(printf '%s' "$line" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//')"
  [ -n "$dir" ] && spec_args+=(--spec-dir "$dir")
done <<< "${INPUT_SPEC_DIRS:-}"
if [ "${#spec_args[@]}" -eq 0 ]; then
  say "spec-dirs: no folder given; name the project's spec folders, one per line"
  exit 2
fi
case "${INPUT_CATALOG:-false}" in
  true) catalog=() ;;
  false) catalog=(--no-catalog) ;;
  *) say "catalog: '${INPUT_CATALOG}' is neither true nor false"; exit 2 ;;
esac
case "${INPUT_COMPILE_CACHE:-true}" in
  true) ;;
  false) export INVARIANTS_NO_CACHE=1 ;;
  *) say "compile-cache: '${INPUT_COMPILE_CACHE}' is neither true nor false"; exit 2 ;;
esac
shard=()
if [ -n "${INPUT_SHARD:-}" ]; then
  shard=(--shard "$INPUT_SHARD")
fi
targets=()
if [ -n "${INPUT_TARGETS:-}" ]; then
  targets=(--targets "$INPUT_TARGETS")
fi
read -ra extra <<< "${INPUT_ARGS:-}"
for arg in "${extra[@]}"; do
  case "$arg" in
    --results-json | --results-json=*)
      say "args: $arg: the action writes the results to artifacts/action/results.json and reports them; leave it out"
      exit 2 ;;
  esac
done

# This run's files go to a folder of its own, and are moved onto the names above once written: two runs in
# one working folder never read each other's results, and an earlier run's stay until this run has its own.
out="artifacts/action"
results="$out/results.json"
report="$out/report.md"
for published in "$results" "$report"; do
  if [ -L "$published" ] || { [ -e "$published" ] && ! [ -f "$published" ]; }; then
    say "$published: not a file this action wrote (a link, a folder or a special file); remove it"
    exit 2
  fi
done
if ! mkdir -p "$out" || ! own="$(mktemp -d "$out/run.XXXXXX")"; then
  say "$out: cannot make a folder there"
  exit 2
fi
trap 'rm -rf "$own"' EXIT

# The gate's log holds the project's text (a spec's why, its folder names): the runner must read no line
# of it as a workflow command (::error::, ::add-mask::...). Commands stop until a token no text can know.
token=""
if [ "${GITHUB_ACTIONS:-}" = "true" ]; then
  token="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  printf '::stop-commands::%s\n' "$token"
fi
"$python" -m invariants gate "${spec_args[@]}" --snapshot-dir "${INPUT_SNAPSHOT_DIR:-snapshots}" \
  "${catalog[@]}" "${targets[@]}" "${shard[@]}" --results-json "$own/results.json" "${extra[@]}"
rc=$?

# The report first: its exit status says whether the run passed, which the summary's first line says.
said=""
if [ -n "${INPUT_SHARD:-}" ] && [ -f "$own/results.json" ]; then
  # One shard's file reads as a missing shard of the others: the merge job reports the whole run.
  nothing=""
  if [ "$rc" -eq 5 ]; then
    rc=0
    nothing=" had nothing to do; it"
  fi
  said="Shard ${INPUT_SHARD}${nothing} wrote $results; the merge job reports the whole run."
elif [ -f "$own/results.json" ]; then
  (cd "$own" && "$python" -m invariants report results.json --out report.md)
  report_rc=$?
  [ "$rc" -eq 0 ] && rc=$report_rc
  [ -f "$own/report.md" ] || said="The report could not be written from $results (see the log)."
elif [ "$rc" -eq 0 ]; then
  said="No report: the gate exited 0 but wrote no results, so it checked nothing (args such as --co or --help do that)."
  say "the gate checked nothing: it exited 0 but wrote no results (args: '${INPUT_ARGS:-}')"
  rc=2
else
  said="No report: the gate stopped before writing results (see the log)."
fi
[ -n "$token" ] && printf '::%s::\n' "$token"

summarize "$rc" "$said" "$own/report.md" "${INPUT_SHARD:+, shard $INPUT_SHARD}"
for name in results.json report.md; do
  if [ -f "$own/$name" ] && ! mv -f "$own/$name" "$out/$name" && [ "$rc" -eq 0 ]; then rc=2; fi
done

output exit-code "$rc" "the exit status"
output report "$report" "the report's path"
output results "$results" "the results file's path"
exit "$rc"

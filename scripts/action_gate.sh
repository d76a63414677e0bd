#!/usr/bin/env bash
# The gate step of action.yml: run `python -m invariants gate` on the project's spec folders, write the
# report to the job summary, and exit with the gate's status.
#
# Inputs, as action.yml passes them (environment variables):
#   INPUT_SPEC_DIRS     spec folders, one per line (required)
#   INPUT_SNAPSHOT_DIR  --snapshot-dir (default: snapshots)
#   INPUT_TARGETS       --targets (empty: the gate's default, every target)
#   INPUT_CATALOG       "true" runs the catalog too; "false" (the default) passes --no-catalog
#   INPUT_ARGS          more arguments for the gate, split on whitespace
#   INPUT_COMPILE_CACHE "true" (the default) reads and writes the compile cache; "false": INVARIANTS_NO_CACHE=1
#   GITHUB_STEP_SUMMARY the job summary the report is appended to (unset: the report goes to stdout)
#   GITHUB_OUTPUT       where exit-code and report are written as step outputs (unset: not written)
# The results file and the report go to artifacts/action/ in the working directory.
#
# Exit status: the gate's (0 passed, 1 a failure, 2 bad input, its pytest's otherwise); if the gate
# passed but the report could not be written, the report command's. Bad input to this script itself is
# one line and 2.
set -uo pipefail

say() { printf 'action_gate: %s\n' "$*" >&2; }

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
targets=()
if [ -n "${INPUT_TARGETS:-}" ]; then
  targets=(--targets "$INPUT_TARGETS")
fi
read -ra extra <<< "${INPUT_ARGS:-}"

out="artifacts/action"
results="$out/results.json"
report="$out/report.md"
mkdir -p "$out"
rm -f "$results" "$report"

python -m invariants gate "${spec_args[@]}" --snapshot-dir "${INPUT_SNAPSHOT_DIR:-snapshots}" \
  "${catalog[@]}" "${targets[@]}" --results-json "$results" "${extra[@]}"
rc=$?

summary="${GITHUB_STEP_SUMMARY:-/dev/stdout}"
verdict="passed"
[ "$rc" -ne 0 ] && verdict="failed (exit status $rc)"
{
  printf '## jax-embedding-invariants gate: %s\n\n' "$verdict"
} >> "$summary"
if [ -f "$results" ]; then
  if python -m invariants report "$results" --out "$report"; then
    cat "$report" >> "$summary"
  else
    report_rc=$?
    printf 'The report could not be written from %s (see the log).\n' "$results" >> "$summary"
    [ "$rc" -eq 0 ] && rc=$report_rc
  fi
else
  printf 'No report: the gate stopped before writing results (see the log).\n' >> "$summary"
fi

if [ -n "${GITHUB_OUTPUT:-}" ]; then
  printf 'exit-code=%s\nreport=%s\n' "$rc" "$report" >> "$GITHUB_OUTPUT"
fi
exit "$rc"

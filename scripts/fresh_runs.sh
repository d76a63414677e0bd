#!/usr/bin/env bash
# The README's test command, N times, each in a fresh clone of one commit with a fresh virtual environment
# (the way CI runs it): a test command that is red once in three runs is broken, and only repeated fresh
# runs show that. One line per run goes to DIR/runs.tsv (run, exit code, seconds, pytest's summary line, load
# average before and after); each run's whole output is DIR/run-N.log.
#
#   scripts/fresh_runs.sh [-n N] [-c COMMIT] [-d DIR]
#
# N defaults to 10, COMMIT to HEAD, DIR to artifacts/fresh-runs/<commit>. pip's cache makes the installs
# after the first one quick. Exit status: 0 when every run exited 0, else 1.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs=10
commit=HEAD
out=""
while getopts "n:c:d:" opt; do
  case "$opt" in
    n) runs="$OPTARG" ;;
    c) commit="$OPTARG" ;;
    d) out="$OPTARG" ;;
    *) echo "usage: scripts/fresh_runs.sh [-n N] [-c COMMIT] [-d DIR]" >&2; exit 2 ;;
  esac
done
if ! sha="$(git -C "$repo" rev-parse --verify --quiet "$commit^{commit}")"; then
  echo "fresh_runs: -c $commit: not a commit of $repo" >&2
  exit 2
fi
short="${sha:0:7}"
out="${out:-$repo/artifacts/fresh-runs/$short}"
mkdir -p "$out"
# The test command is read from the README, so that this checks the command users are told to run.
command="$(grep -m1 -E "pytest -n auto" "$repo/README.md" | sed -E 's/.*&& (pytest .*)$/\1/')"
case "$command" in
  pytest*) ;;
  *) echo "fresh_runs: README.md: no 'pytest -n auto' test command found" >&2; exit 2 ;;
esac
printf 'run\texit\tseconds\tsummary\tload_before\tload_after\n' >"$out/runs.tsv"
failed=0
for i in $(seq 1 "$runs"); do
  work="$(mktemp -d "${TMPDIR:-/tmp}/fresh-run-XXXXXX")"
  git clone -q --no-hardlinks "$repo" "$work/repo"
  git -C "$work/repo" checkout -q "$sha"
  load_before="$(cut -d' ' -f1 /proc/loadavg)"
  start=$(date +%s)
  set +e
  (
    cd "$work/repo"
    python3 -m venv .venv
    . .venv/bin/activate
    python -m pip install -q --upgrade pip
    pip install -q -e '.[test,tpu,gpu,libs,dev]'
    date +%s >"$work/tests-start"
    $command
  ) >"$out/run-$i.log" 2>&1
  rc=$?
  set -e
  seconds=$(( $(date +%s) - $(cat "$work/tests-start" 2>/dev/null || echo "$start") ))
  load_after="$(cut -d' ' -f1 /proc/loadavg)"
  summary="$(grep -E '^=+ .*(passed|failed|error).* in ' "$out/run-$i.log" | tail -1 | tr -d '=' | sed -E 's/^ +| +$//g')"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$rc" "$seconds" "$summary" "$load_before" "$load_after" >>"$out/runs.tsv"
  echo "run $i: exit $rc in ${seconds}s: $summary"
  [ "$rc" -eq 0 ] || failed=1
  rm -rf "$work"
done
echo "fresh_runs: $(awk -F'\t' 'NR>1 && $2==0' "$out/runs.tsv" | wc -l) of $runs green at $short; $out/runs.tsv"
exit "$failed"

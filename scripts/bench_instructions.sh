#!/usr/bin/env bash
# Counts the instructions of one sluice-bench run under callgrind, where
# wall-clock rounds on a noisy machine cannot show a change of a few
# percent. Prints, in millions, the inclusive count of each kind of
# transaction (claims, finishes, starts; of starts and finishes, what
# they plan before their transactions begin), of the workers' sweeps, and
# of the whole program.
#
#   scripts/bench_instructions.sh BACKEND_URL WORKLOAD [sluice-bench options]
#   scripts/bench_instructions.sh sqlite:/tmp/ins.db W1
#   scripts/bench_instructions.sh memory: W7 --w7-elements 20000
#
# Uses build/release/bench/sluice-bench (SLUICE_BENCH overrides it) and
# needs valgrind (apt-get install valgrind). A sqlite: file is deleted
# first. The run is about 40 times slower than without valgrind, so the
# workers' 5-second sweeps run many more times than in a real run: compare
# the transactions' counts, which repeat to within 0.1% between runs of
# one build (docs/benchmarks.md, "instructions per SQLite job").
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
backend=$1
workload=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${SLUICE_BENCH:-$root/build/release/bench/sluice-bench}
command -v valgrind >/dev/null || {
  echo "bench_instructions.sh: valgrind is not installed" >&2
  exit 1
}
[[ -x $bench ]] || {
  echo "bench_instructions.sh: no $bench; build the release tree first" >&2
  exit 1
}
if [[ $backend == sqlite:* ]]; then
  file=${backend#sqlite:}
  rm -f "${file%%\?*}" "${file%%\?*}"-wal "${file%%\?*}"-shm
fi

out=$(mktemp /tmp/sluice-callgrind.XXXXXX)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" \
  "$bench" --backend "$backend" --workload "$workload" --no-baseline "$@" \
  2>/dev/null | grep '^RESULT' || true

annotated=$(callgrind_annotate --inclusive=yes --threshold=100 "$out")
# The inclusive count of the first function whose name contains $2.
# None (a function never called, such as a sweep in a short run) is 0.
count() {
  { grep -F -m1 -- "$2" <<<"$annotated" || echo 0; } | awk -v label="$1" \
    '{ gsub(",", "", $1); printf "%-10s %12.1f M\n", label, $1 / 1e6 }'
}
count total "PROGRAM TOTALS"
count claims "::ClaimInEngine("
count finishes "::FinishInOneTransaction("
count starts "::StartRunsOnce("
# Planned before their transactions begin, so not in their critical
# sections: of starts, the new runs; of finishes, the results (where the
# claim's record is at hand, as in every workload here).
count planned "::PlanNewRuns("
count results "finish_internal::PlanResult<"
count sweeps "WorkerImpl::Sweep("

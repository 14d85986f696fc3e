#!/usr/bin/env bash
# Runs sluice-bench's floors (--floors) at a small size on every backend
# that has one, so a schema change that breaks their plain SQL, or a floor
# that stops reporting, fails here and not at the next measurement. Checks
# that each floor reports a positive figure and that --floors is refused
# for a workload without one. Times nothing. Registered in CTest as
# bench_floors_test (tests/CMakeLists.txt); Postgres with
# SLUICE_TEST_POSTGRES_URL.
#
#   bench_floors_test.sh SLUICE_BENCH WORK_DIR
set -euo pipefail
bench=$1
work=$2
mkdir -p "$work"

# Prints the value of field $2 in the RESULT line of output $1; fails unless
# it is a positive number.
positive_field() {
  local value
  value=$(grep '^RESULT ' <<<"$1" | tr ' ' '\n' | sed -n "s/^$2=//p")
  if ! awk -v v="$value" 'BEGIN { exit !(v + 0 > 0) }'; then
    echo "bench_floors_test: $2 is \"$value\", not a positive number" >&2
    echo "$1" >&2
    exit 1
  fi
  echo "$2=$value"
}

out=$("$bench" --backend memory: --workload W1 --runs 300 --no-baseline --floors)
positive_field "$out" floor_per_s
positive_field "$out" shared_floor_per_s

rm -f "$work"/w7.db*
out=$("$bench" --backend "sqlite:$work/w7.db" --workload W7 --w7-elements 300 \
  --no-baseline --floors)
positive_field "$out" floor_ms
rm -f "$work"/w7.db*

if [[ -n ${SLUICE_TEST_POSTGRES_URL:-} ]]; then
  out=$("$bench" --backend "$SLUICE_TEST_POSTGRES_URL" --workload W1 \
    --runs 300 --no-baseline --floors)
  positive_field "$out" floor_per_s
  positive_field "$out" floor_wal_per_job
  positive_field "$out" floor_without_task_per_s
  positive_field "$out" floor_wal_per_job_without_task
else
  echo "bench_floors_test: no SLUICE_TEST_POSTGRES_URL, Postgres's floor not run"
fi

status=0
message=$("$bench" --backend memory: --workload W2 --floors 2>&1) || status=$?
if [[ $status -ne 2 || $message != *"--floors measures W1"* ]]; then
  echo "bench_floors_test: --floors on memory W2 gave status $status: $message" >&2
  exit 1
fi
echo "bench_floors_test: passed"

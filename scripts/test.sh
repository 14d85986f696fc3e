#!/usr/bin/env bash
# Builds everything with warnings as errors under AddressSanitizer and
# UndefinedBehaviorSanitizer, then runs every test on every backend, then
# runs each libFuzzer target for SLUICE_FUZZ_SECONDS (default 15) from its
# seed corpus (scripts/fuzz.sh; run it alone for longer), then the
# ThreadSanitizer subset (scripts/tsan.sh; SLUICE_TSAN=0 leaves it out).
#
# The Postgres tests use SLUICE_TEST_POSTGRES_URL. When it is not set, this
# script starts a throwaway PostgreSQL 15 cluster (fsync off) in a fresh
# temporary directory on a private port, and stops it on exit, whether the
# tests pass, fail or are interrupted. The exit code is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
./scripts/bootstrap.sh
launcher=()
if command -v ccache >/dev/null; then
  # Hash paths relative to the checkout, so that every clone (CI's included)
  # reuses what another clone compiled.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DSLUICE_WERROR=ON -DSLUICE_SANITIZE=ON "${launcher[@]}" >/dev/null
cmake --build build/test

if [ -z "${SLUICE_TEST_POSTGRES_URL:-}" ]; then
  pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-pg.XXXXXX")
  trap '"$root/scripts/pg_cluster.sh" stop "$pg_dir" || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  url=""
  for _ in 1 2 3 4 5; do
    port=$((55400 + RANDOM % 500))
    # Skip ports where a server already answers on TCP.
    if /usr/lib/postgresql/15/bin/pg_isready -q -h 127.0.0.1 -p "$port" -t 1; then
      continue
    fi
    if url=$(SLUICE_PG_FAST=1 "$root/scripts/pg_cluster.sh" start "$pg_dir" "$port"); then
      break
    fi
    url=""
  done
  if [ -z "$url" ]; then
    echo "test.sh: could not start a PostgreSQL 15 cluster in $pg_dir" >&2
    exit 1
  fi
  echo "test.sh: PostgreSQL 15 test cluster on port $port"
  export SLUICE_TEST_POSTGRES_URL="$url"
  # The restart test (tests/postgres_restart_test.cc) restarts this cluster.
  export SLUICE_TEST_POSTGRES_DIR="$pg_dir"
fi

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
failed_stages=()
# Each stage's wall time, so that a slow CI run shows where the time went.
stage() {
  local name=$1 began=$SECONDS code=0
  shift
  "$@" || code=$?
  echo "test.sh: $name took $((SECONDS - began)) s"
  if [ "$code" != 0 ]; then
    status=$code
    failed_stages+=("$name")
  fi
}
echo "test.sh: bootstrap, build and Postgres took ${SECONDS} s"
# A fresh build tree (CI's) has no test times yet, so CTest would start
# the tests in an order of its own and a long one could start last. The
# times of a full run, kept in tests/ctest_costs.txt, let it start the
# longest first; CTest updates its own copy as tests run.
costs=build/test/Testing/Temporary/CTestCostData.txt
if [ ! -f "$costs" ]; then
  mkdir -p "$(dirname "$costs")"
  cp tests/ctest_costs.txt "$costs"
fi
stage ctest ctest --test-dir build/test --output-on-failure -j2
stage fuzz ./scripts/fuzz.sh "${SLUICE_FUZZ_SECONDS:-15}"
if [ "${SLUICE_TSAN:-1}" != 0 ]; then
  stage tsan ./scripts/tsan.sh
fi
# CI shows only the end of this output: name what failed there, and run the
# failed tests once more, so that a flake is told from a steady failure (the
# exit code stays the first run's).
if [ ${#failed_stages[@]} -gt 0 ]; then
  echo "test.sh: failed stages: ${failed_stages[*]}"
  if [[ " ${failed_stages[*]} " == *" fuzz "* ]]; then
    # fuzz.sh stops at the first target that fails: its log is the newest.
    fuzz_log=$(ls -t build/fuzz/*.log 2>/dev/null | head -1 || true)
    if [ -n "$fuzz_log" ]; then
      echo "test.sh: the end of $fuzz_log:"
      tail -30 "$fuzz_log"
    fi
  fi
  failed_log=build/test/Testing/Temporary/LastTestsFailed.log
  if [[ " ${failed_stages[*]} " == *" ctest "* ]] && [ -f "$failed_log" ]; then
    while IFS=: read -r _ name; do
      echo "test.sh: failed: $name; from its first error, and its end:"
      # Up to 50 lines from the first line that tells an error (else the
      # last 40), and the last 10; LastTest.log holds every test's output.
      awk -v name="$name" '
        BEGIN { start = "Testing: " name }
        substr($0, length($0) - length(start) + 1) == start { on = 1; n = 0 }
        on { line[n++] = $0 }
        on && index($0, "\"" name "\" end time") {
          first = n > 40 ? n - 40 : 0  # no error line: the last 40
          for (i = 0; i < n; i++) {
            if (line[i] ~ /^(\[ RUN|\[       OK|Command:|Note:)/) continue
            if (line[i] ~ /: Failure$|FAILED|ERROR|runtime error|terminate called|Segmentation|Timeout/) {
              first = i
              break
            }
          }
          for (i = first; i < n && i < first + 50; i++) print line[i]
          print "..."
          for (i = (n - 10 > first + 50 ? n - 10 : first + 50); i < n; i++) print line[i]
          on = 0
        }' build/test/Testing/Temporary/LastTest.log
    done <"$failed_log"
    echo "test.sh: the failed tests once more:"
    ctest --test-dir build/test --rerun-failed --output-on-failure 2>&1 |
      tail -80 || true
  fi
fi
exit "$status"

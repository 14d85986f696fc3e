#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for SECONDS (default 60) on a copy
# of its seed corpus. A crash leaves its input in build/fuzz/artifacts/ and
# the script exits non-zero; replay it with build/fuzz/fuzz/<target>_fuzzer FILE.
#
#   scripts/fuzz.sh                  # a minute per target
#   scripts/fuzz.sh 3600             # an hour per target
#   scripts/fuzz.sh 60 flow_shape    # one target
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
build=build/fuzz
launcher=()
if command -v ccache >/dev/null; then
  # Hash paths relative to the checkout, so that every clone (CI's included)
  # reuses what another clone compiled.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DSLUICE_FUZZ=ON -DSLUICE_WERROR=ON \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for dir in fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
cmake --build "$build" --target "${targets[@]/%/_fuzzer}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$build/artifacts"
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  cp -n fuzz/corpus/"$target"/* "$corpus"/
  log="$build/$target.log"
  echo "fuzz.sh: $target for ${seconds}s"
  if ! "$build/fuzz/${target}_fuzzer" "$corpus" -max_total_time="$seconds" \
    -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/${target}-" >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz.sh: $target failed; its input is in $build/artifacts/" >&2
    exit 1
  fi
  grep -E 'stat::number_of_executed_units|DONE' "$log" || true
done

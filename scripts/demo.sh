#!/usr/bin/env bash
# Builds Sluice and runs the demo: a flow with a map step on SQLite.
#
#   ./scripts/demo.sh                 runs one word_stats run, prints events
#   ./scripts/demo.sh --dashboard [--port P] [--token T]
#                                     runs demo flows on a loop and serves
#                                     the web dashboard (docs/dashboard.md)
set -euo pipefail
dashboard=0
if [[ "${1:-}" == --dashboard ]]; then
  dashboard=1
  shift
fi
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build build/release --target sluice
if [[ "$dashboard" -eq 1 ]]; then
  exec build/release/tools/sluice dashboard --backend sqlite:build/sluice-dashboard.db "$@"
fi
rm -f build/sluice-demo.db build/sluice-demo.db-wal build/sluice-demo.db-shm
exec build/release/tools/sluice demo --backend sqlite:build/sluice-demo.db

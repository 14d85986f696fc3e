#!/usr/bin/env bash
# Builds Sluice and runs the demo: a flow with a map step on SQLite.
set -euo pipefail
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
rm -f build/sluice-demo.db build/sluice-demo.db-wal build/sluice-demo.db-shm
exec build/release/tools/sluice demo --backend sqlite:build/sluice-demo.db

#!/usr/bin/env bash
# Installs the Debian 12 packages Sluice builds and tests with. Safe to run
# again: it installs only what is missing. The PostgreSQL 15 server is for the
# tests' throwaway clusters (scripts/pg_cluster.sh); they run in their own
# directories, so Debian's default cluster may stay stopped. clang-14 builds the
# libFuzzer targets (scripts/fuzz.sh); ccache, when present, speeds rebuilds.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libsqlite3-dev libpq-dev
  postgresql-15 postgresql-client-15
  libabsl-dev libboost1.81-dev libboost-json1.81-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 ccache
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "bootstrap: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Installs the Debian 12 packages Sluice builds and tests with. Safe to run
# again: it installs only what is missing. The PostgreSQL 15 server is for the
# tests' throwaway clusters (scripts/pg_cluster.sh); they run in their own
# directories, so Debian's default cluster may stay stopped. clang-14 builds the
# libFuzzer targets (scripts/fuzz.sh) and the ThreadSanitizer build
# (scripts/tsan.sh); ccache, when present, speeds rebuilds. The TSan build
# compiles Debian's own Abseil source with -fsanitize=thread, so this adds a
# deb-src entry for bookworm and installs dpkg-dev (dpkg-source). CLI11 parses
# the CLI's arguments, cpp-httplib serves the admin listener, and
# python3-croniter is the reference the cron parser is tested against.
# chromium (headless) and python3-websocket (its DevTools protocol) run the
# dashboard's browser test.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libsqlite3-dev libpq-dev
  postgresql-15 postgresql-client-15
  libabsl-dev libboost1.81-dev libboost-json1.81-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 ccache dpkg-dev
  libcli11-dev libcpp-httplib-dev python3-croniter
  chromium python3-websocket
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

# Sources for `apt-get source abseil` (scripts/tsan_absl.sh).
src_list=/etc/apt/sources.list.d/sluice-src.sources
need_update=0
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ &&
   ! grep -qs '^deb-src ' /etc/apt/sources.list; then
  echo "bootstrap: adding $src_list (Debian bookworm sources)"
  printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' \
    'Suites: bookworm' 'Components: main' \
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
    $sudo tee "$src_list" >/dev/null
  need_update=1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  if [ "$need_update" -eq 1 ]; then $sudo apt-get update -qq; fi
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null

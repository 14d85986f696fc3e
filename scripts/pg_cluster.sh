#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests: initdb into a temporary
# directory, a private port, and a Unix socket in that directory only (no
# TCP). Prints the libpq URL.
#
#   scripts/pg_cluster.sh start DIR PORT   -> prints postgresql:///postgres?host=DIR&port=PORT
#   scripts/pg_cluster.sh stop DIR
#
# As root the cluster runs as the "postgres" user, since PostgreSQL refuses
# to run as root.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
command=${1:?start or stop}
dir=${2:?directory}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$command" in
  start)
    port=${3:?port}
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses='' -c fsync=on -c max_connections=200" \
      start >/dev/null
    echo "postgresql:///postgres?host=$dir&port=$port&user=postgres"
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests: initdb into a temporary
# directory, a private port, and a Unix socket in that directory only (no
# TCP). Prints the libpq URL. Authentication is trust, except for the role
# sluice_password_test, which must give its password.
#
#   scripts/pg_cluster.sh start DIR PORT   -> prints postgresql:///postgres?host=DIR&port=PORT&user=postgres
#   scripts/pg_cluster.sh restart DIR   (immediate: every server process
#                                        killed, then WAL recovery)
#   scripts/pg_cluster.sh stop DIR
#
# The cluster is durable by default (benchmarks measure real commits). With
# SLUICE_PG_FAST=1 it runs without fsync, synchronous commit or full-page
# writes: much faster for tests, and a crash of the machine may lose it,
# which a throwaway test cluster does not mind.
#
# `start` first stops any cluster left running in DIR, and fails with the
# tail of the server log if the server does not come up.
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

stop_cluster() {
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
}

case "$command" in
  start)
    port=${3:?port}
    stop_cluster
    rm -rf "$dir/data"
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
    if ! as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync \
        >"$dir/initdb.log" 2>&1; then
      echo "pg_cluster: initdb failed in $dir/data:" >&2
      tail -n 30 "$dir/initdb.log" >&2
      exit 1
    fi
    # Every local user is trusted except one role that must give a password,
    # so the tests can check how a wrong password is reported.
    hba="$dir/data/pg_hba.conf"
    as_owner sh -c "{ echo 'local all sluice_password_test scram-sha-256'; cat '$hba'; } >'$hba.new' && mv '$hba.new' '$hba'"
    durability="-c fsync=on"
    if [ "${SLUICE_PG_FAST:-0}" = "1" ]; then
      durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses='' $durability -c max_connections=200" \
        start >/dev/null 2>&1; then
      echo "pg_cluster: PostgreSQL did not start in $dir (port $port); server log:" >&2
      tail -n 30 "$dir/server.log" >&2 2>/dev/null || true
      stop_cluster
      exit 1
    fi
    echo "postgresql:///postgres?host=$dir&port=$port&user=postgres"
    ;;
  restart)
    # The same settings as at start (pg_ctl keeps them in postmaster.opts).
    # The log file keeps the server off the caller's stdout and stderr.
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate \
        -w -t 60 restart >/dev/null 2>&1; then
      echo "pg_cluster: PostgreSQL did not restart in $dir; server log:" >&2
      tail -n 30 "$dir/server.log" >&2 2>/dev/null || true
      exit 1
    fi
    ;;
  stop)
    stop_cluster
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac

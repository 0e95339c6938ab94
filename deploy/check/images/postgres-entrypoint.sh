#!/bin/sh
# The official postgres image's first start, the parts compose.replicas.yml
# uses: an empty data folder gets a cluster whose POSTGRES_USER has the
# password (scram-sha-256 over TCP) and a database POSTGRES_DB; then
# `postgres ARGS...` runs as PID 1 (SIGTERM: a fast shutdown).
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    POSTGRES_PASSWORD="$(cat "$POSTGRES_PASSWORD_FILE")"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "postgres: POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) is not set" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$db" != "postgres" ]; then
        echo "CREATE DATABASE \"$db\" OWNER \"$user\"" \
            | postgres --single -D "$PGDATA" -j postgres >/dev/null
    fi
fi
unset POSTGRES_PASSWORD
if [ "${1:-}" = "postgres" ]; then
    shift
    exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"

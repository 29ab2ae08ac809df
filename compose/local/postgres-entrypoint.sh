#!/bin/sh
# The part of the official postgres image's entrypoint that compose/docker-compose.yml relies on: on an empty
# PGDATA, initdb with POSTGRES_USER / POSTGRES_PASSWORD and create POSTGRES_DB; then run the server as the
# postgres user on all addresses, port PGPORT (default 5432).
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}" "${PGPORT:=5432}"
export PGPORT
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
  exec setpriv --reuid="$(id -u postgres)" --regid="$(id -g postgres)" --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile="$(mktemp)"
  printf '%s\n' "${POSTGRES_PASSWORD:-}" > "$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -E UTF8
  rm -f "$pwfile"
  printf "host all all all scram-sha-256\n" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k /var/run/postgresql" -w start
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -h /var/run/postgresql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 \
      -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -c listen_addresses='*' -k /var/run/postgresql "$@"
fi
exec "$@"

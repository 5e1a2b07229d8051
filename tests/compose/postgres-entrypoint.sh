#!/bin/bash
# The start-up of the PostgreSQL stand-in (postgres.Dockerfile), behaving as the official
# image's entrypoint does for `postgres` as the command: as root, it makes PGDATA the
# postgres user's and starts again as that user; with no cluster in PGDATA, it refuses an
# empty POSTGRES_PASSWORD (unless POSTGRES_HOST_AUTH_METHOD=trust), runs initdb with
# POSTGRES_USER as the superuser and the password, lets every host in with that method
# (scram-sha-256 by default), creates POSTGRES_DB on a server that listens on its socket
# only (so nothing connects before it is ready), stops it, then runs the command.
set -Eeo pipefail

if [ "${1:0:1}" = "-" ]; then
    set -- postgres "$@"
fi
if [ "$1" != "postgres" ]; then
    exec "$@"
fi

if [ "$(id -u)" = "0" ]; then
    mkdir -p "$PGDATA"
    chmod 00700 "$PGDATA"
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

# POSTGRES_PASSWORD_FILE: the password read from that file (a Compose secret); both set
# is refused, as there.
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    if [ -n "${POSTGRES_PASSWORD:-}" ]; then
        echo >&2 "error: both POSTGRES_PASSWORD and POSTGRES_PASSWORD_FILE are set (but are exclusive)"
        exit 1
    fi
    POSTGRES_PASSWORD="$(< "$POSTGRES_PASSWORD_FILE")"
fi
unset POSTGRES_PASSWORD_FILE

user="${POSTGRES_USER:-postgres}"
database="${POSTGRES_DB:-$user}"
method="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "$POSTGRES_PASSWORD" ] && [ "$method" != "trust" ]; then
        cat >&2 <<'MESSAGE'
Error: Database is uninitialized and superuser password is not specified.
       You must specify POSTGRES_PASSWORD to a non-empty value for the
       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".
MESSAGE
        exit 1
    fi
    mkdir -p "$PGDATA"
    chmod 00700 "$PGDATA" || true
    # shellcheck disable=SC2086  # POSTGRES_INITDB_ARGS is a list of options, as there
    initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
        --auth-local=trust --auth-host="$method" $POSTGRES_INITDB_ARGS
    printf '\nhost all all all %s\n' "$method" >> "$PGDATA/pg_hba.conf"
    printf "\nlisten_addresses = '*'\n" >> "$PGDATA/postgresql.conf"

    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    if [ "$database" != "postgres" ]; then
        psql -v ON_ERROR_STOP=1 --username "$user" --no-password --dbname postgres \
            --set db="$database" <<<'CREATE DATABASE :"db";'
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop
    echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"

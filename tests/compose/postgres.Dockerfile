# A stand-in for docker.io/library/postgres:15, which cannot be pulled here, built by
# tests/compose/images.py under that name (build context: tests/compose).
#
# Imitates the official image's interface: the user postgres with uid/gid 999, PostgreSQL
# 15's programs on PATH (postgres, initdb, pg_ctl, psql, pg_isready), PGDATA
# /var/lib/postgresql/data (a volume, mode 1777 like the image's, so that it may also run as
# `user: 999:999`), the socket directory /var/run/postgresql, port 5432, STOPSIGNAL SIGINT,
# `postgres` as the command, and an entrypoint that behaves as the image's does on the
# environment compose.yaml uses (postgres-entrypoint.sh: POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB, POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD).
# Differs: PostgreSQL is Debian bookworm's postgresql-15 (the official image takes
# PostgreSQL's own apt repository's build of the latest 15.x); the cluster's locale is
# C.UTF-8, not en_US.utf8; no /docker-entrypoint-initdb.d scripts, no gosu (setpriv drops
# root), no nss_wrapper for a uid missing from /etc/passwd; the contrib modules (unaccent)
# come in Debian's postgresql-15 package as in the image.
FROM python:3.11-slim
RUN groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql --shell /bin/bash postgres \
    && mkdir -p /etc/postgresql-common/createcluster.d \
    && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/no-main.conf \
    && printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
    && apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
    && install -d -o postgres -g postgres -m 3777 /var/run/postgresql \
    && install -d -o postgres -g postgres -m 1777 /var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data PG_MAJOR=15
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]

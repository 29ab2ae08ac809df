# Stand-in for postgres:16-bookworm where no image registry is reachable: Debian's PostgreSQL 15 behind the
# official image's interface (POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB, PGDATA, PGPORT, pg_isready and
# psql on PATH, runs as the postgres user).
ARG LOCAL_BASE=harnessrl-local/debian:bookworm
FROM ${LOCAL_BASE}
ENV LANG=C.UTF-8 \
    PGDATA=/var/lib/postgresql/data \
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 postgresql-client-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p "$PGDATA" /var/run/postgresql && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]

# Stand-in for redis:7-bookworm where no image registry is reachable: Debian's Redis 7.0, redis-server and
# redis-cli on PATH, working directory /data (where --appendonly writes).
ARG LOCAL_BASE=harnessrl-local/debian:bookworm
FROM ${LOCAL_BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data
VOLUME /data
WORKDIR /data
CMD ["redis-server"]

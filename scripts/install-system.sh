#!/usr/bin/env bash
# System packages and the sandbox toolchain for harnessrl rollouts and grading (run as root; idempotent).
#
# - bubblewrap + setpriv (util-linux): the sandbox (shared/sandbox.py); git: task repositories.
# - /opt/harnessrl/sandbox-venv: the Python the sandbox sees. It is built from Debian's /usr/bin/python3 and lives
#   outside /root, because root's home is mode 0700 and the unprivileged sandbox uid could not read a toolchain
#   there. Override the location with HARNESSRL_SANDBOX_VENV.
# - HARNESSRL_SKIP_SANDBOX_CHECK=1 skips the final self-check (a `docker build` step grants no namespaces; the
#   sandbox checks itself again when a runner or grader starts and refuses to run without a working one).
set -euo pipefail

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

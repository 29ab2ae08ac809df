#!/usr/bin/env bash
# Install the four coding-agent CLIs at pinned versions into a prefix outside /root, so that the
# sandboxed (unprivileged) uids can execute them. Idempotent: a package already present at the
# pinned version is skipped, so a second run takes well under a second.
#
# Usage: scripts/install-harnesses.sh [PREFIX]   (default: $HARNESSRL_NPM_PREFIX or /opt/harnessrl/npm)
set -euo pipefail

PREFIX="${1:-${HARNESSRL_NPM_PREFIX:-/opt/harnessrl/npm}}"
PACKAGES=(
  "@openai/codex@0.171.0"
  "@anthropic-ai/claude-code@2.1.197"
  "@qwen-code/qwen-code@0.15.10"
  "@mariozechner/pi-coding-agent@0.73.1"
)

installed_version() {
  # Prints the version of an installed package, or nothing when it is absent.
  local manifest="$PREFIX/lib/node_modules/$1/package.json"
  [[ -f "$manifest" ]] && node -p "require('$manifest').version" 2>/dev/null || true
}

missing=()
for spec in "${PACKAGES[@]}"; do
  name="${spec%@*}"
  version="${spec##*@}"
  if [[ "$(installed_version "$name")" != "$version" ]]; then
    missing+=("$spec")
  fi
done

if ((${#missing[@]})); then
  mkdir -p "$PREFIX"
  # --prefix with -g puts bins in $PREFIX/bin and packages in $PREFIX/lib/node_modules.
  npm install --global --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "${missing[@]}"
fi

# Node's os.userInfo() (Qwen Code calls it at start) fails for a uid without a passwd entry, and bwrap binds the
# host's /etc read-only: give the sandbox uid a name. Skipped when not root (then the sandbox runs as the caller).
SANDBOX_UID="${HARNESSRL_SANDBOX_UID:-10001}"
if [[ "$(id -u)" == 0 ]] && ! getent passwd "$SANDBOX_UID" >/dev/null; then
  getent group "$SANDBOX_UID" >/dev/null || groupadd --gid "$SANDBOX_UID" harnessrl-sandbox
  useradd --uid "$SANDBOX_UID" --gid "$SANDBOX_UID" --no-create-home --home-dir /home/sandbox \
    --shell /usr/sbin/nologin harnessrl-sandbox
fi

# World-readable and executable so the sandbox uids can run the CLIs.
chmod -R a+rX "$PREFIX"
for bin in codex claude qwen pi; do
  [[ -x "$PREFIX/bin/$bin" ]] || { echo "install-harnesses: $PREFIX/bin/$bin missing" >&2; exit 1; }
done
echo "harness CLIs installed in $PREFIX/bin"

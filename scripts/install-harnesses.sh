#!/usr/bin/env bash
# Install the five coding-agent CLIs at pinned versions into a prefix outside /root, so that the
# sandboxed (unprivileged) uids can execute them. Idempotent: a package already present at the
# pinned version is skipped, so a second run takes well under a second.
#
# Usage: scripts/install-harnesses.sh [PREFIX]   (default: $HARNESSRL_NPM_PREFIX or /opt/harnessrl/npm)
#        scripts/install-harnesses.sh --list     (print "harness binary package version", one pin a line)
#
# The pins below are the one list of harness CLI versions: scripts/check-harness-versions.sh reads it with
# --list, and a pin is bumped only after that check passes for the new version (docs/harness-versions.md).
set -euo pipefail

# harness name (as in run configs)   binary   npm package   pinned version
PINS=(
  "codex        codex   @openai/codex                  0.171.0"
  "claude-code  claude  @anthropic-ai/claude-code      2.1.332"
  "qwen-code    qwen    @qwen-code/qwen-code           0.24.4"
  "pi           pi      @mariozechner/pi-coding-agent  0.73.1"
  "gemini       gemini  @google/gemini-cli             0.61.0"
)

if [[ "${1:-}" == "--list" ]]; then
  for pin in "${PINS[@]}"; do
    read -r harness bin package version <<<"$pin"
    echo "$harness $bin $package $version"
  done
  exit 0
fi

PREFIX="${1:-${HARNESSRL_NPM_PREFIX:-/opt/harnessrl/npm}}"

installed_version() {
  # Prints the version of an installed package, or nothing when it is absent.
  local manifest="$PREFIX/lib/node_modules/$1/package.json"
  [[ -f "$manifest" ]] && node -p "require('$manifest').version" 2>/dev/null || true
}

missing=()
bins=()
for pin in "${PINS[@]}"; do
  read -r _harness bin package version <<<"$pin"
  bins+=("$bin")
  if [[ "$(installed_version "$package")" != "$version" ]]; then
    missing+=("$package@$version")
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
for bin in "${bins[@]}"; do
  [[ -x "$PREFIX/bin/$bin" ]] || { echo "install-harnesses: $PREFIX/bin/$bin missing" >&2; exit 1; }
done
echo "harness CLIs installed in $PREFIX/bin"

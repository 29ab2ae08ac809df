#!/usr/bin/env bash
# Install the five npm coding-agent CLIs at pinned versions into a prefix outside /root, so that the
# sandboxed (unprivileged) uids can execute them. Idempotent: a package already present at the
# pinned version is skipped, so a second run takes well under a second.
#
# Usage: scripts/install-harnesses.sh [PREFIX]   (default: $HARNESSRL_NPM_PREFIX or /opt/harnessrl/npm)
#        scripts/install-harnesses.sh --list     (print "harness binary package version registry", one pin a line)
#
# The pins below are the one list of harness versions: scripts/check-harness-versions.sh reads it with
# --list, and a pin is bumped only after that check passes for the new version (docs/harness-versions.md).
# A PyPI harness gets its own virtual environment from scripts/install-recipe-agents.sh, which reads its pin here.
set -euo pipefail

# harness name (as in run configs)   binary   package   pinned version   registry
PINS=(
  "codex           codex   @openai/codex                  0.171.0  npm"
  "claude-code     claude  @anthropic-ai/claude-code      2.1.332  npm"
  "qwen-code       qwen    @qwen-code/qwen-code           0.24.4   npm"
  "pi              pi      @mariozechner/pi-coding-agent  0.73.1   npm"
  "gemini          gemini  @google/gemini-cli             0.61.0   npm"
  "mini-swe-agent  mini    mini-swe-agent                 2.4.6    pypi"
)

if [[ "${1:-}" == "--list" ]]; then
  for pin in "${PINS[@]}"; do
    read -r harness bin package version registry <<<"$pin"
    echo "$harness $bin $package $version $registry"
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
  read -r _harness bin package version registry <<<"$pin"
  [[ "$registry" == npm ]] || continue
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

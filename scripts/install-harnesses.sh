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

# World-readable and executable so the sandbox uids can run the CLIs.
chmod -R a+rX "$PREFIX"
for bin in codex claude qwen pi; do
  [[ -x "$PREFIX/bin/$bin" ]] || { echo "install-harnesses: $PREFIX/bin/$bin missing" >&2; exit 1; }
done
echo "harness CLIs installed in $PREFIX/bin"

#!/usr/bin/env bash
# Install the two agents of the shell-harness recipes (docs/harnesses.md#shell-harness-any-installed-agent),
# each where a user would put it, outside any harnessrl prefix, so the `shell` harness has to mount them (tests/e2e/test_shell_recipes.py):
#   - a Node CLI installed with npm into its own prefix: Qwen Code in $RECIPES/qwen-code;
#   - a Python agent in its own virtual environment: mini-swe-agent in $RECIPES/mini-swe-agent.
# Idempotent (each is skipped when present at its version). The mini-swe-agent venv is also the `mini-swe-agent`
# harness's (services/runner/harnesses/mini_swe_agent.py); its version is that harness's pin in install-harnesses.sh.
#
# Usage: scripts/install-recipe-agents.sh [RECIPES_DIR]   (default: $HARNESSRL_RECIPES_DIR or /opt/harnessrl/recipes)
set -euo pipefail

RECIPES="${1:-${HARNESSRL_RECIPES_DIR:-/opt/harnessrl/recipes}}"
QWEN_VERSION="0.24.4"
MINI_SWE_AGENT_VERSION="$(bash "$(dirname "$0")/install-harnesses.sh" --list | awk '$1 == "mini-swe-agent" { print $4 }')"
[[ -n "$MINI_SWE_AGENT_VERSION" ]] || { echo "install-recipe-agents: no mini-swe-agent pin in install-harnesses.sh" >&2; exit 1; }
mkdir -p "$RECIPES"

qwen_prefix="$RECIPES/qwen-code"
manifest="$qwen_prefix/lib/node_modules/@qwen-code/qwen-code/package.json"
if [[ ! -f "$manifest" ]] || [[ "$(node -p "require('$manifest').version")" != "$QWEN_VERSION" ]]; then
  npm install --global --prefix "$qwen_prefix" --no-audit --no-fund --loglevel=error "@qwen-code/qwen-code@$QWEN_VERSION"
fi

venv="$RECIPES/mini-swe-agent"
if [[ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mini-swe-agent"))' 2>/dev/null)" != "$MINI_SWE_AGENT_VERSION" ]]; then
  # The system Python, so the venv's interpreter is the /usr one the sandbox shows.
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mini-swe-agent==$MINI_SWE_AGENT_VERSION"
fi

# Readable and executable by the sandbox uid, writable by no one else.
chmod -R a+rX,go-w "$RECIPES"
echo "recipe agents installed in $RECIPES: $qwen_prefix/bin/qwen, $venv/bin/mini"

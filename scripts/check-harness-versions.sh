#!/usr/bin/env bash
# Harness-version drift check: install the newest published version of each harness CLI into a scratch npm
# prefix (a PyPI harness: into a scratch virtual environment), run the real-CLI chain test (tests/e2e/test_harness_cli_chain.py: sandboxed CLI, real gateway,
# scripted policy, >= 3 tool calls, one exact chain) against it, and print a Markdown report per harness:
# pinned vs newest version, install and test result, the chain/fork outcome, the first prompt's size, and
# "moved to X" for a package whose releases continue under another name (npm's deprecation of the newest version
# names it, or scripts/install-harnesses.sh --successors declares it).
#
# Usage: scripts/check-harness-versions.sh [HARNESS...]      (default: every pinned harness)
# Env:   PYTHON (default .venv/bin/python), HARNESSRL_TEST_REDIS_DB (the test session's Redis db),
#        KEEP_PREFIX=1 (keep the scratch prefix and report files; their path is printed).
# Needs: npm and pip with their registries reachable, and what the e2e tests need (Postgres, Redis, bubblewrap).
# Exit status: 0 when every checked harness passes on its newest version and none has moved, 1 otherwise.
#
# The pins live in scripts/install-harnesses.sh; bump one only after this check passes for the new version.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON=python3

mapfile -t PINS < <(bash scripts/install-harnesses.sh --list)
declare -A successor_of=()  # package -> the package its releases continue under
while read -r package successor; do successor_of[$package]="$successor"; done < <(bash scripts/install-harnesses.sh --successors)
selected=("$@")

scratch="$(mktemp -d /tmp/harnessrl-versions-XXXXXX)"
chmod 755 "$scratch"  # the sandbox uid runs the CLIs from here
cleanup() { if [[ "${KEEP_PREFIX:-0}" == 1 ]]; then echo "kept $scratch" >&2; else rm -rf "$scratch"; fi; }
trap cleanup EXIT

versions="$scratch/versions.tsv"  # the columns scripts/harness_versions_report.py names (VERSIONS_COLUMNS)
: >"$versions"
harnesses=()
newest_version() {  # registry package -> its newest published version, or nothing
  if [[ "$1" == pypi ]]; then
    "$PYTHON" -m pip index versions --disable-pip-version-check "$2" 2>/dev/null | sed -n 's/^[^ ]* (\(.*\))$/\1/p'
  else
    npm view "$2" dist-tags.latest 2>/dev/null || true
  fi
}

deprecation() {  # registry package version -> npm's deprecation message of that version, on one line, or nothing
  [[ "$1" == npm ]] || return 0
  npm view "$2@$3" deprecated 2>/dev/null | tr '\n\t' '  ' || true
}

install_newest() {  # registry harness package version: into the scratch prefix, or the harness's scratch venv
  if [[ "$1" == pypi ]]; then
    # The system Python, as scripts/install-recipe-agents.sh does: the sandbox shows it.
    /usr/bin/python3 -m venv "$scratch/recipes/$2" &&
      "$scratch/recipes/$2/bin/pip" install --quiet --disable-pip-version-check "$3==$4"
  else
    # As make install does, with its runtime (a harness on Node 22 gets it and its wrapper there too).
    bash scripts/install-harnesses.sh "$scratch/npm" "$2=$4"
  fi
}

for pin in "${PINS[@]}"; do
  read -r harness _bin package pinned registry _runtime <<<"$pin"
  if ((${#selected[@]})) && [[ " ${selected[*]} " != *" $harness "* ]]; then
    continue
  fi
  newest="$(newest_version "$registry" "$package")"
  if [[ -z "$newest" ]]; then
    printf '%s\t%s\t%s\t%s\t%s\t\t%s\n' "$harness" "$package" "$pinned" "?" "registry lookup failed" \
      "${successor_of[$package]:-}" >>"$versions"
    continue
  fi
  deprecated="$(deprecation "$registry" "$package" "$newest")"
  moved="${successor_of[$package]:-}"
  echo "== $harness: pinned $pinned, newest $newest ($registry)${moved:+, moved to $moved}${deprecated:+, deprecated: $deprecated}; installing into $scratch" >&2
  if install_newest "$registry" "$harness" "$package" "$newest" >"$scratch/install-$harness.log" 2>&1; then
    installed="ok"
    harnesses+=("$harness")
  else
    installed="install failed: $(tail -n 3 "$scratch/install-$harness.log" | tr '\n\t' '  ')"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$harness" "$package" "$pinned" "$newest" "$installed" "$deprecated" "$moved" \
    >>"$versions"
done
[[ -s "$versions" ]] || { echo "no pinned harness among: $*" >&2; exit 2; }

if ((${#harnesses[@]})); then
  mkdir -p "$scratch/npm" "$scratch/recipes"
  chmod -R a+rX "$scratch/npm" "$scratch/recipes"
  # One pytest session for all harnesses (the gateway, the test database and the S3 server start once).
  tests=()
  for harness in "${harnesses[@]}"; do
    tests+=("tests/e2e/test_harness_cli_chain.py::test_real_cli_multi_turn_task_forms_one_exact_chain[$harness]")
  done
  echo "== chain test against $scratch/npm and $scratch/recipes: ${harnesses[*]}" >&2
  set +e
  HARNESSRL_NPM_PREFIX="$scratch/npm" HARNESSRL_RECIPES_DIR="$scratch/recipes" \
    HARNESSRL_CHAIN_REPORT="$scratch/chain.jsonl" OMP_NUM_THREADS=1 \
    "$PYTHON" -m pytest "${tests[@]}" -p no:cacheprovider -q --junitxml="$scratch/junit.xml" \
    >"$scratch/pytest.log" 2>&1
  set -e
  tail -n 3 "$scratch/pytest.log" >&2
fi

"$PYTHON" scripts/harness_versions_report.py "$versions" "$scratch/junit.xml" "$scratch/chain.jsonl"

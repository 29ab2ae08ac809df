"""The workspace's git is data, never configuration (issue 36, item 1), and what the agent does to it is its own
outcome (item 5): the runner's patch step runs no command and reads no file the agent's ``.git`` names, reads no
host file through the agent's links, and refuses, as the agent's outcome (reward 0, never retried), a workspace it
cannot diff safely.

Each test runs one attack as the shell harness through the real runner, sandbox and grader (``attack``). Markers
and secrets live in the test's own tmp dir, a host folder the sandbox cannot see: the attack names their host paths
in what it writes, as an agent that guessed them would.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e]

FIX = "printf \"def greet():\\n    return 'hello'\\n\" > greet.py"
WRONG = "printf \"def greet():\\n    return 'hola'\\n\" > greet.py"


def _git_config(text: str) -> str:
    """Shell that appends ``text`` to the workspace's ``.git/config`` (git itself is not needed for it)."""
    return f"cat >> .git/config <<'EOF'\n{text}\nEOF"


def _graded_zero(result) -> None:  # type: ignore[no-untyped-def]
    assert result.outcome != "infrastructure_error", result
    assert result.status == "graded", result
    assert result.reward == 0.0, result
    assert len(result.meta["attempts"]) == 1, result.meta  # no second try


@pytest.mark.parametrize("mechanism", ["fsmonitor", "hook", "filter"])
def test_agent_git_config_runs_nothing_on_the_host(attack, toy_task, tmp_path: Path, mechanism: str) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / f"{mechanism}-marker"
    command = f"id > {marker}"
    script = {
        # core.fsmonitor runs its value through the shell on every index refresh (git add).
        "fsmonitor": _git_config(f"[core]\n\tfsmonitor = {command}; true"),
        # post-index-change runs whenever an index is written (read-tree, add), from core.hooksPath or .git/hooks.
        "hook": (
            "mkdir -p myhooks .git/hooks\n"
            f"printf '#!/bin/sh\\n{command}\\n' > myhooks/post-index-change\n"
            "cp myhooks/post-index-change .git/hooks/post-index-change\n"
            "chmod +x myhooks/post-index-change .git/hooks/post-index-change\n"
            + _git_config("[core]\n\thooksPath = myhooks")
        ),
        # A clean filter named by .gitattributes runs on every file git add hashes.
        "filter": (
            "echo '* filter=evil diff=evil' > .gitattributes\n"
            + _git_config(
                f'[filter "evil"]\n\tclean = {command}; cat\n[diff "evil"]\n\ttextconv = {command}; cat'
            )
        ),
    }[mechanism]

    result = attack(toy_task, f"{script}\n{WRONG}")

    assert not marker.exists(), f"the agent's {mechanism} ran on the host: {marker.read_text()}"
    _graded_zero(result)
    assert b"+    return 'hola'" in (result.patch or b"")  # the agent's work is still its patch


def test_core_worktree_elsewhere_puts_no_host_file_in_the_patch(attack, toy_task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("HOST-SECRET-WORKTREE\n")
    (elsewhere / "secret.txt").chmod(0o600)

    result = attack(toy_task, _git_config(f"[core]\n\tworktree = {elsewhere}"))

    assert b"HOST-SECRET-WORKTREE" not in (result.patch or b"") and b"secret.txt" not in (result.patch or b"")
    _graded_zero(result)


def _host_repo(path: Path) -> str:
    """A repository on the host (outside the workspace) with one commit; returns its hash."""
    env = {"GIT_AUTHOR_NAME": "h", "GIT_AUTHOR_EMAIL": "h@h", "GIT_COMMITTER_NAME": "h", "GIT_COMMITTER_EMAIL": "h@h",
           "HOME": str(path), "PATH": "/usr/bin:/bin"}  # fmt: skip
    path.mkdir()
    (path / "secret.txt").write_text("HOST-REPO-SECRET\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "host"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


@pytest.mark.parametrize("kind", ["gitdir-file", "nested-repo"])
def test_nested_git_pointing_elsewhere_refuses_the_patch(attack, toy_task, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    host_commit = _host_repo(tmp_path / "host-repo")
    script = {
        # git would read this file, then the repository it names, on the host.
        "gitdir-file": f"mkdir -p vendor/lib && echo 'gitdir: {tmp_path}/host-repo/.git' > vendor/lib/.git",
        # a repository inside the workspace, its objects borrowed from the host's (alternates)
        "nested-repo": (
            "git init -q vendor/lib && echo x > vendor/lib/x.txt && "
            f"echo '{tmp_path}/host-repo/.git/objects' > vendor/lib/.git/objects/info/alternates"
        ),
    }[kind]

    result = attack(toy_task, f"{script}\ncd /workspace && {FIX}")

    assert host_commit.encode() not in (result.patch or b""), "git read the host's repository"
    assert b"HOST-REPO-SECRET" not in (result.patch or b"")
    _graded_zero(result)  # the fix is in the refused patch: refused means reward 0
    assert (result.outcome, result.outcome_reason) == ("harness_error", "patch_refused"), result
    assert "vendor/lib/.git" in (result.error or "") and "nested .git" in (result.error or "")
    assert result.patch == b""


def test_links_to_host_files_stay_links(attack, toy_task, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "root-only.txt"
    secret.write_text("HOST-ROOT-ONLY-SECRET\n")
    secret.chmod(0o600)
    _host_repo(tmp_path / "host-repo")
    script = (
        f"ln -s {secret} leak.txt && ln -s /etc/shadow shadow && ln -s {tmp_path} hostdir\n"
        # .git itself a link to a host repository: never followed either
        f"rm -rf .git && ln -s {tmp_path}/host-repo/.git .git\n"
    )

    result = attack(toy_task, script)

    patch = result.patch or b""
    assert (
        b"HOST-ROOT-ONLY-SECRET" not in patch and b"HOST-REPO-SECRET" not in patch and b"root:" not in patch
    )
    assert f"+{secret}".encode() in patch and b"+/etc/shadow" in patch  # the links' text, nothing more
    assert b"new file mode 120000" in patch
    _graded_zero(result)


@pytest.mark.parametrize(
    ("kind", "script", "why"),
    [
        ("fifo", "mkfifo pipe", "pipe: a fifo"),
        (
            "socket",
            "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"",
            "sock: a socket",
        ),
        ("huge", "truncate -s 64M data.bin", "data.bin: 67108864 bytes"),
    ],
)
def test_special_and_huge_files_refuse_the_patch_as_the_agents_outcome(
    attack, toy_task, kind, script, why
) -> None:  # type: ignore[no-untyped-def]
    result = attack(toy_task, f"{script}\n{FIX}")

    _graded_zero(result)
    assert (result.outcome, result.outcome_reason) == ("harness_error", "patch_refused"), result
    assert why in (result.error or ""), result.error
    assert result.meta["attempts"][-1]["patch_refused"].startswith(why.split(":")[0])
    assert result.patch == b""
    # The grader runs no test for a refused patch: its verdict is the refusal, flagged, whatever the reward function.
    assert result.reward_row is not None and result.reward_row["outcome"] == "patch_refused", (
        result.reward_row
    )
    assert result.reward_row["reward_hack_suspected"], result.reward_row


@pytest.mark.parametrize(
    ("script", "reward"),
    [
        (f"rm -rf .git\n{FIX}", 1.0),  # the runner's own copy of the base diffs it: the fix counts
        ("echo garbage > .git/HEAD && rm -rf .git/objects .git/index", 0.0),
    ],
    ids=["deleted-and-fixed", "corrupted"],
)
def test_a_broken_git_dir_is_the_agents_outcome_not_an_infrastructure_error(
    attack, toy_task, script, reward
) -> None:  # type: ignore[no-untyped-def]
    result = attack(toy_task, script)

    assert result.outcome != "infrastructure_error", result
    assert result.status == "graded", result
    assert result.reward == reward, result
    assert result.outcome == ("resolved" if reward else "unresolved"), result
    assert len(result.meta["attempts"]) == 1
    assert b".git" not in (result.patch or b"")

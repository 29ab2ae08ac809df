"""The sandbox for real (bubblewrap as an unprivileged uid): what runs inside, and escape attempts, each contained."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from shared.sandbox import (
    CGROUP_PREFIX,
    ISOLATION_NONE,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
    _bwrap_probe,
    _own_cgroup_v1,
    _sweep_stale_cgroups,
)
from shared.settings import Settings

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]


@pytest.fixture
def limits(box: Sandbox) -> SandboxLimits:
    return box.limits(20).with_(memory_bytes=512 * 1024**2, max_processes=64, file_size_bytes=8 * 1024**2,
                                disk_bytes=32 * 1024**2, tmpfs_bytes=16 * 1024**2)  # fmt: skip


def py(code: str) -> list[str]:
    return ["python", "-c", code]


def survivors(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def wait_no_survivors(marker: str, timeout_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := survivors(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = f"gateway:{self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, *args: object) -> None:
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def gateway_socket(sandbox_dir: Path) -> Iterator[Path]:
    """A tiny HTTP server on a Unix socket, standing in for the gateway's socket."""
    path = sandbox_dir / "gw" / "gateway.sock"
    path.parent.mkdir()
    path.parent.chmod(0o755)
    server = _UnixHTTPServer(str(path), _Hello)
    path.chmod(0o666)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield path
    server.shutdown()
    server.server_close()


def _workspace(sandbox_dir: Path) -> Path:
    return _workspace_named(sandbox_dir, "ws")


def _workspace_named(sandbox_dir: Path, name: str) -> Path:
    ws = sandbox_dir / name
    ws.mkdir()
    return ws


def test_runs_as_unprivileged_uid_in_fresh_namespaces(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits
) -> None:
    code = (
        "import os, socket\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "print(os.getuid(), socket.gethostname(), status['CapEff'].strip(), status['NoNewPrivs'].strip())\n"
        "print(sorted(name for _, name in socket.if_nameindex()))\n"
        "print(len([p for p in os.listdir('/proc') if p.isdigit()]), os.getcwd(), os.environ['HOME'])\n"
        "print(sorted(os.listdir('/')))\n"
        "import subprocess\n"
        "nested = subprocess.run(['unshare', '--user', 'true'], capture_output=True)\n"
        "print('nested userns', 'CREATED' if nested.returncode == 0 else 'refused')\n"
    )
    result = box.run(py(code), _workspace(sandbox_dir), limits=limits)
    assert result.ok, result.stderr
    ident, nets, procs, root, userns = result.stdout.splitlines()
    assert userns == "nested userns refused"
    assert ident == "10001 sandbox 0000000000000000 1"
    assert nets == "['lo']"
    count, cwd, home = procs.split()
    assert int(count) <= 6 and cwd == "/workspace" and home == "/home/sandbox"
    assert root == str(
        sorted(
            ["bin", "dev", "etc", "home", "lib", "lib64", "opt", "proc", "sbin", "tmp", "usr", "workspace"]
        )
    )
    assert result.isolation.startswith("bwrap(uid=10001")


def test_only_the_gateway_is_reachable(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits, gateway_socket: Path
) -> None:
    code = (
        "import socket, urllib.request\n"
        "print(urllib.request.urlopen('http://127.0.0.1:8301/v1/models', timeout=5).read().decode())\n"
        "for host, port in [('127.0.0.1', 6379), ('127.0.0.1', 5432), ('10.0.0.1', 80), ('1.1.1.1', 53)]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2)\n"
        "        print(host, port, 'CONNECTED')\n"
        "    except OSError as exc:\n"
        "        print(host, port, 'blocked', exc.errno)\n"
        "try:\n"
        "    socket.getaddrinfo('pypi.org', 443)\n"
        "    print('dns CONNECTED')\n"
        "except OSError:\n"
        "    print('dns blocked')\n"
    )
    with socket.create_connection(("127.0.0.1", 6379), timeout=2):
        pass  # the host's Redis is up, so "blocked" below is the sandbox's doing
    result = box.run(py(code), _workspace(sandbox_dir), limits=limits, gateway_socket=gateway_socket,
                     gateway_port=8301)  # fmt: skip
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "gateway:/v1/models"
    assert "CONNECTED" not in result.stdout
    assert len([line for line in lines if "blocked" in line]) == 5


def test_an_agents_shell_runs_the_tasks_tests_though_the_harness_sets_its_own_path(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits
) -> None:
    """Every harness passes a ``PATH`` of its own (``base_env``: its npm prefix and the system's); the commands its
    agent runs must still find the sandbox venv's ``python`` with pytest, as the grader's test run does. Before,
    every test step of a demonstration answered ``python: not found`` (exit 127)."""
    ws = _workspace(sandbox_dir)
    (ws / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    harness_path = "/opt/harnessrl/npm/bin:/usr/local/bin:/usr/bin:/bin"
    shell = ["/bin/sh", "-c", "python -m pytest -q -p no:cacheprovider test_ok.py; echo PATH=$PATH"]
    result = box.run(shell, ws, limits=limits, env={"PATH": harness_path})
    assert result.ok and "1 passed" in result.stdout, (result.stdout, result.stderr)
    assert f"PATH=/opt/harnessrl/npm/bin:{box.venv}/bin:/usr/local/bin:/usr/bin:/bin" in result.stdout


def test_writes_outside_the_workspace_fail(box: Sandbox, sandbox_dir: Path, limits: SandboxLimits) -> None:
    token = secrets.token_hex(4)
    outside = sandbox_dir / f"outside-{token}"
    targets = [
        "/usr/x",
        "/etc/x",
        f"{box.venv}/x",
        "/tmp/t",
        f"{REPO_ROOT}/x",
        str(outside),
        "/workspace/inside",
    ]
    code = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print(path, 'written')\n"
        "    except OSError as exc:\n"
        "        print(path, 'refused', type(exc).__name__)\n"
    )
    ws = _workspace(sandbox_dir)
    result = box.run(["python", "-c", code, *targets], ws, limits=limits)
    assert result.ok, result.stderr
    written = {line.split()[0] for line in result.stdout.splitlines() if line.endswith("written")}
    assert written == {"/tmp/t", "/workspace/inside"}  # a private tmpfs and the workspace
    assert (ws / "inside").read_text() == "x" and (ws / "inside").stat().st_uid == 10001
    assert not outside.exists() and not Path(f"{box.venv}/x").exists() and not (REPO_ROOT / "x").exists()


def test_files_outside_the_workspace_cannot_be_read(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits
) -> None:
    secret = sandbox_dir / "secret.txt"
    secret.write_text("s3cr3t")
    secret.chmod(0o644)
    targets = [
        str(secret),
        f"{REPO_ROOT}/pyproject.toml",
        "/root/.bashrc",
        "/etc/shadow",
        f"/proc/{os.getpid()}/environ",
    ]
    code = (
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        print(path, 'READ', open(path).read()[:20])\n"
        "    except OSError as exc:\n"
        "        print(path, 'refused', type(exc).__name__)\n"
    )
    result = box.run(["python", "-c", code, *targets], _workspace(sandbox_dir), limits=limits)
    assert result.ok, result.stderr
    assert "READ" not in result.stdout and "s3cr3t" not in result.stdout
    assert result.stdout.count("refused") == len(targets)


def test_fork_bomb_is_contained(box: Sandbox, sandbox_dir: Path, limits: SandboxLimits) -> None:
    token = secrets.token_hex(6)
    ws = _workspace(sandbox_dir)
    (ws / f"bomb_{token}.sh").write_text("bomb() { bomb | bomb & }; bomb; sleep 60\n")
    outcome: list[SandboxResult] = []
    started = time.monotonic()
    bomb = threading.Thread(
        target=lambda: outcome.append(
            box.run(["bash", f"bomb_{token}.sh"], ws, limits=limits.with_(timeout_s=5))
        )
    )
    bomb.start()
    time.sleep(1.5)
    # Meanwhile another sandbox of the same uid still starts processes: the cap is per sandbox.
    neighbour = box.run(["bash", "-c", "for i in 1 2 3 4 5; do (true) & done; wait; echo fine"],
                        _workspace_named(sandbox_dir, "ws2"), limits=limits)  # fmt: skip
    bomb.join()
    # With per-sandbox cgroups the first refused fork ends the bomb (``processes``); without, the wall clock does.
    assert outcome[0].killed_reason == ("processes" if box.cgroups else "timeout"), outcome[0].stderr[-500:]
    assert time.monotonic() - started < 20
    assert wait_no_survivors(token) == []
    if box.cgroups:
        assert neighbour.ok and neighbour.stdout == "fine\n", neighbour.stderr


def test_setsid_children_do_not_survive_the_time_limit(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits
) -> None:
    token = secrets.token_hex(6)
    code = (
        "import os, signal, subprocess, sys, time\n"
        "subprocess.Popen(['setsid', 'bash', '-c', 'trap \"\" TERM HUP; exec -a m_TOKEN sleep 1000'])\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        os.execvp('bash', ['bash', '-c', 'exec -a m_TOKEN sleep 1000'])\n"
        "    os._exit(0)\n"
        "time.sleep(1000)\n"
    ).replace("TOKEN", token)
    result = box.run(py(code), _workspace(sandbox_dir), limits=limits.with_(timeout_s=2))
    assert result.timed_out and result.killed_reason == "timeout"
    assert 2 <= result.duration_s < 6
    assert wait_no_survivors(f"m_{token}") == []


def test_memory_limit(box: Sandbox, sandbox_dir: Path, limits: SandboxLimits) -> None:
    result = box.run(py("x = bytearray(1024**3)\nprint('allocated')"), _workspace(sandbox_dir),
                     limits=limits.with_(memory_bytes=256 * 1024**2))  # fmt: skip
    assert result.exit_code != 0 and "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


def test_resident_memory_is_capped_by_the_sandbox_cgroup(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits
) -> None:
    # A generous address-space limit, so the memory cgroup is what stops a process touching 1 GiB.
    if not box.cgroups:
        pytest.fail(f"per-sandbox cgroups are not usable on this machine (isolation: {box.isolation})")
    assert box.isolation.endswith("cgroup=pids,memory")
    code = "x = bytearray(1024**3)\nfor i in range(0, len(x), 4096): x[i] = 1\nprint('touched')"
    roomy = limits.with_(memory_bytes=4 * 1024**3, resident_memory_bytes=2 * 1024**3)
    result = box.run(py(code), _workspace(sandbox_dir), limits=roomy)
    assert result.ok and "touched" in result.stdout, result.stderr
    capped = box.run(
        py(code),
        _workspace_named(sandbox_dir, "ws2"),
        limits=roomy.with_(resident_memory_bytes=256 * 1024**2),
    )
    assert capped.killed_reason == "memory" and capped.exit_code == 128 + 9 and "touched" not in capped.stdout


def test_stale_sandbox_cgroups_are_swept(box: Sandbox) -> None:
    # What a worker SIGKILLed mid-run leaves behind: an empty cgroup nobody will remove.
    if not box.cgroups:
        pytest.fail(f"per-sandbox cgroups are not usable on this machine (isolation: {box.isolation})")
    parent = _own_cgroup_v1("pids")
    assert parent is not None
    stale, fresh = (
        parent / f"{CGROUP_PREFIX}stale{secrets.token_hex(3)}",
        parent / f"{CGROUP_PREFIX}fresh{secrets.token_hex(3)}",
    )
    stale.mkdir()
    fresh.mkdir()
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    try:
        _sweep_stale_cgroups()
        assert not stale.exists() and fresh.exists()  # a young one may be a sandbox being set up right now
    finally:
        for directory in (stale, fresh):
            if directory.exists():
                directory.rmdir()


def test_cpu_limit(box: Sandbox, sandbox_dir: Path, limits: SandboxLimits) -> None:
    result = box.run(
        py("while True: pass"), _workspace(sandbox_dir), limits=limits.with_(cpu_s=1, timeout_s=30)
    )
    # bwrap reports a signal death inside as 128 + signal: SIGKILL or SIGXCPU, long before the wall clock.
    assert result.exit_code in (128 + 9, 128 + 24) and not result.timed_out
    assert result.duration_s < 10


def test_filling_the_disk_is_stopped(box: Sandbox, sandbox_dir: Path, limits: SandboxLimits) -> None:
    ws = _workspace(sandbox_dir)
    many_files = "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 1024**2)\n    i += 1\n"
    result = box.run(py(many_files), ws, limits=limits)
    assert result.killed_reason == "disk" and not result.timed_out
    used = sum(p.stat().st_size for p in ws.iterdir())
    # The walks come sooner as usage grows fast (DiskWatch): stopped within tens of MiB of the limit (32 MiB).
    assert used < 128 * 1024**2

    ws = sandbox_dir / "ws2"
    ws.mkdir()
    big_file = box.run(py("open('big', 'wb').write(b'x' * 64 * 1024**2)"), ws, limits=limits)
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of the signal killing it.
    assert big_file.exit_code != 0 and "File too large" in big_file.stderr
    assert (ws / "big").stat().st_size <= limits.file_size_bytes

    fill_tmp = "for i in range(16):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * 4 * 1024**2)"
    tmp_fill = box.run(py(fill_tmp), ws, limits=limits)  # /tmp is a tmpfs capped at 16 MiB
    assert tmp_fill.exit_code != 0 and "No space left on device" in tmp_fill.stderr


def test_timeout_and_bounded_output(box: Sandbox, sandbox_dir: Path, limits: SandboxLimits) -> None:
    ws = _workspace(sandbox_dir)
    chatty = box.run(
        py("for i in range(200000): print('line', i)"), ws, limits=limits.with_(output_bytes=4096)
    )
    assert chatty.ok and chatty.output_truncated
    assert len(chatty.stdout) <= 4096 and chatty.stdout.endswith("line 199999\n")
    slow = box.run(["sleep", "30"], ws, limits=limits.with_(timeout_s=1))
    assert slow.timed_out and slow.exit_code == -9 and slow.duration_s < 5
    assert "killed (timeout)" in slow.stderr


def test_unreachable_paths_are_refused_before_running(
    box: Sandbox, sandbox_dir: Path, limits: SandboxLimits
) -> None:
    private = sandbox_dir / "private"
    (private / "ws").mkdir(parents=True)
    private.chmod(0o700)
    with pytest.raises(SandboxError, match="not reachable by sandbox uid 10001"):
        box.run(["true"], private / "ws", limits=limits)
    with pytest.raises(SandboxError, match="needs gateway_port"):
        box.run(["true"], _workspace(sandbox_dir), limits=limits, gateway_socket=sandbox_dir)


def test_without_bubblewrap_it_refuses_unless_unsafe_is_allowed(
    sandbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_tools = sandbox_dir / "bin"
    no_tools.mkdir()
    for tool in ("python3", "bash", "true"):
        os.symlink(shutil.which(tool) or f"/usr/bin/{tool}", no_tools / tool)
    monkeypatch.setenv("PATH", str(no_tools))  # a machine without bwrap and setpriv
    _bwrap_probe.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="HARNESSRL_ALLOW_UNSANDBOXED"):
            Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]
        unsafe = Sandbox(Settings(_env_file=None, allow_unsandboxed=True))  # type: ignore[call-arg]
        assert unsafe.isolation == ISOLATION_NONE == "none (unsafe)"
        ws = _workspace(sandbox_dir)
        result = unsafe.run(["bash", "-c", "pwd; echo $HOME"], ws, limits=unsafe.limits(10))
        assert result.ok and result.isolation == "none (unsafe)"
        assert result.stdout.splitlines()[0] == str(ws)
    finally:
        _bwrap_probe.cache_clear()

"""The sandbox's resource walls, attacked from inside (issue 36, build item 4): every filesystem the agent can write
has a size (bwrap's root and /dev are read-only, /dev/shm, /tmp and a throwaway HOME are sized tmpfs), and a
seccomp filter refuses with EPERM the system calls an agent never needs, while ordinary work (Python, git, Node,
threads, subprocesses) still runs.

The attack through the real runner and grader (``attack``) records what it saw in ``walls.txt`` in the workspace,
so it travels in the stored patch; the finer walls run through ``Sandbox.run`` directly (no runner needed)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
from pathlib import Path

import pytest

from shared.sandbox import Sandbox
from shared.settings import Settings

pytestmark = [pytest.mark.e2e]

MiB = 1024**2
# System call numbers written out here, not taken from shared.seccomp, so a wrong table there fails this test.
NUMBERS = {
    "x86_64": {
        "init_module": 175, "finit_module": 313, "delete_module": 176, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 246, "kexec_file_load": 320, "mount": 165,
        "umount2": 166, "pivot_root": 155, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
        "fsconfig": 431, "fspick": 433, "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "syslog": 103, "lookup_dcookie": 212,
        "fanotify_init": 300, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "setns": 308,
        "unshare": 272, "ptrace": 101, "process_vm_readv": 310,
    },
    "aarch64": {
        "init_module": 105, "finit_module": 273, "delete_module": 106, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 104, "kexec_file_load": 294, "mount": 40,
        "umount2": 39, "pivot_root": 41, "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsmount": 432,
        "fsconfig": 431, "fspick": 433, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "syslog": 116, "lookup_dcookie": 18,
        "fanotify_init": 262, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171, "setns": 268,
        "unshare": 97, "ptrace": 117, "process_vm_readv": 270,
    },
}  # fmt: skip
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine())

# Runs inside: each call with arguments that, without the filter, would succeed or fail with another errno than
# EPERM where the kernel allows (keyctl reads the session keyring's id, open_tree opens "/", ptrace targets a pid
# that does not exist, process_vm_readv reads nothing from itself, unshare asks for a user namespace, ...).
# Prints one JSON object: {name: [return value, errno]}.
SYSCALL_PROBE = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
numbers = json.loads(sys.argv[1])
S, L = ctypes.c_char_p, ctypes.c_long
AT_FDCWD = -100
calls = {
    "init_module": (None, 0, S(b"")), "finit_module": (-1, S(b""), 0), "delete_module": (S(b"nope"), 0),
    "bpf": (0, None, 0), "perf_event_open": (None, 0, -1, -1, 0), "userfaultfd": (1,),
    "keyctl": (0, -3, 0), "add_key": (S(b"user"), S(b"k"), S(b"v"), 1, -3), "request_key": (S(b"user"), S(b"k"), None, 0),
    "io_uring_setup": (1, None), "io_uring_enter": (-1, 0, 0, 0, None, 0), "io_uring_register": (-1, 0, None, 0),
    "kexec_load": (0, 0, None, 0), "kexec_file_load": (-1, -1, 0, None, 0),
    "mount": (S(b"none"), S(b"/tmp"), S(b"tmpfs"), 0, None), "umount2": (S(b"/tmp"), 0), "pivot_root": (S(b"/"), S(b"/")),
    "move_mount": (-1, S(b""), -1, S(b""), 0), "open_tree": (AT_FDCWD, S(b"/"), 0), "fsopen": (S(b"tmpfs"), 0),
    "fsmount": (-1, 0, 0), "fsconfig": (-1, 0, None, None, 0), "fspick": (AT_FDCWD, S(b"/"), 0),
    "swapon": (S(b"/nope"), 0), "swapoff": (S(b"/nope"),), "reboot": (0, 0, 0, None), "acct": (None,),
    "quotactl": (0, None, 0, None), "open_by_handle_at": (-1, None, 0),
    "name_to_handle_at": (AT_FDCWD, S(b"/"), None, None, 0), "syslog": (10, None, 0), "lookup_dcookie": (0, None, 0),
    "fanotify_init": (0, 0), "settimeofday": (None, None), "clock_settime": (0, None), "adjtimex": (None,),
    "setns": (-1, 0), "unshare": (0x10000000,), "ptrace": (16, 999999, 0, 0),
    "process_vm_readv": (os.getpid(), None, 0, None, 0, 0),
}
out = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    rc = libc.syscall(L(numbers[name]), *[L(a) if isinstance(a, int) else a for a in args])
    out[name] = [rc, ctypes.get_errno()]
print(json.dumps(out))
"""


def _expect_denied(observed: dict[str, list[int]]) -> None:
    wrong = {name: rc_errno for name, rc_errno in observed.items() if rc_errno != [-1, 1]}
    assert not wrong, f"not refused with EPERM: {wrong}"
    assert set(observed) == set(NUMBERS[ARCH])


@pytest.fixture(scope="module")
def box() -> Sandbox:
    settings = Settings(_env_file=None, sandbox_tmpfs_bytes=8 * MiB, sandbox_shm_bytes=4 * MiB)  # type: ignore[call-arg]
    return Sandbox(settings)


def _limits(box: Sandbox):  # type: ignore[no-untyped-def]
    # Files may be larger than every tmpfs, so what stops a writer below is the filesystem's size.
    return box.limits(60).with_(file_size_bytes=64 * MiB, disk_bytes=256 * MiB)


def _written_until_full(box: Sandbox, workspace: Path, path: str, max_bytes: int) -> tuple[int, str]:
    """Bytes a writer got into ``path`` inside the sandbox before the filesystem refused, and the error."""
    code = (
        "import sys\nn = 0\ntry:\n    with open(sys.argv[1], 'wb') as f:\n"
        "        while n < int(sys.argv[2]):\n            f.write(b'x' * 65536); f.flush(); n += 65536\n"
        "    print(n, 'no error')\nexcept OSError as e:\n    print(n, e.strerror)\n"
    )
    result = box.run(["python", "-c", code, path, str(max_bytes)], workspace, limits=_limits(box))
    written, _, error = result.stdout.strip().partition(" ")
    assert written.isdigit(), result
    return int(written), error


def test_dev_and_root_are_not_writable(box: Sandbox, sandbox_dir: Path) -> None:
    marker = f"harnessrl-wall-{os.getpid()}"
    script = (
        f"for p in /dev/{marker} /{marker} /run/{marker}; do "
        'if echo x > $p 2>/dev/null; then echo "$p written"; else echo "$p refused"; fi; done; '
        "echo ok > /dev/null && echo devnull-ok; head -c 4 /dev/urandom | wc -c"
    )
    result = box.run(["sh", "-c", script], sandbox_dir, limits=_limits(box))
    assert result.ok, result
    assert result.stdout.split("\n")[:3] == [
        f"/dev/{marker} refused",
        f"/{marker} refused",
        f"/run/{marker} refused",
    ]
    assert "devnull-ok" in result.stdout and result.stdout.strip().endswith("4")
    assert not Path(f"/dev/{marker}").exists() and not Path(f"/{marker}").exists()  # the host is untouched


def test_harness_installs_bound_into_the_sandbox_cannot_be_changed_from_inside(
    box: Sandbox, sandbox_dir: Path
) -> None:
    """The harness installs a rollout sees (the npm prefix with its Node 22, mini-swe-agent's venv) are shared by
    every rollout: an agent that rewrote one would run its code in the next rollouts. Inside they are read-only."""
    from services.runner.harnesses.base import npm_prefix
    from services.runner.harnesses.mini_swe_agent import mini_swe_agent_venv

    installs = [p for p in (npm_prefix(), mini_swe_agent_venv()) if p.is_dir()]
    if not installs:
        pytest.skip("no harness install on this machine (make install puts them in place)")
    targets = [
        next(p for p in (root / "node22" / "bin" / "node", root / "bin" / "mini", root / "bin") if p.exists())
        for root in installs
    ]
    before = {t: (t.stat().st_mtime_ns, t.stat().st_size) for t in targets}
    script = (
        'for p in "$@"; do [ -e "$p" ] || { echo "$p missing"; continue; }; '
        'if [ -d "$p" ]; then t="$p/planted"; else t="$p"; fi; '
        'if (echo x >> "$t") 2>/dev/null || touch "$p.planted" 2>/dev/null; then echo "$p written"; '
        'else echo "$p refused"; fi; done'
    )
    result = box.run(["sh", "-c", script, "sh", *map(str, targets)], sandbox_dir, limits=_limits(box),
                     ro_binds=installs)  # fmt: skip
    assert result.ok, result
    assert result.stdout.split() == [w for t in targets for w in (str(t), "refused")], result
    assert {t: (t.stat().st_mtime_ns, t.stat().st_size) for t in targets} == before  # the host is untouched
    assert not any(Path(f"{t}.planted").exists() or (t / "planted").exists() for t in targets)


@pytest.mark.parametrize(("path", "size_bytes"), [("/dev/shm/fill", 4 * MiB), ("/tmp/fill", 8 * MiB),
                                                  ("/home/sandbox/fill", 8 * MiB)])  # fmt: skip
def test_every_tmpfs_stops_at_its_size(box: Sandbox, sandbox_dir: Path, path: str, size_bytes: int) -> None:
    written, error = _written_until_full(box, sandbox_dir, path, 32 * MiB)
    assert error == "No space left on device", (written, error)
    assert size_bytes - MiB <= written <= size_bytes, written


def test_denied_system_calls_get_eperm(box: Sandbox, sandbox_dir: Path) -> None:
    if ARCH not in NUMBERS:
        pytest.skip(f"no syscall numbers for {ARCH}")
    result = box.run(
        ["python", "-c", SYSCALL_PROBE, json.dumps(NUMBERS[ARCH])], sandbox_dir, limits=_limits(box)
    )
    assert result.ok, result
    _expect_denied(json.loads(result.stdout))
    status = box.run(["grep", "^Seccomp:", "/proc/self/status"], sandbox_dir, limits=_limits(box))
    assert status.stdout.split() == ["Seccomp:", "2"], status  # a filter is installed
    assert "seccomp=on" in box.isolation


def test_another_abi_is_killed(box: Sandbox, sandbox_dir: Path) -> None:
    if ARCH != "x86_64":
        pytest.skip("the x32 ABI exists on x86_64 only")
    code = "import ctypes; print(ctypes.CDLL(None).syscall(0x40000000 | 39))"  # getpid through the x32 ABI
    result = box.run(["sh", "-c", f"python -c '{code}'; echo status=$?"], sandbox_dir, limits=_limits(box))
    assert result.stdout.strip().splitlines()[-1] == "status=159", result  # 128 + SIGSYS


def test_ordinary_work_still_runs(box: Sandbox, sandbox_dir: Path) -> None:
    (sandbox_dir / "a.py").write_text("print('a')\n")
    python = (
        "import concurrent.futures, subprocess, unittest.mock, multiprocessing, os\n"
        "with concurrent.futures.ThreadPoolExecutor(8) as pool: print(sum(pool.map(lambda x: x * x, range(100))))\n"
        "with multiprocessing.Pool(2) as pool: print(sum(pool.map(abs, range(-10, 0))))\n"
        "print(subprocess.run(['python', 'a.py'], capture_output=True, text=True).stdout.strip())\n"
        "print(os.unshare(os.CLONE_FS) if hasattr(os, 'unshare') else None)\n"
    )
    script = (
        f'python -c "{python}" && git init -q && git add a.py && '
        "git -c user.email=a@b -c user.name=a commit -qm one && git log --oneline | wc -l"
    )
    result = box.run(["sh", "-c", script], sandbox_dir, limits=_limits(box))
    assert result.ok, result
    assert result.stdout.split() == ["328350", "55", "a", "None", "1"], result
    if shutil.which("node") is None:
        return
    node = (
        "const fs = require('fs'), cp = require('child_process'), { Worker } = require('worker_threads');"
        "fs.writeFileSync('/tmp/n.txt', 'node'); fs.promises.readFile('/tmp/n.txt', 'utf8').then(t => {"
        "  const w = new Worker('require(\"worker_threads\").parentPort.postMessage(6 * 7)', { eval: true });"
        "  w.on('message', m => console.log(t, m, cp.execSync('echo child').toString().trim())); });"
    )
    limits = _limits(box).with_(memory_bytes=16 * 1024**3)  # V8 reserves far more address space than it uses
    result = box.run(["node", "-e", node], sandbox_dir, limits=limits)
    assert result.ok, result
    assert result.stdout.strip() == "node 42 child", result


def test_attack_through_the_runner_meets_the_walls(attack, toy_task) -> None:  # type: ignore[no-untyped-def]
    """A harness that tries to fill /dev, bwrap's root and /dev/shm and calls the denied system calls, through the
    real runner and grader: every attempt refused (what it saw travels in the patch), the bug untouched, reward
    0, and the host's /dev untouched."""
    if ARCH not in NUMBERS:
        pytest.skip(f"no syscall numbers for {ARCH}")
    marker = f"harnessrl-attack-{os.getpid()}"
    script = (
        f"cat > /tmp/probe.py <<'EOF'\n{SYSCALL_PROBE}\nEOF\n"
        f"python3 /tmp/probe.py '{json.dumps(NUMBERS[ARCH])}' >> walls.txt 2>&1\n"
        f"(echo x > /dev/{marker} && echo dev=written || echo dev=refused) >> walls.txt 2>/dev/null\n"
        f"(echo x > /{marker} && echo root=written || echo root=refused) >> walls.txt 2>/dev/null\n"
        # 80 MiB into /dev/shm: the default size is 64 MiB
        "dd if=/dev/zero of=/dev/shm/fill bs=1M count=80 2>/dev/null; "
        "echo shm_mib=$(( $(stat -c %s /dev/shm/fill) / 1048576 )) >> walls.txt\n"
        "grep ^Seccomp: /proc/self/status | tr -d '\\t ' >> walls.txt\n"
    )
    result = attack(toy_task, script)
    assert result.status == "graded", result.error
    assert result.reward == 0.0, result
    patch = (result.patch or b"").decode()
    seen = [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert "dev=refused" in seen and "root=refused" in seen, seen
    assert "shm_mib=64" in seen, seen
    assert "Seccomp:2" in seen, seen
    observed = json.loads(next((line for line in seen if line.startswith("{")), "null"))
    assert observed is not None, patch
    _expect_denied(observed)
    assert not Path(f"/dev/{marker}").exists() and not Path(f"/{marker}").exists()


def _unified_root() -> Path | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        if tail.split(" ", 1)[0] == "cgroup2" and not (Path(fields.split()[4]) / "cgroup.type").exists():
            return Path(fields.split()[4])
    return None


def test_cgroup_v2_sandbox_cgroups_on_a_real_cgroup2(sandbox_dir: Path) -> None:
    """The v2 path's mechanics on the host's real cgroup2, with whatever controller it has free of v1 (hugetlb on
    a hybrid host, where memory and pids are bound to v1; the memory.max / pids.max writes and the events files of
    those two controllers cannot be exercised there): a worker in a non-root cgroup moves into the workers leaf,
    enables the controller for its children, and a sandbox's command runs in a cgroup of its own, removed after."""
    import secrets
    import time

    from shared.sandbox import CGROUP_PREFIX, CGROUP_V2_WORKERS, CgroupSupport, _cgroup2_base

    root = _unified_root()
    if os.geteuid() != 0 or root is None:
        pytest.skip("needs root and the root of a cgroup2 hierarchy")
    free = sorted(set((root / "cgroup.controllers").read_text().split()))
    if not free:
        pytest.skip("no controller of the cgroup2 hierarchy is free of v1")
    controller = free[0]
    enabled_before = controller in (root / "cgroup.subtree_control").read_text().split()
    own = root / f"harnessrl-test-{secrets.token_hex(4)}"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the "worker": waits until it sits in ``own``, then sets up and runs one sandbox
        os.close(write_fd)
        os.read(read_fd, 1)
        code = 1
        try:
            base = _cgroup2_base((controller,))
            assert base == own, base
            assert (own / CGROUP_V2_WORKERS / "cgroup.procs").read_text().split() == [str(os.getpid())]
            assert controller in (own / "cgroup.subtree_control").read_text().split()
            assert _cgroup2_base((controller,)) == own  # a second worker (or this one again) finds it ready
            box = Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]
            box.cgroup_support = CgroupSupport(version=2, base=own, controllers=(controller,))
            seen: list[list[str]] = []

            def look() -> None:
                seen.append(
                    [d.name for d in own.glob(f"{CGROUP_PREFIX}*") if (d / "cgroup.procs").read_text()]
                )

            result = box.run(["sleep", "2.5"], sandbox_dir, limits=box.limits(30), stop_check=look)  # type: ignore[arg-type,func-returns-value]
            assert result.ok, result
            assert any(len(names) == 1 for names in seen), seen  # the command ran in a sandbox cgroup
            deadline = time.monotonic() + 10
            while list(own.glob(f"{CGROUP_PREFIX}*")) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not list(own.glob(f"{CGROUP_PREFIX}*"))  # and it was removed
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        os._exit(code)
    os.close(read_fd)
    try:
        if not enabled_before:
            (root / "cgroup.subtree_control").write_text(f"+{controller}")
        own.mkdir()
        (own / "cgroup.procs").write_text(str(pid))
        os.write(write_fd, b"x")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(write_fd)
        for directory in sorted(own.glob("*/"), reverse=True):
            if (directory / "cgroup.procs").exists():
                with contextlib.suppress(OSError):
                    directory.rmdir()
        with contextlib.suppress(OSError):
            own.rmdir()
        if not enabled_before:
            with contextlib.suppress(OSError):
                (root / "cgroup.subtree_control").write_text(f"-{controller}")


def test_no_per_sandbox_cgroup_is_said_at_start(sandbox_dir: Path) -> None:
    """A worker that is not root, on a host that delegated it no cgroup (this one: the v1 hierarchies need root,
    the cgroup2 hierarchy lacks memory and pids), still runs sandboxes and logs one warning at start that resident
    memory is not capped per sandbox."""
    import logging

    from shared import sandbox as sandbox_module

    if os.geteuid() != 0:
        pytest.skip("needs root to become the unprivileged sandbox uid")
    import tempfile

    os.chown(sandbox_dir, 10001, 10001)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        report: dict[str, object] = {}
        tempfile.tempdir = str(sandbox_dir)  # this host's /tmp may not be writable by the sandbox uid
        try:
            os.setgroups([])
            os.setresgid(10001, 10001, 10001)
            os.setresuid(10001, 10001, 10001)
            sandbox_module._cgroup_support.cache_clear()
            sandbox_module._bwrap_probe.cache_clear()
            records: list[str] = []

            class Keep(logging.Handler):
                def emit(self, record: logging.LogRecord) -> None:
                    records.append(record.getMessage())

            sandbox_module.log.addHandler(Keep())
            box = Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]
            report = {"isolation": box.isolation, "cgroups": box.cgroups, "warnings": records}
            report["stdout"] = box.run(["id", "-u"], sandbox_dir, limits=box.limits(30)).stdout.strip()
        except BaseException as exc:  # reported to the parent
            import traceback

            report["error"] = repr(exc) + traceback.format_exc()
        os.write(write_fd, json.dumps(report).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        report = json.loads(pipe.read() or b"{}")
    os.waitpid(pid, 0)
    assert "error" not in report, report
    assert report["cgroups"] is False and "cgroup=" not in str(report["isolation"]), report
    assert "seccomp=on" in str(report["isolation"]), report
    warnings = [w for w in report["warnings"] if "NOT capped per sandbox" in w]  # type: ignore[union-attr]
    assert len(warnings) == 1 and "RLIMIT_AS" in warnings[0], report
    assert report["stdout"] == "10001", report


def test_a_host_without_a_seccomp_filter_refuses_unless_allowed(monkeypatch, sandbox_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """An architecture with no syscall table (here: the kernel's name faked as riscv64) gets no filter: the sandbox
    refuses to start, and with ``sandbox_allow_no_seccomp`` it runs, saying ``seccomp=off (unsafe)``."""
    from shared.sandbox import SandboxUnavailable

    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    with pytest.raises(SandboxUnavailable, match="riscv64.*HARNESSRL_SANDBOX_ALLOW_NO_SECCOMP"):
        Sandbox(Settings(_env_file=None))  # type: ignore[call-arg]
    box = Sandbox(Settings(_env_file=None, sandbox_allow_no_seccomp=True))  # type: ignore[call-arg]
    assert "seccomp=off (unsafe)" in box.isolation
    result = box.run(["grep", "^Seccomp:", "/proc/self/status"], sandbox_dir, limits=_limits(box))
    assert result.stdout.split() == ["Seccomp:", "0"], result

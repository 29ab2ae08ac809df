"""The sandbox: run one untrusted command (a harness, a test suite) confined, and report what happened.

Used by the runner (harnesses) and the grader (test runs); neither imports the other, both import this.

Isolation, when bubblewrap is installed (``ISOLATION_BWRAP``; docs/design.md#sandbox):
- ``setpriv`` drops to ``settings.sandbox_uid`` (no groups, no capabilities, no-new-privs) before ``bwrap``
  creates fresh user, pid, net, mount, ipc, uts and cgroup namespaces; nested user namespaces are disabled
  (``--disable-userns``: no second, capability-holding namespace for a kernel exploit to start from). Root
  inside a user namespace would map to host root and make RLIMIT_NPROC void, hence the unprivileged uid.
- Filesystem: /usr, /etc and the sandbox venv read-only (the venv is bound at its host path so its script
  shebangs work); the workspace at ``/workspace`` and HOME at ``/home/sandbox`` are the only writable host
  paths; /tmp (and HOME when none is given) and /dev/shm are private, size-capped tmpfs. bwrap's own root and
  its /dev are tmpfs without a size: both are remounted read-only once set up, so every filesystem the command
  can write to has a size (the device nodes, /dev/pts and /proc stay usable). Nothing else of the host exists
  inside.
- seccomp (``shared.seccomp``; the isolation string says ``seccomp=on``): a filter bwrap installs before the
  command runs refuses with EPERM what an agent never needs (kernel modules, bpf, perf_event_open, userfaultfd,
  keyrings, io_uring, mounts, kexec, swap, the host clock, file handles, ptrace, namespaces, ...) and kills a
  process that makes a system call through another ABI. Where bwrap or the architecture cannot take the filter,
  ``Sandbox`` refuses to start unless ``settings.sandbox_allow_no_seccomp`` (then ``seccomp=off (unsafe)``).
- Network: only the namespace's own loopback. With ``gateway_socket`` the gateway's Unix socket is bound at
  ``/run/harnessrl/gateway.sock`` and a small forwarder (``_FORWARDER``) started inside listens on
  ``127.0.0.1:<gateway_port>``, so ``http://127.0.0.1:<port>`` reaches the gateway and nothing else does.
- rlimits (inherited by everything inside): CPU seconds, address space, file size, processes, open files.
- cgroups (the isolation string then ends in ``CGROUP_SUFFIX``): a pids and a memory cgroup per sandbox, nested
  under the worker's own, so the process cap holds per sandbox (RLIMIT_NPROC counts all sandboxes of the uid
  together) and resident memory (swap included) is capped; an OOM kill inside is reported as
  ``killed_reason == "memory"``, and a fork refused at the process cap kills the tree with
  ``killed_reason == "processes"`` (without cgroups the cap is RLIMIT_NPROC alone, and reaching it is not
  reported). Two ways, the first that works here: cgroup v2 (``_SandboxCgroupsV2``: the unified hierarchy has
  the ``memory`` and ``pids`` controllers and this process may manage its own cgroup, as root or because the
  host delegated it to the worker's user), or v1 (``_SandboxCgroups``: root, with the v1 ``pids`` and
  ``memory`` hierarchies). With neither, ``Sandbox`` logs one warning at start: resident memory is then not
  capped per sandbox (only the address space, by RLIMIT_AS).
- Wall clock: on timeout the bwrap process is SIGKILLed; ``--die-with-parent`` then kills the namespace's
  init and the kernel kills every process in the PID namespace, including ``setsid``/double-forked ones.
- Disk: a single file is capped by RLIMIT_FSIZE; total usage of the writable host dirs is watched while the
  command runs, and the tree is killed when it passes ``disk_bytes`` (``killed_reason == "disk"``). The walks
  come sooner the faster usage grows (``DiskWatch``), so a writer at page-cache speed is stopped within a few
  tens of MiB of the limit, not after a fixed interval's worth of writes.

Without bubblewrap (or if it cannot create namespaces here) ``Sandbox`` refuses to start
(``SandboxUnavailable``) unless ``settings.allow_unsandboxed``; then commands run as the current user in their
own session with the same rlimits and tree-kill-by-process-group, and the isolation reported is
``ISOLATION_NONE`` so the rollout records that it was unsafe.

Host paths bound into the sandbox must be reachable by the sandbox uid (every parent directory searchable):
bwrap resolves them after dropping privileges, so nothing under root's 0700 home can be bound.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from shared.scratch import scratch_prefix
from shared.seccomp import SeccompUnsupported, filter_program, program_fd
from shared.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_SANDBOX_VENV = Path("/opt/harnessrl/sandbox-venv")
WORKSPACE_INSIDE = "/workspace"
HOME_INSIDE = "/home/sandbox"
GATEWAY_SOCKET_INSIDE = "/run/harnessrl/gateway.sock"
SYSTEM_PYTHON = "/usr/bin/python3"

ISOLATION_BWRAP = "bwrap(uid={uid}; ns=user,pid,net,mount,ipc,uts,cgroup; rlimits=cpu,as,fsize,nproc,nofile; seccomp={seccomp})"
SECCOMP_ON = "on"
SECCOMP_OFF = "off (unsafe)"
CGROUP_SUFFIX = "; cgroup=pids,memory"
CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "harnessrl-sandbox-"
# v2: the processes of the worker's own cgroup move into this leaf, so the cgroup itself may enable controllers
# for its children (the kernel's no-internal-process rule) and the sandboxes' cgroups sit beside the leaf.
CGROUP_V2_WORKERS = "harnessrl-workers"
STALE_CGROUP_AGE_S = 120.0
# With a pids cgroup per sandbox, RLIMIT_NPROC (counted per uid, across every sandbox running as that uid) is
# only a backstop; this factor keeps one sandbox's fork bomb from starving the others.
NPROC_BACKSTOP_FACTOR = 16
# How often a caller's ``stop_check`` runs while a command runs (the runner's call and token limits query the
# database: once a second keeps that cheap while ending a rollout at most about a second after its limit).
STOP_CHECK_INTERVAL_S = 1.0
# The disk watch: walks start 10 ms apart and back off to DISK_CHECK_MAX_S while usage is far from the limit;
# when it grows fast they come as often as the walk's own cost allows (at most half a core).
DISK_CHECK_MIN_S = 0.01
DISK_CHECK_MAX_S = 0.2
ISOLATION_NONE = "none (unsafe)"

# Runs inside the sandbox before the command: listen on loopback, relay each connection to the gateway's Unix
# socket, run the command, exit with its status. It binds before starting the command, so the first request
# of the harness never races the forwarder.
_FORWARDER = r"""
import socket, subprocess, sys, threading
port, path, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(128)
def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
def relay(client):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()
def serve():
    while True:
        client, _ = server.accept()
        threading.Thread(target=relay, args=(client,), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
code = subprocess.call(argv)
sys.exit(128 - code if code < 0 else code)
"""


class SandboxError(RuntimeError):
    """The sandbox could not be set up (bad path, missing toolchain); nothing was run."""


class SandboxUnavailable(SandboxError):
    """No working bubblewrap and unsandboxed runs are not allowed."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed command."""

    timeout_s: float
    cpu_s: int
    memory_bytes: int
    file_size_bytes: int
    max_processes: int
    open_files: int
    disk_bytes: int
    tmpfs_bytes: int
    output_bytes: int = 1024 * 1024
    shm_bytes: int = 64 * 1024**2  # the size of /dev/shm
    # Resident-memory cap of the sandbox's memory cgroup; None: the same as ``memory_bytes``. Raise
    # ``memory_bytes`` alone for runtimes that reserve far more address space than they use (V8, WASM).
    resident_memory_bytes: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings, timeout_s: float) -> SandboxLimits:
        return cls(
            timeout_s=timeout_s,
            # CPU time is a second line behind the wall clock: one process cannot burn more than the wall
            # clock allows for all of them.
            cpu_s=max(1, int(timeout_s) + 1),
            memory_bytes=settings.sandbox_memory_bytes,
            file_size_bytes=settings.sandbox_file_size_bytes,
            max_processes=settings.sandbox_max_processes,
            open_files=settings.sandbox_open_files,
            disk_bytes=4 * settings.sandbox_file_size_bytes,
            tmpfs_bytes=settings.sandbox_tmpfs_bytes,
            shm_bytes=settings.sandbox_shm_bytes,
        )

    def with_(self, **changes: float | int | None) -> SandboxLimits:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed command did.

    ``exit_code``: the command's status; 128 + N when it died of signal N inside the sandbox (bwrap's
    convention); -9 when the sandbox killed it (``killed_reason`` says why: ``timeout`` or ``disk``;
    ``memory`` when the sandbox's memory cgroup OOM-killed a process inside; ``processes`` when a fork was refused
    at the sandbox's process limit (per-sandbox cgroups only); or the reason the caller's ``stop_check`` gave).
    """

    exit_code: int
    timed_out: bool
    killed_reason: str | None  # "timeout" | "disk" | "memory" | "processes" | a stop_check reason | None
    stdout: str
    stderr: str
    output_truncated: bool
    duration_s: float
    isolation: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed_reason is None


def _unreachable_parent(path: Path, uid: int) -> Path | None:
    """The first ancestor of ``path`` the uid cannot search (o+x missing and not its owner), if any."""
    for parent in reversed(path.parents):
        st = parent.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return parent
    return None


def _disk_usage_bytes(roots: Sequence[Path]) -> int:
    total = 0
    stack = [str(r) for r in roots]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total


class DiskWatch:
    """When to walk the writable dirs next: the walk's cost, the usage's growth and the headroom decide.

    Steady state is one walk per ``DISK_CHECK_MAX_S`` (or 20x the walk's cost, keeping it near 5% of a core);
    the first walks come ``DISK_CHECK_MIN_S`` apart and the interval at most doubles per walk, so a command
    that writes from its first instruction is seen early. While usage grows, the next walk comes before the
    growth seen so far could use half the remaining headroom (never more often than twice the walk's cost).
    """

    def __init__(self, limit_bytes: int, started: float) -> None:
        self.limit_bytes = limit_bytes
        self._last_at = started
        self._last_usage = 0
        self._interval = DISK_CHECK_MIN_S / 2

    def next_interval(self, usage: int, at: float, cost_s: float) -> float:
        """Seconds until the next walk, given a walk at ``at`` that found ``usage`` bytes and took ``cost_s``."""
        elapsed = max(at - self._last_at, 1e-6)
        rate = max(0, usage - self._last_usage) / elapsed
        self._last_at, self._last_usage = at, usage
        interval = min(max(DISK_CHECK_MAX_S, 20 * cost_s), 2 * self._interval)
        if rate > 0:
            interval = min(interval, max(self.limit_bytes - usage, 0) / rate / 2)
        self._interval = max(interval, DISK_CHECK_MIN_S, 2 * cost_s)
        return self._interval


def _read_bounded(path: Path, limit: int) -> tuple[str, bool]:
    """The last ``limit`` bytes of a file (the end of a log says why it failed) and whether it was cut."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size > limit:
            f.seek(size - limit)
        data = f.read(limit)
    return data.decode("utf-8", errors="replace"), size > limit


def _chown_tree(root: Path, uid: int) -> None:
    os.lchown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, uid)


@functools.cache
def _bwrap_probe(uid: int) -> str | None:
    """None if bwrap can create all namespaces as ``uid`` here, else why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None or shutil.which("setpriv") is None:
        return "bubblewrap (bwrap) or setpriv is not installed; run scripts/install-system.sh"
    # Every bwrap option the sandbox relies on, so a bubblewrap too old for one is refused here, with its message.
    argv = [*_setpriv(uid), bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--dev", "/dev", "--size", str(1024**2), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--remount-ro", "/", "--", "/usr/bin/true"]  # fmt: skip
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap probe failed: {exc}"
    if proc.returncode != 0:
        return f"bwrap cannot create namespaces as uid {uid}: {proc.stderr.decode(errors='replace').strip()}"
    return None


@functools.cache
def _seccomp_probe(uid: int, program: bytes) -> str | None:
    """None if bwrap here installs ``program`` (``--seccomp FD``) and a command runs under it, else why not."""
    fd = program_fd(program)
    try:
        argv = [*_setpriv(uid), "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--seccomp", str(fd), "--",
                "/usr/bin/true"]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, timeout=30, check=False, pass_fds=(fd,))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap --seccomp probe failed: {exc}"
    finally:
        os.close(fd)
    if proc.returncode != 0:
        return f"bwrap cannot install the seccomp filter here: {proc.stderr.decode(errors='replace').strip()}"
    return None


def _setpriv(uid: int) -> list[str]:
    if os.geteuid() != 0:
        return []  # already unprivileged: bwrap runs as the calling user
    return [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
    ]  # fmt: skip


def _own_cgroup_v1(controller: str) -> Path | None:
    """This process's cgroup directory of a v1 controller, if that hierarchy is mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = CGROUP_V1_ROOT / controller / path.lstrip("/")
            return directory if directory.is_dir() else None
    return None


class _SandboxCgroups:
    """Per-sandbox v1 cgroups, nested under this process's own (so the machine's accounting still applies):
    ``pids.max`` caps the processes of this sandbox alone, ``memory.limit_in_bytes`` its resident memory (the OOM
    killer acts inside the sandbox, never on the host)."""

    CONTROLLERS = ("pids", "memory")

    def __init__(self, limits: SandboxLimits) -> None:
        name = f"{CGROUP_PREFIX}{secrets.token_hex(6)}"
        self.dirs: dict[str, Path] = {}
        try:
            for controller in self.CONTROLLERS:
                parent = _own_cgroup_v1(controller)
                if parent is None:
                    raise OSError(f"no {controller} cgroup")
                directory = parent / name
                directory.mkdir()
                self.dirs[controller] = directory
            (self.dirs["pids"] / "pids.max").write_text(str(limits.max_processes))
            resident = str(limits.resident_memory_bytes or limits.memory_bytes)
            (self.dirs["memory"] / "memory.limit_in_bytes").write_text(resident)
            with contextlib.suppress(OSError):  # absent without swap accounting
                (self.dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(resident)
        except BaseException:
            self.close()
            raise
        self.procs_files = [str(d / "cgroup.procs") for d in self.dirs.values()]

    def enter(self) -> None:
        """Move the calling process (the child, between fork and exec) into the cgroups."""
        pid = str(os.getpid())
        for path in self.procs_files:
            with open(path, "w") as f:
                f.write(pid)

    def pids_limit_hit(self) -> bool:
        """Whether a fork or clone inside was refused because ``pids.max`` was reached."""
        try:
            events = (self.dirs["pids"] / "pids.events").read_text().split()
        except (KeyError, OSError):
            return False
        return len(events) == 2 and events[0] == "max" and int(events[1]) > 0

    def oom_killed(self) -> bool:
        try:
            control = (self.dirs["memory"] / "memory.oom_control").read_text()
        except (KeyError, OSError):
            return False
        counts = dict(line.split() for line in control.splitlines() if len(line.split()) == 2)
        return int(counts.get("oom_kill", "0")) > 0

    def close(self) -> None:
        """Remove the cgroups. Exited processes can linger in them for some milliseconds after the sandbox
        returns, so a busy cgroup is removed by a background thread rather than delaying the caller."""
        busy = [d for d in self.dirs.values() if not self._rmdir(d)]
        if busy:
            _PENDING_CGROUPS.update(busy)
            threading.Thread(target=self._remove_when_empty, args=(busy, 30.0), daemon=True).start()

    @staticmethod
    def _rmdir(directory: Path) -> bool:
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return False
        return True

    @classmethod
    def _remove_when_empty(cls, directories: list[Path], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while directories and time.monotonic() < deadline:
            time.sleep(0.02)
            directories = [d for d in directories if not cls._rmdir(d)]
        _PENDING_CGROUPS.difference_update(d for d in list(_PENDING_CGROUPS) if not d.exists())


class _SandboxCgroupsV2(_SandboxCgroups):
    """A per-sandbox cgroup in the v2 (unified) hierarchy, a child of ``base`` (the worker's own cgroup, set up by
    ``_cgroup2_base``): ``memory.max`` caps its resident memory, ``memory.swap.max`` = 0 keeps it from spilling
    into swap, ``pids.max`` caps its processes; ``memory.events`` and ``pids.events`` say what happened."""

    def __init__(
        self, limits: SandboxLimits, base: Path, controllers: Sequence[str] = ("memory", "pids")
    ) -> None:
        directory = base / f"{CGROUP_PREFIX}{secrets.token_hex(6)}"
        self.dirs = {}
        try:
            directory.mkdir()
            self.dirs["unified"] = directory
            resident = str(limits.resident_memory_bytes or limits.memory_bytes)
            if "pids" in controllers:
                (directory / "pids.max").write_text(str(limits.max_processes))
            if "memory" in controllers:
                (directory / "memory.max").write_text(resident)
                with contextlib.suppress(FileNotFoundError):  # absent without swap accounting
                    (directory / "memory.swap.max").write_text("0")
        except BaseException:
            self.close()
            raise
        self.procs_files = [str(directory / "cgroup.procs")]

    def _events(self, name: str) -> dict[str, int]:
        try:
            text = (self.dirs["unified"] / name).read_text()
        except (KeyError, OSError):
            return {}
        return {k: int(v) for k, v in (line.split() for line in text.splitlines() if len(line.split()) == 2)}

    def pids_limit_hit(self) -> bool:
        return self._events("pids.events").get("max", 0) > 0

    def oom_killed(self) -> bool:
        return self._events("memory.events").get("oom_kill", 0) > 0


def _cgroup2_own() -> Path | None:
    """This process's cgroup directory in the v2 (unified) hierarchy, if one is mounted (``/sys/fs/cgroup`` on a
    v2 host, ``/sys/fs/cgroup/unified`` on a hybrid one)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None
    for mount in mounts:
        fields, _, tail = mount.partition(" - ")
        if tail.split(" ", 1)[0] == "cgroup2":
            directory = Path(fields.split()[4]) / own.lstrip("/")
            if directory.is_dir():
                return directory
    return None


def _cgroup2_base(controllers: Sequence[str] = ("memory", "pids")) -> Path:
    """The v2 cgroup the sandboxes' cgroups are made in (this worker's own), ready for them: its processes moved
    into the ``CGROUP_V2_WORKERS`` leaf (the root cgroup needs no leaf) and ``controllers`` enabled for its
    children. Raises OSError saying why not (no v2 hierarchy, a controller bound to v1 or not delegated, no
    permission: the host did not delegate this cgroup to the worker's user)."""
    own = _cgroup2_own()
    if own is None:
        raise OSError("no cgroup v2 hierarchy is mounted")
    wanted = set(controllers)
    if own.name == CGROUP_V2_WORKERS and wanted <= set(
        (own.parent / "cgroup.subtree_control").read_text().split()
    ):
        return own.parent  # another worker of this cgroup set it up already (or this one, before a fork)
    missing = wanted - set((own / "cgroup.controllers").read_text().split())
    if missing:
        raise OSError(
            f"the cgroup v2 hierarchy at {own} lacks the {', '.join(sorted(missing))} controller(s) (bound to a v1 "
            "hierarchy, or not delegated to this cgroup)"
        )
    enable = " ".join(f"+{c}" for c in sorted(wanted))
    # Only the hierarchy's real root may hold processes and enable controllers at once; it alone has no
    # cgroup.type (a cgroup namespace's root, in a container, does have one and follows the rule).
    is_root = not (own / "cgroup.type").exists()
    if not is_root:
        leaf = own / CGROUP_V2_WORKERS
        leaf.mkdir(exist_ok=True)
    for _ in range(20):  # processes may start in the cgroup while we move them (EBUSY below): move again
        if not is_root:
            for pid in (own / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                    (leaf / "cgroup.procs").write_text(pid)
        try:
            (own / "cgroup.subtree_control").write_text(enable)
            return own
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
    raise OSError(f"could not empty {own} to enable {enable} for its children (processes keep arriving)")


_PENDING_CGROUPS: set[Path] = set()


@atexit.register
def _remove_pending_cgroups() -> None:
    # A short-lived process (a CLI command) may exit before the background removal is done.
    _SandboxCgroups._remove_when_empty(sorted(_PENDING_CGROUPS), 2.0)


def _sweep_stale_cgroups(parents: Sequence[Path | None] | None = None) -> int:
    """Remove empty sandbox cgroups left by a worker that was killed mid-run (nobody else removes them) from
    ``parents`` (default: this process's v1 pids and memory cgroups); an age threshold keeps a sandbox being set
    up right now by another worker out of reach."""
    if parents is None:
        parents = [_own_cgroup_v1(c) for c in _SandboxCgroups.CONTROLLERS]
    removed = 0
    for parent in parents:
        if parent is None:
            continue
        for directory in parent.glob(f"{CGROUP_PREFIX}*"):
            with contextlib.suppress(OSError):
                if time.time() - directory.stat().st_mtime < STALE_CGROUP_AGE_S:
                    continue
                if not (directory / "cgroup.procs").read_text().strip():
                    directory.rmdir()
                    removed += 1
    return removed


@dataclass(frozen=True)
class CgroupSupport:
    """How sandboxes get their cgroups here: ``version`` 2 (``base``: the parent of their cgroups), 1, or None
    (``reason`` says why neither works)."""

    version: int | None
    base: Path | None = None
    reason: str = ""
    # v2: the controllers each sandbox's cgroup sets limits of
    controllers: tuple[str, ...] = ("memory", "pids")


@functools.cache
def _cgroup_support() -> CgroupSupport:
    """Which per-sandbox cgroups can be made here: v2 when the unified hierarchy has the memory and pids controllers
    and this process may manage its cgroup (root, or a delegated subtree), else v1 as root, else none."""
    probe = SandboxLimits(1, 1, 64 * 1024**2, 1, 8, 8, 1, 1)
    try:
        base = _cgroup2_base()
        _SandboxCgroupsV2(probe, base).close()
    except OSError as exc:
        v2_problem = f"cgroup v2: {exc}"
    else:
        _sweep_stale_cgroups([base])
        return CgroupSupport(version=2, base=base)
    if os.geteuid() != 0:
        v1_problem = "cgroup v1: needs root"
    else:
        try:
            _SandboxCgroups(probe).close()
        except OSError as exc:
            v1_problem = f"cgroup v1: {exc}"
        else:
            _sweep_stale_cgroups()
            return CgroupSupport(version=1)
    return CgroupSupport(version=None, reason=f"{v2_problem}; {v1_problem}")


SYSTEM_BIN_DIRS = ("/usr/local/bin", "/usr/bin", "/bin")


def with_directory(path: str, directory: str) -> str:
    """``path`` with ``directory`` on it: as it is where it already holds it, else just before the first system
    directory (so it wins over the system's ``python``, while what the caller put first stays first), else last."""
    parts = [p for p in path.split(":") if p]
    if directory in parts:
        return path
    at = next((i for i, p in enumerate(parts) if p in SYSTEM_BIN_DIRS), len(parts))
    return ":".join([*parts[:at], directory, *parts[at:]])


class Sandbox:
    """Runs commands confined; one instance per worker process (it probes bubblewrap once)."""

    def __init__(self, settings: Settings, venv: Path | None = None) -> None:
        self.settings = settings
        self.uid = settings.sandbox_uid if os.geteuid() == 0 else os.geteuid()
        self.venv = Path(venv or getattr(settings, "sandbox_venv", None) or DEFAULT_SANDBOX_VENV)
        self.seccomp_program: bytes | None = None
        self.cgroup_support = CgroupSupport(version=None, reason="unsandboxed")
        problem = _bwrap_probe(self.uid)
        if problem is None:
            self.seccomp_program = self._seccomp_program(settings)
            seccomp = SECCOMP_ON if self.seccomp_program is not None else SECCOMP_OFF
            self.isolation = ISOLATION_BWRAP.format(uid=self.uid, seccomp=seccomp)
            self.cgroup_support = _cgroup_support()
            if self.cgroups:
                self.isolation += CGROUP_SUFFIX
            else:
                log.warning(
                    "sandbox: resident memory is NOT capped per sandbox here (only each process's address space, "
                    "by RLIMIT_AS), and the process cap is per uid, not per sandbox: no per-sandbox cgroup can be "
                    "made (%s). Run the worker as root, or on a cgroup v2 host that delegates the worker's cgroup "
                    "with the memory and pids controllers.",
                    self.cgroup_support.reason,
                )
            if not (self.venv / "bin" / "python").exists():
                raise SandboxError(
                    f"sandbox venv {self.venv} is missing; create it with scripts/install-system.sh"
                )
        elif settings.allow_unsandboxed:
            self.isolation = ISOLATION_NONE
        else:
            raise SandboxUnavailable(
                f"{problem}. Refusing to run untrusted commands unsandboxed; set HARNESSRL_ALLOW_UNSANDBOXED=1 "
                "to run them anyway (recorded as unsafe)."
            )

    def _seccomp_program(self, settings: Settings) -> bytes | None:
        """The filter to install, or None where it cannot be and the operator allowed running without it."""
        try:
            program = filter_program()
            problem = _seccomp_probe(self.uid, program)
        except SeccompUnsupported as exc:
            problem = str(exc)
        if problem is None:
            return program
        if not settings.sandbox_allow_no_seccomp:
            raise SandboxUnavailable(
                f"{problem}. Refusing to run untrusted commands without the seccomp filter; set "
                "HARNESSRL_SANDBOX_ALLOW_NO_SECCOMP=1 to run them anyway (recorded as seccomp=off (unsafe))."
            )
        log.warning("sandbox: running WITHOUT the seccomp filter (%s)", problem)
        return None

    @property
    def confined(self) -> bool:
        return self.isolation != ISOLATION_NONE

    @property
    def cgroups(self) -> bool:
        """Whether each sandbox gets its own memory and pids cgroup (v1 or v2)."""
        return self.cgroup_support.version is not None

    def workspace_path(self, workspace: Path) -> str:
        """Where the command sees the workspace."""
        return WORKSPACE_INSIDE if self.confined else str(workspace)

    def limits(self, timeout_s: float) -> SandboxLimits:
        return SandboxLimits.from_settings(self.settings, timeout_s)

    def run(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        limits: SandboxLimits,
        env: Mapping[str, str] | None = None,
        home: Path | None = None,
        gateway_socket: Path | None = None,
        gateway_port: int | None = None,
        ro_binds: Sequence[Path] = (),
        stop_check: Callable[[], str | None] | None = None,
    ) -> SandboxResult:
        """Run ``argv`` with the workspace as its working directory; never raises for what the command does.

        ``home``: a host directory used as HOME (the runner writes harness config there first); ``None`` gives
        a throwaway tmpfs HOME. ``gateway_socket`` + ``gateway_port``: see the module docstring. ``ro_binds``:
        extra host paths (e.g. a harness install) bound read-only at the same path. ``stop_check``: called about
        every ``STOP_CHECK_INTERVAL_S`` while the command runs; a reason it returns kills the command with that
        ``killed_reason`` (the runner's per-run call and token limits).
        """
        if not argv:
            raise SandboxError("empty command")
        workspace = Path(workspace).resolve()
        if not workspace.is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        if gateway_socket is not None:
            if gateway_port is None:
                raise SandboxError(
                    "gateway_socket needs gateway_port (the loopback port the forwarder serves)"
                )
            if not Path(gateway_socket).exists():
                raise SandboxError(f"gateway socket {gateway_socket} does not exist")
        writable = [workspace] + ([Path(home).resolve()] if home is not None else [])
        with contextlib.ExitStack() as stack:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=scratch_prefix("sandbox")))
            pass_fds: tuple[int, ...] = ()
            if self.confined:
                seccomp_fd = None
                if self.seccomp_program is not None:
                    seccomp_fd = program_fd(self.seccomp_program)  # bwrap reads it; closed here once it ran
                    stack.callback(os.close, seccomp_fd)
                    pass_fds = (seccomp_fd,)
                command = self._bwrap_command(argv, workspace, home, gateway_socket, gateway_port, ro_binds, env,
                                              limits, seccomp_fd)  # fmt: skip
                popen_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
                cwd = "/"
            else:
                command = self._plain_command(argv, gateway_socket, gateway_port)
                popen_env = self._inner_env(env, str(home or Path(tmp) / "home"), str(workspace))
                (Path(tmp) / "home").mkdir()
                cwd = str(workspace)
            return self._supervise(command, popen_env, cwd, limits, writable, Path(tmp), stop_check, pass_fds)

    # --- command lines ---------------------------------------------------------------------------------

    def _inner_env(self, env: Mapping[str, str] | None, home: str, workspace: str) -> dict[str, str]:
        """The command's environment: ``env`` over the sandbox's own. The venv's ``bin`` stays on ``PATH`` even where
        ``env`` sets one (every harness does): a task's test command (``python -m pytest ...``) then runs inside an
        agent's shell as it does in the grader's, instead of ``python: not found``."""
        path = f"{self.venv}/bin:/usr/local/bin:/usr/bin:/bin" if self.venv.exists() else os.environ["PATH"]
        base = {
            "HOME": home,
            "PATH": path,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            "PWD": workspace,
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        merged = {**base, **(env or {})}
        if self.venv.exists():
            merged["PATH"] = with_directory(merged["PATH"], str(self.venv / "bin"))
        return merged

    def _bwrap_command(
        self,
        argv: Sequence[str],
        workspace: Path,
        home: Path | None,
        gateway_socket: Path | None,
        gateway_port: int | None,
        ro_binds: Sequence[Path],
        env: Mapping[str, str] | None,
        limits: SandboxLimits,
        seccomp_fd: int | None = None,
    ) -> list[str]:
        # (bwrap flag, host path, path inside): the only host paths the command can see besides /usr and /etc.
        mounts: list[tuple[str, Path, str]] = [
            ("--ro-bind", self.venv, str(self.venv)),
            ("--bind", workspace, WORKSPACE_INSIDE),
        ]
        mounts += [("--ro-bind", Path(p).resolve(), str(Path(p).resolve())) for p in ro_binds]
        if home is not None:
            mounts.append(("--bind", Path(home).resolve(), HOME_INSIDE))
        if gateway_socket is not None:
            mounts.append(("--bind", Path(gateway_socket).resolve(), GATEWAY_SOCKET_INSIDE))
        for _, path, _ in mounts:
            blocked = _unreachable_parent(path, self.uid)
            if blocked is not None:
                raise SandboxError(
                    f"{path} is not reachable by sandbox uid {self.uid}: {blocked} is not searchable "
                    "(put workspaces, HOME and the gateway socket under a world-searchable directory)"
                )
        if os.geteuid() == 0:
            _chown_tree(workspace, self.uid)
            if home is not None:
                _chown_tree(Path(home), self.uid)
        cmd = [
            "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc", "/etc",
            "--proc", "/proc", "--dev", "/dev", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
            "--size", str(limits.tmpfs_bytes), "--tmpfs", "/tmp",
        ]  # fmt: skip
        if home is None:
            cmd += ["--size", str(limits.tmpfs_bytes), "--tmpfs", HOME_INSIDE]
        for flag, path, inside in mounts:
            cmd += [flag, str(path), inside]
        # bwrap's root and /dev are tmpfs of no size the command could fill: read-only once every mount point
        # in them exists (the mounts on them stay as they are).
        cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]
        if seccomp_fd is not None:
            cmd += ["--seccomp", str(seccomp_fd)]
        inner_argv = list(argv)
        if gateway_socket is not None:
            inner_argv = [SYSTEM_PYTHON, "-c", _FORWARDER, str(gateway_port), GATEWAY_SOCKET_INSIDE, *argv]
        cmd += ["--clearenv"]
        for key, value in self._inner_env(env, HOME_INSIDE, WORKSPACE_INSIDE).items():
            cmd += ["--setenv", key, value]
        cmd += ["--chdir", WORKSPACE_INSIDE, "--", *inner_argv]
        return [*_setpriv(self.uid), *cmd]

    def _plain_command(
        self, argv: Sequence[str], gateway_socket: Path | None, gateway_port: int | None
    ) -> list[str]:
        if gateway_socket is None:
            return list(argv)
        return [SYSTEM_PYTHON, "-c", _FORWARDER, str(gateway_port), str(gateway_socket), *argv]

    # --- supervision -----------------------------------------------------------------------------------

    def _supervise(
        self,
        command: list[str],
        env: dict[str, str],
        cwd: str,
        limits: SandboxLimits,
        writable: list[Path],
        tmp: Path,
        stop_check: Callable[[], str | None] | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> SandboxResult:
        stdout_path, stderr_path = tmp / "stdout", tmp / "stderr"

        support = self.cgroup_support
        cgroups: _SandboxCgroups | None = None
        if support.version == 2 and support.base is not None:
            cgroups = _SandboxCgroupsV2(limits, support.base, support.controllers)
        elif support.version == 1:
            cgroups = _SandboxCgroups(limits)
        nproc = limits.max_processes * (NPROC_BACKSTOP_FACTOR if cgroups else 1)

        def confine_child() -> None:  # runs in the child between fork and exec
            for which, value in (
                (resource.RLIMIT_CPU, limits.cpu_s),
                (resource.RLIMIT_AS, limits.memory_bytes),
                (resource.RLIMIT_FSIZE, limits.file_size_bytes),
                (resource.RLIMIT_NPROC, nproc),
                (resource.RLIMIT_NOFILE, limits.open_files),
                (resource.RLIMIT_CORE, 0),
            ):
                resource.setrlimit(which, (value, value))
            if cgroups is not None:
                cgroups.enter()

        try:
            return self._watch(
                command,
                env,
                cwd,
                limits,
                writable,
                stdout_path,
                stderr_path,
                confine_child,
                cgroups,
                stop_check,
                pass_fds,
            )
        finally:
            if cgroups is not None:
                cgroups.close()

    def _watch(
        self,
        command: list[str],
        env: dict[str, str],
        cwd: str,
        limits: SandboxLimits,
        writable: list[Path],
        stdout_path: Path,
        stderr_path: Path,
        confine_child: Callable[[], None],
        cgroups: _SandboxCgroups | None,
        stop_check: Callable[[], str | None] | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> SandboxResult:
        started = time.monotonic()
        killed_reason: str | None = None
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=confine_child,
                pass_fds=pass_fds,
            )
            deadline = started + limits.timeout_s
            next_disk_check = started
            disk_watch = DiskWatch(limits.disk_bytes, started)
            next_stop_check = started + STOP_CHECK_INTERVAL_S if stop_check else float("inf")
            while proc.poll() is None:
                now = time.monotonic()
                if now >= deadline:
                    killed_reason = "timeout"
                    break
                if cgroups is not None and cgroups.pids_limit_hit():
                    killed_reason = "processes"
                    break
                if stop_check is not None and now >= next_stop_check:
                    killed_reason = stop_check()
                    if killed_reason is not None:
                        break
                    next_stop_check = time.monotonic() + STOP_CHECK_INTERVAL_S
                if now >= next_disk_check:
                    usage = _disk_usage_bytes(writable)
                    if usage > limits.disk_bytes:
                        killed_reason = "disk"
                        break
                    walked = time.monotonic()
                    next_disk_check = walked + disk_watch.next_interval(usage, now, walked - now)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    # Sleep until the next disk check or the deadline; a command that ends wakes us at once.
                    wake = min(next_disk_check, deadline, next_stop_check)
                    proc.wait(timeout=max(0.0, wake - time.monotonic()))
            if killed_reason is not None:
                self._kill_tree(proc)
            exit_code = proc.wait()
        duration_s = time.monotonic() - started
        if killed_reason is None and exit_code != 0 and cgroups is not None and cgroups.oom_killed():
            killed_reason = "memory"
        if killed_reason is None and cgroups is not None and cgroups.pids_limit_hit():
            killed_reason = "processes"  # refused a fork, then ended before the watch saw it
        stdout, cut_out = _read_bounded(stdout_path, limits.output_bytes)
        stderr, cut_err = _read_bounded(stderr_path, limits.output_bytes)
        if killed_reason is not None:
            stderr += f"\n[harnessrl sandbox: killed ({killed_reason}) after {duration_s:.1f}s]\n"
        return SandboxResult(
            exit_code=exit_code,
            timed_out=killed_reason == "timeout",
            killed_reason=killed_reason,
            stdout=stdout,
            stderr=stderr,
            output_truncated=cut_out or cut_err,
            duration_s=duration_s,
            isolation=self.isolation,
        )

    def _kill_tree(self, proc: subprocess.Popen[bytes]) -> None:
        # Confined: SIGKILL to bwrap ends its PID namespace (die-with-parent). Unsafe: the process group is
        # all we can reach; a child that called setsid escapes it, which is one reason this mode is unsafe.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()

"""The sandbox's seccomp filter: a classic-BPF program, written here by hand, that bubblewrap installs (``bwrap
--seccomp FD``) on the sandboxed command just before it runs.

Used by ``shared.sandbox`` (which hands the program to bwrap on an inherited memfd and probes once that bwrap here
takes it). No dependency: the program is assembled from the tables below, one per supported architecture.

What the program does, per system call (``struct seccomp_data``: ``nr`` at offset 0, ``arch`` at 4, the arguments
from 16, little-endian on both supported architectures):
- a call made through another ABI than the host's own (``arch`` differs: e.g. ``int 0x80`` i386 calls on an
  x86_64 host) or, on x86_64, through the x32 ABI (``nr`` has bit 0x40000000) kills the process
  (``SECCOMP_RET_KILL_PROCESS``, the process dies of SIGSYS): the numbers of those ABIs differ from the tables
  below, so they could reach a denied call under another number; nothing an agent runs needs them;
- a call in ``DENIED`` fails with EPERM (the process goes on, as it would without the privilege);
- ``unshare`` with any namespace flag fails with EPERM (``unshare(CLONE_FS)`` and the like still work);
- everything else is allowed.

An architecture without a table here cannot be filtered: ``filter_program`` raises ``SeccompUnsupported`` and the
sandbox refuses to start (unless the operator allowed running without seccomp).

``clone``/``clone3`` are not filtered: a new namespace needs a capability the sandboxed process does not have, and
a new user namespace (the way to get one) is already refused by ``bwrap --disable-userns``.
"""

from __future__ import annotations

import os
import platform
import struct

# The calls an agent, its harness (Node, Python, git, bash) and a task's tests never need, by why.
DENIED: dict[str, tuple[str, ...]] = {
    "kernel modules": ("init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms",
                       "query_module"),
    "kernel attack surface": ("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
                              "io_uring_register", "lookup_dcookie", "uselib", "_sysctl", "nfsservctl"),
    "kernel keyrings": ("keyctl", "add_key", "request_key"),
    "kexec and power": ("kexec_load", "kexec_file_load", "reboot"),
    "mounts": ("mount", "umount2", "pivot_root", "move_mount", "open_tree", "open_tree_attr", "fsopen", "fsmount",
               "fsconfig", "fspick", "mount_setattr"),
    "swap, accounting, quotas": ("swapon", "swapoff", "acct", "quotactl", "quotactl_fd"),
    "file handles (bypass path checks)": ("open_by_handle_at", "name_to_handle_at"),
    "host logs and events": ("syslog", "fanotify_init"),
    "host clock": ("settimeofday", "clock_settime", "adjtimex", "clock_adjtime"),
    "namespaces and host identity": ("setns", "sethostname", "setdomainname", "vhangup"),
    "other processes' memory": ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"),
    "port I/O": ("iopl", "ioperm"),
}  # fmt: skip
DENIED_NAMES: tuple[str, ...] = tuple(name for names in DENIED.values() for name in names)

# System call numbers per architecture (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
# for aarch64). A name absent from an architecture's table does not exist there (nothing to deny).
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "init_module": 175, "finit_module": 313, "delete_module": 176, "create_module": 174, "get_kernel_syms": 177,
        "query_module": 178, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "lookup_dcookie": 212, "uselib": 134, "_sysctl": 156,
        "nfsservctl": 180, "keyctl": 250, "add_key": 248, "request_key": 249, "kexec_load": 246,
        "kexec_file_load": 320, "reboot": 169, "mount": 165, "umount2": 166, "pivot_root": 155, "move_mount": 429,
        "open_tree": 428, "open_tree_attr": 467, "fsopen": 430, "fsmount": 432, "fsconfig": 431, "fspick": 433,
        "mount_setattr": 442, "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179, "quotactl_fd": 443,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "syslog": 103, "fanotify_init": 300,
        "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "setns": 308,
        "sethostname": 170, "setdomainname": 171, "vhangup": 153, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "pidfd_getfd": 438, "iopl": 172, "ioperm": 173, "unshare": 272,
    },
    "aarch64": {
        "init_module": 105, "finit_module": 273, "delete_module": 106, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "lookup_dcookie": 18, "nfsservctl": 42, "keyctl": 219, "add_key": 217, "request_key": 218,
        "kexec_load": 104, "kexec_file_load": 294, "reboot": 142, "mount": 40, "umount2": 39, "pivot_root": 41,
        "move_mount": 429, "open_tree": 428, "open_tree_attr": 467, "fsopen": 430, "fsmount": 432, "fsconfig": 431,
        "fspick": 433, "mount_setattr": 442, "swapon": 224, "swapoff": 225, "acct": 89, "quotactl": 60,
        "quotactl_fd": 443, "open_by_handle_at": 265, "name_to_handle_at": 264, "syslog": 116,
        "fanotify_init": 262, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171, "clock_adjtime": 266,
        "setns": 268, "sethostname": 161, "setdomainname": 162, "vhangup": 58, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "unshare": 97,
    },
}  # fmt: skip
# include/uapi/linux/audit.h: AUDIT_ARCH_X86_64 = EM_X86_64 | 64BIT | LE, AUDIT_ARCH_AARCH64 = EM_AARCH64 | 64BIT | LE.
AUDIT_ARCH: dict[str, int] = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
# CLONE_NEWTIME | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
# CLONE_NEWNET: the unshare flags that make a namespace.
CLONE_NAMESPACE_FLAGS = (
    0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)

# linux/filter.h, linux/seccomp.h
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARG0_LOW = 16
MAX_JUMP = 255


class SeccompUnsupported(RuntimeError):
    """This host's architecture has no syscall table here, so no filter can be built for it."""


def host_arch() -> str:
    """The architecture whose system calls the sandbox's processes make (the kernel's, as uname reports it)."""
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(arch: str | None = None) -> bytes:
    """The compiled program (``struct sock_filter`` records, host byte order) for ``arch`` (default: this host's)."""
    arch = arch or host_arch()
    if arch not in SYSCALLS:
        raise SeccompUnsupported(
            f"no seccomp syscall table for architecture {arch!r} (supported: {', '.join(sorted(SYSCALLS))})"
        )
    table = SYSCALLS[arch]
    denied = sorted({table[name] for name in DENIED_NAMES if name in table})
    # Layout (BPF jumps only go forward):
    #   0 load arch; 1 jeq host arch, else -> kill; 2 load nr; [x86_64: jge x32 bit -> kill]
    #   one jeq per denied nr -> deny; jeq unshare -> unshare check; allow
    #   unshare check: load arg0 (low half: every namespace flag is there); jset namespace flags -> deny, else -> allow
    #   deny (EPERM); allow; kill
    x32 = arch == "x86_64"
    allow_at = 3 + int(x32) + len(denied) + 1
    unshare_at = allow_at + 1
    deny_at = unshare_at + 2
    allow_again_at = deny_at + 1
    kill_at = allow_again_at + 1
    if kill_at > MAX_JUMP:
        raise AssertionError("too many denied system calls for one-hop jumps")

    out: list[bytes] = []

    def jump(code: int, k: int, true_to: int | None, false_to: int | None) -> None:
        # Offsets are relative to the next instruction; None: fall through.
        at = len(out) + 1
        out.append(
            _insn(code, 0 if true_to is None else true_to - at, 0 if false_to is None else false_to - at, k)
        )

    out.append(_insn(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH))
    jump(BPF_JEQ_K, AUDIT_ARCH[arch], None, kill_at)
    out.append(_insn(BPF_LD_W_ABS, 0, 0, OFFSET_NR))
    if x32:
        jump(BPF_JGE_K, X32_SYSCALL_BIT, kill_at, None)
    for nr in denied:
        jump(BPF_JEQ_K, nr, deny_at, None)
    jump(BPF_JEQ_K, table["unshare"], unshare_at, None)
    assert len(out) == allow_at
    out.append(_insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    out.append(_insn(BPF_LD_W_ABS, 0, 0, OFFSET_ARG0_LOW))
    jump(BPF_JSET_K, CLONE_NAMESPACE_FLAGS, deny_at, allow_again_at)
    assert len(out) == deny_at
    out.append(_insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    out.append(_insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    assert len(out) == kill_at
    out.append(_insn(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS))
    return b"".join(out)


def program_fd(program: bytes) -> int:
    """A file descriptor (a memfd, read from its start) holding ``program``, for ``bwrap --seccomp FD``; the
    caller passes it to the child and closes it."""
    fd = os.memfd_create("harnessrl-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd

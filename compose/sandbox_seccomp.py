"""Writes ``compose/sandbox-seccomp.json``: the seccomp profile compose's runner and grader containers run under
(``security_opt: seccomp=./sandbox-seccomp.json``), in place of ``seccomp=unconfined``.

Run it again when the lists below change: ``python3 compose/sandbox_seccomp.py`` (it reads the system-call names
from the kernel headers, ``linux-libc-dev``; ``--check`` says whether the committed file is what it writes).
``tests/unit/test_compose.py`` checks the committed file against the lists.

What the profile allows, and why
--------------------------------
The containers start bubblewrap (``shared/sandbox.py``) as an unprivileged uid with no capabilities (``setpriv``),
so bwrap creates a user namespace and then, inside it, its mount, pid, net, ipc, uts and cgroup namespaces, mounts
a tmpfs root, a fresh ``/proc`` and bind mounts, pivots into the new root and sets the sandbox's host name. Docker's
default profile refuses exactly those calls unless the container holds ``CAP_SYS_ADMIN``, which is why the compose
file used to grant ``SYS_ADMIN`` and ``seccomp=unconfined``. This profile instead allows those calls outright
(``BWRAP_NAMESPACE_CALLS``; a namespace bwrap creates as an unprivileged user grants privilege over that namespace
only), so the containers need no ``SYS_ADMIN`` at all, and denies:

- ``DENIED``: calls neither the services nor bubblewrap make, each a known kernel attack surface or a host-wide
  effect: kernel modules and kexec, ``bpf``, ``perf_event_open``, ``userfaultfd``, the key ring, ``io_uring``,
  file handles (``open_by_handle_at``: the classic container escape), ``ptrace`` and cross-process memory access,
  the new mount API (bwrap uses ``mount(2)``), ``setns``, clocks, swap, accounting, quotas, the kernel log, raw I/O
  ports, and 32-bit compatibility system calls (x86-64 and AArch64 only, no sub-architectures);
- any system call this list does not name (the default action, ``EPERM``), e.g. one added by a later kernel.

Everything else of the kernel's table (``read`` to ``clone3``) is allowed: the Python services, git, Celery and
the sandbox's own seccomp filter (bwrap ``--seccomp``, stacked on this one) need the ordinary system-call surface.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

PROFILE_PATH = Path(__file__).with_name("sandbox-seccomp.json")
HEADERS = (
    Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),  # x86-64
    Path("/usr/include/asm-generic/unistd.h"),  # AArch64 and the other generic-table architectures
)

# bubblewrap's namespace set-up: what docker's default profile opens only to CAP_SYS_ADMIN.
BWRAP_NAMESPACE_CALLS = ("clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "sethostname")

# System calls newer than the headers this was generated from, harmless and used by newer libcs.
NEWER_ALLOWED = (
    "fchmodat2",
    "cachestat",
    "futex_wake",
    "futex_wait",
    "futex_requeue",
    "map_shadow_stack",
    "mseal",
)

DENIED = {
    "kernel modules and kexec": [
        "init_module", "finit_module", "delete_module", "create_module", "query_module", "get_kernel_syms",
        "kexec_load", "kexec_file_load", "reboot",
    ],
    "kernel attack surface no service needs": [
        "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
        "io_uring_setup", "io_uring_enter", "io_uring_register", "lookup_dcookie", "nfsservctl", "uselib",
        "ustat", "sysfs", "_sysctl", "vhangup", "syslog", "modify_ldt", "iopl", "ioperm",
        "vm86", "vm86old",
    ],
    "file handles (reach files outside the container's mount namespace)": [
        "open_by_handle_at", "name_to_handle_at",
    ],
    "other processes' memory": ["ptrace", "process_vm_readv", "process_vm_writev", "kcmp"],
    "namespaces and mounts beyond what bwrap does": [
        "setns", "setdomainname", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
        "mount_setattr", "umount",
    ],
    "host-wide clocks, swap, accounting, quotas": [
        "settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff", "acct",
        "quotactl", "quotactl_fd",
    ],
}  # fmt: skip


def kernel_syscalls() -> set[str]:
    """Every system-call name the kernel headers define (x86-64 and the generic table)."""
    names: set[str] = set()
    for header in HEADERS:
        names |= set(re.findall(r"#define __NR(?:3264)?_([a-z0-9_]+)\s", header.read_text()))
    return {name for name in names if name not in ("syscalls", "arch_specific_syscall")}


def profile(syscalls: set[str]) -> dict[str, object]:
    denied = {name for names in DENIED.values() for name in names}
    assert not denied & set(BWRAP_NAMESPACE_CALLS)
    ordinary = sorted((syscalls | set(NEWER_ALLOWED)) - denied - set(BWRAP_NAMESPACE_CALLS))
    return {
        "comment": [
            "Written by compose/sandbox_seccomp.py (its docstring says why each call is allowed or denied).",
            "Denied (the default action): " + "; ".join(f"{why}: {' '.join(n)}" for why, n in DENIED.items()),
        ],
        "defaultAction": "SCMP_ACT_ERRNO",
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": []},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": []},
        ],
        "syscalls": [
            {
                "comment": "bubblewrap's namespaces, mounts and pivot_root (docker's default: CAP_SYS_ADMIN only)",
                "names": list(BWRAP_NAMESPACE_CALLS),
                "action": "SCMP_ACT_ALLOW",
            },
            {"comment": "the ordinary system-call surface", "names": ordinary, "action": "SCMP_ACT_ALLOW"},
        ],
    }


def main() -> None:
    text = json.dumps(profile(kernel_syscalls()), indent=1) + "\n"
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if PROFILE_PATH.read_text() == text else 1)
    PROFILE_PATH.write_text(text)


if __name__ == "__main__":
    main()

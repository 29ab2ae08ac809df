"""The sandbox's seccomp program, run through a small classic-BPF interpreter on made-up ``seccomp_data``: what it
answers per architecture, ABI and call; and its syscall tables against the kernel headers where they are installed."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from shared.seccomp import (
    AUDIT_ARCH,
    DENIED_NAMES,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    SECCOMP_RET_KILL_PROCESS,
    SYSCALLS,
    SeccompUnsupported,
    filter_program,
)

EPERM_ACTION = SECCOMP_RET_ERRNO | 1
AUDIT_ARCH_I386 = 0x40000003
CLONE_FS = 0x200
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x20000


def run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The action ``program`` returns for one system call (the subset of classic BPF the sandbox's filter uses)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # ret k
            return k
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unexpected BPF opcode {code:#x}")


@pytest.mark.parametrize("arch", sorted(SYSCALLS))
def test_denied_calls_get_eperm_and_the_rest_is_allowed(arch: str) -> None:
    program = filter_program(arch)
    table = SYSCALLS[arch]
    native = AUDIT_ARCH[arch]
    for name in DENIED_NAMES:
        if name in table:
            assert run_bpf(program, table[name], native) == EPERM_ACTION, name
    denied = {table[n] for n in DENIED_NAMES if n in table} | {table["unshare"]}
    for nr in range(0, 470):
        if nr not in denied:
            assert run_bpf(program, nr, native) == SECCOMP_RET_ALLOW, nr


@pytest.mark.parametrize("arch", sorted(SYSCALLS))
def test_unshare_is_refused_only_for_namespaces(arch: str) -> None:
    program, nr, native = filter_program(arch), SYSCALLS[arch]["unshare"], AUDIT_ARCH[arch]
    assert run_bpf(program, nr, native, (CLONE_FS,)) == SECCOMP_RET_ALLOW
    assert run_bpf(program, nr, native, (CLONE_NEWUSER,)) == EPERM_ACTION
    assert run_bpf(program, nr, native, (CLONE_FS | CLONE_NEWNS,)) == EPERM_ACTION


@pytest.mark.parametrize("arch", sorted(SYSCALLS))
def test_another_abi_kills(arch: str) -> None:
    program = filter_program(arch)
    getpid = 39 if arch == "x86_64" else 172
    for other in (AUDIT_ARCH_I386, *(a for name, a in AUDIT_ARCH.items() if name != arch)):
        assert run_bpf(program, getpid, other) == SECCOMP_RET_KILL_PROCESS
    if (
        arch == "x86_64"
    ):  # the x32 ABI: same arch value, nr with bit 30; bpf through x32 must not slip through
        assert run_bpf(program, 0x40000000 | 321, AUDIT_ARCH[arch]) == SECCOMP_RET_KILL_PROCESS
        assert run_bpf(program, 0x40000000 | 39, AUDIT_ARCH[arch]) == SECCOMP_RET_KILL_PROCESS


def test_an_unknown_architecture_has_no_filter() -> None:
    with pytest.raises(SeccompUnsupported, match="riscv64"):
        filter_program("riscv64")


HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("arch", sorted(SYSCALLS))
def test_tables_match_the_kernel_headers(arch: str) -> None:
    header = HEADERS[arch]
    if not header.exists():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    numbers = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text())
    }
    checked = 0
    for name, nr in SYSCALLS[arch].items():
        if name in numbers:  # newer calls (open_tree_attr) may postdate the installed headers
            assert numbers[name] == nr, name
            checked += 1
    assert checked >= len(SYSCALLS[arch]) - 2

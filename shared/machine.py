"""What a benchmark ran on, in one line: cores, CPU model, OS, and how busy the machine was."""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def load_average() -> str:
    with contextlib.suppress(OSError):
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    return "unknown"


def describe_machine() -> str:
    """``"2 cores (Intel(R) Xeon(R) Processor), Linux 6.1, load 0.4/0.3/0.2"`` (1/5/15-minute load averages)."""
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), {platform.system()} {platform.release()}, "
        f"load {load_average()}"
    )

"""Describe the machine a benchmark ran on: CPU, cores, memory, kernel, tool versions, and its load."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

TOOLS = {
    "clang-19": ["/usr/lib/llvm-19/bin/clang", "--version"],
    "ld.lld-19": ["/usr/lib/llvm-19/bin/ld.lld", "--version"],
    "gn": ["gn", "--version"],
    "ninja": ["ninja", "--version"],
}


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    memory_gib: float
    kernel: str
    python: str
    tools: dict[str, str]

    def one_line(self) -> str:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(self.tools.items()))
        return (f"{self.cpu}, {self.cores} cores, {self.memory_gib:.0f} GiB, Linux {self.kernel}, "
                f"Python {self.python}; {tools}")


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    line = out.strip().splitlines()[0] if out.strip() else "?"
    words = [w for w in line.split() if w[:1].isdigit()]
    return words[0] if words else line


def describe() -> Machine:
    cpu = platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = next(int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal"))
    return Machine(cpu=cpu, cores=os.cpu_count() or 1, memory_gib=mem_kib / 2**20, kernel=platform.release(),
                   python=platform.python_version(), tools={k: _first_line(v) for k, v in TOOLS.items()})


def load_average() -> float:
    """One-minute load average: how busy the machine was (other builds share it)."""
    return os.getloadavg()[0]


def busy_processes(limit: int = 5) -> list[str]:
    """The commands using the most CPU over the last second (top's second sample), for the report."""
    try:
        out = subprocess.run(["top", "-b", "-n", "2", "-d", "1", "-o", "%CPU", "-w", "200"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    sample = out.split("\ntop - ")[-1].splitlines()
    header = next((i for i, l in enumerate(sample) if l.strip().startswith("PID")), None)
    if header is None:
        return []
    busy = []
    for line in sample[header + 1:]:
        cols = line.split()
        if len(cols) >= 12 and float(cols[8]) >= 10.0:
            busy.append(f"{cols[11]} {float(cols[8]):.0f}%")
    return busy[:limit]

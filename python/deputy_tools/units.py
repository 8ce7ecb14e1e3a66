"""Byte sizes as the benchmarks print them (4K, 64K, 1M).

Figures and tables label transfer sizes the way `deputy bench` and
dsa_perf_micros' plots do, so a reader can match a bar to a command line.
"""

from __future__ import annotations

_SUFFIXES = (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10))


def format_size(size: int) -> str:
    """Exact binary-suffixed size: 4096 -> "4K", 1536 -> "1536", 0 -> "0"."""
    for suffix, scale in _SUFFIXES:
        if size >= scale and size % scale == 0:
            return f"{size // scale}{suffix}"
    return str(size)


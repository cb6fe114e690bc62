"""Keep freed memory in a long-running process, so that the next trace need not page it in again.

A 512-token trace allocates about 50 MB of fresh stage arrays. After each request glibc hands
most of it back to the system, and the next request takes a page fault on every 4 KiB of it:
about 4,000 faults, which cost more than the attention itself. The server calls
keep_freed_memory() once at start; other allocators (macOS, musl) are left alone.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt() parameters
MMAP_THRESHOLD = 32 << 20  # blocks up to this size come from the heap (glibc's own upper limit)
TRIM_THRESHOLD = 256 << 20  # the heap keeps up to this much free memory before giving it back


def keep_freed_memory() -> bool:
    """Ask glibc to reuse freed blocks instead of returning them; True if it agreed."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

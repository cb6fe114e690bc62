"""Set-up of a long-running server process: keep freed memory, and keep the garbage collector off
the objects that live as long as the process.

A 512-token trace allocates about 50 MB of fresh stage arrays. After each request glibc hands
most of it back to the system, and the next request takes a page fault on every 4 KiB of it:
about 4,000 faults, which cost more than the attention itself. The free memory so kept is held
in two heaps at most, not one for each thread that ran a trace. Other allocators (macOS, musl)
are left alone. `mha-explorer serve` calls settle_server_process() once, before serving.
"""

from __future__ import annotations

import ctypes
import gc

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt() parameters
MMAP_THRESHOLD = 32 << 20  # blocks up to this size come from the heap (glibc's own upper limit)
TRIM_THRESHOLD = 256 << 20  # the heap keeps up to this much free memory before giving it back
# Each heap (arena) keeps its own free memory: glibc gives a thread that finds the others busy a
# heap of its own, up to 8 a core, and the server's threads take turns at traces. With two heaps
# (the traces that run at once), rounds of 24 traces sent at once peaked at 1.90 GB, not 2.13.
ARENA_MAX = 2


def keep_freed_memory() -> bool:
    """Ask glibc to reuse freed blocks instead of returning them; True if it agreed."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(option, value) for option, value in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_ARENA_MAX, ARENA_MAX)))


def settle_server_process() -> None:
    """Once the app is built: keep freed memory, and move every object alive now (modules, the
    app, loaded tables) out of the collector's way, so that its pauses during requests are short."""
    keep_freed_memory()
    gc.collect()
    gc.freeze()

"""Big NumPy work split over the machine's cores.

NumPy runs each call on one core, except matrix products, which BLAS spreads over threads of its
own. A big layer instead splits its work into independent parts (heads, or blocks of rows): the
calling thread and a small pool of threads take them in turn, one thread a core; NumPy releases
the GIL inside each call. Meanwhile BLAS is held to one thread: its threads keep spinning between
calls and would take the pool's cores.

That limit is process-wide, so parallel parts take turns: a server tracing two requests at once
runs one request's parts, then the other's (each already fills every core). Without the turns, the
first to finish would give BLAS its threads back under the other's pool, and the last would leave
BLAS on one thread for good.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from threadpoolctl import ThreadpoolController

WORKERS = min(os.cpu_count() or 1, 8)
_PREFIX = "mha-part"
_pool = ThreadPoolExecutor(max_workers=WORKERS - 1, thread_name_prefix=_PREFIX) if WORKERS > 1 else None  # the caller is the last
_working = threading.local()  # .now is True in a calling thread while it takes parts itself
_blas = ThreadpoolController()
_turn = threading.RLock()  # held by the thread whose parts run on the pool (re-entrant: nested calls)

Each = Callable[[Callable, Iterable], None]  # each(task, items) runs task(item) for every item


def serially(task: Callable, items: Iterable) -> None:
    for item in items:
        task(item)


def in_parallel(task: Callable, items: Iterable) -> None:
    """task(item) for every item: the calling thread and the pool's take the items in turn. The
    first exception is raised once every thread has stopped; no item is started after it. Called
    from inside a part, it runs the items one after another: the pool's threads are taken."""
    if _inside_a_part():
        return serially(task, items)
    pending, taking, failures = iter(list(items)), threading.Lock(), []

    def work() -> None:
        while True:
            with taking:
                item = _NONE if failures else next(pending, _NONE)
            if item is _NONE:
                return
            try:
                task(item)
            except BaseException as failure:  # noqa: BLE001 - raised by the caller below
                failures.append(failure)

    # a helper runs in a copy of the caller's context, so np.errstate and the like hold there too
    helpers = [_pool.submit(contextvars.copy_context().run, work) for _ in range(WORKERS - 1)]
    was, _working.now = getattr(_working, "now", False), True
    try:
        work()
    except BaseException as failure:  # noqa: BLE001 - a KeyboardInterrupt between two parts
        failures.append(failure)
    finally:
        _working.now = was
    for helper in helpers:  # every helper stops before anything is raised: no part outlives the call
        while True:
            try:
                helper.result()
                break
            except BaseException as failure:  # noqa: BLE001 - a KeyboardInterrupt while waiting: the helpers stop after their part
                failures.append(failure)
                if helper.done():
                    break
    if failures:
        raise failures[0]


_NONE = object()  # no item left


def _inside_a_part() -> bool:
    return getattr(_working, "now", False) or threading.current_thread().name.startswith(_PREFIX)


@contextmanager
def cores(big: bool) -> Iterator[Each]:
    """Yield how to run independent parts: on every core (BLAS on one thread) when the work is
    big enough to repay the threads, else one after another. Inside a part it is always one after
    another: the pool's threads are taken."""
    if _pool is None or not big or _inside_a_part():
        yield serially
        return
    with _turn, _blas.limit(limits=1, user_api="blas"):
        yield in_parallel


def row_blocks(n: int) -> list[slice]:
    """n rows cut into one block per worker."""
    edges = np.linspace(0, n, WORKERS + 1).round().astype(int)
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def matmul(a: np.ndarray, b: np.ndarray, each: Each) -> np.ndarray:
    """a @ b for a 2-d a, one block of a's rows per task."""
    if each is serially:
        return a @ b
    out = np.empty((a.shape[0], b.shape[1]), np.result_type(a, b))
    each(lambda rows: np.matmul(a[rows], b, out=out[rows]), row_blocks(a.shape[0]))
    return out

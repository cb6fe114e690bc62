"""Big traces from several threads at once (the server's workers): same numbers, BLAS left as found."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from mha_explorer import parallel
from mha_explorer.config import AttentionConfig
from mha_explorer.trace import PARALLEL_ENTRIES, trace
from mha_explorer.weights import AttentionWeights

pytestmark = pytest.mark.unit

CONFIG = AttentionConfig(d_model=64, n_heads=4, d_head=16, causal=True)
N = 400  # n_heads * n * n = 640,000 >= PARALLEL_ENTRIES: the heads run on the pool


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.mark.skipif(parallel.WORKERS < 2, reason="one core: nothing runs in parallel")
def test_concurrent_traces_give_the_serial_numbers_and_give_blas_its_threads_back():
    assert CONFIG.n_heads * N * N >= PARALLEL_ENTRIES
    w = AttentionWeights.random(CONFIG, seed=3, dtype=np.float32)
    x = np.random.default_rng(3).standard_normal((N, CONFIG.d_model)).astype(np.float32)
    expected = trace(x, w, CONFIG)
    before = blas_threads()
    differ: list[str] = []

    def work() -> None:
        for _ in range(8):
            got = trace(x, w, CONFIG)
            differ.extend(name for name, a in got.stages.items() if not np.array_equal(a, expected[name]))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert differ == []
    # each trace limits BLAS to one thread while its heads run; overlapping limits used to leave
    # it there (the last to finish restored the value the others had set)
    assert blas_threads() == before


def test_inside_a_pool_task_parts_run_one_after_another():
    if parallel.WORKERS < 2:
        pytest.skip("one core: there is no pool")
    seen = []

    def task(_):
        with parallel.cores(True) as each:
            seen.append(each)

    with parallel.cores(True) as each:
        each(task, range(2))
    assert seen == [parallel.serially, parallel.serially]


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_every_part_runs_once_and_the_first_failure_is_raised_after_every_thread_stops(error):
    if parallel.WORKERS < 2:
        pytest.skip("one core: there is no pool")
    ran: list[int] = []
    with parallel.cores(True) as each:
        each(ran.append, range(50))
    assert sorted(ran) == list(range(50))  # the caller and the pool took them in turn

    started: list[int] = []
    running = threading.Event()

    def task(i: int) -> None:
        started.append(i)
        if i == 0:
            raise error("part 0 failed")
        running.wait(0.01)

    with parallel.cores(True) as each, pytest.raises(error, match="part 0 failed"):
        each(task, range(200))
    count = len(started)
    time.sleep(0.1)
    assert len(started) == count < 200  # every thread had stopped, and took no part once one had failed
    with parallel.cores(True) as each:  # the pool is free again
        ran.clear()
        each(ran.append, range(4))
    assert sorted(ran) == [0, 1, 2, 3]


def test_a_part_that_hands_out_parts_itself_runs_them_one_after_another():
    """Directly, with the `each` it was given, or through cores(): never waiting for a pool whose
    threads are all taken (which would never end), and on whichever thread the part runs."""
    if parallel.WORKERS < 2:
        pytest.skip("one core: there is no pool")
    seen, ran, given = [], [], {}

    def part(i: int) -> None:
        given["each"](ran.append, [i])
        with parallel.cores(True) as inner:  # after the direct call, as before it
            seen.append(inner)

    def run() -> None:
        with parallel.cores(True) as each:
            given["each"] = each
            each(part, range(6))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the parts waited for each other"
    assert sorted(ran) == list(range(6))
    assert seen == [parallel.serially] * 6


@pytest.mark.parametrize("workers", [2, 3])
def test_a_large_answer_is_gzipped_in_one_piece_a_core_and_reads_back_whole(monkeypatch, workers):
    """gzip_fast() joins pieces deflated on separate cores into one gzip stream: zlib's gzip reader
    gives back every byte from that one stream, across the size from which the pieces are made."""
    import zlib

    from mha_explorer import server

    monkeypatch.setattr(parallel, "WORKERS", workers)
    pieces = []
    real = parallel.in_parallel
    monkeypatch.setattr(parallel, "in_parallel", lambda task, items: pieces.append(list(items)) or real(task, pieces[-1]))
    rng = np.random.default_rng(workers)
    for size in (0, 1, 4099, server.PARALLEL_GZIP - 1, server.PARALLEL_GZIP, 3 * server.PARALLEL_GZIP + 7):
        data = rng.standard_normal(size // 4 + 1).astype(np.float32).tobytes()[:size]
        pieces.clear()
        zipped = server.gzip_fast(data)
        reader = zlib.decompressobj(31)  # one gzip stream (gzip.decompress would read several joined, too)
        assert reader.decompress(zipped) == data and reader.eof and not reader.unused_data, size
        parallel_here = size >= server.PARALLEL_GZIP and parallel.WORKERS > 1 and parallel._pool is not None  # (one core: one piece, serially)
        assert pieces == ([list(range(workers))] if parallel_here else []), size

"""trace() against torch.nn.MultiheadAttention on the same layer, in the same run.

The layer: d_model 384, 12 heads of width 32, biases (torch's default), float32.
Both sides get identical weights (torch's through `AttentionWeights.to_packed`) and
identical inputs; the outputs are compared before anything is timed. torch runs
its forward with need_weights=True and average_attn_weights=False, under
torch.no_grad(), with its default number of threads. trace() does strictly more
work: it also keeps q, k, v, the raw and scaled scores and every head's
contribution to the output, each a fresh array.

Two measurements, because the C allocator is shared within a process:

- isolated (the verdict): each side runs alone in its own fresh process, the
  two alternating, three processes per side and length. This is what each
  costs on its own, as in the server (which never imports torch). Both sides'
  processes keep freed memory as the server does (mha_explorer.memory).
- same process, interleaved: both in this process, alternating call by call.
  Robust to a busy machine, but each side's frees change when glibc hands
  memory back to the system, so each side's page faults depend on the other.

Target: trace() at most 3x torch's time at n = 512.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mha_explorer.config import AttentionConfig
from mha_explorer.memory import keep_freed_memory
from mha_explorer.trace import trace
from mha_explorer.weights import AttentionWeights

D_MODEL, N_HEADS = 384, 12
LENGTHS = (16, 128, 512)
TARGET_N, TARGET_RATIO = 512, 3.0
WARMUP = 5
MIN_REPEATS, MIN_SECONDS = 21, 1.5  # per measurement: at least this many timed calls (or rounds) and this long
PROCESSES = 3  # isolated: fresh processes per side and length
ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "trace.json"


def layer() -> tuple[AttentionConfig, AttentionWeights]:
    config = AttentionConfig(d_model=D_MODEL, n_heads=N_HEADS, bias=True)
    return config, AttentionWeights.random(config, seed=0, dtype=np.float32)


def tokens(n: int) -> np.ndarray:
    return np.random.default_rng(n).standard_normal((n, D_MODEL)).astype(np.float32)  # (n, d_model)


def torch_layer(weights: AttentionWeights, config: AttentionConfig):
    import torch

    mha = torch.nn.MultiheadAttention(config.d_model, config.n_heads, bias=config.bias, batch_first=True)
    with torch.no_grad():
        for name, a in weights.to_packed(config).items():
            mha.get_parameter(name).copy_(torch.from_numpy(np.ascontiguousarray(a)))
    return mha.eval()


def callables(n: int, sides=("ours", "torch")) -> dict:
    """side -> a no-argument call running that side's forward pass on n tokens."""
    config, weights = layer()
    x = tokens(n)
    calls = {}
    if "ours" in sides:
        calls["ours"] = lambda: trace(x, weights, config)
    if "torch" in sides:
        import torch

        mha, xt = torch_layer(weights, config), torch.from_numpy(x)[None]  # (1, n, d_model)

        def forward():
            with torch.no_grad():
                return mha(xt, xt, xt, need_weights=True, average_attn_weights=False)

        calls["torch"] = forward
    return calls


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def timed(fn) -> tuple[float, int]:
    f0, t0 = minor_faults(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, minor_faults() - f0


def summary(times: list[float], faults: list[int]) -> dict:
    return {
        "median_ms": round(statistics.median(times) * 1e3, 4),
        "min_ms": round(min(times) * 1e3, 4),
        "page_faults": int(statistics.median(faults)),
        "calls": len(times),
    }


def measure_alone(fn) -> dict:
    """Median wall time of fn() after warm-up, with minor page faults per call."""
    for _ in range(WARMUP):
        fn()
    times, faults = [], []
    start = time.perf_counter()
    while len(times) < MIN_REPEATS or time.perf_counter() - start < MIN_SECONDS:
        t, f = timed(fn)
        times.append(t)
        faults.append(f)
    return summary(times, faults)


def measure_interleaved(calls: dict) -> dict:
    """Both sides in this process, alternating call by call (order swapped every round)."""
    sides = list(calls)
    for _ in range(WARMUP):
        for side in sides:
            calls[side]()
    times: dict[str, list[float]] = {s: [] for s in sides}
    faults: dict[str, list[int]] = {s: [] for s in sides}
    start = time.perf_counter()
    rounds = 0
    while rounds < MIN_REPEATS or time.perf_counter() - start < MIN_SECONDS:
        for side in sides if rounds % 2 == 0 else sides[::-1]:
            t, f = timed(calls[side])
            times[side].append(t)
            faults[side].append(f)
        rounds += 1
    return {side: summary(times[side], faults[side]) for side in sides}


def isolated(side: str, n: int) -> dict:
    """Measure one side in a fresh process (this module run with --worker)."""
    done = subprocess.run(
        [sys.executable, "-m", f"{__package__ or 'benchmarks'}.bench_trace", "--worker", side, str(n)],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_same_numbers(n: int) -> None:
    """A fast wrong answer is not a result: both sides must agree before anything is timed."""
    calls = callables(n)
    t = calls["ours"]()
    y, a = calls["torch"]()
    for name, arr in t.stages.items():
        assert arr.dtype == np.float32, f"trace() returned {name} as {arr.dtype} for a float32 layer"
    np.testing.assert_allclose(t["output"], y[0].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(t["weights"], a[0].numpy(), rtol=1e-4, atol=1e-6)


def ratio(ours: float, theirs: float) -> float:
    return round(ours / theirs, 3)


def main() -> dict:
    import torch

    load_before = os.getloadavg()
    for n in LENGTHS:
        check_same_numbers(n)

    isolated_rows, shared_rows = [], []
    for n in LENGTHS:
        runs: dict[str, list[dict]] = {"ours": [], "torch": []}
        for p in range(PROCESSES):
            for side in ("ours", "torch") if p % 2 == 0 else ("torch", "ours"):
                runs[side].append(isolated(side, n))
        row = {"n": n}
        for side in ("ours", "torch"):
            row[f"{side}_ms"] = round(statistics.median(r["median_ms"] for r in runs[side]), 4)
            row[f"{side}_page_faults"] = int(statistics.median(r["page_faults"] for r in runs[side]))
            row[f"{side}_per_process_ms"] = [r["median_ms"] for r in runs[side]]
        row["ratio"] = ratio(row["ours_ms"], row["torch_ms"])
        isolated_rows.append(row)

        m = measure_interleaved(callables(n))
        shared_rows.append(
            {
                "n": n,
                "ours_ms": m["ours"]["median_ms"],
                "torch_ms": m["torch"]["median_ms"],
                "ratio": ratio(m["ours"]["median_ms"], m["torch"]["median_ms"]),
                "ours_page_faults": m["ours"]["page_faults"],
                "torch_page_faults": m["torch"]["page_faults"],
                "rounds": m["ours"]["calls"],
            }
        )
    load_after = os.getloadavg()

    at_target = next(r for r in isolated_rows if r["n"] == TARGET_N)
    verdict = "PASS" if at_target["ratio"] <= TARGET_RATIO else "MISS"
    shared_at_target = next(r for r in shared_rows if r["n"] == TARGET_N)

    print(f"trace() vs torch.nn.MultiheadAttention: d_model {D_MODEL}, {N_HEADS} heads, bias, float32")
    print(
        f"median wall time after {WARMUP} warm-up calls, >= {MIN_REPEATS} calls and >= {MIN_SECONDS:g} s per measurement; "
        f"torch threads: {torch.get_num_threads()}"
    )
    header = f"{'n':>6} {'trace() ms':>11} {'torch ms':>10} {'ours/torch':>11} {'page faults/call':>18}"
    for title, rows in (
        (f"isolated: each side alone in a fresh process, {PROCESSES} processes each, median of their medians", isolated_rows),
        ("same process, the two calls interleaved", shared_rows),
    ):
        print()
        print(title)
        print(header)
        for r in rows:
            faults = f"{r['ours_page_faults']} / {r['torch_page_faults']}"
            print(f"{r['n']:>6} {r['ours_ms']:>11.3f} {r['torch_ms']:>10.3f} {r['ratio']:>10.2f}x {faults:>18}")
    print()
    print(
        f"target: ours/torch <= {TARGET_RATIO:g}x at n = {TARGET_N} (isolated): {verdict} ({at_target['ratio']:.2f}x; "
        f"same process: {shared_at_target['ratio']:.2f}x)"
    )
    print(
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} CPUs "
        "(other work on the machine slows both columns)"
    )

    result = {
        "benchmark": "trace",
        "layer": {"d_model": D_MODEL, "n_heads": N_HEADS, "d_head": D_MODEL // N_HEADS, "bias": True, "dtype": "float32"},
        "target": {"n": TARGET_N, "max_ratio": TARGET_RATIO, "measured": "isolated", "verdict": verdict},
        "isolated": isolated_rows,
        "same_process": shared_rows,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "load_average_1min": {"before": round(load_before[0], 2), "after": round(load_after[0], 2)},
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written: {RESULTS.relative_to(ROOT.parent)}")
    return result


def worker(side: str, n: int) -> None:
    """One side, alone in this process (torch is imported only for the torch side); prints JSON."""
    keep_freed_memory()
    print(json.dumps(measure_alone(callables(n, sides=(side,))[side])))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()

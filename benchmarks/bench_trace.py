"""trace() against torch.nn.MultiheadAttention on the same layer, in the same run.

The layer: d_model 384, 12 heads of width 32, biases (torch's default), float32.
Both sides get identical weights (torch's through `AttentionWeights.to_packed`) and
identical inputs; the outputs are compared before anything is timed. torch runs
its forward with need_weights=True and average_attn_weights=False, under
torch.no_grad(), with its default number of threads. trace() does strictly more
work: it also keeps q, k, v, the raw and scaled scores and every head's
contribution to the output.

Target: trace() at most 3x torch's time at n = 512.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from mha_explorer.config import AttentionConfig
from mha_explorer.trace import trace
from mha_explorer.weights import AttentionWeights

D_MODEL, N_HEADS = 384, 12
LENGTHS = (16, 128, 512)
TARGET_N, TARGET_RATIO = 512, 3.0
WARMUP = 5
MIN_REPEATS, MIN_SECONDS = 15, 1.0  # per side and length: at least this many runs and this long
RESULTS = Path(__file__).resolve().parent / "results" / "trace.json"


def median_ms(fn) -> tuple[float, int]:
    """Median wall time of fn() in ms after warm-up, and how many timed runs it took."""
    for _ in range(WARMUP):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MIN_REPEATS or time.perf_counter() - start < MIN_SECONDS:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, len(times)


def torch_layer(weights: AttentionWeights, config: AttentionConfig):
    import torch

    mha = torch.nn.MultiheadAttention(config.d_model, config.n_heads, bias=config.bias, batch_first=True)
    with torch.no_grad():
        for name, a in weights.to_packed(config).items():
            mha.get_parameter(name).copy_(torch.from_numpy(np.ascontiguousarray(a)))
    return mha.eval()


def main() -> dict:
    import torch

    config = AttentionConfig(d_model=D_MODEL, n_heads=N_HEADS, bias=True)
    weights = AttentionWeights.random(config, seed=0, dtype=np.float32)
    mha = torch_layer(weights, config)
    rng = np.random.default_rng(1)

    rows = []
    for n in LENGTHS:
        x = rng.standard_normal((n, D_MODEL)).astype(np.float32)
        xt = torch.from_numpy(x)[None]  # (1, n, d_model)

        def ours():
            return trace(x, weights, config)

        def theirs():
            with torch.no_grad():
                return mha(xt, xt, xt, need_weights=True, average_attn_weights=False)

        # same numbers first: a fast wrong answer is not a result
        t = ours()
        y, a = theirs()
        assert t["output"].dtype == np.float32, f"trace() returned {t['output'].dtype} for float32 input"
        np.testing.assert_allclose(t["output"], y[0].numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(t["weights"], a[0].numpy(), rtol=1e-4, atol=1e-6)

        ours_ms, ours_runs = median_ms(ours)
        torch_ms, torch_runs = median_ms(theirs)
        rows.append(
            {
                "n": n,
                "ours_ms": round(ours_ms, 4),
                "torch_ms": round(torch_ms, 4),
                "ratio": round(ours_ms / torch_ms, 3),
                "runs": {"ours": ours_runs, "torch": torch_runs},
            }
        )

    at_target = next(r for r in rows if r["n"] == TARGET_N)
    verdict = "PASS" if at_target["ratio"] <= TARGET_RATIO else "MISS"

    print(f"trace() vs torch.nn.MultiheadAttention: d_model {D_MODEL}, {N_HEADS} heads, bias, float32")
    print(f"median of >= {MIN_REPEATS} runs (>= {MIN_SECONDS:g} s) after {WARMUP} warm-up runs; torch threads: {torch.get_num_threads()}")
    print()
    print(f"{'n':>6} {'trace() ms':>12} {'torch ms':>12} {'ours/torch':>11}")
    for r in rows:
        print(f"{r['n']:>6} {r['ours_ms']:>12.3f} {r['torch_ms']:>12.3f} {r['ratio']:>10.2f}x")
    print()
    print(f"target: ours/torch <= {TARGET_RATIO:g}x at n = {TARGET_N}: {verdict} ({at_target['ratio']:.2f}x)")

    result = {
        "benchmark": "trace",
        "layer": {"d_model": D_MODEL, "n_heads": N_HEADS, "d_head": D_MODEL // N_HEADS, "bias": True, "dtype": "float32"},
        "target": {"n": TARGET_N, "max_ratio": TARGET_RATIO, "verdict": verdict},
        "rows": rows,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written: {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")
    return result


if __name__ == "__main__":
    main()

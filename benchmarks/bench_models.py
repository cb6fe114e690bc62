"""Real models: a 512-token MiniLM layer against transformers, and the memory of a server with two models.

1. Time. all-MiniLM-L6-v2 on a text of exactly 512 tokens (its longest). Ours, float32, NumPy:
   - `trace_layer`: trace() of layer 5 on that layer's real input (the attention alone);
   - `run_layer`: LoadedModel.run(text, 5) from scratch (tokenize, embeddings and layers 0-4,
     then the trace of layer 5), with the cached residual streams dropped before every call.
   The reference: transformers' BertModel (eager attention) forward over all 6 layers with
   output_attentions=True, under torch.no_grad(), with torch's default number of threads. Both
   sides are checked to agree before anything is timed; the three calls alternate round by round.
   Reported as ratios ours / reference.

2. Memory. A fresh process imports the server, loads MiniLM and SmolLM2 and traces the longest text
   each accepts (512 and 1024 tokens) at its last layer; the peak resident memory of that process
   (ru_maxrss) is the number. Target: under 2.5 GB.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "models.json"
LAYER = 5
WARMUP, MIN_REPEATS, MIN_SECONDS = 2, 10, 2.0
MEMORY_TARGET_GB = 2.5
WORDS = "attention lets every token read from every other token while each head learns its own pattern".split()


def text_of(model, n_tokens: int) -> str:
    """A text that the model's tokenizer cuts into exactly n_tokens tokens (special ones included)."""
    words = [WORDS[0]]
    while len(model.tokenize(" ".join(words))) < n_tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    while len(model.tokenize(" ".join(words))) > n_tokens:
        words.pop()
    text = " ".join(words)
    while len(model.tokenize(text)) < n_tokens:
        text += " ."
    assert len(model.tokenize(text)) == n_tokens, len(model.tokenize(text))
    return text


def interleaved(calls: dict) -> tuple[dict[str, float], int]:
    """Median ms of each call, the calls alternating round by round (order reversed every other
    round), so that a machine busy with other work slows every side alike."""
    names = list(calls)
    for _ in range(WARMUP):
        for name in names:
            calls[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    start, rounds = time.perf_counter(), 0
    while rounds < MIN_REPEATS or time.perf_counter() - start < MIN_SECONDS:
        for name in names if rounds % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    return {name: round(statistics.median(t) * 1e3, 3) for name, t in times.items()}, rounds


def time_minilm() -> dict:
    import torch
    from transformers import AutoModel

    from mha_explorer.models import load_model
    from mha_explorer.trace import trace

    os.environ["HF_HUB_OFFLINE"] = "1"
    model = load_model("minilm")
    text = text_of(model, 512)
    run = model.run(text, LAYER)
    x, weights, config = run.trace["x"], run.weights, run.config
    ids = torch.from_numpy(run.ids[None])
    reference = AutoModel.from_pretrained(model.source, attn_implementation="eager", dtype=torch.float32).eval()

    def reference_forward():
        with torch.no_grad():
            return reference(input_ids=ids, output_attentions=True)

    out = reference_forward()  # a fast wrong answer is not a result
    np.testing.assert_allclose(run.trace["weights"], out.attentions[LAYER][0].numpy(), atol=1e-4)

    def run_from_scratch():
        model.forget()
        return model.run(text, LAYER)

    medians, rounds = interleaved(
        {"trace": lambda: trace(x, weights, config), "run": run_from_scratch, "reference": reference_forward}
    )
    trace_ms, run_ms, reference_ms = medians["trace"], medians["run"], medians["reference"]
    trace_calls = rounds
    return {
        "model": "minilm",
        "n_tokens": len(run.tokens),
        "layer": LAYER,
        "trace_layer_ms": trace_ms,
        "run_layer_ms": run_ms,
        "reference_forward_ms": reference_ms,
        "trace_layer_ratio": round(trace_ms / reference_ms, 3),
        "run_layer_ratio": round(run_ms / reference_ms, 3),
        "rounds": trace_calls,
        "torch_threads": torch.get_num_threads(),
    }


def memory_worker() -> None:
    """In a fresh process: the server's imports, two models loaded, their longest texts traced."""
    import resource

    from mha_explorer import server  # noqa: F401 - what the server process holds
    from mha_explorer.models import load_model

    loaded = {}
    for name in ("minilm", "smollm2"):
        model = load_model(name)
        run = model.run(text_of(model, model.max_tokens), model.n_layers - 1)
        loaded[name] = {"n_tokens": len(run.tokens), "layer": run.layer}
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"peak_rss_gb": round(peak_kib / 2**20, 3), "traced": loaded, "torch_imported": "torch" in sys.modules}))


def measure_memory() -> dict:
    done = subprocess.run(
        [sys.executable, "-m", f"{__package__ or 'benchmarks'}.bench_models", "--memory-worker"],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["target_gb"] = MEMORY_TARGET_GB
    result["verdict"] = "PASS" if result["peak_rss_gb"] < MEMORY_TARGET_GB else "MISS"
    return result


def main() -> dict:
    from mha_explorer.models import available_models

    missing = [i.name for i in available_models() if not i.installed and i.name in ("minilm", "smollm2")]
    if missing:
        print(f"skipped: {', '.join(missing)} not installed (make models)")
        return {}
    timing = time_minilm()
    memory = measure_memory()
    result = {
        "benchmark": "models",
        "minilm_512_tokens": timing,
        "server_memory": memory,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "numpy": np.__version__},
    }
    print(
        f"MiniLM, 512 tokens, layer {LAYER}: trace {timing['trace_layer_ms']} ms, run from scratch "
        f"{timing['run_layer_ms']} ms, transformers forward {timing['reference_forward_ms']} ms "
        f"(ratios {timing['trace_layer_ratio']} and {timing['run_layer_ratio']})"
    )
    print(f"server with MiniLM and SmolLM2: peak {memory['peak_rss_gb']} GB (target < {MEMORY_TARGET_GB}: {memory['verdict']})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written: {RESULTS.relative_to(ROOT.parent)}")
    return result


if __name__ == "__main__":
    if sys.argv[1:] == ["--memory-worker"]:
        memory_worker()
    else:
        main()

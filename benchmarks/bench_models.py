"""Real models: a 512-token MiniLM layer against transformers, and the memory of a server with two models.

1. Time. all-MiniLM-L6-v2 on a text of exactly 512 tokens (its longest). Ours, float32, NumPy:
   - `trace_layer`: trace() of layer 5 on that layer's real input (the attention alone);
   - `run_layer`: LoadedModel.run(text, 5) from scratch (tokenize, embeddings and layers 0-4,
     then the trace of layer 5), with the cached residual streams dropped before every call: the
     last layer is the most work, so it is the headline; every other layer is timed too.
   The reference: transformers' BertModel (eager attention) forward over all 6 layers with
   output_attentions=True, under torch.no_grad(), with torch's default number of threads. Both
   sides are checked to agree before anything is timed; the three calls take turns in short blocks.
   The process keeps freed memory as the server does (mha_explorer.memory), for both sides.
   Reported as ratios ours / reference.

2. Memory. A fresh process imports the server, loads MiniLM and SmolLM2 and traces the longest text
   each accepts (512 and 1024 tokens) at its last layer; the peak resident memory of that process
   (ru_maxrss) is the number. Then the server itself (`mha-explorer serve`) with both models, under
   load: rounds of 24 requests sent at once (16 SmolLM2 traces of 1,024 tokens at spread layers,
   8 MiniLM traces of 512 tokens, as the page asks for them), each round on new texts; the server
   computes 18 of each round (2 at a time, 16 waiting) and tells the rest to retry. The peak
   resident memory of the server process (VmHWM). Target: under 2.5 GB, with every round's 18
   computed.
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
WARMUP, MIN_REPEATS, MIN_SECONDS = 2, 5, 2.0
BLOCK = 3  # timed calls per turn
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
    """Median ms of each call, the calls taking turns in short blocks (order reversed every other
    round), so that a machine busy with other work slows every side alike. The first call of each
    block is not timed: torch's OpenMP threads keep spinning for a while after its forward and
    would take cores from whichever call came next."""
    names = list(calls)
    for _ in range(WARMUP):
        for name in names:
            calls[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    start, rounds = time.perf_counter(), 0
    while rounds < MIN_REPEATS or time.perf_counter() - start < MIN_SECONDS:
        for name in names if rounds % 2 == 0 else names[::-1]:
            calls[name]()  # settles the machine after the previous block
            for _ in range(BLOCK):
                t0 = time.perf_counter()
                calls[name]()
                times[name].append(time.perf_counter() - t0)
        rounds += 1
    return {name: round(statistics.median(t) * 1e3, 3) for name, t in times.items()}, rounds


def from_scratch(model, text: str, layer: int):
    """A call that runs the model up to layer and traces it, its cached residual streams dropped first."""

    def run():
        model.forget()
        return model.run(text, layer)

    return run


def forward_with_attentions(reference, ids):
    """A call of transformers' full forward with output_attentions, under torch.no_grad()."""
    import torch

    def forward():
        with torch.no_grad():
            return reference(input_ids=ids, output_attentions=True)

    return forward


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

    reference_forward = forward_with_attentions(reference, ids)
    out = reference_forward()  # a fast wrong answer is not a result
    np.testing.assert_allclose(run.trace["weights"], out.attentions[LAYER][0].numpy(), atol=1e-4)

    calls = {"trace": lambda: trace(x, weights, config), "reference": reference_forward}
    calls |= {f"run {layer}": from_scratch(model, text, layer) for layer in range(model.n_layers)}
    medians, rounds = interleaved(calls)
    trace_ms, run_ms, reference_ms = medians["trace"], medians[f"run {LAYER}"], medians["reference"]
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
        # the same run for every layer: the layers before the traced one are the cost
        "run_ratio_by_layer": {layer: round(medians[f"run {layer}"] / reference_ms, 3) for layer in range(model.n_layers)},
        "rounds": trace_calls,
        "torch_threads": torch.get_num_threads(),
    }


def time_smollm2() -> dict:
    """SmolLM2 on 512 tokens: our run up to a layer and trace of it, against transformers' full
    forward of the same GGUF weights with output_attentions. The last layer (29) is the most work,
    so it is the headline; the middle one (15) is timed too. Target: at most 1.5x."""
    import torch
    from transformers import AutoModelForCausalLM

    from mha_explorer.models import load_model

    model = load_model("smollm2")
    text = text_of(model, 512)
    layers = (model.n_layers // 2, model.n_layers - 1)
    runs = {layer: model.run(text, layer) for layer in layers}
    ids = torch.from_numpy(runs[layers[0]].ids[None])
    folder, name = os.path.split(model.source)
    reference = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="eager", dtype=torch.float32).eval()

    reference_forward = forward_with_attentions(reference, ids)
    out = reference_forward()
    for layer, run in runs.items():  # a fast wrong answer is not a result
        np.testing.assert_allclose(run.trace["weights"], out.attentions[layer][0].numpy(), atol=1e-3)

    medians, rounds = interleaved({"reference": reference_forward} | {f"run {layer}": from_scratch(model, text, layer) for layer in layers})
    last = layers[-1]
    return {
        "model": "smollm2",
        "n_tokens": len(runs[last].tokens),
        "layer": last,
        "run_layer_ms": medians[f"run {last}"],
        "reference_forward_ms": medians["reference"],
        "run_layer_ratio": round(medians[f"run {last}"] / medians["reference"], 3),
        "run_ratio_by_layer": {layer: round(medians[f"run {layer}"] / medians["reference"], 3) for layer in layers},
        "rounds": rounds,
        "target_ratio": 1.5,
    }


LOAD_WORKER = """
import json, os, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"
which, name = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if which == "ours":
    from mha_explorer.models import load_model
    load_model(name)
else:
    import torch
    from transformers import AutoModel, AutoModelForCausalLM
    from mha_explorer.models import available_models
    location = next(i.location for i in available_models() if i.name == name)
    t0 = time.perf_counter()
    if name == "minilm":
        AutoModel.from_pretrained(os.path.dirname(location) if location.endswith(".safetensors") else location, attn_implementation="eager")
    else:
        folder, file = os.path.split(location)
        AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, attn_implementation="eager", dtype=torch.float32)
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def time_loads() -> dict:
    """First load in a fresh process (imports included for ours), against transformers' load of the
    same files (its imports excluded). Targets: MiniLM under 2 s, SmolLM2 under 10 s."""
    out = {}
    for name, target in (("minilm", 2.0), ("smollm2", 10.0)):
        row = {"target_s": target}
        for which in ("ours", "transformers"):
            done = subprocess.run([sys.executable, "-c", LOAD_WORKER, which, name], capture_output=True, text=True, timeout=600)
            if done.returncode:
                row[f"{which}_error"] = done.stderr.strip().splitlines()[-1][:200]
                continue
            row[f"{which}_s"] = round(json.loads(done.stdout.strip().splitlines()[-1])["seconds"], 2)
        if "ours_s" in row and "transformers_s" in row:
            row["ratio"] = round(row["ours_s"] / row["transformers_s"], 2)
        out[name] = row
    return out


def memory_worker() -> None:
    """In a fresh process: the server's imports, two models loaded, their longest texts traced."""
    from mha_explorer import server  # noqa: F401 - what the server process holds
    from mha_explorer.memory import keep_freed_memory
    from mha_explorer.models import load_model

    keep_freed_memory()  # as `mha-explorer serve` does
    loaded = {}
    for name in ("minilm", "smollm2"):
        model = load_model(name)
        run = model.run(text_of(model, model.max_tokens), model.n_layers - 1)
        loaded[name] = {"n_tokens": len(run.tokens), "layer": run.layer}
    # VmHWM, the peak of this process's own memory: ru_maxrss would also count the parent it was
    # forked from (it survives exec), and the parent holds torch and transformers by then
    status = Path("/proc/self/status").read_text()
    peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    print(json.dumps({"peak_rss_gb": round(peak_kib / 2**20, 3), "traced": loaded, "torch_imported": "torch" in sys.modules}))


def server_under_load(rounds: int = 4, at_once: int = 24) -> dict:
    """The server's own peak memory with MiniLM and SmolLM2, under rounds of concurrent traces."""
    import socket
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from mha_explorer.models import load_model

    texts = {name: [text_of(model, model.max_tokens - 8 * r) for r in range(rounds)] for name in ("minilm", "smollm2") for model in [load_model(name)]}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    server = subprocess.Popen([sys.executable, "-m", "mha_explorer", "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    statuses: dict[int, int] = {}
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.get("api/health")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            for name in texts:
                client.post(f"api/models/{name}/load")
                while client.get(f"api/models/{name}").json()["state"] == "loading":
                    time.sleep(0.2)

            def trace(request: dict) -> int:
                return client.post("api/model-trace", json=request | {"encoding": "binary"}, headers={"Accept-Encoding": "gzip"}).status_code

            for r in range(rounds):
                requests = [{"model": "smollm2", "text": texts["smollm2"][r], "layer": (2 * i + r) % 30, "head": i % 9} for i in range(at_once * 2 // 3)]
                requests += [{"model": "minilm", "text": texts["minilm"][r], "layer": i % 6, "head": i % 12} for i in range(at_once - len(requests))]
                with ThreadPoolExecutor(at_once) as pool:
                    for status in pool.map(trace, requests):
                        statuses[status] = statuses.get(status, 0) + 1
        peak_kib = int(next(line.split()[1] for line in Path(f"/proc/{server.pid}/status").read_text().splitlines() if line.startswith("VmHWM:")))
    finally:
        server.terminate()
        server.wait(timeout=30)
    peak = round(peak_kib / 2**20, 3)
    computed = statuses.get(200, 0) >= rounds * min(at_once, 18) and set(statuses) <= {200, 503}  # a refused trace holds no memory
    return {"peak_rss_gb": peak, "rounds": rounds, "at_once": at_once, "statuses": statuses, "verdict": "PASS" if peak < MEMORY_TARGET_GB and computed else "MISS"}


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
    from mha_explorer.memory import keep_freed_memory

    keep_freed_memory()  # as `mha-explorer serve` does
    timing = time_minilm()
    smol = time_smollm2()
    loads = time_loads()
    memory = measure_memory()
    memory["server_under_load"] = server_under_load()
    result = {
        "benchmark": "models",
        "minilm_512_tokens": timing,
        "smollm2_512_tokens": smol,
        "first_load": loads,
        "server_memory": memory,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "numpy": np.__version__},
    }
    print(
        f"MiniLM, 512 tokens, layer {LAYER}: trace {timing['trace_layer_ms']} ms, run from scratch "
        f"{timing['run_layer_ms']} ms, transformers forward {timing['reference_forward_ms']} ms "
        f"(ratios {timing['trace_layer_ratio']} and {timing['run_layer_ratio']})"
    )
    by_layer = ", ".join(f"{layer}: {ratio}" for layer, ratio in timing["run_ratio_by_layer"].items())
    print(f"MiniLM run from scratch / transformers forward, by traced layer (target <= 1): {by_layer}")
    print(
        f"SmolLM2, 512 tokens, layer {smol['layer']}: run from scratch {smol['run_layer_ms']} ms, transformers "
        f"forward {smol['reference_forward_ms']} ms (ratio {smol['run_layer_ratio']}, target <= 1.5; "
        + ", ".join(f"layer {layer}: {ratio}" for layer, ratio in smol["run_ratio_by_layer"].items())
        + ")"
    )
    for name, row in loads.items():
        print(f"first load of {name}: ours {row.get('ours_s')} s, transformers {row.get('transformers_s')} s (target < {row['target_s']} s)")
    print(f"server with MiniLM and SmolLM2: peak {memory['peak_rss_gb']} GB (target < {MEMORY_TARGET_GB}: {memory['verdict']})")
    loaded = memory["server_under_load"]
    print(
        f"the server itself, {loaded['rounds']} rounds of {loaded['at_once']} traces at once (SmolLM2 1,024 tokens, MiniLM 512; answers {loaded['statuses']}):"
        f" peak {loaded['peak_rss_gb']} GB (target < {MEMORY_TARGET_GB}: {loaded['verdict']})"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written: {RESULTS.relative_to(ROOT.parent)}")
    return result


if __name__ == "__main__":
    if sys.argv[1:] == ["--memory-worker"]:
        memory_worker()
    else:
        main()

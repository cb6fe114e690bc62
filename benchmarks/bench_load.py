"""Load on loopback: 50 clients for 30 s on the teaching trace, 8 clients on 128-token MiniLM traces.

The server runs as its own process (`mha-explorer serve`). The clients are Debian's wrk (a small C
load generator, installed by `make bench`); without it they are asyncio tasks in this process, which
on two cores cost about as much CPU as the server and so measure the client as much as the server.
Both share the machine's two cores. Every run is bounded in time and stops by itself.
Reported: requests per second, p50/p99 latency, errors, and the server's resident memory in the
first and the last 10 s. Targets: no errors, at least 500 requests/s on the teaching trace, memory
growing less than 10% from the first to the last 10 s.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
TEXT_128 = " ".join(["the quick brown fox jumps over the lazy dog"] * 14)  # 128 tokens with [CLS] and [SEP]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def hammer(url: str, clients: int, seconds: float, request, pid: int) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    memory: list[tuple[float, float]] = []
    start = time.monotonic()
    stop = start + seconds

    async def client(http: httpx.AsyncClient) -> None:
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            try:
                response = await request(http)
                if response.status_code != 200:
                    errors.append(str(response.status_code))
            except httpx.HTTPError as error:
                errors.append(type(error).__name__)
            latencies.append(time.perf_counter() - t0)

    async def sample_memory() -> None:
        while time.monotonic() < stop:
            memory.append((time.monotonic() - start, rss_mb(pid)))
            await asyncio.sleep(0.5)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as http:
        await asyncio.gather(sample_memory(), *(client(http) for _ in range(clients)))
    elapsed = time.monotonic() - start
    lat = np.array(latencies) * 1000
    first = [m for t, m in memory if t <= 10]
    last = [m for t, m in memory if t >= seconds - 10]
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "errors": len(errors),
        "error_kinds": sorted(set(errors))[:5],
        "rss_first_10s_mb": round(float(np.mean(first)), 1),
        "rss_last_10s_mb": round(float(np.mean(last)), 1),
    }


def run_wrk(url: str, path: str, clients: int, seconds: int, pid: int, body: dict | None = None) -> dict:
    """wrk on one path; memory sampled meanwhile. wrk's own report gives the rate and latencies."""
    script = None
    args = ["wrk", "-t2", f"-c{clients}", f"-d{seconds}s", "--latency", "--timeout", "30s"]
    if body is not None:
        script = Path(RESULTS / "post.lua")
        RESULTS.mkdir(exist_ok=True)
        script.write_text(
            'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            f"wrk.body = [[{json.dumps(body)}]]\n"
        )
        args += ["-s", str(script)]
    process = subprocess.Popen([*args, url + path], stdout=subprocess.PIPE, text=True)
    memory, start = [], time.monotonic()
    while process.poll() is None:
        memory.append((time.monotonic() - start, rss_mb(pid)))
        time.sleep(0.5)
    out = process.stdout.read()
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(bad.group(1)) if bad else 0) + (sum(int(x) for x in sock.groups()) if sock else 0)

    def percentile(p: str) -> float:
        value, unit = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)\b", out).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    first = [m for t, m in memory if t <= 10]
    last = [m for t, m in memory if t >= seconds - 10]
    return {
        "client": "wrk",
        "clients": clients,
        "seconds": seconds,
        "requests": requests,
        "requests_per_s": rate,
        "p50_ms": percentile("50"),
        "p99_ms": percentile("99"),
        "errors": errors,
        "rss_first_10s_mb": round(float(np.mean(first)), 1),
        "rss_last_10s_mb": round(float(np.mean(last)), 1),
    }


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("mha-explorer")
    server = subprocess.Popen([str(exe), "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)
        wrk = shutil.which("wrk")
        if wrk:
            teaching = run_wrk(url, "/api/example", 50, 30, server.pid)
        else:
            teaching = asyncio.run(hammer(url, 50, 30, lambda http: http.get("/api/example"), server.pid))
        httpx.post(url + "/api/models/minilm/load", timeout=30)
        while httpx.get(url + "/api/models/minilm", timeout=30).json()["state"] == "loading":
            time.sleep(0.2)
        body = {"model": "minilm", "text": TEXT_128, "layer": 3, "head": 0}
        if wrk:
            minilm = run_wrk(url, "/api/model-trace", 8, 30, server.pid, body)
        else:
            minilm = asyncio.run(hammer(url, 8, 30, lambda http: http.post("/api/model-trace", json=body), server.pid))
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = {"teaching_trace": teaching, "minilm_128_tokens": minilm, "targets": {"errors": 0, "teaching_requests_per_s": 500, "memory_growth": 0.10}}
    for name, row in (("teaching trace, 50 clients", teaching), ("MiniLM 128 tokens, 8 clients", minilm)):
        growth = row["rss_last_10s_mb"] / row["rss_first_10s_mb"] - 1
        row["memory_growth"] = round(growth, 3)
        print(
            f"{name:<30} {row['requests_per_s']:>8.1f} req/s  p50 {row['p50_ms']:>7.1f} ms  p99 {row['p99_ms']:>7.1f} ms  "
            f"errors {row['errors']}  memory {row['rss_first_10s_mb']:.0f} -> {row['rss_last_10s_mb']:.0f} MB ({100 * growth:+.1f}%)"
        )
    ok = teaching["requests_per_s"] >= 500 and teaching["errors"] == 0 and minilm["errors"] == 0
    print(f"targets (no errors, >= 500 req/s on the teaching trace, memory growth < 10%): {'PASS' if ok and max(teaching['memory_growth'], minilm['memory_growth']) < 0.10 else 'MISS'}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "load.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

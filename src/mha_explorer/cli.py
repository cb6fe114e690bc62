"""`mha-explorer`: the command line. It only translates arguments into calls of the core."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace

import click
from rich.console import Console

from .examples import load_teaching_example
from .narrative import PAGE_STAGE_IDS, page_stages
from .schema import trace_payload
from .trace import trace as run_trace
from .walkthrough import render


def fail(message: str) -> None:
    """One line on stderr saying what is allowed, exit status 2, no traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group()
@click.version_option(package_name="mha-explorer")
def main() -> None:
    """Follow one query token through every stage of multi-head attention."""


@main.command("trace")
@click.option("--query", "query_token", default=None, help="the query token (default: the example's, 'like')")
@click.option("--head", default=None, help="show only this head (default: every head)")
@click.option("--stage", default=None, help=f"show only this stage: {', '.join(PAGE_STAGE_IDS)}")
@click.option("--causal", is_flag=True, help="mask keys after the query before the softmax")
@click.option("--json", "as_json", is_flag=True, help="print the whole trace as JSON (the server's schema)")
def trace_command(query_token, head, stage, causal, as_json) -> None:
    """Walk the teaching example through attention, stage by stage."""
    example = load_teaching_example()
    config = replace(example.config, causal=True) if causal else example.config
    tokens = list(example.tokens)

    query_token = example.query if query_token is None else query_token
    if query_token not in tokens:
        fail(f"unknown query token {query_token!r}; choose one of: {', '.join(tokens)}")
    query = tokens.index(query_token)

    heads = list(range(config.n_heads))
    if head is not None:
        if not head.isdigit() or int(head) >= config.n_heads:
            fail(f"--head {head} is out of range; choose a head from 0 to {config.n_heads - 1}")
        heads = [int(head)]

    allowed = [s.id for s in page_stages(config)]
    if stage is not None and stage not in allowed:
        hint = " (mask needs --causal)" if stage == "mask" else ""
        fail(f"unknown stage {stage!r}{hint}; choose one of: {', '.join(allowed)}")

    t = run_trace(example.x, example.weights, config)
    if as_json:
        click.echo(trace_payload(t, tokens, example.weights, query=query).model_dump_json(indent=1))
        return
    render(t, tokens, query, heads, stage, Console(highlight=False))


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind; 0.0.0.0 exposes the explorer")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
def serve(host: str, port: int) -> None:
    """Start the explorer in the browser."""
    import uvicorn

    from .server import create_app

    logging.basicConfig(level=logging.INFO, format="%(message)s")  # one JSON line per request
    click.echo(f"mha-explorer: open http://{host}:{port}/ (Ctrl+C stops)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"mha-explorer: listening on {host}: anyone who can reach this port can use the explorer", err=True)
    uvicorn.run(create_app(), host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=10)


@main.command("export-site")
@click.argument("directory", type=click.Path(file_okay=False, writable=True))
def export_site_command(directory: str) -> None:
    """Write a static copy of the explorer into DIRECTORY (works from file:// and any static host)."""
    from pathlib import Path

    from .export import export_site

    try:
        written = export_site(Path(directory))
    except OSError as e:
        fail(f"cannot write to {directory}: {e.strerror or e}; choose a writable directory")
    total = sum(p.stat().st_size for p in written)
    click.echo(f"wrote {len(written)} files ({total / 1024:.0f} KiB) to {directory}; open {Path(directory) / 'index.html'}")


if __name__ == "__main__":
    main()

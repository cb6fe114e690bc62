"""`mha-explorer`: the command line. It only translates arguments into calls of the core."""

from __future__ import annotations

import codecs
import errno
import logging
import os
import re
import signal
import socket
import sys
import textwrap
import unicodedata
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from .examples import load_teaching_example
from .narrative import LACKS, PAGE_STAGE_IDS, page_stages, stage_id
from .schema import trace_payload
from .trace import trace as run_trace
from .models.errors import empty_text
from .models.forward import MAX_TOKENS
from .modelview import DEFAULT_TEXT, STATIC_MAX_TOKENS, misnamed, named_positions, plain_labels, short_label, token_labels, token_positions
from .walkthrough import ASCII_SIGNS, ROOT, print_wrapped, render


def fail(message: str) -> None:
    """One line on stderr saying what is allowed, exit status 2, no traceback."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(2)


def note(message: str) -> None:
    """One line on stderr about how an option was read; the command goes on."""
    click.echo(f"Note: {message}", err=True)


NARROWEST = 60  # the walkthrough's tables fit this many columns and more


def walkthrough_console() -> Console:
    """The console the walkthrough prints on; narrower than its tables fit, said on stderr: a cell
    too narrow for its vector wraps it over lines, and one too narrow for a number cuts it ("-1.…"):
    a reader checking numbers by hand must know."""
    console = Console(highlight=False)
    if console.width < NARROWEST:
        note(f"the terminal is {console.width} columns wide, and the tables need {NARROWEST}: a vector may wrap over lines, and a number that does not fit is cut (…); widen it, or set COLUMNS={NARROWEST}")
    return console


def parse_whole(option: str, value: str, choose: str) -> int:
    """The whole number value spells, or a one-line error (ending with `choose`) and exit 2."""
    if not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        fail(f"{option} {value!r} is not a whole number; {choose}")
    return int(value)


def whole_number(option: str, value: str, count: int, what: str) -> int:
    """The number value names, from 0 to count - 1, or a one-line error and exit 2."""
    choose = f"choose a {what} from 0 to {count - 1} ({what}s are numbered from 0)"
    if not 0 <= parse_whole(option, value, choose) < count:
        fail(f"{option} {value.strip()} is out of range; {choose}")
    return int(value)


def spec_of(model_name: str):
    """The registry's entry of a named model (its layers and heads, known before it loads); None
    for a checkpoint's path."""
    from .models.registry import spec_named

    return spec_named(model_name)


# The optional stages every layer of a family has (narrative.LACKS names them), so that a stage a
# named model lacks is refused before it loads (some seconds for gemma3)
FAMILY_STAGES = {"bert": (), "llama": ("rope", "mask"), "gemma3": ("qk_norm", "rope", "mask")}


def check_layers(model_name: str, layers: list[str]) -> None:
    """Refuse a --layer that is no whole number, or out of a named model's range, before the model
    loads (gemma3 takes a while); a checkpoint's layers are known once it is read."""
    spec = spec_of(model_name)
    for layer in layers:
        if spec is not None:
            whole_number("--layer", layer, spec.n_layers, "layer")
        elif parse_whole("--layer", layer, "choose a layer of the model, numbered from 0") < 0:
            fail(f"--layer {layer.strip()} is out of range: layers are numbered from 0; give 0 or more (mha-explorer models PATH lists them)")


def every_head(head: str | None) -> bool:
    """--head all (or none given): every head."""
    return head is None or head.strip().lower() == "all"


def chosen_heads(head: str | None, config) -> list[int]:
    """Every head, or the one --head names."""
    return list(range(config.n_heads)) if every_head(head) else [whole_number("--head", head, config.n_heads, "head")]


def need_model(text, layer) -> None:
    """--text or --layer without --model: a one-line error naming what was given and the models,
    and exit 2."""
    from .models.registry import NAMES

    given = " and ".join(name for name, value in (("--text", text), ("--layer", layer)) if value)
    fail(f"{given} need{'' if ' and ' in given else 's'} --model: choose one of {', '.join(NAMES)} or a checkpoint path")


TEACHING = "the teaching example"
def check_stage(stage: str | None, config, layer: str = TEACHING) -> None:
    """--stage names a stage the layer (as the message calls it) has, or a one-line error and exit 2."""
    allowed = [s.id for s in page_stages(config)]
    if stage is not None and stage not in allowed:
        if stage == "mask" and layer == TEACHING:
            fail("the mask stage needs --causal: add it to mask the keys after the query")
        if stage in LACKS:  # a stage some layers have
            fail(f"{layer} has no {stage} stage ({LACKS[stage]}); choose one of: {', '.join(allowed)}")
        fail(f"unknown stage {stage!r}{'' if layer == TEACHING else f' for {layer}'}; choose one of: {', '.join(allowed)}")


def find_query(tokens: list[str], texts: list[str], wanted: str, labels: list[str] | None = None, of: str = "") -> int:
    """The position --query names: a token as the tokenizer spells it ("Ġfox"), as the page labels
    it ("␣fox") or as the text reads ("fox"), its first place; "fox@4" or "fox @4" (the tables'
    label of a repeated token) is fox at position 4; a number that is no token is a position ("3",
    as the page and the widget take one), and "@3" is position 3 whatever its token. Otherwise a
    one-line error and exit 2, ending in `of` where the query is not found (which text it was
    looked for in)."""
    labels = labels or plain_labels(tokens, texts)
    found, position = named_positions(tokens, texts, wanted, labels)
    if not found and re.fullmatch(r"-?[0-9]+", wanted.strip()) and 0 <= int(wanted) < len(tokens):  # ASCII digits only: int("²") fails; -0 is 0
        return int(wanted)
    hint = misnamed(wanted, found, position, texts, labels)
    if not found and re.fullmatch(r"@?[0-9]+|-[0-9]+", wanted.strip()):  # a position past the last token, or before the first
        where = f"{len(tokens)} tokens, at positions 0 to {len(tokens) - 1}" if len(tokens) > 1 else "1 token, at position 0"
        if hint is not None:  # "10", a number of the text, cut into "1" + "0"
            fail(f"--query {wanted.strip()} is out of range: the text has {where}. As a word, {hint}")
        choose = "choose one of those" if len(tokens) > 1 else "choose 0"
        fail(f"--query {wanted.strip()} is out of range: the text has {where}; {choose}, or a token: {listed(labels)}{of}")
    if hint is not None:  # a position where the token is not, or a word cut into pieces
        fail(f"--query {wanted}: {hint}")
    if not found or not wanted.strip():
        fail(f"unknown query token {wanted!r}; choose one of: {listed(labels)}, or a position from 0 to {len(tokens) - 1}{of}")
    if len(alone := token_positions(tokens, texts, wanted, labels)) > 1:  # a token named alone that the text holds more than once: its first, said
        note(f"{wanted!r} is at positions {', '.join(map(str, alone))}; the first is traced (name another as {wanted.strip()}@{alone[1]})")
    return position


def listed(labels: list[str]) -> str:
    """The tokens an error offers, as the tables print them: each once, a long one cut."""
    return ", ".join(dict.fromkeys(short_label(label) for label in labels))


def _ascii_signs(error: UnicodeError) -> tuple[str, int]:
    """An encoding error handler: each sign the stream cannot encode as ASCII_SIGNS spells it, else
    "?" (for a wide character "? "). A spelling longer than its sign (√ as sqrt) takes its room from the first padding (two
    spaces or more) after it on the line, a table cell's or a panel's, so that the borders after it
    stay where they were drawn."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object
    signs = text[error.start : error.end]
    wide = [unicodedata.east_asian_width(c) in "WF" for c in signs]  # two columns on screen (🐱, 爱): "? " keeps them
    spelled = "".join(ASCII_SIGNS.get(c) or ("? " if w else "?") for c, w in zip(signs, wide))
    end = error.end
    root = ROOT.match(text, error.end - 1) if signs.endswith("√") else None
    if root:  # its operand in brackets: "/sqrt(64)", not "/sqrt64"
        spelled, end = f"{spelled[: -len(ASCII_SIGNS['√'])]}sqrt({root[1]})", root.end()
    longer = len(spelled) - (end - error.start) - sum(wide)  # in columns
    line_end = text.find("\n", end) % (len(text) + 1)  # the end of the text when no line break follows
    padding = _PADDING.search(text, end, line_end) if longer > 0 else None
    if padding is None:
        return spelled, end
    between = text[end : padding.start()]
    try:
        between.encode(error.encoding)
    except UnicodeEncodeError:  # another sign comes first: it is spelled on its own
        return spelled, end
    return spelled + between + " " * max(1, len(padding.group()) - longer), padding.end()


_PADDING = re.compile(r"  +")


codecs.register_error("mha-explorer-ascii", _ascii_signs)


@click.group(invoke_without_command=True)
@click.version_option(package_name="mha-explorer")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Follow one query token through every stage of multi-head attention."""
    # output redirected under another encoding than UTF-8 (cp1252 on Windows) spells the signs out
    for stream in (sys.stdout, sys.stderr):
        try:
            "√·−∞␣".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="mha-explorer-ascii")
    if ctx.invoked_subcommand is None:  # no command: the help, which is what was asked for
        click.echo(ctx.get_help())




@main.command("trace", short_help="Walk attention stage by stage in the terminal.")
@click.option(
    "--query",
    "query_token",
    default=None,
    metavar="TOKEN",
    help="the query token: as the text reads it (fox), as the page labels it (␣fox, ␣ for a space at either end) "
    "or as the tokenizer spells it (Ġfox), its first place; fox@4 is fox at position 4, as the tables "
    "label a repeated token (fox @4); or a position from 0, where the text has no such number as a token, "
    "and @4 for position 4 whatever its token, unless a token is spelled @4 "
    "(default: the example's, 'like'; with --model, "
    "the middle word of the text)",
)
@click.option("--head", default=None, metavar="N", help="show only this head, numbered from 0, or all (default: every head; with --json and --model, head 0)")
@click.option(
    "--stage",
    default=None,
    metavar="STAGE",
    # a stage it does not know is said as typed ("W_O", not "w_o")
    callback=lambda ctx, param, value: value if value is None or stage_id(value) not in PAGE_STAGE_IDS else stage_id(value),
    help=f"show only this stage: {', '.join(PAGE_STAGE_IDS)}, its title as the walkthrough heads it (\"Output projection\"), or a trace array it shows (z for mixing)",
)
@click.option("--causal", is_flag=True, help="mask keys after the query before the softmax (teaching example only)")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="print the trace as JSON, in the server's schema, instead of the walkthrough: the teaching example "
    "whole (every head and stage; its arrays lists of numbers, a masked score null); with --model, what the server's "
    "/api/model-trace sends: every stage of one head, --head (default 0; all: every head's), and the model, layer, text "
    "and readable tokens; its arrays base64 float32, a per-head array holding the slices its `heads` names, its "
    "`shape` the whole layer's. mha_explorer.schema.to_numpy reads either",
)
@click.option(
    "--model",
    "model_name",
    default=None,
    metavar="NAME|PATH",
    help="trace a real model instead: minilm, smollm2, gemma3 (see `mha-explorer models`), "
    "or the path of a local checkpoint (Hugging Face directory or GGUF file)",
)
@click.option("--text", default=None, help=f"the text to run through --model (default: {DEFAULT_TEXT!r})")
@click.option("--layer", default=None, metavar="N", help="the layer of --model to trace, numbered from 0 (default: 0)")
def trace_command(query_token, head, stage, causal, as_json, model_name, text, layer) -> None:
    """Walk the teaching example, or one layer of a real model, through attention, stage by stage."""
    if model_name is not None:
        if causal:
            fail("--causal applies to the teaching example; a real model uses its own mask")
        _trace_model(model_name, text, layer, query_token, head, stage, as_json)
        return
    if text is not None or layer is not None:
        need_model(text is not None, layer is not None)
    example = load_teaching_example()
    config = replace(example.config, causal=True) if causal else example.config
    tokens = list(example.tokens)

    query = find_query(tokens, tokens, example.query if query_token is None else query_token)
    heads = chosen_heads(head, config)
    check_stage(stage, config)

    t = run_trace(example.x, example.weights, config)
    if as_json:
        chosen = [option for option, given in (("--head", head is not None and not every_head(head)), ("--stage", stage is not None)) if given]
        if chosen:  # (--head all asks for what --json writes)
            note(f"--json writes every head and stage; {' and '.join(chosen)} {'choose' if len(chosen) > 1 else 'chooses'} what the walkthrough shows")
        click.echo(trace_payload(t, tokens, example.weights, query=query).model_dump_json(indent=1))
        return
    render(t, tokens, query, heads, stage, walkthrough_console(), example.weights)


def _trace_model(model_name, text, layer, query_token, head, stage, as_json) -> None:
    """trace --model: load the model (progress on stderr), run it up to the layer, walk that layer
    (text None: the default text)."""
    from .models import ModelError
    from .modelview import middle_word, model_payload

    # a query looked for in the default text, where the user meant their own and forgot --text
    of = "" if text is not None else f" (of the default text, {DEFAULT_TEXT!r}; give your own with --text)"
    text = DEFAULT_TEXT if text is None else text

    # what can be refused before the model loads: a named model's stages are its family's
    spec = spec_of(model_name)
    has = PAGE_STAGE_IDS if spec is None else [s for s in PAGE_STAGE_IDS if s not in LACKS or s in FAMILY_STAGES[spec.family]]
    if stage is not None and stage not in PAGE_STAGE_IDS:
        fail(f"unknown stage {stage!r}; choose one of: {', '.join(has)}{' (the layer shows those it has)' if spec is None else ''}")
    check_layers(model_name, [] if layer is None else [layer])
    if spec is not None and stage in LACKS and stage not in FAMILY_STAGES[spec.family]:
        fail(f"{spec.title} has no {stage} stage ({LACKS[stage]}); choose one of: {', '.join(has)}")
    choose = "choose a head of the layer, numbered from 0, or all"
    if not every_head(head):
        if spec is not None:
            whole_number("--head", head, spec.n_heads, "head")
        elif parse_whole("--head", head, choose) < 0:
            fail(f"--head {head.strip()} is out of range; {choose}")
    if not text.strip():
        fail(empty_text(text))
    try:
        model = _load(model_name)
        layer = whole_number("--layer", "0" if layer is None else layer, model.n_layers, "layer")
        config, encoded = model.layer_config(layer), model.encode(text)
    except ModelError as e:
        fail(str(e))
    tokens = encoded.tokens
    texts = [model.readable(token) for token in tokens]
    labels = token_labels(model, tokens, encoded.special, text)
    query = None if query_token is None else find_query(tokens, texts, query_token, labels, of)
    heads = chosen_heads(head, config)
    check_stage(stage, config, f"layer {layer} of {model.title}")

    try:
        if as_json:
            if stage is not None:
                note("--json writes every stage; --stage chooses what the walkthrough shows")
            whole = head is not None and every_head(head)  # --head all: every head's arrays, as a static copy holds them
            click.echo(model_payload(model, text, layer, None if whole else heads[0], query).model_dump_json(indent=1))
            return
        run = model.run(text, layer)
    except ModelError as e:
        fail(str(e))
    query = middle_word(run, model) if query is None else query
    console = walkthrough_console()
    console.print(f"{escape(model.title)} · layer {layer} of 0–{model.n_layers - 1} · {len(tokens)} token{'' if len(tokens) == 1 else 's'}", style="bold")
    # weights not the published float32 ones are said, so that numbers compared with another copy of the model are not taken for wrong ones
    stored = f"Weights: {model.storage}." if model.storage and not model.storage.endswith("F32") else ""
    print_wrapped(console, " ".join(note for note in (model.arch.input_note, model.arch.output_note, model.arch.norm_note, model.arch.layer_note(layer), stored) if note), style="dim")
    render(run.trace, [short_label(label) for label in labels], query, heads, stage, console, run.weights)


def page_url(host: str, port: int) -> str:
    """The page's address; an IPv6 address is written in brackets (http://[::1]:8000/). A server
    on every address is opened on this machine at its loopback address: 0.0.0.0 at localhost, ::
    (IPv6 only) at [::1], where "localhost" may be tried as 127.0.0.1 and find nothing."""
    if host in ("0.0.0.0", ""):
        host = "localhost"
    if host == "::":
        host = "::1"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def network_address(host: str) -> str | None:
    """This machine's address on its network, as other machines reach a server on every address
    (0.0.0.0 or ::): the one its route out leaves from. A UDP socket's connect sends nothing; no
    route (no network) is None."""
    family, far = (socket.AF_INET6, "2001:db8::1") if host == "::" else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((far, 9))
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if address in ("0.0.0.0", "::", "127.0.0.1", "::1") else address


class _Progress:
    """Loading progress on stderr: a line every 10%, or one line redrawn on a terminal."""

    def __init__(self, name: str):
        self.name, self.last, self.tty = name, -1, sys.stderr.isatty()
        self.open = False  # a redrawn line not yet ended

    def __call__(self, fraction: float, message: str) -> None:
        percent = int(round(fraction * 100))
        if self.tty:
            self.open = percent < 100
            click.echo(f"\rloading {self.name}: {percent:3d}% {message[:60]:<60}", err=True, nl=not self.open)
        elif percent // 10 != self.last:
            self.last = percent // 10
            click.echo(f"loading {self.name}: {percent}% {message}", err=True)


def _load(name: str):
    """load_model with its progress on stderr; a failure's message starts a line of its own."""
    from .models import load_model

    spec = spec_of(name)
    if spec is not None and Path(name).exists():  # a folder or file here of a model's name: the name is the model's
        note(f"{name} is the explorer's {spec.title}; for the {'folder' if Path(name).is_dir() else 'file'} {name} here, give --model ./{name}")
    progress = _Progress(name)
    try:
        return load_model(name, progress)
    finally:
        if progress.open:
            click.echo(err=True)


# what a key of a model's configuration means, where its name alone could mislead
SUMMARY_NOTES = {
    "context_length": " (the longest input the model was built for)",
    "max_tokens": f" (the longest text traced here: the context length, up to {MAX_TOKENS})",
}


@main.command("models", short_help="List the real models, where each comes from, its config.")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="print the list (or NAME's configuration) as JSON")
def models_command(name, as_json) -> None:
    """List the real models: what each is, where it comes from, and whether it is installed.

    With NAME (a model or a checkpoint path), load it and print its configuration, with the layers
    that share an attention configuration grouped (layers are numbered from 0).
    """
    import json
    from dataclasses import asdict

    from .models import SUPPORTED, ModelError, available_models

    if name is not None:
        try:
            model = _load(name)
        except ModelError as e:
            fail(str(e))
        summary = model.config_summary()
        if as_json:
            click.echo(json.dumps(summary, indent=1))
            return
        layers = summary.pop("layers")
        for key, value in summary.items():
            note = SUMMARY_NOTES.get(key, "") if value is not None else ""
            if key == "max_tokens" and summary.get("context_length") is None:  # no context to be bounded by
                note = " (the longest text traced here)"
            echo_wrapped(f"{key}: {plain(value)}{note}", "    ")
        click.echo(f"attention, by layer ({len(layers)} layers, numbered from 0):")
        for line in layer_groups(layers):
            echo_wrapped(line, "      ", "  ")
        return
    infos = available_models()
    if as_json:
        click.echo(json.dumps([asdict(i) for i in infos], indent=1))
        return
    indent = " " * 9
    for info in infos:
        status = "installed" if info.installed else "not installed"
        echo_wrapped(f"{info.name:<8} {info.title} ({status})", indent)
        echo_wrapped(info.description, indent, indent)
        parts = f" and its {len(info.parts)} parts ({', '.join(info.parts)}), joined into one file when it first loads" if info.parts else ""
        echo_wrapped(f"from PyPI package {info.package}{parts}", indent, indent)
        if info.installed:  # on a line of its own, never cut: a path is copied whole
            click.echo(f"{indent}files:")
            click.echo(f"{indent}{info.location}")
        else:
            echo_wrapped(f"install: make models, or {info.install}", indent, indent)
    echo_wrapped(f"Or give a local checkpoint path: {SUPPORTED}.")
    echo_wrapped("Layers are numbered from 0. `mha-explorer models NAME` loads one and prints its configuration.")


def echo_wrapped(text: str, rest: str = "", first: str = "") -> None:
    """text wrapped to the terminal's width: its first line after `first`, the others after `rest`."""
    width = Console().width
    # a path or any other long word stays whole (on a line of its own), so that it can be copied
    click.echo(textwrap.fill(text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False, break_long_words=False))


def plain(value) -> str:
    """A configuration value as a person writes it: 1e-06, 10000, 1000000, yes, 5, 11, 17."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"  # a RoPE base whole, as the page writes it
    if isinstance(value, dict):
        return ", ".join(f"{k} {plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)) and not value:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value)
    return "none" if value is None else str(value)


def layer_groups(layers: list[dict]) -> list[str]:
    """The layers' attention configs in a few lines: what every layer has, then each different kind
    of layer with the layers that are of that kind ("layers 5, 11, 17: no sliding window, ...")."""
    keys = list(dict.fromkeys(key for layer in layers for key in layer))
    shared = [key for key in keys if all(layer.get(key) == layers[0].get(key) for layer in layers)]
    lines = ["every layer: " + ", ".join(_setting(key, layers[0].get(key)) for key in shared)]
    kinds: dict[str, list[int]] = {}
    for i, layer in enumerate(layers):
        kind = ", ".join(_setting(key, layer.get(key)) for key in keys if key not in shared)
        kinds.setdefault(kind, []).append(i)
    if len(kinds) > 1:
        lines += [f"layer{'s' if len(indexes) > 1 else ''} {_spans(indexes)}: {kind}" for kind, indexes in kinds.items()]
    return lines


def _setting(key: str, value) -> str:
    if key == "sliding_window":
        return "no sliding window (global: full attention)" if value is None else f"sliding window {value}"
    if key in WORDS and (value is None or isinstance(value, bool)):
        return WORDS[key][bool(value)]
    if value is None or isinstance(value, bool):
        return key if value else f"no {key}"
    return f"{key} {plain(value)}"


WORDS = {  # a flag as a sentence says it: "not causal", "with biases"
    "causal": ("not causal", "causal"),
    "bias": ("no biases", "with biases"),
    "qk_norm": ("no q/k norm", "q/k norm"),
}


def _spans(indexes: list[int]) -> str:
    """[0, 1, 2, 3, 4, 6] -> "0–4, 6"."""
    spans: list[list[int]] = []
    for i in indexes:
        if spans and spans[-1][1] == i - 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


@main.command(short_help="Serve the explorer; open the address it prints in a browser.")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind; 0.0.0.0 exposes the explorer")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="port to listen on")
@click.option(
    "--model",
    "checkpoints",
    multiple=True,
    metavar="PATH",
    help="also offer a local checkpoint on the page (a Hugging Face directory or a GGUF file); repeat for more",
)
@click.option(
    "--allow-host",
    "allowed",
    multiple=True,
    metavar="NAME",
    help="a host name a loopback server also answers for (a reverse proxy's, passed on in the Host header); repeat for more",
)
@click.option(
    "--offer",
    "offered",
    multiple=True,
    metavar="NAME",
    help="offer only this named model (repeat for more: --offer minilm --offer smollm2); the others are neither listed nor loaded. Default: all",
)
def serve(host: str, port: int, checkpoints: tuple[str, ...], allowed: tuple[str, ...], offered: tuple[str, ...]) -> None:
    """Start the explorer's server; open the address it prints in a browser."""
    from .models import available_models
    from .models.errors import ModelError
    from .models.registry import local_models

    names = [info.name for info in available_models()]
    for name in offered:
        if name not in names:
            fail(f"--offer {name!r} is not a named model; choose from: {', '.join(names)}")
    try:
        local = local_models(list(checkpoints))
    except ModelError as e:
        fail(str(e))
    check_port(host, port)
    import uvicorn

    from .memory import settle_server_process
    from .modelview import ModelService
    from .server import LOOPBACK_NAMES, create_app

    for name in allowed:  # compared with the Host header's name, its port left out
        if not re.fullmatch(r"[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]", name):
            fail(f"--allow-host {name!r} is not a host name; give it as a browser's address bar shows it, without scheme or port (explorer.example, or [fd00::1])")
    loopback = host in ("127.0.0.1", "localhost", "::1")
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # one JSON line per request
    click.echo(f"mha-explorer: open {page_url(host, port)} (Ctrl+C stops)")
    if host in ("0.0.0.0", "::") and (address := network_address(host)):
        click.echo(f"mha-explorer: from other machines: {page_url(address, port)} (this machine's address on its network)")
    if not loopback:
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"mha-explorer: listening on {shown}: anyone who can reach this port can use the explorer", err=True)
        if allowed:
            note(f"--allow-host is for a server bound to the loopback address; bound to {host}, it answers for any name")
    for name, path in local.items():
        click.echo(f"mha-explorer: {path} is offered as {name!r} (it loads when chosen on the page)")
    hosts = LOOPBACK_NAMES | {name.lower() for name in allowed}
    app = create_app(models=ModelService(local=local, offered=offered or None), hosts=hosts if loopback else None)
    settle_server_process()
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=10)


def check_port(host: str, port: int) -> None:
    """Bind host:port once, as the server will, so that a port in use is a one-line error."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.create_server((host, port), family=family):
            pass
    except socket.gaierror as e:
        fail(f"--host {host} is not an address ({e.strerror}); give one such as 127.0.0.1")
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            fail(f"port {port} on {host} is already in use; choose another with --port")
        fail(f"cannot listen on {host} port {port} ({os.strerror(e.errno) if e.errno else e}); choose another --host or --port")


@main.command("export-site", short_help="Write a static copy of the explorer, to host or open.")
@click.argument("directory")
@click.option(
    "--model",
    "model_name",
    default=None,
    metavar="NAME|PATH",
    help="also write layers of a real model into the copy (minilm, smollm2, gemma3, or a checkpoint path), "
    "on one text, every head: the copy's Real model mode then shows them with no server",
)
@click.option("--text", default=None, help=f"the text for --model, at most {STATIC_MAX_TOKENS} tokens (default: {DEFAULT_TEXT!r})")
@click.option("--layer", "layers", multiple=True, metavar="N", help="a layer of --model to write, numbered from 0; repeat for more")
@click.option("--replace", is_flag=True, help="replace files of the same names in DIRECTORY that are not an earlier copy")
def export_site_command(directory: str, model_name, text, layers, replace) -> None:
    """Write a static copy of the explorer into DIRECTORY (works from file:// and any static host).

    With --model, --text and one or more --layer, the copy also holds those layers of a real model
    (every head: a MiniLM layer is about 3.5 MB on a sentence, 9.3 MB at 110 tokens; larger models
    take more), shown in its Real model mode."""
    from .export import ModelLayers, WouldReplace, export_site
    from .models.errors import ModelError

    if not directory.strip():
        fail("DIRECTORY is empty: name the directory to write the copy into, such as site")
    if Path(directory).exists() and not Path(directory).is_dir():
        fail(f"{directory} is a file: name a directory to write the copy into (a new one is made)")
    # the first part of the path that is there, or a link to nothing: said as what it is, not as
    # "cannot write to DIR/static: Not a directory" (a path never typed) or "File exists"
    path = Path(directory)
    there = next((part for part in (path, *path.parents) if part.exists() or part.is_symlink()), None)
    if there is not None and there.is_symlink() and not there.exists():
        fail(f"{there} is a link to {os.readlink(there)}, which is not there: make that folder, or name another directory")
    if there is not None and there != path and not there.is_dir():
        fail(f"{there} is a file, not a folder: name a directory to write the copy into whose parents are folders")
    model_layers = None
    if model_name is None:
        if text is not None or layers:
            need_model(text is not None, bool(layers))
    else:
        if not layers:
            fail("--model needs at least one --layer (numbered from 0) to write into the copy")
        if text is not None and not text.strip():
            fail(empty_text(text))
        check_layers(model_name, layers)
        try:
            model = _load(model_name)
        except ModelError as e:
            fail(str(e))
        chosen = sorted({whole_number("--layer", layer, model.n_layers, "layer") for layer in layers})
        model_layers = ModelLayers(model, DEFAULT_TEXT if text is None else text, tuple(chosen))
    try:
        written = export_site(Path(directory), model_layers, replace)
    except WouldReplace as e:
        fail(
            f"{directory} already holds {', '.join(str(p) for p in e.paths)}, not an earlier copy of the explorer: "
            f"choose a new or empty directory, or add --replace to write over {'them' if len(e.paths) > 1 else 'it'} (nothing was written)"
        )
    except OSError as e:
        full = e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
        advice = (
            "free some space, or choose another directory"
            if full
            else "a file of that name is in the way of a folder: move it, or choose another directory"
            if e.errno == errno.EEXIST
            else "choose a writable directory"
        )
        where = e.filename or directory  # the path that failed: static/ may be a file
        fail(f"cannot write to {where}: {e.strerror or e}; {advice} (no file of the copy was written)")
    except ModelError as e:
        fail(str(e))
    sizes = {p.relative_to(directory).as_posix(): p.stat().st_size for p in written}
    click.echo(f"wrote a copy of the explorer to {directory}, {_size(sum(sizes.values()))} in all:")
    for name, size in sizes.items():
        click.echo(f"  {name:<20} {_size(size):>9}")
    echo_wrapped(
        f"open {Path(directory) / 'index.html'} in a browser, or put index.html and the static folder, "
        "side by side, on any static host (the page needs both)"
    )


def _size(n: int) -> str:
    """Bytes as a person reads them: 870 B, 322 KB, 66.0 MB."""
    if n < 1000:
        return f"{n} B"
    return f"{n / 1000:.0f} KB" if n < 1_000_000 else f"{n / 1e6:.1f} MB"


def run() -> None:
    """The command line (mha-explorer, python -m mha_explorer): main, in a process of its own. Piped
    into a reader that stops early (| head), a command that prints ends as other command-line tools
    do, at once and in silence, killed by SIGPIPE (status 141 in the shell). Not the server, which
    writes to sockets: a client gone must not end it. Nor main called in another's process (a
    test's, a notebook's): set there, a socket of that process closed under a write killed it."""
    if sys.argv[1:2] in (["trace"], ["models"]) and hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main(prog_name="mha-explorer")


if __name__ == "__main__":
    run()

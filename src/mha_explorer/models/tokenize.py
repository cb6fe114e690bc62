"""Tokenizers built from the files a model ships, with the `tokenizers` package.

- A Hugging Face directory ships tokenizer.json: it is loaded as it is, without its padding and
  truncation (the explorer shows every token of the text, or says the text is too long).
- A GGUF file has no tokenizer.json, only its vocabulary as metadata, under llama.cpp's keys:
  `tokenizer.ggml.model` "gpt2" is byte-level BPE with the merges listed in the file;
  "llama" is SentencePiece-style BPE, whose merges follow from the token scores (a higher score
  merges first), with byte fallback for characters outside the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import CheckpointError, one_line
from .readers import GGUFFile

# llama.cpp's token types (tokenizer.ggml.token_type)
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4
SPACE = "\u2581"  # SentencePiece's visible space, "▁"

# How llama.cpp names the text splitting ("pre-tokenizer") of a byte-level vocabulary, and which
# of them are read here. "smollm" (like "starcoder") first cuts every digit off on its own.
BYTE_LEVEL_SPLITS = {"default": False, "gpt2": False, "gpt-2": False, "smollm": True, "starcoder": True}


@dataclass(frozen=True)
class Encoded:
    ids: np.ndarray  # (n,) token ids
    tokens: list[str]  # the token strings, as the vocabulary spells them
    special: list[bool]  # True for tokens the tokenizer added or marks special ([CLS], <bos>, ...)
    added: list[bool]  # True for tokens the tokenizer added ([CLS], <bos>): none of them the text's


@dataclass
class TextTokenizer:
    backend: object  # tokenizers.Tokenizer
    style: str  # "wordpiece", "byte-level" or "sentencepiece": how token strings spell text
    source: str  # what it was built from, for the config summary
    space_prefix: bool = False  # SentencePiece's "dummy prefix": the text is read as if it began with a space
    _readable: dict[str, str] = field(default_factory=dict, repr=False)
    _special_ids: frozenset[int] | None = field(default=None, repr=False)

    def encode(self, text: str) -> Encoded:
        # The prefix is added to the text, not by a normalizer: a normalizer would also rewrite the
        # user-defined tokens that are matched in normalized text ("▁▁" would become "▁▁▁").
        enc = self.backend.encode(" " + text if self.space_prefix else text)
        if self._special_ids is None:
            self._special_ids = frozenset(i for i, added in self.backend.get_added_tokens_decoder().items() if added.special)
        # special: added by the tokenizer ([CLS], <bos>), or a special token typed in the text
        # (<start_of_turn>, [SEP]), which the mask alone does not mark
        special = [bool(added) or i in self._special_ids for added, i in zip(enc.special_tokens_mask, enc.ids)]
        return Encoded(np.asarray(enc.ids, dtype=np.int64), list(enc.tokens), special, [bool(a) for a in enc.special_tokens_mask])

    def unknown_texts(self, text: str, tokens: list[str]) -> list[str]:
        """What each unknown token ([UNK]) among text's tokens stands for in the text ("爱"); "" for
        every other token."""
        unknown = getattr(self.backend.model, "unk_token", None)
        if unknown is None or unknown not in tokens:
            return [""] * len(tokens)
        source = " " + text if self.space_prefix else text  # as encode() reads it: the offsets are into this
        enc = self.backend.encode(source)
        return [source[a:b].strip() if token == unknown else "" for token, (a, b) in zip(enc.tokens, enc.offsets)]

    def starts_word(self, token: str) -> bool:
        """Whether the token begins a word rather than continuing one: "fox" but not "##es" (WordPiece),
        "Ġfox" and "▁fox" but not "es" (byte-level and SentencePiece mark the space before a word)."""
        if self.style == "wordpiece":
            return not token.startswith("##")
        return self.readable(token)[:1].isspace()

    def text_of(self, tokens: list[str]) -> str:
        """The text a run of tokens stands for together: several byte pieces make one character."""
        if self.style == "wordpiece" or self.backend.decoder is None:
            return "".join(self.readable(token) for token in tokens)
        return self.backend.decoder.decode(tokens)

    def readable(self, token: str) -> str:
        """The text a token stands for: "Ġfox" -> " fox", "▁fox" -> " fox", "##ing" -> "ing"."""
        if token not in self._readable:
            if self.style == "wordpiece":
                text = token[2:] if token.startswith("##") and len(token) > 2 else token
            else:
                text = self.backend.decoder.decode([token]) if self.backend.decoder is not None else token
            self._readable[token] = text
        return self._readable[token]


def from_tokenizer_json(path: Path) -> TextTokenizer:
    from tokenizers import Tokenizer

    try:
        backend = Tokenizer.from_file(str(path))
    except Exception as e:  # the tokenizers package raises plain Exception on a bad file
        raise CheckpointError(f"{path} is not a tokenizer file the tokenizers package can read ({one_line(e)}): give the tokenizer.json saved with the checkpoint") from None
    backend.no_padding()
    backend.no_truncation()
    kind = type(backend.model).__name__
    if kind == "WordPiece":
        style = "wordpiece"
    elif kind == "BPE" and getattr(backend.model, "byte_fallback", False):
        style = "sentencepiece"
    else:
        style = "byte-level"
    return TextTokenizer(backend, style, f"{path.name} ({kind})")


def from_gguf(gguf: GGUFFile) -> TextTokenizer:
    kind = gguf.value("tokenizer.ggml.model", None)
    if kind in ("gpt2", "llama"):
        _check_vocabulary(gguf)
    if kind == "gpt2":
        return _byte_level_bpe(gguf)
    if kind == "llama":
        return _sentencepiece_bpe(gguf)
    said = " has no tokenizer.ggml.model: the file holds no vocabulary" if kind is None else f": tokenizer.ggml.model is {kind!r}"
    raise CheckpointError(
        f"{gguf.path.name}{said}; the explorer reads 'gpt2' (byte-level BPE) and 'llama' (SentencePiece BPE) vocabularies"
    )


def _bpe(gguf: GGUFFile, **options):
    """The tokenizers package's BPE tokenizer of the file's vocabulary; its refusal (a merge of a
    token the list lacks), a plain Exception, said as the file's."""
    from tokenizers import Tokenizer, models

    try:
        return Tokenizer(models.BPE(**options))
    except Exception as error:  # noqa: BLE001: the tokenizers package raises plain Exception
        raise CheckpointError(f"{gguf.path.name}: its vocabulary cannot be built ({one_line(error)}); the file is damaged") from error


def _check_vocabulary(gguf: GGUFFile) -> None:
    """The vocabulary's arrays, one entry per token, and the ids it names, within it: a token_type
    array cut short would leave the last tokens' kinds unread (control tokens split as text)."""
    tokens = gguf.value("tokenizer.ggml.tokens")
    n = len(tokens) if isinstance(tokens, list) else 0
    if not n:
        raise CheckpointError(f"{gguf.path.name}: tokenizer.ggml.tokens holds no list of tokens; the file is damaged")
    for key in ("token_type", "scores"):
        given = gguf.value(f"tokenizer.ggml.{key}", None)
        if given is not None and (not isinstance(given, list) or len(given) != n):
            said = f"{len(given)} {'entry' if len(given) == 1 else 'entries'}" if isinstance(given, list) else f"one value, {given!r},"
            raise CheckpointError(f"{gguf.path.name}: tokenizer.ggml.{key} has {said} for {n} tokens, where it has one a token; the file is damaged")
    for key in ("unknown_token_id", "bos_token_id"):
        given = gguf.value(f"tokenizer.ggml.{key}", None)
        if given is not None and not (isinstance(given, int) and 0 <= given < n):
            raise CheckpointError(f"{gguf.path.name}: tokenizer.ggml.{key} is {given!r}, not the id of one of the vocabulary's {n} tokens (0 to {n - 1}); the file is damaged")
    merges = gguf.value("tokenizer.ggml.merges", None) or []
    bad = next((m for m in merges if not isinstance(m, str) or m.count(" ") != 1), None)
    if bad is not None:
        raise CheckpointError(f"{gguf.path.name}: tokenizer.ggml.merges holds {bad!r}; each merge is two tokens and one space between them")


def _byte_level_bpe(gguf: GGUFFile) -> TextTokenizer:
    from tokenizers import decoders, pre_tokenizers

    tokens = gguf.value("tokenizer.ggml.tokens")
    pre = gguf.value("tokenizer.ggml.pre", "default")
    if pre not in BYTE_LEVEL_SPLITS:
        raise CheckpointError(
            f"{gguf.path.name}: its text splitting (tokenizer.ggml.pre) is {pre!r}; "
            f"supported: {', '.join(BYTE_LEVEL_SPLITS)}"
        )
    merges = [tuple(m.split(" ", 1)) for m in gguf.value("tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    backend = _bpe(gguf, vocab=vocab, merges=merges, fuse_unk=False)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if BYTE_LEVEL_SPLITS[pre]:
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        backend.pre_tokenizer = byte_level
    backend.decoder = decoders.ByteLevel()
    _add_special_tokens(backend, gguf, tokens)
    return TextTokenizer(backend, "byte-level", f"GGUF vocabulary: byte-level BPE, {len(tokens)} tokens, split {pre!r}")


def _sentencepiece_bpe(gguf: GGUFFile) -> TextTokenizer:
    from tokenizers import decoders, normalizers

    # A token of spaces only is stored with real spaces; text reaches the model with "▁" for each.
    tokens = [SPACE * len(t) if t and not t.strip(" ") else t for t in gguf.value("tokenizer.ggml.tokens")]
    types = gguf.value("tokenizer.ggml.token_type", None) or [NORMAL] * len(tokens)
    scores = gguf.value("tokenizer.ggml.scores", None)
    vocab = {t: i for i, t in enumerate(tokens)}
    unk = gguf.value("tokenizer.ggml.unknown_token_id", None)
    merges = _merges_from_scores(tokens, types, scores, vocab)
    backend = _bpe(gguf, vocab=vocab, merges=merges, unk_token=None if unk is None else tokens[unk], fuse_unk=True, byte_fallback=True)
    backend.normalizer = normalizers.Replace(" ", SPACE)
    backend.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    _add_special_tokens(backend, gguf, tokens)
    return TextTokenizer(
        backend,
        "sentencepiece",
        f"GGUF vocabulary: SentencePiece BPE, {len(tokens)} tokens",
        space_prefix=bool(gguf.value("tokenizer.ggml.add_space_prefix", True)),
    )


def _merges_from_scores(tokens, types, scores, vocab) -> list[tuple[str, str]]:
    """Every way to cut a normal token into two tokens of the vocabulary is a merge; a merge ranks by
    the score of the token it makes (higher first, as SentencePiece merges), then by file order."""
    merges, made = [], []  # in file order, and by cut within a token; the index of the token each makes
    known = vocab.__contains__
    for index, (token, kind) in enumerate(zip(tokens, types)):
        if kind != NORMAL or len(token) < 2:
            continue
        for cut in range(1, len(token)):
            if known(token[:cut]) and known(token[cut:]):
                merges.append((token[:cut], token[cut:]))
                made.append(index)
    if scores is None:
        return merges
    # a stable sort by score alone keeps file order among equal scores
    order = np.argsort(-np.asarray(scores, dtype=np.float64)[np.asarray(made, dtype=np.intp)], kind="stable")
    return [merges[i] for i in order]


def _add_special_tokens(backend, gguf: GGUFFile, tokens: list[str]) -> None:
    """Control tokens (<bos>, <|im_start|>) stay whole and count as special; user-defined ones stay whole
    (SentencePiece finds those in the normalized text, where spaces are already "▁"); and a
    beginning-of-sequence token is put first when the file says so."""
    from tokenizers import AddedToken, processors

    kind = gguf.value("tokenizer.ggml.model")
    types = gguf.value("tokenizer.ggml.token_type", None) or []
    control = [AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types) if k == CONTROL]
    in_normalized = kind == "llama"
    user = [AddedToken(t, special=False, normalized=in_normalized) for t, k in zip(tokens, types) if k == USER_DEFINED]
    if control:
        backend.add_special_tokens(control)
    if user:
        backend.add_tokens(user)
    if gguf.value("tokenizer.ggml.add_bos_token", kind == "llama"):
        bos_id = gguf.value("tokenizer.ggml.bos_token_id", None)
        if bos_id is None:
            raise CheckpointError(f"{gguf.path.name} asks for a beginning-of-sequence token but names none")
        bos = tokens[bos_id]
        backend.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, bos_id)])

"""The two ways loading a real model can fail, each with a message that says what to do."""

from __future__ import annotations


class ModelError(ValueError):
    """A model, layer or text the explorer cannot use: unknown name, not installed, too long."""


class CheckpointError(ModelError):
    """A weight file that is refused or cannot be read safely: the message names the file and the reason."""


def one_line(error: BaseException, most: int = 200) -> str:
    """Another library's error message as a message of ours quotes it: on one line, at most `most` characters."""
    return " ".join(str(error).split())[:most]


def empty_text(text: str) -> str:
    """What is wrong with a text that holds nothing to trace: nothing at all, or blank space only."""
    return f"the text {'holds only spaces or line breaks' if text else 'is empty'}: give a sentence to run through the model"

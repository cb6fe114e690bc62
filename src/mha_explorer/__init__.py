"""mha-explorer: follow one query token through every stage of multi-head attention."""

from importlib.metadata import PackageNotFoundError, version

from .config import PRESETS, AttentionConfig, ConfigError
from .costs import costs
from .examples import load_teaching_example
from .trace import STAGE_NAMES, STAGES, Trace, trace
from .weights import AttentionWeights

try:
    __version__ = version("mha-explorer")  # as `mha-explorer --version` says it
except PackageNotFoundError:  # the source tree on the path, not installed
    __version__ = "unknown"

__all__ = [
    "PRESETS",
    "STAGES",
    "STAGE_NAMES",
    "AttentionConfig",
    "AttentionWeights",
    "ConfigError",
    "Trace",
    "costs",
    "load_teaching_example",
    "trace",
]


def __getattr__(name: str):
    # The notebook widget needs anywidget (and so ipywidgets); import it only when asked for,
    # so that the core, the server and the CLI never load it.
    if name == "Explorer":
        from .widget import Explorer

        return Explorer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


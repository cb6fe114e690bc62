"""mha-explorer: follow one query token through every stage of multi-head attention."""

from .config import PRESETS, AttentionConfig, ConfigError
from .costs import costs
from .examples import load_teaching_example
from .trace import STAGE_NAMES, STAGES, Trace, trace
from .weights import AttentionWeights

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

"""Real pretrained layers: read a model's files with NumPy, run it up to a layer, trace that layer.

    from mha_explorer.models import available_models, load_model
    model = load_model("minilm")                 # or "smollm2", "gemma3", or a local checkpoint path
    trace, tokens = model.trace("The cat sat on the mat.", layer=3)   # layers numbered from 0
    trace["weights"]                             # (n_heads, n, n), as the model computes them

Nothing here imports torch. The converters live in bert.py, llama.py and gemma3.py.
"""

from .errors import CheckpointError, ModelError
from .forward import MAX_TOKENS, LayerRun, LoadedModel
from .registry import NAMES, SPECS, SUPPORTED, ModelInfo, available_models, load_model

__all__ = [
    "MAX_TOKENS",
    "NAMES",
    "SPECS",
    "SUPPORTED",
    "CheckpointError",
    "LayerRun",
    "LoadedModel",
    "ModelError",
    "ModelInfo",
    "available_models",
    "load_model",
]

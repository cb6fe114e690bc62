"""Running a transformers model once and keeping what the tests compare.

For every layer: the attention weights (output_attentions), the attention module's input (a
forward pre-hook: after the layer's pre-norm, if any), the attention output before the
residual (a forward hook on the output projection) and the hidden state entering the layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest


@dataclass
class ReferenceRun:
    attentions: list[np.ndarray]  # per layer (n_heads, n, n)
    inputs: list[np.ndarray]  # per layer (n, d_model): what the attention module receives
    outputs: list[np.ndarray]  # per layer (n, d_model): the output projection, before the residual
    hidden: list[np.ndarray]  # per layer (n, d_model): the hidden state entering the layer


def run_reference(model, ids: np.ndarray, attention_modules: list, output_projections: list) -> ReferenceRun:
    import torch

    inputs, outputs = {}, {}

    def keep_input(i):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            inputs[i] = x[0].detach().numpy().copy()

        return hook

    def keep_output(i):
        def hook(module, args, out):
            outputs[i] = out[0].detach().numpy().copy()

        return hook

    handles = [m.register_forward_pre_hook(keep_input(i), with_kwargs=True) for i, m in enumerate(attention_modules)]
    handles += [m.register_forward_hook(keep_output(i)) for i, m in enumerate(output_projections)]
    try:
        with torch.no_grad():
            out = model(input_ids=torch.from_numpy(np.asarray(ids, dtype=np.int64)[None]), output_attentions=True, output_hidden_states=True)
    finally:
        for h in handles:
            h.remove()
    n_layers = len(attention_modules)
    return ReferenceRun(
        attentions=[a[0].numpy() for a in out.attentions],
        inputs=[inputs[i] for i in range(n_layers)],
        outputs=[outputs[i] for i in range(n_layers)],
        hidden=[h[0].numpy() for h in out.hidden_states[:n_layers]],
    )


def gguf_reference(model):
    """transformers' own model and tokenizer from the GGUF file our model was loaded from, float32,
    eager attention."""
    import os

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.split(model.source)
    ref = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="eager", dtype=torch.float32)
    return ref.eval(), AutoTokenizer.from_pretrained(folder, gguf_file=name)


def decoder_runs(model, ref, sentences: dict[str, str]) -> dict[str, ReferenceRun]:
    """A reference run of a decoder (Llama or Gemma layout) on each sentence, as our tokenizer cuts it."""
    layers = ref.model.layers
    attention, projections = [l.self_attn for l in layers], [l.self_attn.o_proj for l in layers]
    return {key: run_reference(ref, model.tokenizer.encode(text).ids, attention, projections) for key, text in sentences.items()}


def assert_same_tokens(model, tokenizer, text: str) -> None:
    """Our ids and token strings are the reference tokenizer's."""
    ids = tokenizer(text)["input_ids"]
    assert model.tokenizer.encode(text).ids.tolist() == ids
    assert model.tokenize(text) == tokenizer.convert_ids_to_tokens(ids)


def require(name: str):
    """The loaded model, or a skip that says how to install it."""
    from mha_explorer.models import available_models, load_model

    info = next(i for i in available_models() if i.name == name)
    if not info.installed:
        pytest.skip(f"{info.title} is not installed: run `make models` ({info.install})")
    model = load_model(name)  # the one object other tiers in this process used too:
    model.forget()  # what this module compares is computed here, not kept from them
    return model


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def row_scale(ref: np.ndarray) -> np.ndarray:
    """(n, 1): the largest |entry| of each token's row, at least 1. Float32 rounding in a layer
    grows with the size of the numbers summed, so every entry of a row with one huge component
    carries errors in proportion to that component."""
    return np.maximum(np.abs(ref.astype(np.float64)).max(axis=-1, keepdims=True), 1.0)


def compare(model, text: str, ref: ReferenceRun, maxima, tol: float, residual_rtol: float = 0.0) -> dict[str, float]:
    """Every layer of our model on text against the reference run; records and returns the maxima."""
    worst = {"weights": 0.0, "attention_output": 0.0, "attention_input": 0.0, "residual": 0.0, "residual_allowance_used": 0.0}
    for layer in range(model.n_layers):
        run = model.run(text, layer)
        worst["weights"] = max(worst["weights"], max_abs(run.trace["weights"], ref.attentions[layer]))
        worst["attention_output"] = max(worst["attention_output"], max_abs(run.trace["output"], ref.outputs[layer]))
        worst["attention_input"] = max(worst["attention_input"], max_abs(run.trace["x"], ref.inputs[layer]))
        worst["residual"] = max(worst["residual"], max_abs(run.residual, ref.hidden[layer]))
        # the largest share of its own allowance (tol + residual_rtol * its row's scale) that an entry's error takes: <= 1 passes
        used = np.abs(run.residual.astype(np.float64) - ref.hidden[layer]) / (tol + residual_rtol * row_scale(ref.hidden[layer]))
        worst["residual_allowance_used"] = max(worst["residual_allowance_used"], float(used.max()))
    for quantity, value in worst.items():
        maxima.record(model.name, quantity, value)
    return worst


def assert_matches(model, text: str, ref: ReferenceRun, maxima, tol: float, residual_rtol: float = 0.0) -> None:
    """Every layer of our model on text within tolerance of the reference. On a failure, our side is
    run once more from scratch (its residual streams dropped), and the message says whether our
    numbers or the reference's moved: a failure that comes and goes needs that to be found."""
    worst = compare(model, text, ref, maxima, tol, residual_rtol)
    problems = [
        f"{quantity}: max |ours - reference| = {worst[quantity]:.3g} > {tol}"
        for quantity in ("weights", "attention_output", "attention_input")
        if worst[quantity] > tol
    ]
    if worst["residual_allowance_used"] > 1:
        problems.append(f"residual: {worst['residual']:.3g}; an entry's error is {worst['residual_allowance_used']:.3g} times its allowance")
    if problems:
        model.forget()
        second = compare(model, text, ref, maxima, tol, residual_rtol)
        if second == worst:
            problems.append("ours, run again from scratch, gives the same numbers")
        else:
            problems.append("ours, run again from scratch, differs: " + ", ".join(f"{q} {v:.3g}" for q, v in second.items()))
    assert not problems, "; ".join(problems)


def compare_isolated(model, ref: ReferenceRun, maxima) -> dict[str, float]:
    """Each layer's attention alone: our trace() of the reference's own attention input, against the
    reference's weights and output. This leaves out the float32 rounding the layers before add up."""
    from mha_explorer.trace import trace

    worst = {"isolated_weights": 0.0, "isolated_attention_output": 0.0}
    for layer in range(model.n_layers):
        t = trace(ref.inputs[layer], model.layer_weights(layer), model.layer_config(layer))
        worst["isolated_weights"] = max(worst["isolated_weights"], max_abs(t["weights"], ref.attentions[layer]))
        worst["isolated_attention_output"] = max(worst["isolated_attention_output"], max_abs(t["output"], ref.outputs[layer]))
    for quantity, value in worst.items():
        maxima.record(model.name, quantity, value)
    return worst


def assert_isolated(model, ref32: ReferenceRun, ref64: ReferenceRun, maxima, tol: float, noise: float) -> None:
    """Each layer alone (compare_isolated), where float32 rounding can pass tol: a layer whose
    outputs reach the thousands (Gemma's) lands 1e-3 or 1e-2 from transformers' float32 run, by
    how the matrix products split their sums. Such a layer is judged as float32 allows. Our trace
    in float64 of transformers' float64 input must equal transformers' float64 output (the same
    function, to 3e-5 of the output's size: see below); on the float32 input, our float32 result must then lie
    within tol of our float64 result, or no more than `noise` times further from it than
    transformers' float32 output does."""
    from mha_explorer.trace import trace

    within = max(compare_isolated(model, ref32, maxima).values()) <= tol
    for layer in range(model.n_layers):
        weights, config = model.layer_weights(layer), model.layer_config(layer)
        exact = trace(ref64.inputs[layer].astype(np.float64), weights, config)["output"]
        relative = max_abs(exact, ref64.outputs[layer]) / max(float(np.abs(ref64.outputs[layer]).max()), 1.0)
        maxima.record(model.name, "isolated_float64_vs_reference_float64_relative", relative)
        # 3e-5: transformers works the rotary angles out in float32 even in a float64 run; at
        # position 650 they are some 4e-5 radians off
        assert relative <= 3e-5, (layer, "float64", relative)
        if within:
            continue
        maxima.record(model.name, "isolated_judged_against_float64", 1.0)
        ours = trace(ref32.inputs[layer], weights, config)
        assert max_abs(ours["weights"], ref32.attentions[layer]) <= tol, (layer, "weights")
        exact32 = trace(ref32.inputs[layer].astype(np.float64), weights, config)["output"]  # the same input, exactly
        ours_error, reference_error = max_abs(ours["output"], exact32), max_abs(ref32.outputs[layer], exact32)
        maxima.record(model.name, "isolated_attention_output_vs_float64", ours_error)
        assert ours_error <= max(tol, noise * reference_error), (layer, ours_error, reference_error)

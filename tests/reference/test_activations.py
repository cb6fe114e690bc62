"""The models' activations against torch's, on arrays bigger than the blocks they run over."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_explorer.models.forward import gelu_erf, gelu_tanh, silu

pytestmark = pytest.mark.reference

OURS_AND_TORCH = {
    "gelu_erf": (gelu_erf, lambda t: torch.nn.functional.gelu(t)),
    "gelu_tanh": (gelu_tanh, lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
    "silu": (silu, torch.nn.functional.silu),
}


@pytest.mark.parametrize("name", OURS_AND_TORCH)
@pytest.mark.parametrize("dtype, atol", [(np.float64, 3e-7), (np.float32, 5e-6)])
def test_activation_matches_torch_and_its_blocks_change_nothing(name, dtype, atol):
    """Measured maxima: GELU (erf) 2.1e-7 in float64, the approximation's own error (Abramowitz &
    Stegun 7.1.26); in float32 at most 1.3e-6 on values up to about 30."""
    ours, reference = OURS_AND_TORCH[name]
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((301, 1537)) * 6).astype(dtype)  # several blocks and a ragged last one
    x[0, :6] = [0.0, -0.0, 80.0, -80.0, 1e-30, -1e-30]
    got = ours(x)
    assert got.dtype == x.dtype and got.shape == x.shape
    whole = np.empty(x.size, dtype)  # the same values as in one piece
    ours.__wrapped__(x.reshape(-1), whole, np.empty_like(whole), np.empty_like(whole))
    np.testing.assert_array_equal(got, whole.reshape(x.shape))
    expected = reference(torch.from_numpy(x.astype(np.float64))).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=atol)

"""A loading step that cannot count its own progress still says it is alive."""

from __future__ import annotations

import time

from mha_explorer.models.registry import _ticking


def test_a_long_step_is_said_again_with_the_time_so_far():
    said = []
    with _ticking(lambda fraction, message: said.append((fraction, message)), 0.02, "reading", every=0.05):
        time.sleep(0.18)
    assert said[0] == (0.02, "reading") and len(said) >= 3
    assert all(f == 0.02 and m.startswith("reading (") and m.endswith("s so far; a large vocabulary takes a while)") for f, m in said[1:])
    count = len(said)
    time.sleep(0.12)
    assert len(said) == count  # nothing after the step

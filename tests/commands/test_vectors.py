"""Review of issue #10 (F8): a publisher's vector that is not finite is refused, quietly.

NaN, infinity and 1e308 (which overflows float32) were accepted and then ignored, and 1e308
made numpy print a RuntimeWarning on stderr on success. A command's vector holds values
within ±1e6, or it is refused naming ``$.vector``; what reaches the embedder by another
path (a raw submission) is ignored without a warning.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from lessonledger.commands import Operation, open_ledger
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.projections.embedder import normalise
from lessonledger.projections.errors import VectorShapeError

P = "3f9a0c1b2d4e5f60"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e308, -1e7])
def test_a_vector_with_a_value_out_of_range_is_refused_naming_it(
        tmp_path: Path, value: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_ledger(tmp_path, sync=False) as ledger:
            outcome = ledger.observe_outcome(
                key="o", project=P, passed=False,
                operations=[Operation(op="bad", target="t", ok=False, error="structural")])
            head = ledger.log.head()
            vector = [0.5] * 255 + [value]
            with pytest.raises(InvalidCommandError) as refused:
                ledger.propose_lesson(key="l", project=P, text="avoid bad", kind="avoid",
                                      avoid_op="bad", target="t",
                                      evidence=[outcome.ids["outcome_id"]], vector=vector)
            assert refused.value.field.startswith("$.vector")
            assert ledger.log.head() == head
            ledger.propose_lesson(key="l", project=P, text="avoid bad", kind="avoid",
                                  avoid_op="bad", target="t",
                                  evidence=[outcome.ids["outcome_id"]], vector=[0.5] * 256)


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e308, -1e39])
def test_normalise_refuses_what_is_not_finite_without_a_warning(value: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(VectorShapeError):
            normalise([[value] * 4], 4)


@pytest.mark.parametrize("value", [1e30, 3e38, -3e38])
def test_normalise_keeps_a_large_finite_vector(value: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row = normalise([[value] * 4], 4)[0]
    row = np.abs(row)
    assert np.allclose(row, [0.5] * 4)

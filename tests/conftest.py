"""Fixtures shared across test modules."""

from __future__ import annotations

import pytest
from serving_helpers import mistral_cost

from planner.serving import StepCost


@pytest.fixture(scope="module")
def mistral() -> StepCost:
    """serving_helpers.mistral_cost(), once per module."""
    return mistral_cost()

"""The executor maps every schedule action kind to one stage operation, and refuses
anything else."""

from __future__ import annotations

import typing

import pytest

from gnnpipe.engine import schedule as sch
from gnnpipe.engine.executor import _HANDLERS, execute


def test_every_action_kind_has_a_handler():
    assert set(_HANDLERS) == set(typing.get_args(sch.Action))


def test_an_unknown_action_is_refused():
    with pytest.raises(TypeError, match="schedule action: expected one of the kinds"):
        execute(None, [object()], None)  # type: ignore[arg-type]

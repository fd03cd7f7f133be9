"""The pipeline schedule as data: order invariants, matching sends/receives, prefetch."""

from __future__ import annotations

import pytest

from gnnpipe.engine.schedule import (
    Backward,
    Forward,
    IdleBackward,
    IdleForward,
    PostRecvBackward,
    PostRecvForward,
    SendBackward,
    SendForward,
    Step,
    WaitRecvBackward,
    WaitRecvForward,
    WaitSends,
    build_schedule,
    epoch_order,
    way_orders,
)

CASES = [(1, 1, (0,)), (2, 1, (0,)), (2, 8, (3, 1, 0, 7, 2, 6, 5, 4)), (4, 3, (2, 0, 1)), (3, 5, (0, 1, 2, 3, 4))]


def _chunks(actions, cls):
    return [a.chunk for a in actions if isinstance(a, cls)]


@pytest.mark.parametrize("S,C,order", CASES)
def test_forward_once_in_order_then_backward_in_reverse(S, C, order):
    sched = build_schedule(S, C, order)
    for s in range(S):
        prog = sched.for_stage(s)
        assert _chunks(prog, Forward) == list(order)
        assert _chunks(prog, Backward) == list(reversed(order))
        # Every forward of the stage comes before any backward (GPipe-like per epoch).
        last_f = max(i for i, a in enumerate(prog) if isinstance(a, Forward))
        first_b = min(i for i, a in enumerate(prog) if isinstance(a, Backward))
        assert last_f < first_b
        assert isinstance(prog[-1], Step) and isinstance(prog[-2], WaitSends)
        assert sum(isinstance(a, Step) for a in prog) == 1


@pytest.mark.parametrize("S,C,order", CASES)
def test_sends_match_receives(S, C, order):
    sched = build_schedule(S, C, order)
    for s in range(S - 1):
        up, down = sched.for_stage(s), sched.for_stage(s + 1)
        assert _chunks(up, SendForward) == _chunks(down, PostRecvForward) == _chunks(down, WaitRecvForward)
        assert _chunks(down, SendBackward) == _chunks(up, PostRecvBackward) == _chunks(up, WaitRecvBackward)
    assert not _chunks(sched.for_stage(0), PostRecvForward)
    assert not _chunks(sched.for_stage(0), SendBackward)
    assert not _chunks(sched.for_stage(S - 1), SendForward)
    assert not _chunks(sched.for_stage(S - 1), PostRecvBackward)


@pytest.mark.parametrize("S,C,order", CASES)
def test_receives_posted_ahead_and_waited_before_use(S, C, order):
    sched = build_schedule(S, C, order)
    for s in range(S):
        prog = sched.for_stage(s)
        pos = {(type(a).__name__, getattr(a, "chunk", None)): i for i, a in enumerate(prog)}
        for t, k in enumerate(order):
            if s > 0:
                assert pos[("PostRecvForward", k)] < pos[("WaitRecvForward", k)] < pos[("Forward", k)]
                if t > 0:
                    # Chunk k's receive is posted before the previous chunk is computed.
                    assert pos[("PostRecvForward", k)] < pos[("Forward", order[t - 1])]
            if s < S - 1:
                assert pos[("PostRecvBackward", k)] < pos[("WaitRecvBackward", k)] < pos[("Backward", k)]
                if t < len(order) - 1:
                    assert pos[("PostRecvBackward", k)] < pos[("Backward", order[t + 1])]
                assert pos[("Forward", k)] < pos[("SendForward", k)]


def test_idle_steps_for_short_ways():
    sched = build_schedule(2, 5, (4, 3), num_steps=3)
    prog = sched.for_stage(1)
    assert [a.step for a in prog if isinstance(a, IdleForward)] == [2]
    assert [a.step for a in prog if isinstance(a, IdleBackward)] == [2]
    # The idle backward step comes first (reverse order), before chunk 3's backward.
    kinds = [type(a) for a in prog if isinstance(a, (IdleBackward, Backward))]
    assert kinds == [IdleBackward, Backward, Backward]


def test_bad_orders_are_rejected():
    with pytest.raises(ValueError):
        build_schedule(2, 3, (0, 0, 1))
    with pytest.raises(ValueError):
        build_schedule(2, 3, (0, 3))
    with pytest.raises(ValueError):
        build_schedule(2, 3, (0, 1, 2), num_steps=2)


def test_str_is_a_table_with_every_action():
    sched = build_schedule(2, 3, (1, 0, 2))
    text = str(sched)
    assert "S=2" in text and "order=[1, 0, 2]" in text
    lines = text.splitlines()
    assert len(lines) == 2 + max(len(sched.for_stage(s)) for s in range(2))
    assert "F1" in text and "B2" in text and "U" in text


def test_schedule_is_frozen_and_pure():
    a = build_schedule(3, 4, (2, 3, 0, 1))
    b = build_schedule(3, 4, (2, 3, 0, 1))
    assert a == b
    with pytest.raises(Exception):
        a.num_stages = 5  # type: ignore[misc]


def test_epoch_order_shared_seed():
    assert epoch_order(6, 3, 7, shuffle=False) == tuple(range(6))
    o1 = epoch_order(16, 3, 7, shuffle=True)
    assert sorted(o1) == list(range(16))
    assert o1 == epoch_order(16, 3, 7, shuffle=True)
    assert o1 != epoch_order(16, 4, 7, shuffle=True)
    # One way is the pipeline order of its chunks.
    assert way_orders([list(range(16))], 3, 7, True) == (o1,)
    w = way_orders([[0, 1, 2], [3, 4]], 1, 0, True)
    assert sorted(w[0]) == [0, 1, 2] and sorted(w[1]) == [3, 4]

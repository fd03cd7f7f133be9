"""The pipeline schedule of one epoch, as frozen data (DESIGN.md 5).

A :class:`PipelineSchedule` is a tuple of actions, each naming the stage that runs it,
built by the pure function :func:`build_schedule` from ``(num_stages, num_chunks,
order)``. It can be built, printed and checked without any process; the pipeline
runner (:mod:`gnnpipe.engine.pipeline`) only executes the actions of its stage, in
order (a thin executor). ``torch.distributed.pipelining`` keeps its schedules the
same way (a list of actions per rank).

Per stage ``s`` of ``S``, with ``c_t = order[t]``::

    PostRecvForward(c_0)                      # s > 0: the first input is posted first
    for t in 0 .. T-1:
        WaitRecvForward(c_t)                  # s > 0
        PostRecvForward(c_{t+1})              # s > 0: posted AHEAD, so that it
        Forward(c_t)                          #   arrives while c_t is computed
        SendForward(c_t)                      # s < S-1, non-blocking
    PostRecvBackward(c_{T-1})                 # s < S-1
    for t in T-1 .. 0:                        # reverse order
        WaitRecvBackward(c_t)                 # s < S-1
        PostRecvBackward(c_{t-1})             # s < S-1, ahead
        Backward(c_t)
        SendBackward(c_t)                     # s > 0, non-blocking
    WaitSends                                 # the outstanding isends complete
    Step

Cross-epoch overlap (``parallel.cross_epoch_chunks = K``, pipeline mode only): at the
turn (after ``PostRecvBackward``) every stage but the last inserts ``BeginNext`` and
the forward of the NEXT epoch's first K chunks (``ahead`` actions: receive, forward,
send), which it runs with its weights not yet stepped; the next epoch's program of
those stages then starts its forward at step K (``carried``). The last stage has no
turn to fill: after its step it posts the receives of those chunks (so that they
are matched before an evaluation's transfers on the same link) and computes them in
the next epoch as usual, whose fill bubble is gone; the turn of the others is spent
computing.

There is no barrier anywhere: a stage only ever waits for the one message it needs
next (the reference system stops every pipeline step at a barrier; gnnpipe does not).
The last stage's ``Forward`` includes the classifier and the loss of the chunk.

Hybrid mode (DESIGN.md 6) runs one schedule per way, over the way's own chunks, with
``num_steps`` = the largest number of chunks of any way: a way with fewer chunks gets
:class:`IdleForward` / :class:`IdleBackward` steps at the end, in which it only takes
part in the halo exchange with the other ways (every way is at the same step at every
exchange). The per-layer halo exchange itself happens inside ``Forward``/``Backward``.

The chunk order ``pi`` of an epoch comes from :func:`epoch_order` (one permutation
for every stage; no communication needed: every rank draws it from the same seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import torch

__all__ = [
    "PostRecvForward",
    "WaitRecvForward",
    "Forward",
    "SendForward",
    "PostRecvBackward",
    "WaitRecvBackward",
    "Backward",
    "SendBackward",
    "IdleForward",
    "IdleBackward",
    "BeginNext",
    "WaitSends",
    "Step",
    "Action",
    "PipelineSchedule",
    "build_schedule",
    "epoch_order",
    "way_orders",
    "way_blocks",
    "order_seed",
]


# ------------------------------------------------------------------------ actions
@dataclass(frozen=True)
class PostRecvForward:
    """Post the receive of chunk ``chunk``'s input rows from stage ``stage - 1``."""

    stage: int
    chunk: int
    step: int
    ahead: bool = False  # of the NEXT epoch (cross-epoch overlap)
    code = "r"


@dataclass(frozen=True)
class WaitRecvForward:
    """Wait for chunk ``chunk``'s input rows (posted earlier)."""

    stage: int
    chunk: int
    step: int
    ahead: bool = False  # of the NEXT epoch (cross-epoch overlap)
    code = "R"


@dataclass(frozen=True)
class Forward:
    """Run the stage's layers on chunk ``chunk`` (last stage: classifier and loss too)."""

    stage: int
    chunk: int
    step: int
    ahead: bool = False  # of the NEXT epoch (cross-epoch overlap)
    code = "F"


@dataclass(frozen=True)
class SendForward:
    """Start sending chunk ``chunk``'s output rows to stage ``stage + 1`` (non-blocking)."""

    stage: int
    chunk: int
    step: int
    ahead: bool = False  # of the NEXT epoch (cross-epoch overlap)
    code = "S"


@dataclass(frozen=True)
class PostRecvBackward:
    """Post the receive of the gradient of chunk ``chunk``'s output rows from ``stage + 1``."""

    stage: int
    chunk: int
    step: int
    code = "b"


@dataclass(frozen=True)
class WaitRecvBackward:
    """Wait for the gradient of chunk ``chunk``'s output rows (posted earlier)."""

    stage: int
    chunk: int
    step: int
    code = "W"


@dataclass(frozen=True)
class Backward:
    """Back-propagate chunk ``chunk`` through the stage's layers."""

    stage: int
    chunk: int
    step: int
    code = "B"


@dataclass(frozen=True)
class SendBackward:
    """Start sending the gradient of chunk ``chunk``'s input rows to ``stage - 1``."""

    stage: int
    chunk: int
    step: int
    code = "G"


@dataclass(frozen=True)
class IdleForward:
    """Hybrid: no chunk of this way at forward step ``step``; halo exchange only."""

    stage: int
    step: int
    code = "."


@dataclass(frozen=True)
class IdleBackward:
    """Hybrid: no chunk of this way at backward step ``step``; halo exchange only."""

    stage: int
    step: int
    code = ","


@dataclass(frozen=True)
class BeginNext:
    """Cross-epoch overlap, at the turn: refresh the snapshot after this epoch's forward,
    set the next epoch's buffers, stash the weights not yet stepped (stage 0: encode
    every row for the next epoch with them)."""

    stage: int
    code = "N"


@dataclass(frozen=True)
class WaitSends:
    """Wait until every outstanding send of the stage has completed."""

    stage: int
    code = "w"


@dataclass(frozen=True)
class Step:
    """One optimizer step on the stage's parameters (gradients summed over chunks)."""

    stage: int
    code = "U"


Action = Union[
    PostRecvForward, WaitRecvForward, Forward, SendForward, PostRecvBackward, WaitRecvBackward,
    Backward, SendBackward, IdleForward, IdleBackward, BeginNext, WaitSends, Step,
]


def _label(a: Action) -> str:
    chunk = getattr(a, "chunk", None)
    if chunk is not None:
        return f"{a.code}{chunk}" + ("+" if getattr(a, "ahead", False) else "")
    step = getattr(a, "step", None)
    return a.code if step is None else f"{a.code}{step}"


# ----------------------------------------------------------------------- schedule
@dataclass(frozen=True)
class PipelineSchedule:
    """One epoch of the pipeline as data: ``actions`` holds every stage's program,
    stage 0's first, each in execution order (see the module docstring).

    Attributes:
        num_stages: S.
        num_chunks: C, the number of chunks of the whole run (chunk ids lie in [0, C)).
        order: the chunks this schedule pipelines, in forward order (pi).
        num_steps: forward steps per stage (>= len(order); more = idle steps).
        actions: the actions of all stages.
    """

    num_stages: int
    num_chunks: int
    order: tuple[int, ...]
    num_steps: int
    actions: tuple[Action, ...]

    def for_stage(self, stage: int) -> tuple[Action, ...]:
        """The program of stage ``stage``, in execution order."""
        if not 0 <= stage < self.num_stages:
            raise ValueError(f"stage: expected 0 <= stage < {self.num_stages}, found {stage}")
        return tuple(a for a in self.actions if a.stage == stage)

    def __str__(self) -> str:
        """A table: one column per stage, its actions top to bottom. Codes: r/R post/wait
        forward receive, F forward, S send forward, b/W post/wait backward receive,
        B backward, G send gradient, ./, idle step, w wait sends, U optimizer step."""
        cols = [[_label(a) for a in self.for_stage(s)] for s in range(self.num_stages)]
        height = max(len(c) for c in cols)
        width = max(6, max((len(x) for c in cols for x in c), default=1) + 1)
        lines = [f"PipelineSchedule(S={self.num_stages}, C={self.num_chunks}, "
                 f"order={list(self.order)}, steps={self.num_steps})"]
        lines.append("      " + "".join(f"{'s' + str(s):>{width}}" for s in range(self.num_stages)))
        for i in range(height):
            row = "".join(f"{(c[i] if i < len(c) else ''):>{width}}" for c in cols)
            lines.append(f"{i:>5} {row}")
        return "\n".join(lines)


def build_schedule(num_stages: int, num_chunks: int, order: Sequence[int],
                   num_steps: int | None = None, *, carried: int = 0,
                   ahead: Sequence[int] = ()) -> PipelineSchedule:
    """The schedule of one epoch for ``num_stages`` stages pipelining ``order``.

    ``order`` lists distinct chunk ids in ``[0, num_chunks)`` (all of them in pipeline
    mode; one way's block in hybrid mode). ``num_steps`` (default ``len(order)``) may
    exceed it: the extra steps are idle (hybrid). A pure function of its arguments.

    Cross-epoch overlap (pipeline mode; see the module docstring): ``carried`` is the
    number of leading chunks of ``order`` whose forward every stage but the last ran
    at the previous epoch's turn (those stages skip them now), ``ahead`` the next
    epoch's leading chunks that every stage but the last forwards at this epoch's turn.
    """
    s_count = int(num_stages)
    if s_count < 1:
        raise ValueError(f"num_stages: expected >= 1, found {num_stages}")
    order_t = tuple(int(c) for c in order)
    if len(set(order_t)) != len(order_t) or any(not 0 <= c < num_chunks for c in order_t):
        raise ValueError(f"order: expected distinct chunk ids in [0, {num_chunks}), found {list(order_t)}")
    steps = len(order_t) if num_steps is None else int(num_steps)
    if steps < len(order_t):
        raise ValueError(f"num_steps: expected >= len(order)={len(order_t)}, found {steps}")
    last = s_count - 1
    carried = int(carried)
    ahead_t = tuple(int(c) for c in ahead)
    if (carried or ahead_t) and (s_count < 2 or steps != len(order_t)):
        raise ValueError("carried/ahead: expected a pipeline of >= 2 stages without idle steps, "
                         f"found S={s_count}, steps={steps}, chunks={len(order_t)}")
    if not 0 <= carried <= len(order_t):
        raise ValueError(f"carried: expected 0 <= carried <= {len(order_t)}, found {carried}")
    if len(set(ahead_t)) != len(ahead_t) or any(not 0 <= c < num_chunks for c in ahead_t):
        raise ValueError(f"ahead: expected distinct chunk ids in [0, {num_chunks}), found {list(ahead_t)}")

    def chunk_at(t: int) -> int | None:
        return order_t[t] if t < len(order_t) else None

    actions: list[Action] = []
    for s in range(s_count):
        # Forward, in order; a stage before the last skips the chunks it ran ahead,
        # the last one finds their receives posted at the end of the previous epoch.
        first = carried if s < last else 0
        if s > 0 and carried < len(order_t):
            actions.append(PostRecvForward(s, order_t[carried], carried))
        for t in range(first, steps):
            k = chunk_at(t)
            if k is None:
                actions.append(IdleForward(s, t))
                continue
            if s > 0:
                actions.append(WaitRecvForward(s, k, t))
                nxt = chunk_at(t + 1)
                if nxt is not None and t + 1 > carried:
                    actions.append(PostRecvForward(s, nxt, t + 1))
            actions.append(Forward(s, k, t))
            if s < last:
                actions.append(SendForward(s, k, t))
        # Backward, in reverse order (idle steps at the end come first).
        if s < last and order_t:
            actions.append(PostRecvBackward(s, order_t[-1], len(order_t) - 1))
        # The turn: the first gradient is on its way; forward the next epoch's leading
        # chunks meanwhile (their inputs come from the previous stage's own turn).
        if s < last and ahead_t:
            actions.append(BeginNext(s))
            if s > 0:
                actions.append(PostRecvForward(s, ahead_t[0], 0, ahead=True))
            for j, k in enumerate(ahead_t):
                if s > 0:
                    actions.append(WaitRecvForward(s, k, j, ahead=True))
                    if j + 1 < len(ahead_t):
                        actions.append(PostRecvForward(s, ahead_t[j + 1], j + 1, ahead=True))
                actions.append(Forward(s, k, j, ahead=True))
                actions.append(SendForward(s, k, j, ahead=True))
        for t in reversed(range(steps)):
            k = chunk_at(t)
            if k is None:
                actions.append(IdleBackward(s, t))
                continue
            if s < last:
                actions.append(WaitRecvBackward(s, k, t))
                if t > 0:
                    actions.append(PostRecvBackward(s, order_t[t - 1], t - 1))
            actions.append(Backward(s, k, t))
            if s > 0:
                actions.append(SendBackward(s, k, t))
        actions.append(WaitSends(s))
        actions.append(Step(s))
        if s == last and ahead_t:
            # The next epoch's first inputs were sent at the others' turns: post their
            # receives now, in the order sent, before anything else (an evaluation's
            # transfers) can come between on the same link.
            for j, k in enumerate(ahead_t):
                actions.append(PostRecvForward(s, k, j, ahead=True))
    return PipelineSchedule(num_stages=s_count, num_chunks=int(num_chunks), order=order_t,
                            num_steps=steps, actions=tuple(actions))


# -------------------------------------------------------------------------- order
def order_seed(seed: int, epoch: int) -> int:
    """The generator seed of epoch ``epoch``'s chunk order: a fixed function of the run
    seed and the epoch, the same on every rank."""
    return (int(seed) * 1_000_003 + int(epoch) * 7_919 + 12_345) % (2**63 - 1)


def epoch_order(num_chunks: int, epoch: int, seed: int, shuffle: bool) -> tuple[int, ...]:
    """pi of an epoch: a permutation of ``range(num_chunks)`` drawn from
    ``torch.Generator().manual_seed(order_seed(seed, epoch))`` when ``shuffle``
    (technique 1), else the identity. Same on every rank, no communication."""
    if not shuffle:
        return tuple(range(num_chunks))
    g = torch.Generator()
    g.manual_seed(order_seed(seed, epoch))
    return tuple(int(c) for c in torch.randperm(num_chunks, generator=g).tolist())


def way_blocks(num_chunks: int, num_ways: int) -> tuple[tuple[int, ...], ...]:
    """Hybrid: chunks dealt to ways in contiguous blocks, as equal as possible (the
    first ``num_chunks % num_ways`` ways get one chunk more)."""
    if num_ways < 1 or num_chunks < num_ways:
        raise ValueError(f"ways: expected 1 <= ways <= chunks={num_chunks}, found {num_ways}")
    base, extra = divmod(int(num_chunks), int(num_ways))
    out, start = [], 0
    for w in range(num_ways):
        n = base + (1 if w < extra else 0)
        out.append(tuple(range(start, start + n)))
        start += n
    return tuple(out)


def way_orders(blocks: Sequence[Sequence[int]], epoch: int, seed: int, shuffle: bool) -> tuple[tuple[int, ...], ...]:
    """Hybrid: one order per way over that way's block of chunks. With ``shuffle``
    each block is permuted by draws from one generator seeded as in
    :func:`epoch_order`, way 0 first (so one way equals :func:`epoch_order` of its
    chunks); otherwise each block in increasing order."""
    blocks_t = [tuple(int(c) for c in b) for b in blocks]
    if not shuffle:
        return tuple(blocks_t)
    g = torch.Generator()
    g.manual_seed(order_seed(seed, epoch))
    out = []
    for b in blocks_t:
        perm = torch.randperm(len(b), generator=g).tolist()
        out.append(tuple(b[i] for i in perm))
    return tuple(out)

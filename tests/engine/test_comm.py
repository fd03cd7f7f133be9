"""Comm: p2p and batched exchange move the right tensors and count exactly the bytes
sent; the ring all-reduce equals the sum (all ranks, sub-groups) with its exact bytes."""

from __future__ import annotations

import pytest
import torch

from tests.engine._dist_util import run_workers

pytestmark = pytest.mark.dist


def _p2p_worker(rank: int, world: int, comm=None) -> dict:
    from gnnpipe.engine.comm import P2P, Comm

    comm = comm or Comm(rank, world)
    out: dict = {}
    # One-directional isend/irecv ring: rank r sends a [3, 2] float64 block to r+1.
    send = torch.full((3, 2), float(rank), dtype=torch.float64)
    recv = torch.empty(3, 2, dtype=torch.float64)
    if rank % 2 == 0:
        comm.wait(comm.isend(send, (rank + 1) % world, "stage_activations"))
        comm.wait(comm.irecv(recv, (rank - 1) % world, "stage_activations"))
    else:
        comm.wait(comm.irecv(recv, (rank - 1) % world, "stage_activations"))
        comm.wait(comm.isend(send, (rank + 1) % world, "stage_activations"))
    out["ring"] = recv
    # All-to-all exchange as one batch: rank r sends (r+q+1) rows of width 4 to q.
    ops, bufs = [], {}
    for q in range(world):
        if q == rank:
            continue
        ops.append(P2P("send", torch.full((rank + q + 1, 4), float(10 * rank + q)), q, "halo_rows"))
        bufs[q] = torch.empty(q + rank + 1, 4)
        ops.append(P2P("recv", bufs[q], q, "halo_rows"))
    comm.wait(comm.batch(ops))
    out["a2a"] = bufs
    out["counters"] = comm.take_counters()
    out["after"] = comm.take_counters()
    return out


SIZES = [(5, 3), (7,), (1, 1), (2,)]  # 25 elements: ring segments of unequal size
#: Sub-groups: two of four ranks (the hybrid case), and a one-rank group (a no-op).
SUB = {2: [0], 4: [1, 3]}


def _all_worker(rank: int, world: int) -> dict:
    """Every check of this file in one process group per world size (spawning is slow)."""
    from gnnpipe.engine.comm import Comm

    comm = Comm(rank, world)
    out = {"p2p": _p2p_worker(rank, world, comm)}
    out["ar_all"] = _allreduce_worker(rank, world, SIZES, None, comm)
    out["ar_sub"] = _allreduce_worker(rank, world, SIZES, SUB[world], comm)
    out["control"] = _control_worker(rank, world, comm)
    out["directional"] = _directional_worker(rank, world)
    return out


def _directional_worker(rank: int, world: int) -> dict:
    """The pipeline pattern that would deadlock NCCL on one stream per pair: both
    neighbours' receives posted ahead, then the sends, in both directions at once.
    Run on per-direction groups (the NCCL default), here exercised under gloo."""
    from gnnpipe.engine.comm import Comm

    comm = Comm(rank, world, directional=True, timeout_s=60)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    recv_fwd = [torch.empty(2, 3) for _ in range(2)]
    recv_bwd = [torch.empty(4) for _ in range(2)]
    handles = []
    for k in range(2):  # two messages per direction: matched in posting order
        handles.append(comm.irecv(recv_fwd[k], prv, "stage_activations", tag=1))
        handles.append(comm.irecv(recv_bwd[k], nxt, "stage_gradients", tag=2))
    for k in range(2):
        handles.append(comm.isend(torch.full((2, 3), 10.0 * rank + k), nxt, "stage_activations", tag=1))
        handles.append(comm.isend(torch.full((4,), -10.0 * rank - k), prv, "stage_gradients", tag=2))
    for h in handles:
        comm.wait(h)
    return {"directional": comm.directional, "fwd": recv_fwd, "bwd": recv_bwd, "counters": comm.take_counters()}


_CACHE: dict = {}


@pytest.fixture(params=[2, 4], scope="module")
def world_results(request):
    world = request.param
    if world not in _CACHE:
        _CACHE[world] = run_workers(_all_worker, world)
    return world, _CACHE[world]


def test_p2p_and_batch_move_tensors_and_count_sent_bytes(world_results) -> None:
    world, all_res = world_results
    res = [r["p2p"] for r in all_res]
    for r, out in enumerate(res):
        torch.testing.assert_close(out["ring"], torch.full((3, 2), float((r - 1) % world), dtype=torch.float64),
                                   rtol=0, atol=0)
        for q, buf in out["a2a"].items():
            torch.testing.assert_close(buf, torch.full((q + r + 1, 4), float(10 * q + r)), rtol=0, atol=0)
        c = out["counters"]
        assert c["stage_activations"] == 3 * 2 * 8
        assert c["halo_rows"] == sum((r + q + 1) * 4 * 4 for q in range(world) if q != r)
        assert all(v == 0 for k, v in c.items() if k not in ("stage_activations", "halo_rows"))
        assert all(v == 0 for v in out["after"].values()), "take_counters must reset"


def _allreduce_worker(rank: int, world: int, sizes: list, group: list | None, comm=None) -> dict:
    from gnnpipe.engine.comm import Comm

    comm = comm or Comm(rank, world)
    comm.take_counters()
    g = torch.Generator().manual_seed(100 + rank)
    tensors = [torch.randn(*s, generator=g, dtype=torch.float64) for s in sizes]
    before = [t.clone() for t in tensors]
    if group is None or rank in group:
        comm.all_reduce_sum(tensors, "weight_allreduce", group_ranks=group)
    return {"before": before, "after": tensors, "bytes": comm.take_counters()["weight_allreduce"]}


@pytest.mark.parametrize("sub", [False, True])
def test_ring_all_reduce_sums_and_counts_two_p_minus_one_times_numel(world_results, sub) -> None:
    world, all_res = world_results
    group = SUB[world] if sub else None
    res = [r["ar_sub" if sub else "ar_all"] for r in all_res]
    sizes = SIZES
    members = list(range(world)) if group is None else group
    for k in range(len(sizes)):
        expect = sum(res[r]["before"][k] for r in members)
        for r in members:
            torch.testing.assert_close(res[r]["after"][k], expect, rtol=1e-12, atol=1e-12)
            # Bit-identical on every member: replicated optimizers stay in lock-step.
            assert torch.equal(res[r]["after"][k], res[members[0]]["after"][k])
    for r in set(range(world)) - set(members):
        for k in range(len(sizes)):
            assert torch.equal(res[r]["after"][k], res[r]["before"][k])
        assert res[r]["bytes"] == 0
    numel = sum(int(torch.Size(s).numel()) for s in sizes)
    p = len(members)
    assert sum(res[r]["bytes"] for r in members) == 2 * (p - 1) * numel * 8


def _control_worker(rank: int, world: int, comm=None) -> dict:
    from gnnpipe.engine.comm import Comm

    comm = comm or Comm(rank, world)
    s = comm.all_reduce_control([rank, 1.5], "sum")
    m = comm.all_reduce_control([rank], "max")
    obj = comm.broadcast_object({"from": rank}, src=world - 1)
    gathered = comm.all_gather_object(rank * 2)
    comm.barrier()
    bad = None
    counters = comm.take_counters()
    try:
        comm.isend(torch.zeros(1), (rank + 1) % world, "not_a_kind")
    except ValueError as exc:
        bad = str(exc)
    return {"s": s, "m": m, "obj": obj, "g": gathered, "counters": counters, "bad": bad}


def test_control_messages_are_uncounted_and_unknown_kinds_refused(world_results) -> None:
    world, all_res = world_results
    res = [r["control"] for r in all_res]
    for out in res:
        assert out["s"] == [float(sum(range(world))), 1.5 * world]
        assert out["m"] == [float(world - 1)]
        assert out["obj"] == {"from": world - 1}
        assert out["g"] == [2 * q for q in range(world)]
        assert all(v == 0 for v in out["counters"].values())
        assert out["bad"] is not None and "not_a_kind" in out["bad"]


def test_directional_groups_carry_both_directions_with_receives_posted_ahead(world_results) -> None:
    world, all_res = world_results
    for r, res in enumerate(all_res):
        out = res["directional"]
        assert out["directional"] is True
        prv, nxt = (r - 1) % world, (r + 1) % world
        for k in range(2):
            assert torch.equal(out["fwd"][k], torch.full((2, 3), 10.0 * prv + k))
            assert torch.equal(out["bwd"][k], torch.full((4,), -10.0 * nxt - k))
        assert out["counters"]["stage_activations"] == 2 * 6 * 4
        assert out["counters"]["stage_gradients"] == 2 * 4 * 4

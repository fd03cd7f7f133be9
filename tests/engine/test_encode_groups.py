"""Stage 0's encode group by group (no processes): rows are grouped by the step of
their first reader; projecting the groups in order and back-propagating them in
reverse (``Encoded.of_projection``: the weights' gradients by
``InputProjection.weight_grads``, no autograd graph kept) gives exactly one whole
encode's rows and weight gradients, dense and sparse, with dropout drawn once, into
the parameters or a stash's leaves; a group left without its backward is an error."""

from __future__ import annotations

import pytest
import torch

from gnnpipe.data.sparse import SparseFeatures
from gnnpipe.engine.encode_groups import ENCODE_BLOCK_BYTES, Encoded, encode_block_rows, first_reader_groups
from gnnpipe.models import InputProjection

DT = torch.float64


def _ids(*rows: list[int]) -> dict[int, torch.Tensor]:
    return {k: torch.tensor(r, dtype=torch.int64) for k, r in enumerate(rows)}


def test_groups_are_the_rows_each_step_reads_first():
    local_ids = _ids([0, 1, 5], [2, 3, 1], [4, 5, 0, 3])  # row 6: read by no chunk
    groups = first_reader_groups(local_ids, [2, 0, 1], range(3), 7)
    assert {t: g.tolist() for t, g in groups.items()} == {0: [0, 3, 4, 5], 1: [1], 2: [2]}
    # The chunks from step 1 on (those not run ahead): chunk 2's rows start over.
    groups = first_reader_groups(local_ids, [2, 0, 1], range(1, 3), 7)
    assert {t: g.tolist() for t, g in groups.items()} == {1: [0, 1, 5], 2: [2, 3]}
    assert first_reader_groups(local_ids, [2, 0, 1], range(0), 7) == {}


def test_groups_partition_the_read_rows_by_their_earliest_reader():
    gen = torch.Generator().manual_seed(0)
    n, chunks = 200, 6
    local_ids = {k: torch.unique(torch.randint(0, n, (60,), generator=gen)) for k in range(chunks)}
    order = torch.randperm(chunks, generator=gen).tolist()
    groups = first_reader_groups(local_ids, order, range(chunks), n)
    first = {}
    for t, k in enumerate(order):
        for r in local_ids[k].tolist():
            first.setdefault(r, t)
    got = {r: t for t, g in groups.items() for r in g.tolist()}
    assert got == first
    assert sum(g.numel() for g in groups.values()) == len(first)


def _features(sparse: bool) -> torch.Tensor | SparseFeatures:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(40, 9, generator=gen, dtype=DT) * (torch.rand(40, 9, generator=gen) < 0.4)
    return SparseFeatures.from_dense(x) if sparse else x


def _whole_encode(proj, x, g):
    """One whole encode of ``x`` (dropout drawn from seed 11) and its parameters'
    gradients for the output gradient ``g``; the parameters' gradients reset after."""
    whole = proj(x, generator=torch.Generator().manual_seed(11))
    whole.backward(g)
    want = {n: p.grad.clone() for n, p in proj.named_parameters()}
    proj.zero_grad(set_to_none=True)
    return whole, want


@pytest.mark.parametrize("activation", [True, False], ids=["relu", "linear"])  # GCNII's, ResGCN+'s
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_grouped_encode_equals_one_whole_encode(sparse, activation):
    x = _features(sparse)
    torch.manual_seed(3)
    proj = InputProjection(9, 5, dropout=0.5, activation=activation).to(DT).train()
    local_ids = _ids(list(range(0, 15)) + [30, 31], list(range(12, 28)), list(range(25, 40)) + [1, 2])
    order = [1, 2, 0]
    groups = first_reader_groups(local_ids, order, range(3), 40)
    read = torch.cat(list(groups.values()))
    g = torch.randn(40, 5, generator=torch.Generator().manual_seed(8), dtype=DT)
    whole, want = _whole_encode(proj, x, g)

    enc = Encoded.of_projection(proj, x, groups, 40, generator=torch.Generator().manual_seed(11), weights=None)
    enc.encode(0)
    assert enc.pending == {0}  # only the first chunk's rows so far
    assert torch.equal(enc.det[groups[0]], whole.detach()[groups[0]])
    for t in (1, 2):
        enc.encode(t)
    torch.testing.assert_close(enc.det[read], whole.detach()[read], rtol=1e-12, atol=1e-12)
    enc.grad.copy_(g)
    for t in (2, 1, 0):
        enc.backward(t)
    enc.check_done()
    for n, p in proj.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-12, atol=1e-12, msg=n)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_blocked_groups_give_the_whole_encode_and_touch_at_most_a_block_of_rows_at_a_time(sparse):
    """A group is projected and back-propagated ``block_rows`` rows at a time (the
    temporaries of one block, not of the group), with one whole encode's values."""
    x = _features(sparse)
    torch.manual_seed(3)
    proj = InputProjection(9, 5, dropout=0.5).to(DT).train()
    local_ids = _ids(list(range(0, 25)) + [30, 31], list(range(20, 40)))
    groups = first_reader_groups(local_ids, [0, 1], range(2), 40)
    g = torch.randn(40, 5, generator=torch.Generator().manual_seed(8), dtype=DT)
    whole, want = _whole_encode(proj, x, g)

    enc = Encoded.of_projection(proj, x, groups, 40, generator=torch.Generator().manual_seed(11), weights=None)
    enc.block_rows = 4
    seen = []
    project, accumulate = enc.project, enc.accumulate
    enc.project = lambda rows: seen.append(("project", rows.numel())) or project(rows)
    enc.accumulate = lambda rows, h, grad_h: seen.append(("accumulate", rows.numel())) or accumulate(rows, h, grad_h)
    for t in (0, 1):
        enc.encode(t)
    enc.grad.copy_(g)
    for t in (1, 0):
        enc.backward(t)
    enc.check_done()
    sizes = {kind: [n for k, n in seen if k == kind] for kind in ("project", "accumulate")}
    assert max(sizes["project"]) == max(sizes["accumulate"]) == 4
    assert sum(sizes["project"]) == sum(sizes["accumulate"]) == 40  # every read row once each way
    torch.testing.assert_close(enc.det, whole.detach(), rtol=1e-12, atol=1e-12)
    for n, p in proj.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-12, atol=1e-12, msg=n)


def test_block_rows_fit_the_budget_counting_both_widths():
    # 2 x 64 input + 3 x 100 output values of 4 bytes a row: 1,712 bytes.
    assert encode_block_rows(64, 100, 4) == ENCODE_BLOCK_BYTES // 1712
    assert encode_block_rows(64, 100, 4, budget_bytes=1712 * 10 + 1711) == 10
    assert encode_block_rows(0, 100, 8, budget_bytes=2400) == 1  # sparse: the output's values only
    assert encode_block_rows(10**9, 100, 4) == 1  # never no rows


def test_a_group_left_without_its_backward_is_an_error():
    proj = InputProjection(9, 5, dropout=0.0).to(DT)
    x = _features(False)
    groups = first_reader_groups(_ids([0, 1, 2], [2, 3]), [0, 1], range(2), 40)
    enc = Encoded.of_projection(proj, x, groups, 40, generator=None, weights=None)
    enc.encode(0)
    enc.encode(1)
    enc.backward(1)
    with pytest.raises(RuntimeError, match=r"steps \[0\] were encoded and not back-propagated"):
        enc.check_done()


def test_the_identity_encode_is_the_input_itself():
    x = _features(False)
    enc = Encoded.constant(x)
    enc.encode(0)
    enc.backward(0)
    enc.check_done()
    assert enc.det is x and enc.grad.shape == x.shape


def test_unsplit_groups_put_every_read_row_at_the_first_step():
    local_ids = _ids([0, 1, 5], [2, 3, 1], [4, 5, 0, 3])
    groups = first_reader_groups(local_ids, [2, 0, 1], range(3), 7, split=False)
    assert {t: g.tolist() for t, g in groups.items()} == {0: [0, 1, 2, 3, 4, 5]}
    groups = first_reader_groups(local_ids, [2, 0, 1], range(1, 3), 7, split=False)
    assert {t: g.tolist() for t, g in groups.items()} == {1: [0, 1, 2, 3, 5]}


def test_a_group_of_every_row_projects_the_whole_input_without_selecting_rows():
    proj = InputProjection(9, 5, dropout=0.0).to(DT)
    x = _features(False)
    asked = []
    groups = first_reader_groups(_ids(list(range(40)), [3, 4]), [0, 1], range(2), 40, split=False)

    def project(rows):
        asked.append(rows)
        with torch.no_grad():
            return proj(proj.drop(x), rows=rows)

    def accumulate(rows, h, grad_h):
        asked.append(rows)

    enc = Encoded.grouped(project, accumulate, groups, 40, 5, torch.device("cpu"), DT)
    enc.encode(0)
    enc.backward(0)
    assert asked == [None, None]
    torch.testing.assert_close(enc.det, proj(x).detach(), rtol=0, atol=0)


def test_with_a_stash_the_gradients_go_to_its_leaves_and_the_parameters_stay_untouched():
    """Cross-epoch: chunks run ahead use the weights not yet stepped (a stash of leaf
    copies); their encode's gradients go to those leaves, as autograd would put them."""
    x = _features(False)
    torch.manual_seed(3)
    proj = InputProjection(9, 5, dropout=0.0).to(DT)
    stash = {n: p.detach().clone().requires_grad_(True) for n, p in proj.named_parameters()}
    groups = first_reader_groups(_ids(list(range(20)), list(range(15, 40))), [0, 1], range(2), 40)
    enc = Encoded.of_projection(proj, x, groups, 40, generator=None, weights=stash)
    g = torch.randn(40, 5, generator=torch.Generator().manual_seed(2), dtype=DT)
    for t in (0, 1):
        enc.encode(t)
    enc.grad.copy_(g)
    for t in (1, 0):
        enc.backward(t)
    assert all(p.grad is None for p in proj.parameters())
    want = proj(x)
    want.backward(g)
    for n, p in proj.named_parameters():
        torch.testing.assert_close(stash[n].grad, p.grad, rtol=1e-12, atol=1e-12, msg=n)

"""The layout: resolved once from the config, the graph and the machine; every
refusal is one ConfigError line; the rank arithmetic of every mode."""

from __future__ import annotations

import pytest

from gnnpipe.config import ModelConfig, ParallelConfig, RunConfig
from gnnpipe.engine.layout import resolve_layout
from gnnpipe.errors import ConfigError

NO_CUDA = (False, 0)


def _cfg(layers: int = 6, **par) -> RunConfig:
    return RunConfig(model=ModelConfig(layers=layers), parallel=ParallelConfig(**par))


def test_hybrid_rank_arithmetic():
    lay = resolve_layout(_cfg(mode="hybrid", workers=6, ways=2, chunks=8), 100, cuda=NO_CUDA)
    assert (lay.ways, lay.stages, lay.world_size, lay.num_chunks) == (2, 3, 6, 8)
    assert [(lay.way_of(r), lay.stage_of(r)) for r in range(6)] == \
        [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(lay.rank_of(lay.way_of(r), lay.stage_of(r)) == r for r in range(6))
    assert [lay.prev_stage_rank(r) for r in range(6)] == [None, 0, 1, None, 3, 4]
    assert [lay.next_stage_rank(r) for r in range(6)] == [1, 2, None, 4, 5, None]
    assert lay.stage_group(1) == (1, 4)
    assert lay.way_peer(4, 0) == 1
    assert lay.stage_split == (2, 2, 2) and [lay.layer_range(s) for s in range(3)] == [(0, 2), (2, 4), (4, 6)]
    assert lay.way_blocks() == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert (lay.device_type, lay.backend, lay.launcher) == ("cpu", "gloo", "local")


def test_pipeline_is_one_way_and_single_runs_in_process():
    pipe = resolve_layout(_cfg(layers=7, mode="pipeline", workers=2, stage_split=(4, 3)), 100, cuda=NO_CUDA)
    assert (pipe.ways, pipe.stages, pipe.stage_split, pipe.num_chunks) == (1, 2, (4, 3), 8)
    assert pipe.stage_group(0) == (0,)
    single = resolve_layout(_cfg(mode="single"), 100, cuda=NO_CUDA)
    assert (single.world_size, single.backend, single.launcher, single.distributed) == (1, None, "inprocess", False)


def test_more_chunks_than_vertices_is_refused():
    cfg = _cfg(mode="pipeline", workers=2, chunks=50)
    assert resolve_layout(cfg, 50, cuda=NO_CUDA).num_chunks == 50
    with pytest.raises(ConfigError, match=r"^parallel\.chunks: expected at most N=49 .*found 50$"):
        resolve_layout(cfg, 49, cuda=NO_CUDA)


@pytest.mark.parametrize("par,cuda,needle", [
    (dict(mode="graph", workers=2, device="cuda"), NO_CUDA, r"^parallel\.device: .*CUDA is not available"),
    (dict(mode="graph", workers=2, backend="nccl"), NO_CUDA, r"^parallel\.backend: expected gloo without CUDA"),
    (dict(mode="graph", workers=2, backend="gloo"), (True, 2), r"^parallel\.backend: expected nccl with device cuda"),
    (dict(mode="graph", workers=4), (True, 2), r"^parallel\.workers: expected at most 2 workers on this node"),
])
def test_what_the_machine_cannot_run_is_refused(par, cuda, needle):
    with pytest.raises(ConfigError, match=needle):
        resolve_layout(_cfg(**par), 100, cuda=cuda)


def test_cuda_resolves_to_nccl_where_present():
    lay = resolve_layout(_cfg(mode="graph", workers=2), 100, cuda=(True, 2))
    assert (lay.device_type, lay.backend) == ("cuda", "nccl")
    assert resolve_layout(_cfg(mode="single"), 100, cuda=(True, 1)).device_type == "cuda"
    assert resolve_layout(_cfg(mode="single", device="cpu"), 100, cuda=(True, 1)).device_type == "cpu"


def test_torchrun_world_size_must_match_and_single_is_refused():
    ok = resolve_layout(_cfg(mode="pipeline", workers=2), 100, launcher_world_size=2, cuda=NO_CUDA)
    assert ok.launcher == "torchrun"
    with pytest.raises(ConfigError, match=r"^parallel\.workers: expected WORLD_SIZE=4 under torchrun, found 2$"):
        resolve_layout(_cfg(mode="pipeline", workers=2), 100, launcher_world_size=4, cuda=NO_CUDA)
    with pytest.raises(ConfigError, match=r"^parallel\.mode: expected graph, pipeline or hybrid under torchrun"):
        resolve_layout(_cfg(mode="single"), 100, launcher_world_size=1, cuda=NO_CUDA)

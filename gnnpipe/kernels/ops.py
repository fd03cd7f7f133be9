"""``ChunkOps``: the one aggregation interface that every layer uses.

A layer holds the rows of its input for a chunk's local vertices, ``x_local =
cat(own rows, halo rows)`` (``local_nid`` order of :class:`~gnnpipe.partition.ChunkPlan`),
and needs, for every own row ``v``, a reduction over its in-neighbours ``u -> v``:

* ``sum``:      ``sum_u x_u``
* ``mean``:     ``sum_u x_u / d_v`` (0 for a row without in-edges)
* ``max``:      elementwise ``max_u x_u`` (0 for a row without in-edges)
* ``gcn``:      ``sum_u x_u / sqrt((d_u+1)(d_v+1)) + x_v / (d_v+1)``, row ``v`` of
  ``D^-1/2 (A + I) D^-1/2 x`` with ``D = in_degree + 1``
* ``weighted``: ``sum_e w_e x_{src e}`` for a per-edge weight ``w`` [nnz] in the
  plan's edge order (``plan.indices``), differentiable; a weight of the graph's edges
  ``w_graph`` [E] is ``w_graph[plan_graph_edges(graph, plan)]``
  (:func:`gnnpipe.partition.plan_graph_edges`).

``d`` is ``ChunkPlan.in_degree``: the *global* in-degree, so a chunk's rows equal the
corresponding rows of the whole-graph result. Duplicate edges count once per copy.
The result is differentiable w.r.t. every row of ``x_local``, halo rows included
(the engine sends halo gradients back to their owners).

Backends, chosen explicitly: ``torch`` (default; CSR sparse-dense products, scatter
max), ``scatter`` (torch-scatter, when installed) and ``reference`` (plain per-edge
code for tests). Operators are built once, never per call: in :meth:`ChunkOps.build`
for the reduces it names, any other at its first use.
"""

from __future__ import annotations

from typing import Collection, Iterable, Protocol

import torch

from gnnpipe.errors import ConfigError, DataError
from gnnpipe.kernels.constant import hold_constant
from gnnpipe.kernels.reference import ReferenceBackend
from gnnpipe.kernels.scatter_backend import ScatterBackend, scatter_available
from gnnpipe.kernels.torch_backend import TorchBackend
from gnnpipe.partition.plan import ChunkPlan

__all__ = ["ChunkOps", "BACKENDS", "REDUCES", "available_backends"]

REDUCES: tuple[str, ...] = ("sum", "mean", "max", "gcn", "weighted")
BACKENDS: tuple[str, ...] = ("torch", "scatter", "reference")


class _Backend(Protocol):
    name: str

    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None) -> torch.Tensor: ...


_BACKEND_CLASSES = {"torch": TorchBackend, "scatter": ScatterBackend, "reference": ReferenceBackend}


def available_backends() -> tuple[str, ...]:
    """The backends that can be built here (``scatter`` only when torch_scatter imports)."""
    return tuple(b for b in BACKENDS if b != "scatter" or scatter_available())


class _HeldConstant:
    """A backend's aggregation with the rows ``constant`` of its input held constant
    (:meth:`ChunkOps.with_constant_rows` for backends that cannot skip them)."""

    def __init__(self, impl: _Backend, constant: torch.Tensor) -> None:
        self.name = impl.name
        self._impl = impl
        self._constant = constant

    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None) -> torch.Tensor:
        return self._impl.aggregate(hold_constant(x_local, self._constant), reduce, edge_weight)


class ChunkOps:
    """Device-side aggregation operators of one chunk, built once from its plan.

    Shapes: ``aggregate(x_local [num_local, d], reduce, edge_weight [nnz] | None)``
    -> ``[num_own, d]``.
    """

    def __init__(self, plan: ChunkPlan, impl: _Backend, device: torch.device, dtype: torch.dtype,
                 constant: torch.Tensor | None = None) -> None:
        self.plan = plan
        self._impl = impl
        self.device = device
        self.dtype = dtype
        #: The rows of ``x_local`` held constant (bool [num_local]); None for a chunk's own operators.
        self.constant = constant

    @classmethod
    def build(
        cls,
        plan: ChunkPlan,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        backend: str = "torch",
        reduces: Iterable[str] | None = None,
    ) -> "ChunkOps":
        """Build the operators of ``plan`` on ``device`` for inputs of ``dtype``.

        ``backend``: one of :data:`BACKENDS`; unknown or uninstalled -> ConfigError.
        ``reduces``: the reduces to build now (default: all of :data:`REDUCES`); the
        ``torch`` backend builds any other at its first use (a model's
        :attr:`~gnnpipe.models.model.DeepGNN.reduces` are all it reads).
        """
        if backend not in _BACKEND_CLASSES:
            raise ConfigError(f"backend: expected one of {', '.join(BACKENDS)}, found {backend!r}")
        wanted = REDUCES if reduces is None else tuple(reduces)
        unknown = [r for r in wanted if r not in REDUCES]
        if unknown:
            raise ConfigError(f"reduces: expected names among {', '.join(REDUCES)}, found {unknown[0]!r}")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ConfigError(f"dtype: expected a floating-point torch.dtype, found {dtype!r}")
        # Resolve "cuda" to "cuda:<current>" so that the device check in aggregate
        # compares like with like.
        resolved = torch.empty(0, device=device if device is not None else "cpu").device
        impl = _BACKEND_CLASSES[backend](plan, resolved, dtype, wanted)
        return cls(plan, impl, resolved, dtype)

    # ------------------------------------------------------------------ sizes
    @property
    def backend(self) -> str:
        return self._impl.name

    # The plan's sizes: own rows, halo rows, both, and edges (duplicates counted: the
    # length of ``edge_weight``).
    num_own = property(lambda self: self.plan.num_own)
    num_halo = property(lambda self: self.plan.num_halo)
    num_local = property(lambda self: self.plan.num_local)
    num_edges = property(lambda self: self.plan.num_edges)

    # ------------------------------------------------------------------ aggregation
    def aggregate(self, x_local: torch.Tensor, reduce: str, edge_weight: torch.Tensor | None = None) -> torch.Tensor:
        """Reduce the in-neighbour rows of every own row (see the module docstring).

        Shapes: x_local [num_local, d]; edge_weight [nnz] (``weighted`` only) -> [num_own, d].
        """
        if reduce not in REDUCES:
            raise ConfigError(f"reduce: expected one of {', '.join(REDUCES)}, found {reduce!r}")
        self._check_tensor("x_local", x_local, (self.num_local, None))
        if reduce == "weighted":
            if edge_weight is None:
                raise ConfigError("edge_weight: expected a [nnz] tensor for reduce='weighted', found None")
            self._check_tensor("edge_weight", edge_weight, (self.num_edges,))
        elif edge_weight is not None:
            raise ConfigError(f"edge_weight: expected None for reduce={reduce!r} (only 'weighted' uses it), found a tensor")
        return self._impl.aggregate(x_local, reduce, edge_weight)

    def with_constant_rows(self, constant: torch.Tensor) -> "ChunkOps":
        """These operators with the rows ``constant`` of ``x_local`` held constant: the
        same aggregation, and a backward that gives those rows gradient 0.

        A pipeline stage reads the halo rows of chunks later in the epoch's order stale
        and drops their gradient; with the ``torch`` backend the transposed products
        then skip those rows' entries instead of computing what is dropped
        (:class:`~gnnpipe.kernels.torch_backend.ConstantRows`); the other backends
        compute the whole gradient and zero those rows. Built in O(nnz) per reduce at
        first use: one per chunk and epoch.

        Shapes: constant bool [num_local] on the ops' device.
        """
        self._check_tensor("constant", constant, (self.num_local,), torch.bool)
        return self._held(constant, None)

    def with_constant_chunks(self, chunks: Collection[int]) -> "ChunkOps":
        """These operators with the halo rows of the source chunks ``chunks`` held
        constant: :meth:`with_constant_rows` of those rows, named by host integers.

        A source chunk's halo rows are one run of local ids
        (:attr:`~gnnpipe.partition.ChunkPlan.halo_blocks`), so the mask is filled run by
        run and the ``torch`` backend cuts its transposes by entry runs, from row
        pointers it read once: nothing reads the device, where with a mask of arbitrary
        rows the number of kept entries is read back (on a GPU a host-device
        synchronisation in every chunk's backward). Chunks without halo rows here are
        ignored; none: the operators themselves.
        """
        runs = tuple((a, b) for j, a, b in self.plan.halo_blocks if j in chunks)
        if not runs:
            return self
        constant = torch.zeros(self.num_local, dtype=torch.bool, device=self.device)
        for a, b in runs:
            constant[a:b] = True
        return self._held(constant, runs)

    def _held(self, constant: torch.Tensor, runs: tuple[tuple[int, int], ...] | None) -> "ChunkOps":
        impl = self._impl
        held = impl.with_constant_rows(constant, runs) if isinstance(impl, TorchBackend) else \
            _HeldConstant(impl, constant)
        return ChunkOps(self.plan, held, self.device, self.dtype, constant)

    def _check_tensor(self, name: str, t: torch.Tensor, shape: tuple[int | None, ...],
                      dtype: torch.dtype | None = None) -> None:
        expected = "[" + ", ".join("d" if s is None else str(s) for s in shape) + "]"
        if not isinstance(t, torch.Tensor):
            raise DataError(f"{name}: expected a tensor of shape {expected}, found {type(t).__name__}")
        if t.dim() != len(shape) or any(s is not None and t.shape[i] != s for i, s in enumerate(shape)):
            raise DataError(f"{name}: expected shape {expected} for {self!r}, found {list(t.shape)}")
        want = self.dtype if dtype is None else dtype
        if t.dtype != want:
            whose = " (the ChunkOps dtype)" if dtype is None else ""
            raise DataError(f"{name}: expected dtype {want}{whose}, found {t.dtype}")
        if t.device != self.device:
            raise DataError(f"{name}: expected device {self.device} (the ChunkOps device), found {t.device}")

    def __repr__(self) -> str:
        return (
            f"ChunkOps({self.backend}, chunk {self.plan.chunk_idx}, own {self.num_own}, "
            f"halo {self.num_halo}, edges {self.num_edges}, {self.dtype}, {self.device})"
        )

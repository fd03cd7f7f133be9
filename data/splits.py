"""Seeded train/val/test splits for datasets whose files carry none.

The default follows Shchur et al. (*Pitfalls of GNN Evaluation*, 2018): per class, 20
labelled vertices for training and 30 for validation, every other labelled vertex for
testing. A class with fewer vertices fills its train quota first, then validation.
Vertices with label -1 are in no mask. Fully vectorised: one random key per vertex,
one sort by (class, key), ranks within a class by subtraction.
"""

from __future__ import annotations

import numpy as np
import torch

from gnnpipe.errors import DataError

__all__ = ["per_class_split", "fraction_split"]


def per_class_split(
    labels: torch.Tensor,
    num_classes: int,
    *,
    train_per_class: int = 20,
    val_per_class: int = 30,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Masks with ``train_per_class`` / ``val_per_class`` vertices of every class, rest test.

    Shapes: labels int64 [N] (-1 = unlabelled) -> three bool [N] masks.
    """
    if train_per_class < 1 or val_per_class < 0:
        raise DataError(
            f"split: train_per_class must be >= 1 and val_per_class >= 0, found "
            f"{train_per_class} and {val_per_class}"
        )
    y = labels.numpy()
    n = y.shape[0]
    rng = np.random.default_rng(seed)
    key = rng.random(n)
    labelled = np.flatnonzero(y >= 0)
    # Sort the labelled vertices by class, then by the random key.
    order = labelled[np.lexsort((key[labelled], y[labelled]))]
    cls = y[order]
    counts = np.bincount(cls, minlength=num_classes)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(order.size) - first[cls]
    train = np.zeros(n, dtype=bool)
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    train[order[rank < train_per_class]] = True
    val[order[(rank >= train_per_class) & (rank < train_per_class + val_per_class)]] = True
    test[order[rank >= train_per_class + val_per_class]] = True
    return torch.from_numpy(train), torch.from_numpy(val), torch.from_numpy(test)


def fraction_split(
    labels: torch.Tensor, *, train: float, val: float, test: float, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random masks with the given fractions of the labelled vertices (rounded down).

    Shapes: labels int64 [N] -> three bool [N] masks.
    """
    for what, v in (("train", train), ("val", val), ("test", test)):
        if not 0.0 <= v <= 1.0:
            raise DataError(f"split: {what} fraction must lie in [0, 1], found {v}")
    if train + val + test > 1.0 + 1e-9:
        raise DataError(f"split: train + val + test fractions must be <= 1, found {train + val + test:g}")
    y = labels.numpy()
    n = y.shape[0]
    labelled = np.flatnonzero(y >= 0)
    perm = labelled[np.random.default_rng(seed).permutation(labelled.size)]
    m = labelled.size
    n_train, n_val, n_test = int(train * m), int(val * m), int(test * m)
    masks = []
    for lo, hi in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, n_train + n_val + n_test)):
        mask = np.zeros(n, dtype=bool)
        mask[perm[lo:hi]] = True
        masks.append(torch.from_numpy(mask))
    return masks[0], masks[1], masks[2]

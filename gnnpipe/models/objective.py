"""Loss and accuracy, shared by the single trainer and the distributed engine.

The training loss is DESIGN.md 3's: the *sum* of cross-entropy over the training
rows at hand divided by the *global* number of training vertices, so that the losses
of any split of the rows (chunks, workers) add up to the full-graph mean.
Accuracies are fractions in [0, 1] over each split's labelled vertices.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["training_loss", "correct_counts", "split_accuracies", "evaluation_sums", "evaluation_metrics"]


def training_loss(logits: Tensor, labels: Tensor, train_mask: Tensor, num_train_global: int) -> Tensor:
    """``sum_{v in rows, train} CE(logits_v, y_v) / num_train_global``.

    ``train_mask``: bool [n], or the ids of the training rows, ascending (int64
    [n_train]): the same rows in the same order, so the same value bit for bit; with
    ids nothing reads the device (a bool mask is turned into ids on the device and
    their number read back, on a GPU a synchronisation).

    Shapes: logits [n, C], labels int64 [n] -> scalar. Rows without a training vertex
    give a zero that still carries the graph (so that ``backward`` works on every
    chunk).
    """
    if num_train_global < 1:
        raise ValueError(f"num_train_global: expected >= 1, found {num_train_global}")
    if train_mask.dtype == torch.bool:
        rows, labels = logits[train_mask], labels[train_mask]
    else:
        rows, labels = logits.index_select(0, train_mask), labels.index_select(0, train_mask)
    if rows.shape[0] == 0:
        return logits.sum() * 0.0
    return F.cross_entropy(rows, labels, reduction="sum") / num_train_global


@torch.no_grad()
def correct_counts(logits: Tensor, labels: Tensor, masks: tuple[Tensor, ...]) -> Tensor:
    """int64 [2 * len(masks)]: (correct, total) per mask, for summing over workers
    (an all-reduce of these counts gives exact global accuracies).

    Shapes: logits [n, C], labels [n], each mask bool [n].
    """
    pred = logits.argmax(dim=1)
    hit = pred == labels
    out = []
    for m in masks:
        out.append(hit[m].sum())
        out.append(m.sum())
    return torch.stack(out).to(torch.int64)


def split_accuracies(counts: Tensor) -> tuple[float, ...]:
    """Fractions from :func:`correct_counts` output (0.0 for an empty split)."""
    c = counts.tolist()
    return tuple((c[i] / c[i + 1]) if c[i + 1] else 0.0 for i in range(0, len(c), 2))


@torch.no_grad()
def evaluation_sums(logits: Tensor, labels: Tensor, masks: tuple[Tensor, Tensor, Tensor]) -> list[float]:
    """Additive evaluation figures of some rows, for summing over workers:
    ``[correct, total]`` for train, val and test, then the summed cross-entropy over
    the validation rows. An all-reduce (sum) of these lists over any split of the rows
    gives the exact global figures (:func:`evaluation_metrics`).

    Shapes: logits [n, C], labels [n], each mask bool [n].
    """
    counts = [float(v) for v in correct_counts(logits, labels, masks).tolist()]
    val = masks[1]
    loss = F.cross_entropy(logits[val].double(), labels[val], reduction="sum") if bool(val.any()) else 0.0
    return counts + [float(loss)]


def evaluation_metrics(sums: list[float]) -> dict[str, float | None]:
    """``{train, val, test, val_loss}`` from (summed) :func:`evaluation_sums`: the three
    accuracies and the mean validation cross-entropy (None without validation rows)."""
    train, val, test = split_accuracies(torch.tensor(sums[:6], dtype=torch.float64))
    num_val = sums[3]
    return {"train": train, "val": val, "test": test,
            "val_loss": (sums[6] / num_val) if num_val else None}

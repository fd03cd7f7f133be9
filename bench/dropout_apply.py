"""How fast a dropout mask is applied: the multiply by a bool mask kept for backward.

Dropout keeps its mask as bool (1 byte an entry: a stage holds the masks of every
chunk in flight) and multiplies the input by it, forward and backward. On the CPU
``float * bool`` and ``float * uint8`` (the bool's bytes) take torch's per-entry
casting path, while converting the mask to float and multiplying two float tensors
are both vectorised. This times, one thread, median of ``--repeats``, for a
[rows, width] float32 input:

* ``mul_bool``: ``x * keep``;
* ``mul_uint8``: ``x * keep.view(uint8)`` (gnnpipe before);
* ``to_then_mul``: ``keep.to(float32).mul_(x)`` (gnnpipe now: one allocation, like
  the others; the same values);
* ``draw``: drawing the mask (:func:`gnnpipe.models.masks.draw_keep`, p = 0.5), for scale;
* ``dropout_fwd_bwd``: :func:`gnnpipe.models.layers.dropout` forward + backward as
  the layers call it (``scaled=False``).

    python -m bench.dropout_apply --out bench/results/dropout_apply.json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from gnnpipe.plan.calibrate import median_time_s

from .runner import load_average, write_measurement


def measure(rows: int, width: int, repeats: int) -> dict[str, Any]:
    """Seconds of each variant on a [rows, width] input (measured)."""
    from gnnpipe.models.layers import dropout
    from gnnpipe.models.masks import draw_keep

    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, width, generator=g)
    keep = draw_keep((rows, width), 0.5, generator=g)
    xg = x.clone().requires_grad_()
    grad = torch.randn(rows, width, generator=g)

    def fwd_bwd() -> None:
        y = dropout(xg, 0.5, True, generator=g, scaled=False)
        y.backward(grad)
        xg.grad = None

    assert torch.equal(x * keep, keep.to(x.dtype).mul_(x))
    return {"rows": rows, "width": width, "seconds": {
        "mul_bool": median_time_s(lambda: x * keep, repeats),
        "mul_uint8": median_time_s(lambda: x * keep.view(torch.uint8), repeats),
        "to_then_mul": median_time_s(lambda: keep.to(x.dtype).mul_(x), repeats),
        "draw": median_time_s(lambda: draw_keep((rows, width), 0.5, generator=g), repeats),
        "dropout_fwd_bwd": median_time_s(fwd_bwd, repeats),
    }}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results/dropout_apply.json")
    ap.add_argument("--rows", type=int, nargs="+", default=[5_000, 33_400, 200_000],
                    help="input rows (BlogCatalog's N; a C = 8 stage layer's local rows on it; the 200k graph's N)")
    ap.add_argument("--width", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=11)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    load_before, results = load_average(), []
    for rows in args.rows:
        results.append(measure(rows, args.width, args.repeats))
        s = results[-1]["seconds"]
        print(f"[{rows}, {args.width}]: " + ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in s.items()), flush=True)
    write_measurement(args, "seconds to apply a bool dropout mask to a float32 input, per variant, and the mask "
                      "draw and dropout forward + backward for scale; one thread, median of repeats (measured)",
                      load_before, results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

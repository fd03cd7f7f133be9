"""bench/csr_products.py: on a small graph, every variant's products (int64 and int32
indices, ``@`` and ``addmm`` into an output not zeroed) equal the int64 ones bit for
bit, and each variant has one timing per round, for the whole graph, the chunks and
the chunks with their stale halo columns left out of the transposes."""

from __future__ import annotations

import json

from bench import csr_products


def test_every_variant_is_timed_per_round_and_equals_the_int64_products(tmp_path):
    out = tmp_path / "p.json"
    csr_products.main(["--out", str(out), "--datasets", "synthetic", "--synthetic-option", "num_nodes=400",
                       "--chunks", "4", "--hidden", "8", "--rounds", "3", "--reps", "1"])
    rec = json.loads(out.read_text())
    res = rec["results"]["synthetic"]
    assert set(res) == {"whole", "chunks", "chunks_held"}
    assert res["whole"]["operators"] == 1 and res["chunks"]["operators"] == res["chunks_held"]["operators"] == 4
    assert res["whole"]["nnz"] == res["chunks"]["nnz"] == res["chunks_held"]["nnz"] > 0  # every entry once
    assert res["whole"]["kept_share"] == res["chunks"]["kept_share"] == 1.0
    assert 0 < res["chunks_held"]["kept_share"] < 1  # the stale halo columns left out of the transposes
    for kind in res.values():
        assert kind["bit_equal_to_int64"] == {v: True for v in csr_products.VARIANTS}
        for v in csr_products.VARIANTS:
            assert len(kind["all_ms"][v]) == 3 and kind["median_ms"][v] > 0
            # Each round's time over the same round's chunks time.
            assert kind["paired_ratios"][v] == [t / c for t, c in zip(kind["all_ms"][v], res["chunks"]["all_ms"][v])]
    assert rec["config"]["rounds"] == 3 and "load_average_before" in rec and rec["machine"]

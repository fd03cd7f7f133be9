"""``python -m gnnpipe.data`` (called in-process through its main())."""

from __future__ import annotations

import json

from gnnpipe.data.__main__ import main


def test_list_prints_names(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "cora" in out and "synthetic" in out and "ogb" in out


def test_info_prints_statistics(capsys):
    assert main(["info", "synthetic", "-o", "num_nodes=500", "-o", "num_classes=3"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["nodes"] == 500 and rec["classes"] == 3 and sum(rec["label_counts"]) == 500
    assert rec["self_loops"] == 0 and rec["undirected_edges"] * 2 == rec["stored_directed_edges"]
    assert rec["feature_layout"] == "dense" and rec["feature_density"] == 1.0  # Gaussian features


def test_bad_input_is_one_line_on_stderr_and_exit_2(capsys, tmp_path):
    assert main(["info", "no-such-dataset", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no-such-dataset" in err
    assert main(["info", "cora", "--root", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err

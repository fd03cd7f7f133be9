"""The suite as data: grid expansion, run names, argv and bad files, without processes
(except the CLI's one-line error and the trainer's ``--help``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import suite as S
from bench.estimate import probe_point, run_estimate
from bench.runner import estimate_left

SHIPPED = sorted(S.SUITES_DIR.glob("*.toml"))


def _suite(tmp_path: Path, text: str, name: str = "t") -> S.Suite:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return S.load_suite(path)


HEAD = '[suite]\ndescription = "test"\n'


def test_grid_is_the_product_of_its_axes_seed_outermost(tmp_path):
    suite = _suite(tmp_path, HEAD + """
[defaults]
model = ["gcn", "gcnii"]
seed = [0, 1]
[[grid]]
mode = "single"
layers = [2, 4, 8]
""")
    points = [r.point for r in suite.runs]
    assert len(points) == 2 * 2 * 3
    assert [p["seed"] for p in points] == [0] * 6 + [1] * 6
    assert {(p["model"], p["layers"]) for p in points} == {(m, l) for m in ("gcn", "gcnii") for l in (2, 4, 8)}
    assert suite.varied == ("model", "layers")


def test_settings_a_mode_ignores_are_left_out_and_duplicates_collapse(tmp_path):
    suite = _suite(tmp_path, HEAD + """
[[grid]]
mode = ["single", "graph", "pipeline", "hybrid"]
workers = 2
chunks = [4, 8]
techniques = [{}, { history_init = "zeros" }]
""")
    by_mode: dict[str, list[dict]] = {}
    for r in suite.runs:
        by_mode.setdefault(r.point["mode"], []).append(r.point)
    assert by_mode["single"] == [{"mode": "single"}]  # no workers, chunks or techniques
    assert by_mode["graph"] == [{"mode": "graph", "workers": 2}]  # graph: C = P, no techniques
    assert len(by_mode["pipeline"]) == len(by_mode["hybrid"]) == 4
    assert len({r.name for r in suite.runs}) == len(suite.runs) == 10


def test_layout_and_techniques_tables_lay_over_the_point(tmp_path):
    suite = _suite(tmp_path, HEAD + """
[defaults]
workers = 4
[[grid]]
mode = "hybrid"
layout = [{ workers = 2, ways = 2, chunks = 2 }, { ways = 2, chunks = 8 }]
""")
    assert [r.point for r in suite.runs] == [
        {"mode": "hybrid", "workers": 2, "ways": 2, "chunks": 2},
        {"mode": "hybrid", "workers": 4, "ways": 2, "chunks": 8},
    ]


def test_same_settings_same_name_other_seed_other_name():
    a = {"dataset": "cora", "model": "gcn", "mode": "single", "seed": 0}
    reordered = {"seed": 0, "mode": "single", "model": "gcn", "dataset": "cora"}
    assert S.run_name(a) == S.run_name(dict(a)) == S.run_name(reordered)
    assert len(S.run_name(a)) == 12
    assert S.run_name(a) != S.run_name(dict(a, seed=1))
    assert S.run_name(a) != S.run_name(dict(a, model="gcnii"))


def test_name_does_not_depend_on_file_layout_or_int_vs_float(tmp_path):
    one = _suite(tmp_path, HEAD + '[[grid]]\nmode = "single"\nlr = 1\nseed = 3\n', "a")
    two = _suite(tmp_path, HEAD + '[defaults]\nseed = 3\n[[grid]]\nlr = 1.0\nmode = "single"\n', "b")
    assert one.runs[0].name == two.runs[0].name


def test_argv_spells_every_kind_of_setting():
    point = S.normalize({"mode": "pipeline", "dataset": "cora", "data_options": {"normalize_features": True},
                         "input_proj": False, "shuffle": True, "unbiased_scale": True, "lr": 0.001,
                         "lambda": 0.5, "workers": 2, "seed": 1})
    assert S.argv(point, "/data") == [
        "--dataset", "cora", "--data-root", "/data", "--data-option", "normalize_features=true",
        "--lambda", "0.5", "--no-input-proj", "--lr", "0.001", "--mode", "pipeline", "--workers", "2",
        "--shuffle", "--unbiased-scale", "--seed", "1"]
    assert "--data-root" not in S.argv({"dataset": "synthetic", "mode": "single"}, "/data")


def test_only_terms_must_all_match():
    spec = S.RunSpec({"dataset": "cora", "model": "gcn", "mode": "pipeline", "seed": 10}, "g1")
    assert S.matches(spec, None) and S.matches(spec, "mode=pipeline")
    assert S.matches(spec, "mode=pipe* seed=10") and S.matches(spec, "grid=g1")
    assert S.matches(spec, spec.name[:6])
    assert not S.matches(spec, "mode=pipeline seed=1") and not S.matches(spec, "model=gcnii")


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_suites_expand(path):
    suite = S.load_suite(path)
    assert suite.runs and suite.description and suite.estimate_minutes
    assert len({r.name for r in suite.runs}) == len(suite.runs)


def test_shipped_suites_cover_the_brief():
    runs = {p.stem: S.load_suite(p).runs for p in SHIPPED}
    assert {r.point["mode"] for r in runs["smoke"]} == set(S.MODES)
    paper = runs["paper"]
    assert {r.point["model"] for r in paper} == {"gcn", "sage", "gcnii", "resgcn+"}
    assert {r.point["mode"] for r in paper} == {"single", "pipeline", "hybrid"}
    assert {r.point["seed"] for r in paper} == {0, 1, 2} and len({r.point["dataset"] for r in paper}) == 3
    assert all(r.point["layers"] == 32 and r.point["hidden"] == 100 and r.point["monitor"] == "val_loss"
               for r in paper)
    assert {r.point["layers"] for r in runs["depth"]} == {8, 16, 32, 64, 128}
    assert {r.point.get("chunks") for r in runs["chunks"] if r.point["mode"] == "pipeline"} == {2, 4, 8, 16, 32}
    combos = {tuple(r.point.get(k) for k in ("shuffle", "snapshot_period", "unbiased_scale", "history_init"))
              for r in runs["ablation"] if r.point["mode"] == "pipeline"}
    assert (None, 23, True, "zeros") in combos and len(combos) == 6
    assert {r.point.get("stage_dtype") for r in runs["stage-dtype"]} == {None, "bfloat16"}
    assert {r.point["dataset"] for r in runs["stage-dtype"]} == {"synthetic", "cora"}


def test_modes_suite_uses_the_pinned_systems_graph():
    sys.path.insert(0, str(S.SUITES_DIR.parent))
    from graphs import SYSTEMS_SYNTHETIC

    options = S.load_suite(S.SUITES_DIR / "modes.toml").runs[0].point["data_options"]
    assert {k: options[k] for k in SYSTEMS_SYNTHETIC} == SYSTEMS_SYNTHETIC


def test_every_flag_of_the_shipped_suites_is_a_trainer_flag(bench_env):
    help_text = subprocess.run([sys.executable, "-m", "gnnpipe.train", "--help"], capture_output=True,
                               text=True, check=True, env=bench_env).stdout
    flags = {a for p in SHIPPED for r in S.load_suite(p).runs for a in S.argv(r.point, "/d") if a.startswith("--")}
    assert flags and all(f in help_text for f in flags), sorted(f for f in flags if f not in help_text)


BAD = [
    ('[[grid]]\nmode = "single"\n', "suite.description", "a one-line description"),
    (HEAD + '[[grid]]\nmode = "serial"\n', "grid[0].mode", "'serial'"),
    (HEAD + '[[grid]]\nmode = "single"\nlayers = "deep"\n', "grid[0].layers", "an integer"),
    (HEAD + '[[grid]]\nmode = "single"\nlayers = [2, 4.5]\n', "grid[0].layers[1]", "4.5"),
    (HEAD + '[[grid]]\nmode = "single"\nlayer = 2\n', "grid[0].layer", "'layer'"),
    (HEAD + '[[grid]]\nmode = "pipeline"\nlayout = { workers = 2, depth = 3 }\n', "grid[0].layout.depth", "workers"),
    (HEAD + '[[grid]]\nmode = "single"\nseed = []\n', "grid[0].seed", "non-empty list"),
    (HEAD + '[[grid]]\nmodel = "gcn"\n', "grid[0].mode", "<missing>"),
    (HEAD + '[defaults]\nshuffle = "yes"\n[[grid]]\nmode = "single"\n', "defaults.shuffle", "true or false"),
    (HEAD, "grid", "one or more [[grid]] tables"),
    (HEAD + "[[grid]\n", "<syntax>", "valid TOML"),
]


@pytest.mark.parametrize("text,key,fragment", BAD, ids=[b[1] for b in BAD])
def test_a_bad_suite_names_file_key_expected_and_found(tmp_path, text, key, fragment):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(S.SuiteError) as err:
        S.load_suite(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {key}: expected ") and ", found " in message and fragment in message
    assert "\n" not in message


def test_the_cli_gives_one_line_and_exit_2_for_a_bad_suite(tmp_path, bench_env):
    path = tmp_path / "bad.toml"
    path.write_text(HEAD + '[[grid]]\nmode = "single"\nepochs = "many"\n')
    proc = subprocess.run([sys.executable, "-m", "bench", "run", str(path), "--dry-run"], capture_output=True,
                          text=True, env=bench_env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"{path}: grid[0].epochs: expected an integer, found 'many'"]


def test_time_left_comes_from_the_runs_done():
    a0, a1, b0 = {"mode": "single", "seed": 0}, {"mode": "single", "seed": 1}, {"mode": "graph", "seed": 0}
    assert estimate_left([], [a0]) is None
    # a1 costs what a0 (same settings) took; b0 the mean of everything done
    assert estimate_left([(a0, 10.0)], [a1, b0]) == pytest.approx(20.0)
    assert estimate_left([(a0, 10.0), (b0, 30.0)], [a1, {"mode": "pipeline", "seed": 0}]) == pytest.approx(30.0)


def test_estimate_of_a_run_from_its_probe():
    point = {"mode": "single", "epochs": 100, "eval_every": 10, "patience": 5, "seed": 0}
    assert probe_point(point) == {"epochs": 4, "eval_every": 1, "mode": "single", "seed": 0}
    record = {"epochs": [{"epoch_time_s": t, "eval_time_s": 0.5} for t in (3.0, 1.0, 1.0, 1.0)]}
    est = run_estimate(point, record, wall_s=15.0)
    assert est["epoch_s"] == 1.0 and est["eval_s"] == 0.5 and est["overhead_s"] == pytest.approx(15 - 6 - 2)
    assert est["run_s"] == pytest.approx(7 + 100 * 1.0 + 10 * 0.5)


def test_list_names_every_suite_and_the_standalone_scripts(tmp_path, bench_env):
    proc = subprocess.run([sys.executable, "-m", "bench", "list"], capture_output=True, text=True,
                          env=bench_env, cwd=tmp_path, check=True)
    lines = proc.stdout.splitlines()
    for path in SHIPPED:
        suite = S.load_suite(path)
        assert any(ln.split()[:2] == [suite.name, str(len(suite.runs))] and (" min " in ln or " h " in ln)
                   for ln in lines), suite.name
    assert any(ln.startswith("standalone") for ln in lines)
    assert any(ln.split()[:2] == ["compare_pyg", "bench/compare_pyg.py"] for ln in lines)

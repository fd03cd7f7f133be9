"""train.host_huge_pages: a process that asks before its first large allocation gets
torch's huge-page allocation (and the processes it starts inherit it); one that asks
after, or whose environment says otherwise, does not, and the state says why; a real
run records what its workers got, on by default and off when asked, with the same
values either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gnnpipe import huge_pages
from gnnpipe.huge_pages import THP_VARIABLE, _system_policy, huge_pages_state

LINUX = sys.platform.startswith("linux")
POLICY = _system_policy()


def _in_fresh_process(code: str, **env_changes: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != THP_VARIABLE}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


_REQUEST = ("import json; from gnnpipe.huge_pages import request_huge_pages; "
            "print(json.dumps(request_huge_pages({on})))")
_CHILD_SEES = ("import json, multiprocessing as mp; from gnnpipe.huge_pages import request_huge_pages\n"
               "def child(q):\n"
               "    from gnnpipe.huge_pages import huge_pages_state\n"
               "    q.put(huge_pages_state())\n"
               "if __name__ == '__main__':\n"
               "    request_huge_pages(True)\n"
               "    ctx = mp.get_context('spawn'); q = ctx.Queue(); p = ctx.Process(target=child, args=(q,))\n"
               "    p.start(); s = q.get(timeout=60); p.join()\n"
               "    print(json.dumps(s))\n")


@pytest.mark.skipif(not LINUX, reason="torch's huge-page allocation is Linux only")
def test_asked_before_the_first_large_allocation_the_allocator_asks_for_huge_pages():
    state = _in_fresh_process(_REQUEST.format(on=True))
    assert state["allocator_requests"] is True
    assert state["set_by"] == "gnnpipe" and state["variable"] == "1"
    assert state["effective"] is (POLICY in ("always", "madvise"))


@pytest.mark.skipif(not LINUX, reason="torch's huge-page allocation is Linux only")
def test_a_process_started_afterwards_inherits_it(tmp_path):
    script = tmp_path / "child_sees.py"
    script.write_text(_CHILD_SEES)
    env = {k: v for k, v in os.environ.items() if k != THP_VARIABLE}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    child = json.loads(out.stdout.strip().splitlines()[-1])
    assert child["allocator_requests"] is True and child["variable"] == "1"


def test_asked_after_a_large_allocation_it_does_not_take_and_says_so():
    code = ("import json, torch; x = torch.empty(64 << 20, dtype=torch.uint8)\n"
            + _REQUEST.format(on=True).replace("; print", "\nprint"))
    state = _in_fresh_process(code)
    assert state["allocator_requests"] is False and state["effective"] is False
    assert "set after this process's first allocation" in state["why"]


def test_the_environments_setting_stands_and_off_sets_nothing():
    given = _in_fresh_process(_REQUEST.format(on=True), **{THP_VARIABLE: "0"})
    assert given["set_by"] == "environment" and given["variable"] == "0"
    assert given["allocator_requests"] is False and given["why"] == f"off ({THP_VARIABLE} = 0)"
    off = _in_fresh_process(_REQUEST.format(on=False))
    assert off["set_by"] is None and off["variable"] is None
    assert off["allocator_requests"] is False and off["why"] == f"off ({THP_VARIABLE} unset)"


@pytest.mark.parametrize("text, policy", [("always [madvise] never\n", "madvise"),
                                          ("[always] madvise never\n", "always"),
                                          ("always madvise [never]\n", "never"),
                                          ("garbled\n", None)])
def test_the_kernels_policy_is_the_bracketed_word(tmp_path, text, policy):
    path = tmp_path / "enabled"
    path.write_text(text)
    assert _system_policy(str(path)) == policy


def test_a_kernel_that_never_grants_them_makes_the_request_ineffective(tmp_path, monkeypatch):
    monkeypatch.setattr(huge_pages, "_allocator_requests", lambda: True)
    never = tmp_path / "enabled"
    never.write_text("always madvise [never]\n")
    state = huge_pages_state(system_path=str(never))
    assert state["allocator_requests"] is True and state["effective"] is False
    assert "policy is never" in state["why"]
    missing = huge_pages_state(system_path=str(tmp_path / "absent"))
    assert missing["effective"] is False and missing["system_policy"] is None
    assert "no " + str(tmp_path / "absent") in missing["why"]


@pytest.mark.skipif(not LINUX, reason="torch's huge-page allocation is Linux only")
def test_a_run_gets_them_in_its_spawned_workers_by_default_and_not_when_off(small_pipeline_run):
    on = small_pipeline_run("on", epochs=2, unset=(THP_VARIABLE,))
    off = small_pipeline_run("off", "--no-host-huge-pages", epochs=2, unset=(THP_VARIABLE,))
    assert on["config"]["train"]["host_huge_pages"] is True
    assert on["extra"]["host_huge_pages"]["allocator_requests"] is True
    assert on["extra"]["host_huge_pages"]["effective"] is (POLICY in ("always", "madvise"))
    assert off["config"]["train"]["host_huge_pages"] is False
    assert off["extra"]["host_huge_pages"]["allocator_requests"] is False
    assert [e["loss"] for e in on["epochs"]] == [e["loss"] for e in off["epochs"]]

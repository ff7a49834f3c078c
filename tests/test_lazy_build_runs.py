"""A lazy-build candidate from the model's seat: a search whose model (a scripted server; the
prompt does not depend on the protocol, and each protocol's end-to-end run is in
test_llm_operator.py) answers a kernel that builds its library on the first forward, then one
that builds a library during a timed call. The first is accepted; the second is rejected with
its cause named, and a later prompt carries that cause to the model."""
from __future__ import annotations

import pytest

from conftest import EXAMPLES
from kernelevolve.harness.worker.link_faults import LATE_BUILD
from llm_servers import ScriptedServer, prompt_of
from one_finalist import one_finalist_config
from test_llm_operator import KEY_VAR, SECRET, optimize

pytestmark = pytest.mark.slow

GOOD = (EXAMPLES / "softmax" / "candidate_cpp.py").read_text()
AT_IMPORT = '''_lib = load_cpp(CONFIG + SRC, name="softmax_rows", flags=("-fno-trapping-math",))
_lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
_lib.softmax_rows.restype = None
'''
LAZY_BUILD = '''_lib = None
_calls = [0]


def _build(name):
    lib = load_cpp(CONFIG + SRC, name=name, flags=("-fno-trapping-math",))
    lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                 ctypes.c_int64]
    lib.softmax_rows.restype = None
    return lib
'''
FIRST_USE = '''    def forward(self, x: torch.Tensor) -> torch.Tensor:
'''


def lazy(build_at: int) -> str:
    """The example's kernel, its library built on the first forward; on call `build_at` (past
    1) a second one is built. The count is the process's: in the measure job, call 1 is the
    first case's untimed first call and call 20 falls in its timed batches."""
    assert AT_IMPORT in GOOD and FIRST_USE in GOOD
    late = (f"        if _calls[0] == {build_at}:\n"
            "            _lib = _build('softmax_rows_late')\n") if build_at > 1 else ""
    return GOOD.replace(AT_IMPORT, LAZY_BUILD).replace(FIRST_USE, FIRST_USE + (
        "        global _lib\n"
        "        _calls[0] += 1\n"
        "        if _lib is None:\n"
        "            _lib = _build('softmax_rows')\n" + late))


class Script:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: dict) -> str:
        self.calls += 1
        if self.calls == 1:
            return "Lazy build of the fused kernel.\n```python\n" + lazy(1) + "```"
        if self.calls == 2:
            return "Late build of the fused kernel.\n```python\n" + lazy(20) + "```"
        return "Nothing more to add."


def test_a_lazy_build_is_accepted_and_a_late_one_is_named_to_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VAR, SECRET)
    # The default search timing (not tests/quick_timing.toml): call 20 must fall in the first
    # case's timed batches, which the quick policy's few repetitions do not always reach (the
    # count then lands on a later case's untimed first call, where a build is allowed).
    monkeypatch.delenv("KERNELEVOLVE_CONFIG", raising=False)
    # The finalists' re-measurement decides no verdict here: one finalist, at the suite's
    # final timing (the default's is three, 1-6 s per case).
    config = one_finalist_config(tmp_path, default_search_timing=True)
    with ScriptedServer(handler=Script()) as server:
        _, summary = optimize(server, tmp_path / "ws", "--config", str(config), evals=4)
        prompts = [prompt_of(r.json) for r in server.requests if r.json]
    nodes = {n["rationale"].split(": ")[-1].split(" of ")[0]: n for n in summary["nodes"]
             if n["operator"] == "llm" and n.get("rationale")}
    assert nodes["Lazy build"]["stage"] == "accepted", nodes["Lazy build"]["reason"]
    late = nodes["Late build"]
    assert late["stage"] == "timing" and late["reason"] == LATE_BUILD, late
    assert not any("malformed" in (n["reason"] or "") for n in summary["nodes"])
    told = [p for p in prompts if "the library was built inside forward" in p]
    assert told, "no prompt after the late build carries its cause"

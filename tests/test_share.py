"""Kernels that travel: export a promoted kernel in the Hugging Face kernels layout, load and
kernelize it with the real kernels package (offline), gate it with `verify`, import it into
another registry and serve it.

One real search (the synthesizer on a small RMSNorm, one evaluation; conftest.py's
`rmsnorm_run`, shared with test_registry*.py), promoted and exported once, feeds every slow
test; each test that changes the export works on a copy.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import shutil
import types
from pathlib import Path

import pytest
import torch

from conftest import run_cli
from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.problem import import_module
from kernelevolve.registry import Registry, patching
from kernelevolve.registry.promote import promote
from kernelevolve.share import layout, shipped, variant
from kernelevolve.share.export import export, parse_target
from kernelevolve.share.layout import ShareError
from kernelevolve.share.package import forward_params, layer_name
from kernelevolve.share.verify import verify
from kernelevolve.store import Store

HAVE_KERNELS = importlib.util.find_spec("kernels") is not None
needs_kernels = pytest.mark.skipif(not HAVE_KERNELS, reason="the kernels package is not "
                                   "installed (pip install -e '.[share]')")
# The timing checks below miss by far more than the rule's margin (10x the figure; a library
# 4x slower), so a short timing does, timed on (up to 1 s a case) until the interval is 1.5
# wide at most: beside a busy neighbour 5 reps gave the -O0 library an interval reaching 1.0.
SHORT = TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=1.0, tight=1.5)
LAYER = "Rmsnorm"


@pytest.fixture(scope="module")
def exported(tmp_path_factory, rmsnorm_run):
    """(registry folder, export folder, problem path), from the session's one search
    (conftest.py's `rmsnorm_run`, shared with test_registry*.py)."""
    ws, run_id, problem = rmsnorm_run
    root = tmp_path_factory.mktemp("share")
    with Store.open(ws) as store, Registry.open(root / "registry") as reg:
        promote(store, reg, run_id, state="default", force=True, who="test")
        export(reg, "rmsnorm", root / "export")
    return root / "registry", root / "export", problem


def _build(folder: Path) -> Path:
    return layout.builds(folder)[0]


def _copy(exported, tmp_path) -> Path:
    return Path(shutil.copytree(exported[1], tmp_path / "copy"))


def _edit_evidence(folder: Path, change) -> None:
    """Change the evidence and seal the build again: an export that says something else, as
    one made on another machine would (not a tampered file: the digest matches)."""
    build = _build(folder)
    path = layout.package_dir(build) / layout.EVIDENCE
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    layout.seal(build)


# ---- fast: names and the parts that need no kernel ------------------------------------------

def test_variant_names_and_why_a_build_does_not_fit():
    here = variant.here("cpu", compiled=True)
    parsed = variant.parse(here)
    assert parsed is not None and variant.mismatch(parsed, "cpu") is None
    assert variant.here("cpu", compiled=False) == "torch-cpu"
    assert variant.mismatch(variant.parse("torch-cpu"), "cpu") is None
    major, minor = parsed.torch.split(".")
    other = here.replace(f"torch{major}{minor}", f"torch{major}{int(minor) + 1}")
    assert f"built for torch {major}.{int(minor) + 1}, this machine has torch" in \
        variant.mismatch(variant.parse(other), "cpu")
    abi = "cxx98" if parsed.cxx11 else "cxx11"
    assert "ABI" in variant.mismatch(variant.parse(here.replace(
        "cxx11" if parsed.cxx11 else "cxx98", abi)), "cpu")
    assert "CPUs" in variant.mismatch(variant.parse(here.replace(parsed.arch, "riscv64")), "cpu")
    assert variant.parse("not-a-variant") is None
    assert parse_target("rms@3") == ("rms", 3) and parse_target("rms@v2") == ("rms", 2)
    with pytest.raises(ShareError, match="must be a number"):
        parse_target("rms@latest")


def test_names_the_kernels_package_accepts_and_the_layer_signature():
    assert layout.kernel_id("Registry_RMSNorm") == "registry-rmsnorm"
    assert layout.python_name("9lives") == "k_9lives"
    assert layer_name("rms_norm-2") == "RmsNorm2"
    params, call = forward_params(b"class Model:\n    def forward(self, x, y=None, *rest):\n"
                                  b"        pass\n")
    assert (params, call) == ("self, x, y=None, *rest", "x, y, *rest")
    with pytest.raises(ShareError, match="keyword-only"):
        forward_params(b"class Model:\n    def forward(self, x, *, k=1):\n        pass\n")


def test_verify_names_a_folder_that_is_not_an_export(tmp_path):
    with pytest.raises(ShareError, match="is not an exported kernel"):
        verify(tmp_path)


# ---- slow: one real kernel, exported --------------------------------------------------------

@pytest.mark.slow
def test_export_carries_the_evidence_and_a_sealed_build(exported, tmp_path):
    build = _build(exported[1])
    again = tmp_path / "again"
    proc = run_cli("export", "rmsnorm@1", "--out", str(again), "--registry", str(exported[0]))
    assert proc.returncode == 0 and "layer Rmsnorm" in proc.stdout, proc.stderr
    same = layout.read_metadata(_build(again))["digest"]["files"]
    first = layout.read_metadata(build)["digest"]["files"]
    assert {k for k in first if first[k] != same.get(k)} == {"rmsnorm/evidence.json"}  # when
    with Registry.open(exported[0], create=False) as reg, \
            pytest.raises(ShareError, match="not an empty folder"):
        export(reg, "rmsnorm", again)
    assert build.name == variant.here("cpu", compiled=True)
    assert layout.digest_problems(build) == []
    ev = layout.read_evidence(build)
    s = ev["summary"]
    assert s["baseline"] == "eager" and s["speedup"] > 0 and len(s["interval"]) == 2
    assert {c["name"] for c in s["cases"]} >= {"256x1024", "128x2048", "tail_63x1537"}
    for c in s["cases"]:
        assert c["weight"] is not None or c["held_out"]
        assert c["speedup"] > 0 and len(c["speedup_ci"]) == 2
    assert ev["machine"]["cpu_flags"] == ev["entry"]["fingerprint"]["cpu_flags"]
    assert ev["toolchain"]["compiler"] and ev["toolchain"]["libraries"][0]["flags"]
    assert ev["harness"]["version"] and len(ev["harness"]["source_sha256"]) == 64
    assert ev["region"]["args"] and ev["tolerance"] is None
    assert [e["kind"] for e in ev["events"]] == ["promote"]
    pkg = layout.package_dir(build)
    assert sorted(p.name for p in pkg.iterdir() if p.name != "__pycache__") == sorted(
        [*layout.PACKAGE_FILES, layout.LIBS])
    assert "kernelevolve" not in {line.split()[1].split(".")[0] for line in
                                  (pkg / "_runtime.py").read_text().splitlines()
                                  if line.startswith(("import ", "from "))}


@pytest.mark.slow
@needs_kernels
def test_the_kernels_package_loads_it_and_kernelize_matches_the_original(exported,
                                                                          monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from kernels import (LocalLayerRepository, Mode, get_local_kernel, kernelize,
                         use_kernel_forward_from_hub, use_kernel_mapping)

    module = get_local_kernel(exported[1])
    assert hasattr(module.layers, LAYER)

    @use_kernel_forward_from_hub(LAYER)
    class MarkedNorm(import_module(exported[2]).Model):
        pass

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 1024), MarkedNorm(1024, 1e-6),
                                torch.nn.Linear(1024, 8)).eval()
    original = copy.deepcopy(model)
    repo = LocalLayerRepository(repo_path=exported[1], layer_name=LAYER)
    with use_kernel_mapping({LAYER: {"cpu": repo}}):
        model = kernelize(model, mode=Mode.INFERENCE, device="cpu")
    before = dict(module.coverage()["fallbacks"]), module.coverage()["served"]
    x = torch.randn(100, 64)
    with torch.no_grad():
        torch.testing.assert_close(model(x), original(x), atol=1e-5, rtol=1e-5)
        assert module.coverage()["served"] == before[1] + 1  # the kernel ran, not a fallback
        small = torch.randn(8, 64)  # 8 rows: below the validated batch range (63..256)
        torch.testing.assert_close(model(small), original(small), atol=1e-5, rtol=1e-5)
    assert module.coverage()["fallbacks"].get("shape", 0) == before[0].get("shape", 0) + 1


@pytest.mark.slow
@needs_kernels
def test_kernelize_keeps_the_original_where_the_build_cannot_run(exported, tmp_path,
                                                                 monkeypatch):
    """A build for CPU features this machine lacks is, to the kernels package, like a build
    for another system: get_local_kernel says why (a FileNotFoundError), and kernelize with
    KernelizeFallback.ALL keeps the module's own forward; no library was loaded."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from kernels import (KernelizeFallback, LocalLayerRepository, Mode, get_local_kernel,
                         kernelize, use_kernel_forward_from_hub, use_kernel_mapping)

    folder = _copy(exported, tmp_path)
    lacking = next(f for f in ("avx512_fp16", "amx_tile", "sve2", "avx512f")
                   if f not in shipped.cpu_flags())
    _edit_evidence(folder, lambda ev: ev["entry"]["fingerprint"]["cpu_flags"].append(lacking))
    with pytest.raises(FileNotFoundError, match=f"CPU features this CPU lacks: {lacking}"):
        get_local_kernel(folder)

    @use_kernel_forward_from_hub(LAYER)
    class MarkedNorm(import_module(exported[2]).Model):
        pass

    model = torch.nn.Sequential(MarkedNorm(1024, 1e-6)).eval()
    repo = LocalLayerRepository(repo_path=folder, layer_name=LAYER)
    with use_kernel_mapping({LAYER: {"cpu": repo}}):
        model = kernelize(model, mode=Mode.INFERENCE, device="cpu",
                          use_fallback=KernelizeFallback.ALL)
    x = torch.randn(100, 1024)
    with torch.no_grad():
        torch.testing.assert_close(model(x), model[0].__class__.forward(model[0], x))
    assert "_kernel_repo" not in vars(model[0])


@pytest.mark.slow
def test_verify_passes_here(exported):
    proc = run_cli("verify", str(exported[1]), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and [c["check"] for c in report["checks"]] == \
        ["variant", "files", "machine", "gates", "timing"]
    assert report["measured"]["speedup"] > 0 and "upper end" in report["rule"]


@pytest.mark.slow
def test_verify_refuses_a_tampered_library_naming_it(exported, tmp_path):
    folder = _copy(exported, tmp_path)
    lib = next((layout.package_dir(_build(folder)) / layout.LIBS).iterdir())
    data = bytearray(lib.read_bytes())
    data[-1] ^= 0xFF
    lib.write_bytes(bytes(data))
    report = verify(folder)
    assert not report["ok"] and report["checks"][-1]["check"] == "files"
    assert f"libs/{lib.name} was modified" in report["checks"][-1]["why"]
    proc = run_cli("verify", str(folder))
    assert proc.returncode == 1 and f"libs/{lib.name}" in proc.stdout
    entry = layout.read_evidence(_build(folder))["entry"]
    with pytest.raises(shipped.KernelLoadError, match=f"{lib.name} does not match"):
        shipped._verified(lib, entry["libraries"][0]["sha256"])


@pytest.mark.slow
def test_verify_refuses_another_torch_and_a_missing_cpu_feature(exported, tmp_path):
    folder = _copy(exported, tmp_path)
    build = _build(folder)
    parsed = variant.parse(build.name)
    major, minor = parsed.torch.split(".")
    older = build.name.replace(f"torch{major}{minor}", f"torch{major}{int(minor) - 1}")
    build.rename(build.parent / older)
    report = verify(folder)
    assert not report["ok"] and report["checks"][-1]["check"] == "variant"
    assert f"built for torch {major}.{int(minor) - 1}, this machine has torch" in \
        report["checks"][-1]["why"]

    folder = Path(shutil.copytree(exported[1], tmp_path / "flags"))
    have = shipped.cpu_flags()
    lacking = next(f for f in ("avx512_fp16", "amx_tile", "sve2", "avx512f") if f not in have)
    _edit_evidence(folder, lambda ev: ev["entry"]["fingerprint"]["cpu_flags"].append(lacking))
    report = verify(folder)
    assert not report["ok"] and report["checks"][-1]["check"] == "machine"
    assert f"this CPU lacks {lacking}" in report["checks"][-1]["why"]
    # the loader that travels with the export refuses it too, before loading any library
    entry = layout.read_evidence(_build(folder))["entry"]
    assert f"CPU features this CPU lacks: {lacking}" in shipped.incompatibility(entry)


def _slowed_library(folder: Path, tmp_path: Path) -> str:
    """Replace the shipped library by the same source built at -O0, with the evidence's sha256
    updated and the build sealed again; returns the library's file name."""
    from kernelevolve import knobs
    from kernelevolve.runtime.cpp import compile_library

    pkg = layout.package_dir(_build(folder))
    asked = {}

    def load_cpp(source, *, name=None, flags=()):
        asked.update(source=source, flags=tuple(flags))
        raise shipped.KernelLoadError("the source is all this test needs")

    shim = types.SimpleNamespace(load_cpp=load_cpp, kernel_launcher=None,
                                 elementwise_launcher=None, ptr=None)
    with pytest.raises(shipped.KernelLoadError, match="all this test needs"):
        shipped._exec(pkg / "kernel.py", (pkg / "kernel.py").read_bytes(), "ke_capture", shim)
    lib = layout.read_evidence(_build(folder))["entry"]["libraries"][0]
    assert hashlib.sha256(asked["source"].encode()).hexdigest() == lib["source_sha256"]
    built = compile_library(asked["source"], (*asked["flags"], "-O0"), knobs.cxx(), tmp_path,
                            "slow")
    data = built.read_bytes()
    (pkg / layout.LIBS / lib["file"]).write_bytes(data)

    def point_at_it(ev):
        ev["entry"]["libraries"][0]["sha256"] = hashlib.sha256(data).hexdigest()
    _edit_evidence(folder, point_at_it)
    return lib["file"]


@pytest.mark.slow
def test_verify_catches_a_library_whose_speed_no_longer_matches(exported, tmp_path):
    """The shipped library is the kernel's own source built at -O0: correct (it passes every
    gate), consistent (its sha256 is the one the evidence records, the build is sealed), and
    several times slower than the figure the evidence claims, as a library rebuilt by a
    careless toolchain would be. Only the timing check can catch it, and it runs on the shipped
    bytes (the rebuild here differs from them), in the sandbox."""
    folder = _copy(exported, tmp_path)
    (tmp_path / "cc").mkdir()
    file = _slowed_library(folder, tmp_path / "cc")
    report = verify(folder, timing=SHORT)
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["files"]["ok"] and checks["gates"]["ok"]
    assert report["measured"]["on"].startswith("the shipped binaries")
    assert [d["file"] for d in report["drift"] if not d["same_binary"]] == [file]
    assert not checks["timing"]["ok"] and not report["ok"], checks["timing"]["why"]
    assert "recorded" in checks["timing"]["why"]


@pytest.mark.slow
def test_verify_catches_a_figure_that_no_longer_holds(exported, tmp_path):
    """The kernel and its library are untouched and pass every gate; only the claim is ten
    times what was measured at promotion: an export whose figure came from a faster machine,
    or was edited. The build is sealed again, so the timing check, not the file check, must
    catch it (the other branch of the rule: faster than the baseline, far below the claim)."""
    folder = _copy(exported, tmp_path)

    def inflate(ev):
        ev["entry"]["evaluation"]["speedup"] *= 10
    _edit_evidence(folder, inflate)
    report = verify(folder, timing=SHORT)
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["gates"]["ok"] and not report["ok"]
    assert "the recorded figure does not hold here" in checks["timing"]["why"]


@pytest.mark.slow
def test_an_imported_kernel_goes_through_shadow_and_serves_as_default(exported, tmp_path):
    from kernelevolve.share.importer import import_dir

    there = tmp_path / "there"
    with Registry.open(there) as reg:
        rec, report = import_dir(reg, exported[1], timing=SHORT, who="test")
        assert (rec.name, rec.version, rec.state) == ("rmsnorm", 1, "shadow") and report["ok"]
        assert rec.entry["provenance"]["imported"]["events"][0]["kind"] == "promote"
        assert rec.entry["evaluation"] == layout.read_evidence(
            _build(exported[1]))["entry"]["evaluation"]  # the exported figures, kept
        assert [e.kind for e in reg.events("rmsnorm")] == ["promote", "import", "revalidate"]
    net = torch.nn.Sequential(import_module(exported[2]).Model(1024, 1e-6)).eval()
    x = torch.randn(100, 1024)
    patching.reset_coverage()
    with torch.no_grad(), patching.patched(net, there):  # shadow: run beside, compared
        want = net(x)
    cov = patching.coverage("rmsnorm")
    assert cov["served"] == 0 and cov["shadow"] == {"calls": 1, "mismatches": 0, "first": []}
    with Registry.open(there) as reg:
        reg.set_state("rmsnorm", None, "default", who="test", why="shadow was clean")
    patching.reset_coverage()
    with torch.no_grad(), patching.patched(net, there):
        got = net(x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert patching.coverage("rmsnorm")["served"] == 1

    tampered = _copy(exported, tmp_path)
    (layout.package_dir(_build(tampered)) / "kernel.py").write_text("# not the kernel\n")
    proc = run_cli("registry", "import", str(tampered), "--registry", str(there))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "verify refused it (files: rmsnorm/kernel.py was modified" in \
        " ".join(proc.stderr.split())
    assert os.path.isdir(there)

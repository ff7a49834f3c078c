"""`kernelevolve export NAME[@VERSION] --out DIR`: a registered kernel as a Hugging Face kernels
repository (share/layout.py has the tree), loadable offline with `get_local_kernel(DIR)` or
`LocalLayerRepository(DIR, layer_name=...)`, with the evidence inside.

Only the registry's verified bytes are written (a registry object that no longer hashes to its
entry stops the export, naming it), and the build is named for this machine's variant: the
libraries are the ones this machine's registry vouches for, so the machine must be one the
entry's fingerprint fits (compat.py); export where the kernel was measured, or revalidate it
here first.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelevolve.registry.db import KernelRecord, Registry
from kernelevolve.registry.loader import verified_bytes
from kernelevolve.share import evidence as _evidence
from kernelevolve.share import layout, package, variant
from kernelevolve.share.layout import ShareError
from kernelevolve.version import __version__


def parse_target(target: str) -> tuple[str, int | None]:
    """`NAME` or `NAME@VERSION` (`@v3` too)."""
    name, _, ver = target.partition("@")
    if not ver:
        return name, None
    ver = ver[1:] if ver[:1] in "vV" else ver
    if not ver.isdigit():
        raise ShareError(f"{target!r}: the version after @ must be a number, e.g. {name}@2")
    return name, int(ver)


def export(registry: Registry, target: str, out: Path, *, layer: str | None = None
           ) -> dict[str, Any]:
    """Write the kernels repository for `target` into `out` (new or empty); a summary."""
    name, version = parse_target(target)
    rec = registry.get(name, version)
    _check_machine(rec)
    _check_out(out)
    layer = layer or package.layer_name(rec.name)
    if not layer.isidentifier():
        raise ShareError(f"--layer {layer!r} is not a Python class name")
    compiled = bool(rec.entry.get("libraries"))
    build_name = variant.here(rec.platform, compiled)
    build = out / "build" / build_name
    pkg = build / layout.python_name(rec.name)
    (pkg / layout.LIBS).mkdir(parents=True)
    problem = _write_artifacts(registry, rec, pkg)
    title = f"{rec.name} v{rec.version} ({rec.language} on {rec.platform})"
    package.write(pkg, title=title, layer=layer, version=__version__, problem_source=problem)
    ev = _evidence.build(registry, rec, variant=build_name, layer=layer)
    (pkg / layout.EVIDENCE).write_text(json.dumps(ev, indent=2, sort_keys=True, default=str))
    (build / layout.METADATA).write_text(json.dumps(_metadata(rec), indent=2))
    layout.seal(build)
    (out / "README.md").write_text(_readme(rec, ev, layer, build_name))
    return {"name": rec.name, "version": rec.version, "out": str(out), "build": build_name,
            "layer": layer, "package": pkg.name, "headline": _evidence.headline(ev),
            "files": sorted(layout.file_digests(build))}


def _check_machine(rec: KernelRecord) -> None:
    from kernelevolve.registry.compat import current_fingerprint, mismatch

    why = mismatch(rec.entry.get("fingerprint") or {}, current_fingerprint(rec.platform),
                   rec.language)
    if why is not None:
        raise ShareError(f"{rec.label} was measured on another machine ({why}); export it where "
                         "it was measured, or `kernelevolve registry revalidate` it here first")


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ShareError(f"{out} exists and is not an empty folder; pick a new --out folder")


def _write_artifacts(registry: Registry, rec: KernelRecord, pkg: Path) -> bytes:
    """kernel.py, problem.py and libs/, from the registry's verified bytes; the problem's."""
    entry = rec.entry
    src = entry["source"]
    (pkg / "kernel.py").write_bytes(verified_bytes(registry, src["object"], src["sha256"],
                                                   f"{rec.label}: kernel source"))
    prob = entry["problem"]
    problem = verified_bytes(registry, prob["object"], prob["sha256"],
                             f"{rec.label}: problem source")
    (pkg / "problem.py").write_bytes(problem)
    for lib in entry.get("libraries", []):
        if Path(lib["file"]).name != lib["file"] or lib["file"].startswith("."):
            raise ShareError(f"{rec.label}: library name {lib['file']!r} is not a plain file name")
        (pkg / layout.LIBS / lib["file"]).write_bytes(
            verified_bytes(registry, lib["object"], lib["sha256"],
                           f"{rec.label}: compiled library {lib['file']}"))
    return problem


def _metadata(rec: KernelRecord) -> dict[str, Any]:
    """The kernels package's metadata.json (its digest is added by layout.seal)."""
    pyname = layout.python_name(rec.name)
    return {"id": f"_{pyname}", "name": layout.kernel_id(rec.name),  # id: layout.seal
            "version": rec.version, "license": "NOASSERTION", "python-depends": [],
            "backend": {"type": rec.platform},
            "kernelevolve": {"evidence": f"{pyname}/{layout.EVIDENCE}",
                             "verify": "kernelevolve verify DIR"}}


def _readme(rec: KernelRecord, ev: dict[str, Any], layer: str, build_name: str) -> str:
    kid = layout.kernel_id(rec.name)
    return f"""# {kid}: {rec.name} v{rec.version}, exported by kernelevolve

{_evidence.headline(ev)}.

- build: `build/{build_name}/` (the compiled libraries are for this variant only)
- evidence: `build/{build_name}/{layout.python_name(rec.name)}/evidence.json` (cases and
  weights, per-case times, speedups and intervals, baseline, machine, toolchain, harness,
  validated region, registry events)
- check it on your machine before you trust it: `kernelevolve verify .`

```python
from pathlib import Path
from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_mapping

mapping = {{"{layer}": {{"{rec.platform}": LocalLayerRepository(repo_path=Path("."),
                                                       layer_name="{layer}")}}}}
# your layer class, decorated with @use_kernel_forward_from_hub("{layer}")
with use_kernel_mapping(mapping):
    model = kernelize(model, mode=Mode.INFERENCE, device="{rec.platform}")
```

Outside the validated region (other dtypes, sizes the cases did not span, another module
configuration, gradients) the layer runs the module's own forward.
"""

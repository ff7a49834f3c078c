"""Write each hot spot's problem file and check it before keeping it (extract.py renders).

The check, in this process (the code is the user's own model code, not a candidate's):
the file imports as a problem (problem.load_problem); `Model(*get_init_inputs())` loaded with
the region's own state gives outputs bitwise equal to the region's on every recorded input;
every case's `get_inputs()` gives the recorded shapes and dtypes; and the held-out shape runs.
A file that fails is deleted and its hot spot carries the one-line reason.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from kernelevolve.model.extract import (Call, HotSpot, case_weights, held_out_case,
                                        render_problem, _ident)


def _outputs_equal(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or (
            a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
            and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_outputs_equal(x, y) for x, y in zip(a, b))
    return a == b


def _load(path: Path) -> Any:
    from kernelevolve.problem import import_module, load_problem

    problem = load_problem(path)
    return problem, import_module(path)


def check_problem(path: Path, region: Any, calls: Sequence[Call]) -> str | None:
    """None when the file rebuilds the region exactly, else the first difference."""
    import torch

    from kernelevolve.problem import CaseBinder

    try:
        problem, mod = _load(path)
        with torch.inference_mode():
            ref = mod.Model(*mod.get_init_inputs())
            ref.load_state_dict(region.state_dict(), strict=True)
            ref.eval()
            for k, call in enumerate(calls):
                if not _outputs_equal(ref(*call.args), region(*call.args)):
                    return f"its Model differs from the region's on recorded input {k}"
            binder = CaseBinder(mod, problem.cases)
            timed = [c for c in problem.cases if not c.held_out]
            for case, call in zip(timed, calls):
                binder.bind(case)
                got = mod.get_inputs()
                want = [(tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a
                        for a in call.args]
                have = [(tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a
                        for a in got]
                if have != want:
                    return f"case {case.name}'s get_inputs() gives {have}, recorded {want}"
            for case in problem.cases:
                if case.held_out:
                    binder.bind(case)
                    region(*mod.get_inputs())
    except Exception as exc:  # noqa: BLE001 - any failure is the reason the file is not kept
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    return None


def _held_out(hs: HotSpot, region: Any, calls: list[Call], text_for) -> tuple[str, dict | None]:
    """(text, held-out bindings): the first odd shape the region itself can run."""
    import torch

    from kernelevolve.problem import import_module

    import tempfile

    for binds in held_out_case(calls):
        text = text_for(binds)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write(text)
        try:
            mod = import_module(fh.name)
            for key, value in binds.items():
                setattr(mod, key, value)
            with torch.inference_mode():
                region(*mod.get_inputs())
            return text, binds
        except Exception:  # noqa: BLE001 - that shape is not one the region runs: next
            continue
        finally:
            Path(fh.name).unlink(missing_ok=True)
    return text_for(None), None


def write_problems(spots: list[HotSpot], outlined: Any, prof: dict[str, Any],
                   records: dict[str, dict[str, Call]], cases: Sequence[tuple[str, float]],
                   out_dir: Path, origin: str) -> list[HotSpot]:
    """Write and check one problem per hot spot into `out_dir`; sets `problem`, `name`,
    `weights`, `held_out`, or `error`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    mods = dict(outlined.module.named_modules())
    stem = _ident(origin)
    for hs in spots:
        region = mods[hs.instances[0]]
        weights = case_weights(hs, prof, records, cases)
        merged: dict[str, Call] = {}
        for path in hs.instances:
            for sig, call in records.get(path, {}).items():
                merged.setdefault(sig, call)
        ordered = sorted(((sig, merged[sig], weights.get(sig, 1e-4)) for sig in merged),
                         key=lambda t: -t[2])
        if not ordered:
            hs.error = "never called in the workload"
            continue
        hs.weights = {sig: w for sig, _, w in ordered}
        name = f"{stem}_{_ident(hs.label)[:40]}_{hs.kind[:6]}"
        try:
            text, binds = _held_out(
                hs, region, [c for _, c, _ in ordered],
                lambda b: render_problem(hs, ordered, origin, b))
        except ValueError as exc:
            hs.error = str(exc)
            continue
        hs.held_out = (", ".join(f"{k}={v}" for k, v in binds.items()) if binds else
                       "none: no size of this region can be made odd and still run")
        path = out_dir / f"{name}.py"
        path.write_text(text)
        why = check_problem(path, region, [c for _, c, _ in ordered])
        if why is not None:
            path.unlink()
            hs.error = f"not rebuilt exactly: {why}"
            continue
        hs.problem, hs.name = str(path.resolve()), name
    (out_dir / "hot_spots.json").write_text(json.dumps(
        [h.to_dict() for h in spots], indent=1, default=str))
    return spots

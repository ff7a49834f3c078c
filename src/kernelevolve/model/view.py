"""Tables for the model loop: the profile by kind, the hot spots, their verdicts, the model."""
from __future__ import annotations

from typing import Any

from rich.table import Table


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _ms(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def kinds_table(prof: dict[str, Any], top: int = 12) -> Table:
    t = Table(title=f"Where the time goes, by module kind (model {prof['total_ms']:.2f} ms a "
                    f"weighted forward; hooked {prof['hooked_total_ms']:.2f} ms)",
              title_justify="left")
    for col in ("kind", "instances", "calls", "incl ms", "excl ms", "incl share",
                "excl share", "if 2x", "if free", "main input shapes"):
        t.add_column(col, justify="left" if col in ("kind", "main input shapes") else "right")
    for k in [k for k in prof["kinds"] if k["instances"] != ["(model)"]][:top]:
        shapes = "; ".join(f"{s['inputs']} ({s['share']:.0%})" for s in k["shapes"][:1])
        shapes += f" +{len(k['shapes']) - 1}" if len(k["shapes"]) > 1 else ""
        t.add_row(k["label"], str(len(k["instances"])), f"{k['calls']:.1f}", _ms(k["incl_ms"]),
                  _ms(k["excl_ms"]), _pct(k["share_incl"]), _pct(k["share_excl"]),
                  _x(k["amdahl_2x"]), _x(k["amdahl_free"]), shapes)
    return t


def hot_table(spots: list[dict[str, Any]], verdicts: list[dict[str, Any]] | None = None
              ) -> Table:
    by_kind = {v["kind"]: v for v in verdicts or []}
    t = Table(title="Hot spots (regions below the modules, by kind)", title_justify="left")
    cols = ["#", "region", "instances", "share", "if 2x", "if free", "problem"]
    if verdicts is not None:
        cols += ["verdict", "kernel speedup", "in the model", "served as"]
    for col in cols:
        t.add_column(col, justify="right" if col in ("#", "instances", "share", "if 2x",
                                                     "if free", "kernel speedup") else "left")
    for i, h in enumerate(spots, 1):
        row = [str(i), h["label"], str(len(h["instances"])), _pct(h["share"]),
               _x(h["amdahl_2x"]), _x(h["amdahl_free"]),
               (h.get("name") or "") if h.get("problem") else f"not extracted: {h.get('error')}"]
        if verdicts is not None:
            v = by_kind.get(h["kind"], {})
            served = v.get("served") or {}
            row += [str(v.get("verdict") or "-"), _x(v.get("speedup")),
                    _x((v.get("in_situ") or {}).get("speedup")),
                    f"{served['name']} v{served['version']}" if served else
                    ("not served: slower in the model" if v.get("not_served") else "-")]
        t.add_row(*row)
    return t


def left_table(left: list[dict[str, Any]], coverage: float) -> Table:
    t = Table(title=f"Not covered by the extracted problems (they cover {_pct(coverage)} of the "
                    "time)", title_justify="left")
    for col in ("what", "share", "why"):
        t.add_column(col, justify="right" if col == "share" else "left")
    for r in left:
        t.add_row(str(r["what"]), _pct(r.get("share")), str(r.get("why")))
    return t


def model_table(model: dict[str, Any]) -> Table:
    t = Table(title="The whole model (paired, interleaved; weighted over the workload's cases)",
              title_justify="left")
    for col in ("variant", "ms", "speedup over eager"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    iv = model.get("interval")
    t.add_row("eager", _ms(model.get("eager_ms")), "1.00x")
    t.add_row("patched", _ms(model.get("patched_ms")), _x(model.get("speedup")) + (
        f" [{iv[0]:.2f}, {iv[1]:.2f}]" if iv else ""))
    if model.get("compile_ms") is not None:
        t.add_row("torch.compile", _ms(model["compile_ms"]), _x(model.get("compile_speedup")))
        ic = model.get("interval_over_compile")
        t.add_row("patched over torch.compile", "", _x(model.get("speedup_over_compile")) + (
            f" [{ic[0]:.2f}, {ic[1]:.2f}]" if ic else ""))
    elif model.get("compile_failed"):
        t.add_row("torch.compile", "-", f"failed: {model['compile_failed']}")
    return t


def instances_table(prof: dict[str, Any], top: int = 10) -> Table:
    t = Table(title="The busiest module instances (by exclusive time)", title_justify="left")
    for col in ("instance", "class", "calls", "incl ms", "excl ms", "excl share"):
        t.add_column(col, justify="left" if col in ("instance", "class") else "right")
    for i in [i for i in prof["instances"] if i["path"] != "(model)"][:top]:
        t.add_row(i["path"], i["class"], f"{i['calls']:.1f}", _ms(i["incl_ms"]),
                  _ms(i["excl_ms"]), _pct(i["share_excl"]))
    return t

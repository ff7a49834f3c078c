"""One self-contained HTML page for the model loop: time shares by kind (bars), the hot spots
and their verdicts, what was left out, and the whole model's figures next to Amdahl's
prediction. Every text from the model or a run is escaped."""
from __future__ import annotations

from html import escape
from typing import Any


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _bars(items: list[tuple[str, float, str]], unit: str = "share") -> str:
    """Horizontal bars: (label, value in [0, 1] or ms, tooltip)."""
    if not items:
        return "<p>nothing to plot</p>"
    hi = max(v for _, v, _ in items) or 1.0
    w, label_w, row_h = 960, 320, 20
    h = row_h * len(items) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" '
           f'role="img" aria-label="{escape(unit)}">']
    for i, (label, v, tip) in enumerate(items):
        y = 4 + i * row_h
        width = max(1.0, (w - label_w - 90) * v / hi)
        out.append(f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end" font-size="12">'
                   f'{escape(label[:48])}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{width:.1f}" height="14" '
                   f'fill="#2563eb"><title>{escape(tip)}</title></rect>'
                   f'<text x="{label_w + width + 6:.1f}" y="{y + 13}" font-size="12">'
                   f'{escape(tip.split(" ")[0])}</text>')
    out.append("</svg>")
    return "".join(out)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def profile_section(prof: dict[str, Any], top: int = 15) -> str:
    kinds = [k for k in prof["kinds"] if k["instances"] != ["(model)"]][:top]
    bars = _bars([(k["label"], k["share_incl"], f"{_pct(k['share_incl'])} inclusive, "
                   f"{_pct(k['share_excl'])} exclusive") for k in kinds])
    rows = [[k["label"], len(k["instances"]), f"{k['calls']:.1f}", f"{k['incl_ms']:.3f}",
             f"{k['excl_ms']:.3f}", _pct(k["share_incl"]), _pct(k["share_excl"]),
             _x(k["amdahl_2x"]), _x(k["amdahl_free"]),
             "; ".join(s["inputs"] for s in k["shapes"][:3])] for k in kinds]
    return (f"<h2>Where the time goes, by module kind</h2><p>{escape(prof['timing'])}; "
            f"model {prof['total_ms']:.3f} ms a weighted forward without hooks, "
            f"{prof['hooked_total_ms']:.3f} ms with them (hook cost "
            f"{prof['hook_cost_us']:.1f} us a call).</p>" + bars + _table(
                ["kind", "instances", "calls", "incl ms", "excl ms", "incl share",
                 "excl share", "if 2x", "if free", "input shapes"], rows))


def hot_section(spots: list[dict[str, Any]], verdicts: list[dict[str, Any]] | None,
                left: list[dict[str, Any]], coverage: float) -> str:
    by_kind = {v["kind"]: v for v in verdicts or []}
    rows = []
    for h in spots:
        v = by_kind.get(h["kind"], {})
        served = v.get("served") or {}
        rows.append([h["label"], len(h["instances"]), _pct(h["share"]), _x(h["amdahl_2x"]),
                     _x(h["amdahl_free"]), h.get("name") or f"not extracted: {h.get('error')}",
                     v.get("verdict") or "-", _x(v.get("speedup")),
                     _x((v.get("in_situ") or {}).get("speedup")),
                     f"{served['name']} v{served['version']}" if served else
                     (v.get("not_served") or "-")])
    left_rows = [[r["what"], _pct(r.get("share")), r.get("why")] for r in left]
    return ("<h2>Hot spots</h2>" + _bars([(h["label"], h["share"], f"{_pct(h['share'])}")
                                          for h in spots])
            + _table(["region", "instances", "share", "if 2x", "if free", "problem", "verdict",
                      "kernel speedup", "in the model", "served as"], rows)
            + f"<h2>Left out (the problems cover {_pct(coverage)} of the time)</h2>"
            + _table(["what", "share", "why"], left_rows))


def model_section(model: dict[str, Any]) -> str:
    items = [(name, model[key], f"{model[key]:.3f} ms") for name, key in
             (("eager", "eager_ms"), ("patched", "patched_ms"), ("torch.compile", "compile_ms"))
             if model.get(key) is not None]
    iv = model.get("interval")
    text = (f"<p>patched over eager: {_x(model.get('speedup'))}"
            + (f" (95% interval {iv[0]:.2f} to {iv[1]:.2f})" if iv else "")
            + f"; Amdahl's prediction from the kernels' own speedups: "
            f"{_x(model.get('predicted_speedup'))}; over torch.compile: "
            f"{_x(model.get('speedup_over_compile'))}; outputs match: "
            f"{model.get('outputs_match')} (max abs error {model.get('max_abs_err')}).</p>")
    return "<h2>The whole model</h2>" + text + _bars(items, "ms")


def page(title: str, *sections: str) -> str:
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;}"
             "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
             "td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}")
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>"
            f"{escape(title)}</title><style>{style}</style></head><body><h1>{escape(title)}"
            f"</h1>{''.join(sections)}</body></html>")

"""Fit the polynomial coefficients of the synthesizer's vectorisable math (synth/cpp_math.py).

Each function is approximated on its reduced interval as fixed low-order terms plus a sum of
c_k x^k over the listed powers, minimising the maximum relative error: Lawson's algorithm
(iteratively reweighted least squares whose weights converge to the minimax solution) on a
Chebyshev-clustered grid, in float64. The coefficients are then rounded to float32 one at a
time, lowest power first, refitting the remaining ones after each rounding, so the rounding of
the large low-order coefficients is absorbed by the small high-order ones.

    python scripts/fit_synth_math.py            # prints COEFFS as cpp_math.py holds them

It takes about a minute. The printed errors are the approximation's alone (no float32
evaluation rounding); tests/test_synth_math.py measures the compiled functions.
"""
from __future__ import annotations

import math

import numpy as np

L2 = math.log(2)
S2 = math.sqrt(2)
T8 = math.tan(math.pi / 8)
# sin / cos: |r| may exceed pi/4 by 0.03 (the single-float 2/pi used to pick the quadrant,
# see cpp_trig.py), so they are fitted on the wider interval.
TRIG = math.pi / 4 + 0.03


def erfc_exponent(s: np.ndarray) -> np.ndarray:
    """g(s) = log(erfc(z) / t) + z^2 at s = -z / (2 + z), t = 1 + s, so erfc(z) = t exp(-z^2 +
    g(s)): the form of erfc in cpp_special.py (absolute error in g is relative error in
    erfc; g(0) = 0, so small z keep their accuracy)."""
    z = -2.0 * s / (1.0 + s)
    return np.array([math.log(math.erfc(v)) for v in z]) + z * z - np.log1p(s)


# name: (function, lo, hi, powers fitted, fixed (power, coefficient) terms)
SPECS = {
    "exp": (np.exp, -L2 / 2 - 1e-3, L2 / 2 + 1e-3, [2, 3, 4, 5, 6], ((0, 1.0), (1, 1.0))),
    "exp2": (np.exp2, -0.5 - 1e-3, 0.5 + 1e-3, [1, 2, 3, 4, 5, 6], ((0, 1.0),)),
    "expm1": (np.expm1, -L2 / 2 - 1e-3, L2 / 2 + 1e-3, [3, 4, 5, 6, 7], ((1, 1.0), (2, 0.5))),
    "log1p": (np.log1p, S2 / 2 - 1 - 1e-3, S2 - 1 + 1e-3, list(range(3, 10)),
              ((1, 1.0), (2, -0.5))),
    "sin": (np.sin, -TRIG, TRIG, [3, 5, 7, 9], ((1, 1.0),)),
    "cos": (np.cos, -TRIG, TRIG, [4, 6, 8], ((0, 1.0), (2, -0.5))),
    "atan": (np.arctan, -T8 - 1e-3, T8 + 1e-3, [3, 5, 7, 9, 11], ((1, 1.0),)),
    "asin": (np.arcsin, -0.5 - 1e-3, 0.5 + 1e-3, [3, 5, 7, 9, 11], ((1, 1.0),)),
    "sinh": (np.sinh, -1.0 - 1e-3, 1.0 + 1e-3, [3, 5, 7, 9], ((1, 1.0),)),
    # z in [0, 10.2]: s in [-10.2/12.2, 0]; absolute error (see erfc_exponent)
    "erfc": (erfc_exponent, -10.2 / 12.2, 0.0, list(range(1, 11)), (), "abs"),
}


def lawson(basis: np.ndarray, target: np.ndarray, weight: np.ndarray,
           iters: int = 300) -> tuple[np.ndarray, float]:
    """Coefficients c minimising max |weight * (basis @ c - target)|, and that maximum."""
    a = basis * weight[:, None]
    b = target * weight
    w = np.full(len(b), 1.0 / len(b))
    best_c, best_err = None, math.inf
    for _ in range(iters):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)[0]
        err = np.abs(a @ c - b)
        if err.max() < best_err:
            best_c, best_err = c, float(err.max())
        w = w * err
        w /= w.sum()
    return best_c, best_err


def fit(fn, lo: float, hi: float, powers: list[int], fixed, error: str = "rel",
        n: int = 8001):
    """float32 coefficients for `powers` and the final max relative (or absolute) error."""
    x = lo + (hi - lo) * (np.cos(np.linspace(math.pi, 0.0, n)) + 1) / 2
    x = x[x != 0]
    y = fn(x)
    weight = 1.0 / np.abs(y) if error == "rel" else np.ones_like(y)
    target = y - sum((c * x ** k for k, c in fixed), np.zeros_like(y))
    coeffs = []
    rest = list(powers)
    while rest:
        c, _ = lawson(np.stack([x ** p for p in rest], axis=1), target, weight)
        c0 = float(np.float32(c[0]))
        coeffs.append(c0)
        target = target - c0 * x ** rest[0]
        rest = rest[1:]
    return coeffs, float(np.abs(target * weight).max())


def main() -> None:
    print("COEFFS = {")
    for name, (fn, lo, hi, powers, fixed, *error) in SPECS.items():
        coeffs, err = fit(fn, lo, hi, powers, fixed, *error)
        print(f"    # max {'absolute' if error else 'relative'} error {err:.2g}")
        print(f"    {name!r}: ({powers}, {coeffs}),")
    print("}")


if __name__ == "__main__":
    main()

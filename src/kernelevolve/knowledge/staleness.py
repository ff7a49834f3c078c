"""Does a note's provenance still describe this machine? One reason per field that differs.

A learned note says "tile 128x64 won 1.4x" *on some device with some toolchain*. When the current
fingerprint differs (another GPU, another compiler major, another torch/triton minor) the fact may
no longer hold, so retrieval ranks it lower and says what to revalidate. Fields missing on either
side are not evidence of a difference: curated notes usually carry no provenance at all.

Versions are compared at the precision that matters for performance: torch, triton, CUDA and HIP
by major.minor (patch releases rarely change code generation), drivers and compilers by major.
Devices match when one name contains the other ("NVIDIA H100" vs "NVIDIA H100 80GB HBM3").
"""
from __future__ import annotations

import re
from typing import Any

_VERSION = re.compile(r"\d+(?:\.\d+)*")


def staleness(provenance: dict[str, Any], fingerprint: dict[str, Any] | None) -> list[str]:
    """Reasons the note may not hold here, e.g. "measured on torch 2.11, this is 2.13"."""
    if not provenance or not fingerprint:
        return []
    reasons: list[str] = []
    libs = provenance.get("libraries") or {}
    from kernelevolve.plugins import library_keys, toolkit_labels

    for lib in ("torch", *library_keys()):
        was, now = _version(libs.get(lib), 2), _version(fingerprint.get(lib), 2)
        if was and now and was != now:
            reasons.append(f"measured on {lib} {was}, this is {now}")
    for key, label in toolkit_labels().items():
        was, now = _version(provenance.get(key), 2), _version(fingerprint.get(key), 2)
        if was and now and was != now:
            reasons.append(f"measured with {label} {was}, this is {now}")
    was, now = _version(provenance.get("driver"), 1), _version(fingerprint.get("driver"), 1)
    if was and now and was != now:
        reasons.append(f"measured with driver {provenance['driver']}, this is "
                       f"{fingerprint['driver']}")
    was = _compiler(provenance.get("compiler"))
    now = _compiler(fingerprint.get("cxx") or fingerprint.get("compiler"))
    if was and now and was != now:
        reasons.append(f"compiled with {was}, this is {now}")
    dev_was, dev_now = _text(provenance.get("device")), _text(fingerprint.get("device"))
    if dev_was and dev_now and dev_was not in dev_now and dev_now not in dev_was:
        reasons.append(f"measured on {provenance['device']}, this is {fingerprint['device']}")
    plat_was, plat_now = _text(provenance.get("platform")), _text(fingerprint.get("platform"))
    if plat_was and plat_now and plat_was != plat_now:
        reasons.append(f"measured on platform {plat_was}, this is {plat_now}")
    return reasons


def _text(value: Any) -> str:
    return " ".join(str(value).lower().split()) if value not in (None, "") else ""


def _version(value: Any, parts: int) -> str:
    """The first `parts` components of the version in `value` ("2.5.1+cu124" -> "2.5")."""
    if value in (None, ""):
        return ""
    match = _VERSION.search(str(value))
    return ".".join(match.group(0).split(".")[:parts]) if match else ""


def _compiler(value: Any) -> str:
    """Family and major version: 'g++ (Debian 12.2.0-14) 12.2.0' -> 'gcc 12'.

    The trailing version is used because distributions put their own numbers in parentheses.
    An unparseable string is compared as is (lower-cased), so exotic compilers still work.
    """
    text = _text(value)
    if not text or text.startswith("unavailable"):
        return ""
    family = re.sub(r"-\d+$", "", text.split()[0])  # g++-13 -> g++
    family = {"g++": "gcc", "c++": "gcc", "clang++": "clang", "icpx": "icx"}.get(family, family)
    versions = _VERSION.findall(re.sub(r"\(.*?\)", " ", text))
    return f"{family} {versions[-1].split('.')[0]}" if versions else text

"""The linter (ruff, pinned in the `test` extra; rules in pyproject.toml) finds nothing in src/ or
tests/: an unused import or an undefined name fails the fast tier, not a review."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str] | None:
    found = shutil.which("ruff")
    if found:
        return [found]
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True)
    return [sys.executable, "-m", "ruff"] if probe.returncode == 0 else None


def test_ruff_finds_nothing_in_src_and_tests():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' brings it)")
    out = subprocess.run([*ruff, "check", "--no-cache", "--output-format", "concise", "src", "tests"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_config_catches_an_unused_import(tmp_path):
    """The config is live: the same rules flag a planted unused import and undefined name."""
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' brings it)")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    out = subprocess.run([*ruff, "check", "--no-cache", "--output-format", "concise",
                          "--config", str(ROOT / "pyproject.toml"), str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "F401" in out.stdout and "F821" in out.stdout

"""Verdicts, computed in the driver from data: the static gate, output comparison, integrity rules, native-library inspection, scoring. Never imported by worker code."""

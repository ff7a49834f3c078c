"""The config file's timing tables and KERNELEVOLVE_CONFIG, the default config file."""
from __future__ import annotations

import pytest

from kernelevolve import knobs
from kernelevolve.config import RunConfig, build_config
from kernelevolve.errors import UsageError


def test_timing_tables_and_final_top_k_are_read(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("final_top_k = 2\n[search_timing]\nmin_reps = 7\nmax_time_s = 2.5\n"
                    "[final_timing]\nwarmup = 0\nmin_time_s = 0.5\ntight = 1.2\n")
    config = build_config(path, {})
    assert config.final_top_k == 2
    assert (config.search_timing.min_reps, config.search_timing.max_time_s) == (7, 2.5)
    assert config.search_timing.min_time_s == RunConfig().search_timing.min_time_s
    assert (config.final_timing.warmup, config.final_timing.min_time_s) == (0, 0.5)
    assert (config.final_timing.tight, config.search_timing.tight) == (1.2, None)
    assert RunConfig.from_dict(config.to_dict()) == config  # stored with the run, resumed alike


@pytest.mark.parametrize("body, words", [
    ("[search_timing]\nreps = 3\n", "[search_timing] has no setting 'reps'"),
    ("[final_timing]\nmin_reps = 0\n", "min_reps = 0: must be a whole number above 0"),
    ("[final_timing]\nmin_reps = 2.5\n", "min_reps = 2.5: must be a whole number"),
    ("[search_timing]\nmax_time_s = -1\n", "max_time_s = -1: must be a number of seconds"),
    ("[search_timing]\nwarmup = -1\n", "warmup = -1: must be a whole number (0 or more)"),
    ("search_timing = 3\n", "[search_timing] must be a table"),
    ("[final_timing]\ntight = 1\n", "tight = 1: must be the widest speedup interval (hi/lo)"),
])
def test_a_bad_timing_table_is_one_line_naming_the_setting(tmp_path, body, words):
    path = tmp_path / "c.toml"
    path.write_text(body)
    with pytest.raises(UsageError) as err:
        build_config(path, {})
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_default_config_file_applies_when_no_config_is_given_and_flags_still_win(tmp_path):
    default = tmp_path / "machine.toml"
    default.write_text("seed = 5\nmax_evals = 9\n[search_timing]\nmin_reps = 4\n")
    given = tmp_path / "given.toml"
    given.write_text("seed = 6\n")
    with knobs.override(KERNELEVOLVE_CONFIG=str(default)):
        config = build_config(None, {"max_evals": 3})
        assert (config.seed, config.budgets.max_evals, config.search_timing.min_reps) == (5, 3, 4)
        assert build_config(given, {}).seed == 6  # --config replaces the default file
    with knobs.override(KERNELEVOLVE_CONFIG=None):
        assert build_config(None, {}).search_timing == RunConfig().search_timing


def test_a_missing_default_config_file_is_named_by_its_variable(tmp_path):
    with knobs.override(KERNELEVOLVE_CONFIG=str(tmp_path / "gone.toml")):
        with pytest.raises(UsageError, match=r"^KERNELEVOLVE_CONFIG .*gone\.toml: no such file$"):
            build_config(None, {})

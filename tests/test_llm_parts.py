"""Reply parsing, search memory and prompt pieces of the universal operator (no servers)."""
from __future__ import annotations

import pytest

from kernelevolve.operators.reply import GenerationFailure, parse_reply
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.memory import history_table

MODULE = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"
PARENT = "X = 1\nY = 2\n\n\nclass ModelNew:\n    pass\n"


def test_whole_module_in_prose():
    source, why = parse_reply(f"I fused it.\n```python\n{MODULE}```\nThat is all.", None)
    assert source == MODULE and why == "I fused it."


def test_last_block_defining_modelnew_wins():
    reply = f"```python\nprint(1)\n```\nthen\n```py\n{MODULE}```"
    assert parse_reply(reply, None)[0] == MODULE


@pytest.mark.parametrize("reply, reason", [
    ("", "empty reply"),
    ("Use OpenMP and vectorise the inner loop.", "prose only"),
    ("```cpp\nint main(){}\n```", "no Python code block"),
    ("```python\ndef helper():\n    return 1\n```", "defines no ModelNew"),
    ("<<<<<<< SEARCH\nX = 1\n=======\nX = 2\n>>>>>>> REPLACE", "no parent"),
])
def test_generation_failures_have_reasons(reply, reason):
    with pytest.raises(GenerationFailure, match=reason):
        parse_reply(reply, None)


def test_search_replace_edits_apply_exactly_or_with_indentation_drift():
    reply = ("Bump both.\n<<<<<<< SEARCH\nX = 1\n=======\nX = 4\n>>>>>>> REPLACE\n"
             "<<<<<<< SEARCH\n  Y = 2  \n=======\nY = 8\n>>>>>>> REPLACE\n")
    source, why = parse_reply(reply, PARENT)
    assert source.startswith("X = 4\nY = 8\n") and why == "Bump both."
    with pytest.raises(GenerationFailure, match="SEARCH block 1 of 1 does not match"):
        parse_reply("<<<<<<< SEARCH\nZ = 3\n=======\nZ = 4\n>>>>>>> REPLACE", PARENT)


def _graph() -> SearchGraph:
    g = SearchGraph()
    g.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    g.add(Node(1, (0,), "seed", "seed candidate", "h1", "done", "accepted", 1.2, order=0))
    g.add(Node(2, (1,), "llm", "fused exp", "h2", "done", "correctness", 0.0, order=1,
               meta={"reason": "wrong result on case 'tail' (trial 1 of 3): output differs"}))
    g.add(Node(3, (1,), "llm", "blocked rows by 16", "h3", "done", "accepted", 1.6, order=2))
    g.add(Node(4, (3,), "llm", "other", "h4", "done", "correctness", 0.0, order=3,
               meta={"reason": "wrong result on case 'tail' (trial 2 of 3): output differs"}))
    return g


def test_memory_summarises_progress_and_failures():
    text = history_table(_graph())
    assert "4 evaluated: 2 accepted, 2 rejected. Best: node 3 at 1.600x" in text
    assert "| 3 | 1 | llm | blocked rows by 16 | best | 1.600x |" in text
    assert "| 4 | 3 | llm | other | rejected: correctness | - | `wrong result" in text
    assert history_table(SearchGraph()) == "Nothing evaluated yet."


def test_memory_respects_its_token_budget():
    g = _graph()
    for i in range(5, 60):
        g.add(Node(i, (1,), "llm", f"idea {i}", f"h{i}", "done", "accepted", 1.1, order=i))
    text = history_table(g, budget_tokens=100)
    assert len(text) <= 100 * 4 + 600 and "left out to fit the budget" in text


def test_run_config_file_and_flags(tmp_path):
    from kernelevolve.config import build_config
    from kernelevolve.errors import UsageError

    cfg = tmp_path / "run.toml"
    cfg.write_text('llm = "anthropic:claude-haiku-4-5"\nllm-timeout = 30\nmax_cost = 2.5\n'
                   'operators = ["llm", "tune"]\nmax_evals = 40\n')
    config = build_config(cfg, {"max_evals": 5, "policy": None})
    assert config.llm["provider"] == "anthropic" and config.llm["timeout_s"] == 30
    assert config.budgets.max_cost == 2.5 and config.budgets.max_evals == 5  # flags win
    assert config.operators == ["llm", "tune"]
    assert "api_key" not in str(config.to_dict()).replace("api_key_env", "")
    default = build_config(None, {"llm": "openai:gpt-5"})
    assert default.operators == ["llm", "tune"]  # the LLM drafts, tune explores its knobs
    assert build_config(None, {"baseline": "compile"}).baseline == "compile"
    with pytest.raises(UsageError, match="--baseline .fast.: choose eager or compile"):
        build_config(None, {"baseline": "fast"})
    cfg.write_text("bogus = 1\n")
    with pytest.raises(UsageError, match="unknown setting"):
        build_config(cfg, {})
    cfg.write_text("llm = [\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        build_config(cfg, {})


def test_the_key_variable_comes_from_the_one_table_in_llm_spec():
    """A run's secret variable (config.api_key_var, kept from the sandbox) is the variable the
    client reads its key from: one table, llm/spec.py's, and a named one wins."""
    from kernelevolve.config import api_key_var, build_config
    from kernelevolve.llm import DEFAULT_KEY_ENV, LLMConfig

    assert set(DEFAULT_KEY_ENV) == {"openai", "anthropic"}
    for provider, var in DEFAULT_KEY_ENV.items():
        llm = LLMConfig.from_dict(build_config(None, {"llm": f"{provider}:m"}).llm)
        assert api_key_var(llm) == llm.key_env == var
    named = build_config(None, {"llm": "openai:m", "llm_api_key_env": "MY_GATEWAY_KEY"}).llm
    assert api_key_var(LLMConfig.from_dict(named)) == "MY_GATEWAY_KEY"

"""Deeper play and fuzz on environments written on the openreward SDK (issue 19 item 4).

Scorers that crash on strings holding JSON or numbers are found by the boundary inputs; a game
with one free-text ``command`` tool is played to ``finished``; a multi-tool environment's main
tool is played, and the play report says per tool how it was exercised; a stochastic MDP gets a
warning that states both readings, never a failure. Served the way an author's own code is.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orsbench.checks import Options, Report, Status, run_checks
from orsbench.checks.gameplay import Player, command_field, command_verbs, objects
from orsbench.schema_examples import boundary_inputs
from orsbench.servers import launch
from orsbench.servers.user_app import AppTarget

TIMEOUT = 3.0


@pytest.fixture(scope="module", autouse=True)
def _zygote() -> Iterator[None]:
    launch.use_zygote(True)
    yield


def check(target: str, **options: object) -> Report:
    with launch.serve(AppTarget.parse(f"tests/envs/{target}")) as server:
        return run_checks(server.url, Options(env=server.env_name, timeout=TIMEOUT, **options))


@pytest.mark.parametrize(
    ("target", "crashes_on", "error"),
    [
        ("json_scorers.py:JsonObjectScorer", "{}", "'answer'"),  # str(KeyError)
        ("json_scorers.py:JsonArrayScorer", "[1]", "'int' object is not subscriptable"),
        ("json_scorers.py:NumberStringScorer", "12", "tuple index out of range"),
    ],
)
def test_a_scorer_that_crashes_on_json_or_a_number_in_a_string_is_found(target: str, crashes_on: str, error: str) -> None:
    report = check(target)
    result = report.result("tool.no_crash_on_valid_input")
    assert result.status is Status.FAIL, (result.status, result.message)
    found = result.measured["failures"][0]
    assert found["input"] == {"answer": crashes_on} and found["found_by"] == "boundary"
    assert error in found["detail"]
    assert report.exit_code == 1


def test_the_boundaries_hold_json_numbers_as_strings_whitespace_and_long_numbers() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    strings = {value["s"] for value in boundary_inputs(schema, {"s": "x"})}
    assert {"{}", "[1]", "12", "   ", "9" * 40}.issubset(strings)
    longest_numeric = max((s for s in strings if s.isdigit()), key=len)
    with pytest.raises(ValueError):  # longer than Python's int() accepts: a real crash for a numeric scorer
        int(longest_numeric)


def test_a_command_line_game_is_played_to_finished_by_mining_its_help_and_answers() -> None:
    report = check("command_game.py:CommandGame")
    episodes = report.evidence.facts.episodes
    assert [e.index for e in episodes] == [0, 1, 2]
    assert all(e.finished and e.reward == 1.0 for e in episodes), [e.to_json() for e in episodes]
    first = [value["command"] for _tool, value in episodes[0].calls]
    assert first[0] == "help" and first.count("help") == 1
    assert "take key" in first and first[-1] == "open door"
    assert report.result("call.episode_finishes").status is Status.PASS
    assert report.exit_code == 0, [(r.id, r.message) for r in report.results if r.blocking]


def test_a_multi_tool_envs_main_tool_is_played_and_the_report_says_how_each_tool_was_used() -> None:
    report = check("multi_tool_lab.py:MultiToolLab")
    episodes = report.evidence.facts.episodes
    assert all(e.finished and e.reward == 1.0 for e in episodes), [e.to_json() for e in episodes]
    assert [tool for tool, _ in episodes[0].calls][-1] == "answer"
    assert "weigh" in [tool for tool, _ in episodes[0].calls]  # played before the answer that ends the episode
    result = report.result("tool.exercised")
    assert result.status is Status.PASS, result.message
    rows = result.measured
    assert set(rows) == {"answer", "list_samples", "weigh"}
    assert rows["weigh"]["played"] >= 3 and rows["weigh"]["fuzzed"] > 0 and not rows["weigh"]["won"]
    assert rows["answer"]["won"] and rows["answer"]["played"] == 3
    assert "weigh: played" in result.message and "answer: played 3" in result.message and "won with it" in result.message
    assert "§5" in result.message
    assert report.exit_code == 0, [(r.id, r.message) for r in report.results if r.blocking]


def test_a_stochastic_mdp_is_warned_with_both_readings_never_failed() -> None:
    report = check("stochastic_mdp.py:StochasticMdp")
    result = report.result("quality.reward_deterministic")
    assert result.status is Status.WARN, (result.status, result.message)
    assert "stochastic by design" in result.message and "nondeterministic grader" in result.message
    assert "answers already differed at call 1" in result.message  # the transitions, not the grader, moved
    assert "§4.2" in result.message
    assert result.measured["first"] != result.measured["again"]
    assert report.exit_code == 0


def test_a_random_grader_is_read_as_the_likelier_nondeterministic_grader() -> None:
    report = check("random_reward.py:RandomReward")
    result = report.result("quality.reward_deterministic")
    assert result.status is Status.WARN and result.measured["diverged_at"] is None
    assert "a nondeterministic grader is the likelier reading" in result.message


# -- the player, without a server -------------------------------------------------------------------
COMMAND_TOOL = {
    "name": "command",
    "description": "Run one command. Type `help` to list the commands.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}


def test_a_free_text_command_tool_is_recognised_and_a_typed_one_is_not() -> None:
    assert command_field(COMMAND_TOOL) == "command"
    typed = {"name": "submit", "input_schema": {"type": "object", "properties": {"answer": {"type": "string"}}}}
    assert command_field(typed) is None
    assert command_verbs("Commands: look, take <item>, open <thing>, inventory.") == (["look", "inventory"], ["take", "open"])
    assert objects("You see a bed, a key and a door.", exclude={"take"})[:3] == ["bed", "key", "door"]


def test_the_player_asks_for_help_once_then_uses_the_verbs_it_lists_on_what_it_sees() -> None:
    player = Player.build([COMMAND_TOOL], "Get out of the cell.", {})
    assert player.next_input() == ("command", {"command": "help"})
    player.observe("command", {"ok": True, "output": {"blocks": [{"type": "text", "text": "Commands: look, take <item>."}]}})
    assert player.next_input() == ("command", {"command": "look"})
    player.observe("command", {"ok": True, "output": {"blocks": [{"type": "text", "text": "You see a key."}]}})
    lines = []
    while (step := player.next_input()) is not None and len(lines) < 5:
        lines.append(step[1]["command"])
    assert lines[0] == "take key" and "help" not in lines


def test_tools_that_end_the_episode_take_their_turn_last() -> None:
    specs = [
        {"name": "answer", "description": "Answer; ends the episode.", "input_schema": {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}},
        {"name": "weigh", "description": "Weigh a sample.", "input_schema": {"type": "object", "properties": {"sample": {"type": "string"}}, "required": ["sample"]}},
    ]
    player = Player.build(specs, "Weigh sample 'B'.", {})
    assert [plan.name for plan in player.tools] == ["weigh", "answer"]
    assert player.next_input() == ("weigh", {"sample": "B"})

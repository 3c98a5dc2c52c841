"""benchflow 0.7.11's ORS seam: the openreward SDK's session, then benchflow's own reward conversion and verifier.

benchflow ships no ORS session client of its own (its hosted-env runner refuses an ``openreward:`` environment:
"recognized but not executable in this path yet"); what it ships for ORS is the reward seam around a session its
user plays with the openreward SDK — ``benchflow.write_ors_tool_outputs_jsonl`` (``benchflow/adapters/ors.py``)
turns the tool outputs into ``trajectory/ors-rewards.jsonl``, rejecting any reward that is null, non-finite or
outside [0, 1], and the ``ors-episode`` verifier strategy (``Verifier.verify``, ``benchflow/task/verifier_core.py``
and ``verifier_ors_episode.py``) takes the terminal record's reward, refusing an episode without one. So this
target's wire behaviour is the openreward SDK's (it inherits its pinned defects), and what benchflow adds is its
judgement of the rewards: ``orsbench/clients/commands/benchflow_ors.py`` runs both, in the ``trainers-3.12``
environment (:data:`~orsbench.clients.interpreters.TRAINERS_312`), forked warm like platoon's episodes.

Only what that path imports is installed: benchflow without its requirements (litellm, Vertex AI, typer, rich: its
agents, providers and CLI), plus what ``import benchflow`` needs beyond the openreward SDK (agent-client-protocol,
tomli-w).
"""

from __future__ import annotations

from orsbench.clients.consumers import Consumer
from orsbench.clients.interpreters import TRAINERS_312, Command
from orsbench.clients.targets import ClientTarget, register

COMMAND = Command(TRAINERS_312, "benchflow_ors.py", preload=("openreward", "benchflow", "benchflow.task"))

register(
    ClientTarget(
        "benchflow",
        "benchflow",
        "benchflow's ORS reward seam on an openreward SDK session (benchflow ships no session client)",
        command=COMMAND,
        # A cold start (matrix --url, the adapter by hand) imports openreward and benchflow in a fresh 3.12 process.
        startup_s=30.0,
        consumer=Consumer(
            "finishing",
            no_reward="refuses",
            reward_range=(0.0, 1.0),
            every_call_rewarded=True,
            unfinished="refuses",
            failed_call="raises",
            source=(
                "benchflow 0.7.11 benchflow/adapters/ors.py: ORSAdapter.tool_outputs_to_reward_events, _bounded_reward; "
                "benchflow/task/verifier_ors_episode.py: _ors_records_to_verify_result"
            ),
        ),
    ),
    origin=__name__,
)

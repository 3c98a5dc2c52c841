"""TRL's ``OpenRewardSpec``: ``environment_factory()``, ``reset(task_index=...)``, then the generated tool methods.

Played as GRPOTrainer plays a rollout: GRPO stops only when the model stops
calling tools, so the script runs to its end whatever ``finished`` says (the
server's finish latch is what protects the reward; ``trl-calls-after-finished``,
§13.14). TRL hands every failure to the model as ``"Error: ..."`` text: its
``_call_ors_tool`` (trl 1.16.0 ``trl/experimental/openreward/environment.py:271-276``)
catches whatever the SDK's ``session.call_tool`` raised. The adapter watches that
path itself — the SDK call TRL wraps, seen raising (:func:`watch_error_path`) —
never the text: a tool that answers ``ok: true`` with a text that happens to start
with "Error: " took TRL's success path, and is reported as the answer it is. A
call TRL took its exception path for is reported as the error it is, and the
episode stops, as a trainer reading TRL's convention would — the defect itself
(``errors-as-text``) is pinned in ``conformance/test_client_robustness.py``.
After ``finished`` the rollout's reward is settled (``_outcome_only_reward_func``
reads ``rollout.reward``, which a refused call leaves alone), so the refusal of a
later call is reported as the text the model was shown (``after_finished``), not
as the episode's error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import ClientTarget, register

if TYPE_CHECKING:
    from orsbench.clients.transcript import AdapterEpisode


def watch_error_path(rollout: Any) -> list[BaseException]:
    """What the SDK's ``call_tool`` raised under the rollout's tool methods, one entry per call TRL took its exception
    path for (``_call_ors_tool``'s ``except Exception``): the exception is recorded, then raised on to TRL unchanged.

    Why not the text: TRL's error text is ``f"Error: {e}"``, and a tool's own answer may read the same.
    """
    raised: list[BaseException] = []
    session = rollout._session  # opened by reset(); TRL calls session.call_tool for every tool method
    call_tool = session.call_tool

    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            return call_tool(*args, **kwargs)
        except Exception as exc:
            raised.append(exc)
            raise

    session.call_tool = watched
    return raised


def play(episode: AdapterEpisode) -> None:
    from orsbench.clients.transcript import ClientReported
    from trl.experimental.openreward import OpenRewardSpec

    episode.stage = "spec"
    spec = OpenRewardSpec(
        episode.url, env_name=episode.env, split=episode.split, task_tools_discovery_index=episode.index,
        secrets=episode.secrets or None,
    )
    rollout = spec.environment_factory()
    episode.stage = "reset"
    rollout.reset(task_index=episode.index)
    try:
        raised = watch_error_path(rollout)
        episode.stage = "call"
        for call in episode.steps():
            method = getattr(rollout, call.tool, None)
            if not callable(method):
                raise LookupError(f"OpenRewardSpec exposes no method {call.tool!r}")
            seen, done, failures = len(rollout.rewards), rollout.finished, len(raised)
            text = str(method(**call.input))
            if len(raised) > failures:  # TRL caught the SDK's exception and handed the model its text
                if done:
                    # refused after finished: the rollout's reward stands; the line says what TRL's rollout holds
                    episode.after_finished(call.tool, text, rollout.rewards[-1], bool(rollout.finished))
                    continue
                raise ClientReported(text)
            reward = rollout.rewards[-1] if len(rollout.rewards) > seen else None
            episode.record(call.tool, text, reward, bool(rollout.finished))
        episode.stage = None
    finally:
        rollout._close()


register(
    ClientTarget(
        "trl",
        "trl",
        "TRL OpenRewardSpec",
        play,
        modules=("trl.experimental.openreward",),
        trains=True,
        listings=("tools", "num_tasks"),  # the tool methods and the dataset, before any session
        consumer=Consumer(
            "last",
            images=False,
            failed_call="error text",
            source="trl 1.16.0 trl/experimental/openreward: _outcome_only_reward_func (last non-null, None without one), "
            "_call_ors_tool ('Error: ...' text, environment.py:271-276), _join_text_blocks (text only)",
        ),
    ),
    origin=__name__,
)

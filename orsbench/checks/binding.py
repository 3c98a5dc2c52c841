"""Binding checks: per tool of the checked server, what each client will show the model.

An environment author's tools reach the model through a client's binder,
and each binder loses something different. These checks run the same schema
predicates the conformance suite pins its ``xfail(strict=True)`` cases with
(:mod:`orsbench.upstream.defects`), over the server's ``/tools`` listing, so
the author reads "TRL will crash on ``class``" before a training run does.
Findings are warnings (the server is right; the client is wrong), named
``binding.<client>.<rule>``; a server whose tools every client binds
faithfully (``echo``) passes them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from orsbench.checks.evidence import Evidence, json_of
from orsbench.checks.model import CheckOutcome, Severity, not_applicable, passed, skipped, warned
from orsbench.checks.registry import check
from orsbench.upstream import defects as D
from orsbench.upstream import schema_view

JSON = dict[str, Any]
#: OpenAI's function-name rule (Anthropic's is the same with 1-128 characters).
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_REMEDY = "See docs/compatibility.md for the client's defect; rename the tool/parameter or flatten the schema if your users run this client."


def _tools(ev: Evidence) -> list[JSON] | None:
    ok, body = json_of(ev.get("tools"))
    if not ok or not isinstance(body, dict) or not isinstance(body.get("tools"), list):
        return None
    return [t for t in body["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]


def _rule(ev: Evidence, finding: Callable[[JSON], str | None]) -> CheckOutcome:
    tools = _tools(ev)
    if tools is None:
        return skipped("no tool listing to read", "discovery.tools_listing")
    if not tools:
        return not_applicable("the environment lists no tools to bind")
    found = [f"{t['name']!r}: {text}" for t in tools if (text := finding(t))]
    if found:
        return warned(f"{len(found)} of {len(tools)} tools: " + "; ".join(found[:3]) + (" ..." if len(found) > 3 else ""), found, ev.get("tools"))
    return passed(f"all {len(tools)} tools bind faithfully", len(tools))


def _defect_text(defect: D.Defect | None) -> str | None:
    return None if defect is None else f"[{defect.id}] {defect.behaviour.split(';')[0]}"


#: Every binding rule, ``(client, rule, finding)``, in registration order (read by :func:`predict`).
_RULES: list[tuple[str, str, Callable[[JSON], str | None]]] = []


def predict(tools: list[JSON]) -> dict[str, list[str]]:
    """Per client, what its binder will do wrong with these tools (``binding.<client>.<rule>: 'tool': ...``).

    The same findings the checks report, over a ``/tools`` listing in hand: ``matrix --url`` shows
    them beside each client's live verdict. A client with no rule, or none firing, is absent.
    """
    out: dict[str, list[str]] = {}
    for client, rule, finding in _RULES:
        for spec in tools:
            if isinstance(spec, dict) and isinstance(spec.get("name"), str) and (text := finding(spec)):
                out.setdefault(client, []).append(f"binding.{client}.{rule}: {spec['name']!r}: {text}")
    return out


def _register(client: str, rule: str, severity: Severity, title: str, finding: Callable[[JSON], str | None]) -> None:
    """Register one binding rule: never required (the environment is right; a client mishandles it)."""
    _RULES.append((client, rule, finding))

    @check(
        f"binding.{client}.{rule}",
        severity=severity,
        title=title,
        probe="discovery",
        spec="§4",  # the client pain points P3-P6 (docs/conformance.md)
        remediation=_REMEDY,
        requires=("discovery.tools_listing",),
    )
    def run(ev: Evidence) -> CheckOutcome:
        return _rule(ev, finding)


def _trl_crash(spec: JSON) -> str | None:
    defect = D.factory_defect([spec])
    return _defect_text(defect) if defect is not None and defect.id in ("keyword-crash", "bool-schema-crash") else None


def _trl_dropped(spec: JSON) -> str | None:
    defect = D.exposure_defect(spec)
    return _defect_text(defect) if defect is not None and defect.id in ("non-identifier-skipped", "underscore-hidden", "state-shadowed") else None


def _trl_reserved(spec: JSON) -> str | None:
    defect = D.exposure_defect(spec)
    return _defect_text(defect) if defect is not None and defect.id in ("reset-overridden", "get-reward-reserved", "state-shadowed", "underscore-hidden") else None


def _trl_schema(spec: JSON) -> str | None:
    if D.binding_defect(spec) is not None:
        return None  # reported by the crash/dropped rules
    lost = [d.id for a in schema_view.ASPECTS if (d := D.aspect_defect(spec, a)) is not None]
    if (d := D.docstring_defect(spec)) is not None:
        lost.append(d.id)
    if D.empty_descriptions(spec) == ["tool"]:
        lost.append("description-filled")
    lost = list(dict.fromkeys(lost))
    return f"the model loses: {', '.join(lost)}" if lost else None


def _trl_none(spec: JSON) -> str | None:
    defect = D.call_defect(spec)
    return _defect_text(defect) if defect is not None and defect.id == "none-forwarded" else None


def _inspect_untyped(spec: JSON) -> str | None:
    untyped, itemless = D.inspect_untyped_params(spec), D.inspect_itemless_params(spec)
    found = ([f"[inspect-ref-untyped] shown untyped: {', '.join(untyped)}"] if untyped else []) + (
        [f"[inspect-items-dropped] element/value types lost: {', '.join(itemless)}"] if itemless else []
    )
    return "; ".join(found) or None


def _inspect_refused(spec: JSON) -> str | None:
    refused = D.inspect_refused(spec)
    return f"[inspect-schema-refused] ToolParams refuses {'; '.join(refused[:3])}: the eval's sample errors" if refused else None


def _inspect_keywords(spec: JSON) -> str | None:
    if D.inspect_refused(spec):
        return None  # reported by the refused_schema rule
    dropped = D.inspect_dropped_keywords(spec)
    return f"[inspect-keywords-dropped] not shown: {'; '.join(dropped[:3])}" if dropped else None


def _provider_name(spec: JSON) -> str | None:
    return None if PROVIDER_NAME.match(spec["name"]) else "OpenAI/Anthropic reject function names outside ^[a-zA-Z0-9_-]{1,64}$"


_register("trl", "crash", Severity.RECOMMENDED, "TRL's environment_factory() does not crash on a tool", _trl_crash)
_register("trl", "dropped_tool", Severity.RECOMMENDED, "TRL hands the model every tool", _trl_dropped)
_register("trl", "reserved_name", Severity.RECOMMENDED, "no tool name collides with GRPO's reset/get_reward, the adapter's state or a leading _", _trl_reserved)
_register("trl", "lost_schema", Severity.ADVISORY, "TRL keeps each parameter's type, enum, items, nesting and bounds", _trl_schema)
_register("trl", "none_forwarded", Severity.RECOMMENDED, "TRL does not send null for an optional parameter without a JSON default", _trl_none)
_register("inspect", "lost_type", Severity.ADVISORY, "inspect-openreward keeps each parameter's type ($ref models, tuple and dict element types)", _inspect_untyped)
_register("inspect", "refused_schema", Severity.RECOMMENDED, "inspect-openreward can build every tool (inspect's ToolParams accepts its schema)", _inspect_refused)
_register("inspect", "lost_keywords", Severity.ADVISORY, "inspect-openreward keeps const, exclusive bounds, item counts and a union-shaped top level", _inspect_keywords)
_register("inspect", "provider_name", Severity.ADVISORY, "tool names are accepted by model providers (inspect-openreward passes them through)", _provider_name)

#: Every binding check id, in registration order.
BINDING_CHECKS = tuple(f"binding.{client}.{rule}" for client, rule, _finding in _RULES)

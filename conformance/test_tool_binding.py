"""Tool binding: every tool an episode can call becomes a method the model sees, faithfully (P1, P3–P6, P9).

Per tool (each bound alone, see ``adapter.bind_one``): it is bound, GRPO
exposes it, its Python signature and docstring match the server's schema, and
``transformers.utils.get_json_schema(method)`` — what the chat template shows
the model — agrees with the server's ``input_schema`` aspect by aspect;
calling it with only its required arguments is ``ok: true`` on the server.
Per target: the real ``environment_factory()`` builds, keeps the adapter's
``reset``, and binds the union of tools across tasks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from orsbench.upstream import defects, schema_view
from conformance.adapter import grpo_tool_surface, model_schema, trl_warnings
from conformance.params import ToolCase, targets, tool_cases
from conformance.targets import RequestDelta, SuiteTarget
from orsbench import protocol


def _function(case: ToolCase) -> Callable[..., Any]:
    """The generated method, bound to its adapter instance (fails if TRL generated none)."""
    binding = case.binding
    if binding.error is not None:
        raise AssertionError(f"binding {case.tool!r} raised {type(binding.error).__name__}: {binding.error}")
    assert binding.bound, f"TRL did not bind {case.tool!r}; it warned: {binding.warnings}"
    return binding.function.__get__(binding.instance)


def _squash(text: str) -> str:
    return " ".join(text.split())


# -- what the server declares is what it serves --------------------------------------------------
@pytest.mark.parametrize("target", targets(), indirect=True)
def test_server_serves_declared_tools(target: SuiteTarget) -> None:
    """The known-defect predicates read the scenario in-process; the server must serve exactly that."""
    served, expected = target.served, target.declared
    assert served.tools_over(list(range(len(served.tasks())))) == expected.tools
    assert [sorted(t["name"] for t in listed) for listed in served.task_tools] == [sorted(names) for names in expected.task_tools]


# -- one tool at a time ----------------------------------------------------------------------
@pytest.mark.parametrize("case", tool_cases(defects.exposure_defect), indirect=True)
def test_tool_is_exposed(case: ToolCase) -> None:
    """P3/P4: GRPO's tool collection hands the model a callable for the tool."""
    case.binding.require_exposed()


@pytest.mark.parametrize("case", tool_cases(defects.signature_defect), indirect=True)
def test_tool_is_bound_with_the_schema_signature(case: ToolCase) -> None:
    """P3: TRL generates a method for the tool — never a crash or a silent skip — whose parameters are the schema's:
    required ones first and without defaults, JSON defaults kept."""
    fn = _function(case)
    schema = schema_view.parameters(case.spec.get("input_schema"))
    props, required = schema["properties"], set(schema.get("required") or [])
    params = list(inspect.signature(fn).parameters.values())
    expected = [n for n in props if n in required] + [n for n in props if n not in required]
    assert [p.name for p in params] == expected
    for param in params:
        if param.name in required:
            assert param.default is inspect.Parameter.empty, f"{param.name} is required but has a default"
        else:
            assert param.default is not inspect.Parameter.empty, f"{param.name} is optional but has no default"
            if "default" in props[param.name]:
                assert param.default == props[param.name]["default"]


@pytest.mark.parametrize("case", tool_cases(defects.docstring_defect), indirect=True)
def test_docstring(case: ToolCase) -> None:
    """The model sees the server's tool and parameter descriptions (whitespace aside)."""
    shown = model_schema(_function(case))["function"]
    if case.spec.get("description"):
        assert _squash(shown["description"]) == _squash(case.spec["description"])
    for name, text in schema_view.descriptions(case.spec.get("input_schema")).items():
        assert _squash(shown["parameters"]["properties"][name].get("description", "")) == _squash(text), name


@pytest.mark.parametrize("case", tool_cases(defects.aspect_defect, aspects=schema_view.ASPECTS), indirect=True)
def test_model_schema(case: ToolCase) -> None:
    """P5: ``get_json_schema(method)`` agrees with the server's ``input_schema`` on one aspect."""
    shown = model_schema(_function(case))["function"]["parameters"]
    assert case.aspect is not None
    assert schema_view.view(shown)[case.aspect] == schema_view.view(case.spec.get("input_schema"))[case.aspect]


@pytest.mark.parametrize("case", tool_cases(defects.call_defect), indirect=True)
def test_required_args_call(case: ToolCase, adapters: list[Any]) -> None:
    """P6: the bound method called with only its required arguments reaches the tool: one ``/call``, accepted.

    "Accepted" means neither ``input_validation`` nor ``not_found``; a tool
    that raises by design (``explode``) still counts as reached.
    """
    binding = case.binding
    fn = _function(case)
    adapters.append(binding.instance)
    binding.instance.reset(task_index=case.target.declared.first_task_with(case.tool))
    args = schema_view.required_example(case.spec.get("input_schema"))
    with RequestDelta(case.target) as seen:
        shown = fn(**args)
    assert seen["POST /{env}/call"] == 1, seen.delta
    assert protocol.REASON_INPUT_VALIDATION not in shown and protocol.REASON_NOT_FOUND not in shown, (
        f"{case.tool}({args}) → the model saw {shown!r}"
    )


# -- the real environment_factory -------------------------------------------------------------
def _factory_defect(d: Any) -> defects.Defect | None:
    return defects.factory_defect(d.tools.values())


@pytest.mark.parametrize("target", targets(defect=_factory_defect), indirect=True)
def test_factory_builds_adapter_with_its_own_reset(target: SuiteTarget, new_spec: Callable[..., Any], adapters: list[Any]) -> None:
    """P3/P4: ``environment_factory()`` builds an adapter whose ``reset`` still opens a session."""
    from trl.experimental.openreward.environment import _RolloutEnvironment

    instance = new_spec(target).environment_factory()
    adapters.append(instance)
    assert type(instance).reset is _RolloutEnvironment.reset
    assert instance.reset(task_index=0) == target.served.prompt_text(0)


def _union_default(d: Any) -> defects.Defect | None:
    return defects.union_defect(d.tools.values(), set(d.task_tools[0]) if d.task_tools else set())


@pytest.mark.parametrize("target", targets(defect=_union_default), indirect=True)
def test_factory_binds_union_of_task_tools(target: SuiteTarget, new_spec: Callable[..., Any], adapters: list[Any]) -> None:
    """P1: with default options, every tool some task of the split can call is exposed (the union across tasks)."""
    instance = new_spec(target).environment_factory()
    adapters.append(instance)
    surface = grpo_tool_surface(instance)
    missing = [n for n in target.tools if not callable(surface.get(n))]
    assert not missing, f"not exposed to the model: {missing}"


def _union_probed(d: Any) -> defects.Defect | None:
    return defects.union_defect(d.tools.values(), None)


@pytest.mark.parametrize("target", targets(defect=_union_probed), indirect=True)
def test_factory_binds_union_when_probing_each_kind(target: SuiteTarget, new_spec: Callable[..., Any], adapters: list[Any]) -> None:
    """P1: ``indices=`` naming one task per distinct tool set makes discovery find every tool, without leaking probe sessions."""
    before = target.stats()["active_sessions"]
    with trl_warnings() as warnings:
        instance = new_spec(target, indices=target.declared.distinct_tasks).environment_factory()
    adapters.append(instance)
    surface = grpo_tool_surface(instance)
    assert not [n for n in target.tools if not callable(surface.get(n))], warnings
    assert target.stats()["active_sessions"] == before, "probe sessions were left open"


@pytest.mark.parametrize("target", targets(defect=_factory_defect), indirect=True)
def test_discover_task_tools_false_binds_shared_tools_only(
    target: SuiteTarget, new_spec: Callable[..., Any], adapters: list[Any]
) -> None:
    """``discover_task_tools=False``: no probe session is opened and exactly the shared tools are bound."""
    from trl.experimental.openreward.environment import _RolloutEnvironment

    before = target.stats()["sessions_created"]
    instance = new_spec(target, discover_task_tools=False).environment_factory()
    adapters.append(instance)
    assert target.stats()["sessions_created"] == before
    bound = {n for n in vars(type(instance)) if n not in vars(_RolloutEnvironment) and not n.startswith("__")}
    assert bound == {t["name"] for t in target.served.shared_tools}


# -- P1: a schema conflict across tasks, and a failed probe ----------------------------------------
@pytest.mark.parametrize("target", targets(["schema-conflict"], impls=("mock",)), indirect=True)
def test_schema_conflict_across_tasks_is_warned(target: SuiteTarget, new_spec: Callable[..., Any], adapters: list[Any]) -> None:
    """P1: one task-scoped name with two schemas across probed tasks → a warning naming the tool (first schema kept).

    Mock only: the SDK twin builds task tools from the scenario's tools by name and cannot vary a schema per task.
    """
    with trl_warnings() as warnings:
        instance = new_spec(target, indices=[0, 1]).environment_factory()
    adapters.append(instance)
    assert any("configure" in w and "differing schemas" in w for w in warnings), warnings
    assert list(inspect.signature(type(instance).configure).parameters) == ["self", "level"]


@pytest.mark.parametrize("target", targets(["broken-session"]), indirect=True)
def test_failed_probe_falls_back_to_shared_tools_with_a_warning(
    target: SuiteTarget, new_spec: Callable[..., Any], adapters: list[Any]
) -> None:
    """P1: when the discovery session fails (task 0 cannot start), TRL binds the shared tools and says so."""
    with trl_warnings() as warnings:
        instance = new_spec(target).environment_factory()
    adapters.append(instance)
    assert any("using shared tools only" in w for w in warnings), warnings
    assert callable(grpo_tool_surface(instance).get("ping"))


# -- P9: two specs never share bound methods -----------------------------------------------------
@pytest.mark.parametrize("target", targets(["task-tool"], impls=("mock",)), indirect=True)
def test_two_specs_never_share_bound_methods(
    target: SuiteTarget, serve: Callable[..., SuiteTarget], new_spec: Callable[..., Any], adapters: list[Any]
) -> None:
    """P9: specs for two servers (same tool name, different schemas) get separate classes with their own methods.

    Client-side only, so one implementation suffices.
    """
    other = serve("schema-zoo-index", "mock")
    first = new_spec(target, indices=target.declared.distinct_tasks).environment_factory()
    second = new_spec(other).environment_factory()
    again = new_spec(target, indices=target.declared.distinct_tasks).environment_factory()
    adapters.extend([first, second, again])
    assert type(first) is not type(second) and type(first) is not type(again)
    assert list(inspect.signature(type(first).answer).parameters) == ["self", "value"]
    assert list(inspect.signature(type(second).answer).parameters) == ["self", "word"]
    assert not hasattr(type(second), "add") and hasattr(type(first), "add")
    assert first.reset(task_index=0) == target.served.prompt_text(0)
    assert second.reset(task_index=0) == other.served.prompt_text(0)

"""Discovery checks: health, version, environments, tools and their schemas, splits, routing."""

from __future__ import annotations

import keyword
import re
from collections import Counter
from urllib.parse import urlsplit

from orsbench import protocol
from orsbench.checks.evidence import Evidence, answer, json_of, short
from orsbench.checks.model import CheckOutcome, Severity, failed, not_applicable, passed, skipped, warned
from orsbench.checks.registry import check
from orsbench.schema_examples import schema_problems

#: MCP's tool-name rule (1-64 characters of ``[A-Za-z0-9_./-]``).
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_./-]{1,64}$")


@check(
    "discovery.health",
    severity=Severity.REQUIRED,
    passive=("health",),
    title='GET /health answers 200 {"status": "ok"}',
    probe="discovery",
    spec="§1",
    remediation='Serve GET /health returning 200 with the JSON body {"status": "ok"}; launchers and load balancers poll it.',
)
def health(ev: Evidence) -> CheckOutcome:
    ex = ev.get("health")
    ok, body = json_of(ex)
    if ex is None or ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", None if ex is None else ex.status, ex)
    if not ok or not isinstance(body, dict):
        return failed(f"expected a JSON object, got {short(ex.body)}", short(ex.body), ex)
    if body.get("status") != "ok":
        return warned(f"200 but status is {body.get('status')!r}, not 'ok'", body, ex)
    return passed('200 {"status": "ok"}', body, ex)


@check(
    "discovery.version",
    severity=Severity.ADVISORY,
    passive=("version",),
    title="GET /version names the server version",
    probe="discovery",
    spec="§1",
    remediation='Serve GET /version returning {"version": "<your server version>", "build_sha": null}.',
)
def version(ev: Evidence) -> CheckOutcome:
    ex = ev.get("version")
    ok, body = json_of(ex)
    if ex is None or ex.status != 200 or not ok or not isinstance(body, dict) or not isinstance(body.get("version"), str):
        return failed(f'expected 200 {{"version": str}}, got {answer(ex)}', None if ex is None else ex.status, ex)
    return passed(f"version {body['version']}", body, ex)


@check(
    "discovery.list_environments",
    severity=Severity.REQUIRED,
    passive=("list_environments",),
    title="GET /list_environments lists the environments",
    probe="discovery",
    spec="§1",
    remediation="Serve GET /list_environments returning a JSON array of environment names (the first is the default).",
)
def list_environments(ev: Evidence) -> CheckOutcome:
    ex = ev.get("list_environments")
    ok, body = json_of(ex)
    if ex is None or ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", None if ex is None else ex.status, ex)
    if not ok or not isinstance(body, list) or not body or not all(isinstance(n, str) and n for n in body):
        return failed(f"expected a non-empty JSON array of names, got {short(ex.body)}", short(ex.body), ex)
    lowered = Counter(n.lower() for n in body)
    dupes = [n for n, k in lowered.items() if k > 1]
    if dupes:
        return failed(f"names repeat (compared case-insensitively): {dupes}", body, ex)
    if ev.env and ev.env.lower() not in lowered:
        return failed(f"the environment under test {ev.env!r} is not listed: {body}", body, ex)
    return passed(f"{len(body)} environment(s): {short(body, 80)}", body, ex)


def _tool_listing(ev: Evidence, name: str) -> tuple[CheckOutcome | None, list[dict]]:
    """The ``tools`` array of a ListToolsOutput answer, or a failing outcome saying what was wrong."""
    ex = ev.get(name)
    ok, body = json_of(ex)
    if ex is None or ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", None if ex is None else ex.status, ex), []
    if not ok or not isinstance(body, dict) or not isinstance(body.get("tools"), list):
        return failed(f'expected a JSON object with a "tools" array, got {short(ex.body)}', short(ex.body), ex), []
    problems = []
    for i, spec in enumerate(body["tools"]):
        if not isinstance(spec, dict):
            problems.append(f"tools[{i}] is not an object")
            continue
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            problems.append(f"tools[{i}].name is {spec.get('name')!r}, not a non-empty string")
        if "description" in spec and not isinstance(spec["description"], str):
            problems.append(f"tools[{i}].description is not a string")
        if "input_schema" not in spec:
            problems.append(f"tools[{i}] has no input_schema (null for a tool without input)")
        elif spec["input_schema"] is not None and not isinstance(spec["input_schema"], dict):
            problems.append(f"tools[{i}].input_schema is neither an object nor null")
    if problems:
        return failed("; ".join(problems[:4]), problems, ex), []
    return None, body["tools"]


@check(
    "discovery.tools_listing",
    severity=Severity.REQUIRED,
    passive=("tools",),
    title="GET /{env}/tools is a ListToolsOutput",
    probe="discovery",
    spec="§2.1, §4",
    remediation='Answer GET /{env}/tools with {"tools": [{"name", "description", "input_schema": object|null}, ...]}.',
)
def tools_listing(ev: Evidence) -> CheckOutcome:
    problem, tools = _tool_listing(ev, "tools")
    if problem:
        return problem
    if not tools:
        return failed("the tools array is empty; an environment needs at least one tool", [], ev.get("tools"))
    return passed(f"{len(tools)} tool(s): {', '.join(t['name'] for t in tools)}", [t["name"] for t in tools], ev.get("tools"))


@check(
    "discovery.tools_schema",
    severity=Severity.REQUIRED,
    passive=("tools",),
    title="every input_schema is a valid JSON Schema for an object",
    probe="discovery",
    spec="§2.1, §4",
    remediation="Emit each tool's input_schema as a JSON Schema (2020-12) of type object with local $refs only, or null for no input.",
    requires=("discovery.tools_listing",),
)
def tools_schema(ev: Evidence) -> CheckOutcome:
    _, tools = _tool_listing(ev, "tools")
    bad = {t["name"]: schema_problems(t.get("input_schema")) for t in tools}
    bad = {k: v for k, v in bad.items() if v}
    if bad:
        first = next(iter(bad.items()))
        return failed(f"{len(bad)} tool schema(s) unusable; {first[0]}: {first[1][0]}", bad, ev.get("tools"))
    return passed(f"{len(tools)} schema(s) valid", len(tools))


@check(
    "discovery.tool_names_unique",
    severity=Severity.REQUIRED,
    passive=("tools",),
    title="tool names are unique",
    probe="discovery",
    spec="§4",
    remediation="Give every tool a distinct name; clients bind tools by name and keep only one of each.",
    requires=("discovery.tools_listing",),
)
def tool_names_unique(ev: Evidence) -> CheckOutcome:
    _, tools = _tool_listing(ev, "tools")
    counts = Counter(t["name"] for t in tools)
    dupes = sorted(n for n, k in counts.items() if k > 1)
    if dupes:
        return failed(f"names listed more than once: {dupes}", dupes, ev.get("tools"))
    return passed(f"{len(counts)} distinct name(s)", len(counts))


@check(
    "discovery.tool_names_format",
    severity=Severity.ADVISORY,
    passive=("tools",),
    title="tool and parameter names are portable identifiers",
    probe="discovery",
    spec="§4.1",
    remediation="Name tools and parameters as Python identifiers that are not keywords ([A-Za-z_][A-Za-z0-9_]*, ≤64 chars); TRL skips or crashes on others.",
    requires=("discovery.tools_listing",),
)
def tool_names_format(ev: Evidence) -> CheckOutcome:
    _, tools = _tool_listing(ev, "tools")
    problems = []
    for spec in tools:
        name = spec["name"]
        if not MCP_TOOL_NAME.match(name):
            problems.append(f"tool {name!r} breaks the MCP name rule")
        elif not name.isidentifier() or keyword.iskeyword(name):
            problems.append(f"tool {name!r} is not a Python identifier")
        schema = spec.get("input_schema")
        props = schema.get("properties") if isinstance(schema, dict) else None
        for param in props or {}:
            if not str(param).isidentifier() or keyword.iskeyword(param):
                problems.append(f"parameter {name}.{param} is not a Python identifier")
    if problems:
        return warned("; ".join(problems[:4]), problems, ev.get("tools"))
    return passed("all names are identifiers", len(tools))


@check(
    "discovery.tools_optional_fields",
    severity=Severity.ADVISORY,  # both reference servers omit some; clients default them
    passive=("tools",),
    title="ListToolsOutput carries terminal_tool, supports_score_group, message_block_types",
    probe="discovery",
    spec="§4, §11.17",
    remediation='Include "terminal_tool" (object or null), "supports_score_group" (bool) and "message_block_types" (array) in tool listings.',
    requires=("discovery.tools_listing",),
)
def tools_optional_fields(ev: Evidence) -> CheckOutcome:
    ex = ev.get("tools")
    _, body = json_of(ex)
    missing = [k for k in ("terminal_tool", "supports_score_group", "message_block_types") if k not in body]
    wrong = []
    if "supports_score_group" in body and not isinstance(body["supports_score_group"], (bool, type(None))):
        wrong.append("supports_score_group is not a bool")
    if "message_block_types" in body and not isinstance(body["message_block_types"], (list, type(None))):
        wrong.append("message_block_types is not an array")
    if "terminal_tool" in body and not isinstance(body["terminal_tool"], (dict, type(None))):
        wrong.append("terminal_tool is not an object")
    if wrong:
        return failed("; ".join(wrong), wrong, ex)
    if missing:
        return failed(f"missing: {', '.join(missing)}", missing, ex)
    return passed("all present", {k: body[k] for k in ("terminal_tool", "supports_score_group", "message_block_types")})


@check(
    "discovery.splits",
    severity=Severity.REQUIRED,
    passive=("splits",),
    title="GET /{env}/splits lists named splits of type train|validation|test",
    probe="discovery",
    spec="§2.1, §4",
    remediation='Answer GET /{env}/splits with [{"name": str, "type": "train"|"validation"|"test"}, ...], names unique.',
)
def splits(ev: Evidence) -> CheckOutcome:
    ex = ev.get("splits")
    ok, body = json_of(ex)
    if ex is None or ex.status != 200:
        return failed(f"expected 200, got {answer(ex)}", None if ex is None else ex.status, ex)
    if not ok or not isinstance(body, list) or not body:
        return failed(f"expected a non-empty JSON array, got {short(ex.body)}", short(ex.body), ex)
    problems = []
    for i, item in enumerate(body):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            problems.append(f'[{i}] is not {{"name": str, ...}}: {short(item, 60)}')
        elif item.get("type") not in protocol.SPLIT_TYPES:
            problems.append(f"split {item['name']!r} has type {item.get('type')!r}, not one of {list(protocol.SPLIT_TYPES)}")
    names = [i["name"] for i in body if isinstance(i, dict) and isinstance(i.get("name"), str)]
    dupes = sorted(n for n, k in Counter(names).items() if k > 1)
    if dupes:
        problems.append(f"split names repeat: {dupes}")
    if problems:
        return failed("; ".join(problems[:3]), problems, ex)
    return passed(", ".join(f"{i['name']}:{i['type']}" for i in body), body, ex)


# -- routing ------------------------------------------------------------------------
def _location_path(location: str) -> str:
    parts = urlsplit(location)
    return parts.path + (f"?{parts.query}" if parts.query else "")


@check(
    "routing.default_env_redirect",
    severity=Severity.REQUIRED,
    title="bare paths redirect (308) to the default environment",
    probe="discovery",
    spec="§1.2, §6.2, §11.3",
    remediation="Answer a path whose first segment is not a root route or an environment with 308 and Location: /<first env><path>[?query].",
)
def default_env_redirect(ev: Evidence) -> CheckOutcome:
    bare, query = ev.get("redirect.tools"), ev.get("redirect.query")
    envs_ok, envs = json_of(ev.get("list_environments"))
    default = envs[0] if envs_ok and isinstance(envs, list) and envs and isinstance(envs[0], str) else ev.env
    problems = []
    for ex, route in ((bare, f"/{protocol.TOOLS}"), (query, f"/{protocol.SPLITS}?orsbench=1")):
        if ex is None:
            continue
        location = ex.headers.get("location", "")
        if ex.status != 308:
            problems.append(f"GET {route} answered {answer(ex)}, not 308")
        elif default and _location_path(location).lower() != f"/{default}{route}".lower():
            problems.append(f"GET {route} redirects to {location!r}, not /{default}{route}")
    if problems:
        return failed("; ".join(problems), problems, bare, query)
    if bare is None and query is None:
        return skipped("not probed")
    return passed(f"308 → {bare.headers.get('location') if bare else '?'}", None, bare, query)


@check(
    "routing.env_case_insensitive",
    severity=Severity.ADVISORY,
    title="environment names in paths match case-insensitively",
    probe="discovery",
    spec="§1.2, §11.5",
    remediation="Match the {env} path segment case-insensitively, as the reference server does.",
    requires=("discovery.tools_listing",),
)
def env_case_insensitive(ev: Evidence) -> CheckOutcome:
    ex = ev.get("routing.case")
    if ex is None:
        return not_applicable("the environment name has no letters to change the case of")
    if ex.status == 200:
        return passed("200 with the name's case swapped", ex.status, ex)
    return failed(f"GET {ex.url.split('//', 1)[-1].split('/', 1)[-1]} answered {answer(ex)}", ex.status, ex)


@check(
    "routing.unknown_env",
    severity=Severity.ADVISORY,
    title="an unknown environment in the path is never served as if it existed",
    probe="discovery",
    spec="§1.2, §11.3",
    remediation="Answer /<unknown env>/tools with 308 to the default environment (the reference) or 404, never 200 or 5xx.",
)
def unknown_env(ev: Evidence) -> CheckOutcome:
    ex = ev.get("routing.unknown_env")
    if ex is None:
        return skipped("not probed")
    if ex.status in (307, 308, 404):
        return passed(f"{ex.status}", ex.status, ex)
    return failed(f"expected 308 or 404, got {answer(ex)}", ex.status, ex)

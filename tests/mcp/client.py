#!/usr/bin/env python3
"""An MCP client for Sandcastle's integration tests, on the official Python SDK (`mcp`).

Usage: SANDCASTLE_MCP_CASE='{"url": ..., "token": ...}' python client.py SCENARIO

The case is a JSON object in the environment; the scenario is the first argument (see SCENARIOS at
the end, and README.md). On success the last line on stdout is one JSON object with what the Rust
test checks, and the exit code is 0. On an unmet expectation a message saying what was expected and
what came goes to stderr, and the exit code is 1. Every request has a timeout; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextResourceContents

SDK = f"mcp {version('mcp')}"

READ_TOOLS = [
    "list_previews",
    "get_preview",
    "wait_for_preview",
    "get_logs",
    "get_events",
    "diagnose_preview",
]
WRITE_TOOLS = [
    "create_preview",
    "redeploy",
    "extend",
    "stop",
    "wake",
    "reset",
    "destroy",
    "mint_preview_token",
    "share_preview",
    "revoke_share",
    "get_header_secret",
    "run_tests",
    "refresh_blueprint_data",
]
PREVIEW_TEMPLATE = "sandcastle://previews/{name}"

CALL_TIMEOUT = 60.0  # seconds, for each request (initialize, list, call, read)
SCENARIO_TIMEOUT = 600.0  # seconds, for a whole scenario
PAGE_CAP = 50  # pages followed on a paginated listing


class Failure(Exception):
    """An unmet expectation: what was expected, and what came."""


def expect(condition: bool, expected: str, got: Any = None) -> None:
    if not condition:
        raise Failure(f"expected {expected}; got {_show(got)}")


def _show(value: Any, limit: int = 2000) -> str:
    if isinstance(value, CallToolResult):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


# --- connecting ---------------------------------------------------------------------------------


class StatusLog:
    """The HTTP status of every response, recorded by an httpx2 event hook: the SDK turns a 401
    without a JSON-RPC body into a JSON-RPC error that no longer names the status."""

    def __init__(self) -> None:
        self.statuses: list[int] = []

    async def hook(self, response: httpx2.Response) -> None:
        self.statuses.append(response.status_code)


def _mode(case: dict[str, Any]) -> str:
    # "auto" (the SDK's default) probes `server/discover` (protocol 2026-07-28) and falls back to
    # the initialize handshake; "legacy" goes straight to the handshake.
    return case.get("mode", "auto")


@asynccontextmanager
async def http_client(case: dict[str, Any], *, token: str | None, log: StatusLog | None = None):
    """A connected, initialized `mcp.Client` over Streamable HTTP at case["url"]."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    hooks = {"response": [log.hook]} if log is not None else {}
    # The read timeout is long for the server's GET event stream; each request is bounded by the
    # session's read timeout instead.
    timeout = httpx2.Timeout(CALL_TIMEOUT, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http:
        transport = streamable_http_client(case["url"], http_client=http)
        async with Client(
            transport,
            mode=_mode(case),
            read_timeout_seconds=CALL_TIMEOUT,
            cache=None,  # every listing goes to the server
        ) as client:
            yield client


@asynccontextmanager
async def stdio_client(case: dict[str, Any]):
    """A connected, initialized `mcp.Client` to `<case.sandcastle> mcp` over stdin/stdout."""
    env = dict(os.environ)
    env["SANDCASTLE_SERVER"] = case["server"]
    # Without a token in the case, the server is started without one.
    env.pop("SANDCASTLE_TOKEN", None)
    if case.get("token") is not None:
        env["SANDCASTLE_TOKEN"] = case["token"]
    args = ["mcp", "--write"] if case.get("write") else ["mcp"]
    params = StdioServerParameters(command=case["sandcastle"], args=args, env=env)
    async with Client(params, mode=_mode(case), read_timeout_seconds=CALL_TIMEOUT, cache=None) as client:
        yield client


# --- helpers ------------------------------------------------------------------------------------


async def list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise Failure(f"expected tools/list to end within {PAGE_CAP} pages; it kept returning a cursor")


async def list_resources(client: Client) -> list[Any]:
    resources: list[Any] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await client.list_resources(cursor=cursor)
        resources.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return resources
    raise Failure(f"expected resources/list to end within {PAGE_CAP} pages; it kept returning a cursor")


def check_tools(tools: list[Any], writes: bool) -> list[str]:
    """The listed tool names, in order, once each, exactly the read (and write) tools."""
    names = [tool.name for tool in tools]
    wanted = READ_TOOLS + (WRITE_TOOLS if writes else [])
    expect(len(names) == len(set(names)), "each tool listed once", names)
    expect(
        sorted(names) == sorted(wanted),
        f"exactly the {len(wanted)} tools {sorted(wanted)} ({'writes enabled' if writes else 'read-only'})",
        names,
    )
    for tool in tools:
        expect(
            isinstance(tool.input_schema, dict) and tool.input_schema.get("type") == "object",
            f"tool {tool.name} to have an inputSchema of type object",
            tool.input_schema,
        )
        annotations = tool.annotations
        expect(annotations is not None, f"tool {tool.name} to carry annotations", None)
        if tool.name in READ_TOOLS:
            expect(annotations.read_only_hint is True, f"read tool {tool.name} to have readOnlyHint true", _ann(tool))
    by_name = {tool.name: tool for tool in tools}
    if "destroy" in by_name:
        expect(
            by_name["destroy"].annotations.destructive_hint is True,
            "destroy to have destructiveHint true",
            _ann(by_name["destroy"]),
        )
    return names


def _ann(tool: Any) -> dict[str, Any] | None:
    if tool.annotations is None:
        return None
    return tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)


def first_text(result: CallToolResult) -> str | None:
    for block in result.content:
        if getattr(block, "type", None) == "text":
            return block.text
    return None


async def call(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    *,
    timeout: float = CALL_TIMEOUT,
    progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
) -> CallToolResult:
    return await client.call_tool(tool, arguments, read_timeout_seconds=timeout, progress_callback=progress)


async def call_ok(client: Client, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    """Call a tool that must succeed; return its structuredContent (a JSON object), having checked
    that content[0] is a text block holding the same JSON."""
    result = await call(client, tool, arguments, **kwargs)
    expect(not result.is_error, f"{tool} {_show(arguments)} to succeed", result)
    structured = result.structured_content
    expect(isinstance(structured, dict), f"{tool} to return structuredContent as a JSON object", result)
    expect(
        bool(result.content) and getattr(result.content[0], "type", None) == "text",
        f"{tool}'s content[0] to be a text block",
        result,
    )
    try:
        echoed = json.loads(result.content[0].text)
    except ValueError:
        echoed = None
    expect(echoed == structured, f"{tool}'s content[0].text to hold the same JSON as structuredContent", result)
    return structured


async def call_refused(client: Client, tool: str, arguments: dict[str, Any], code: str) -> str:
    """Call a tool that must refuse with `code: message`; return the text."""
    result = await call(client, tool, arguments)
    text = first_text(result)
    expect(
        result.is_error and text is not None and text.startswith(f"{code}: "),
        f"{tool} {_show(arguments)} to be refused (isError) with text starting '{code}: '",
        result,
    )
    return text


def strings(value: Any):
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def connect_error(exc: BaseException, log: StatusLog) -> str:
    """One line for a failed connection: the SDK's exceptions, and the HTTP statuses seen."""
    parts = [f"{type(leaf).__name__}: {leaf}" for leaf in leaves(exc)]
    return f"{'; '.join(parts)} (HTTP statuses: {log.statuses})"


def leaves(exc: BaseException) -> list[BaseException]:
    group = getattr(exc, "exceptions", None)
    if isinstance(exc, BaseException) and isinstance(group, tuple):
        return [leaf for inner in group for leaf in leaves(inner)]
    return [exc]


# --- scenarios ----------------------------------------------------------------------------------


async def scenario_read(case: dict[str, Any]) -> dict[str, Any]:
    preview = case["preview"]
    secret = case["secretValue"]
    writes = bool(case.get("writes", False))
    seen: list[tuple[str, Any]] = []  # every result, to look for the secret in

    async with http_client(case, token=case["token"]) as client:
        tools = await list_tools(client)
        names = check_tools(tools, writes)
        annotations = {tool.name: _ann(tool) for tool in tools}

        listed = await call_ok(client, "list_previews", {})
        seen.append(("list_previews", listed))
        items = listed.get("items")
        expect(isinstance(items, list), "list_previews to return {items: [...], continue}", listed)
        expect("continue" in listed, "list_previews to return a `continue` field (the next page's token, or null)", listed)
        item_names = [item.get("name") for item in items if isinstance(item, dict)]
        expect(preview in item_names, f"list_previews items to include {preview!r}", item_names)

        got = await call_ok(client, "get_preview", {"name": preview})
        seen.append(("get_preview", got))
        expect(got.get("name") == preview, f"get_preview to return the preview named {preview!r}", got)
        expect(got.get("phase") == "Ready", f"get_preview {preview!r} to be in phase Ready", got)
        for field in ("url", "namespace"):
            expect(field in got, f"get_preview to return a preview object with `{field}`", got)

        progress: list[dict[str, Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append({"progress": value, "total": total, "message": message})

        waited = await call_ok(
            client, "wait_for_preview", {"name": preview, "timeout": "30s"}, timeout=90.0, progress=on_progress
        )
        seen.append(("wait_for_preview", waited))
        expect(waited.get("outcome") == "ready", f"wait_for_preview {preview!r} to end with outcome ready", waited)
        expect(
            isinstance(waited.get("preview"), dict) and waited["preview"].get("name") == preview,
            "wait_for_preview to return the preview",
            waited,
        )

        logs = await call_ok(client, "get_logs", {"name": preview})
        seen.append(("get_logs", logs))
        entries = logs.get("entries")
        expect(isinstance(entries, list) and entries, "get_logs to return a non-empty list of entries", logs)
        lines: list[str] = []
        for entry in entries:
            expect(
                isinstance(entry, dict)
                and {"pod", "container", "lines"} <= entry.keys()
                and isinstance(entry["lines"], list),
                "each log entry to be {pod, container, lines: [...]}",
                entry,
            )
            lines.extend(entry["lines"])
        expect(any(case["logLine"] in line for line in lines), f"a log line containing {case['logLine']!r}", lines)
        redacted = logs.get("redacted")
        expect(
            isinstance(redacted, (int, float)) and not isinstance(redacted, bool) and redacted >= 1,
            "get_logs to report redacted >= 1",
            logs,
        )
        expect(isinstance(logs.get("truncated"), bool), "get_logs to report truncated as a boolean", logs)

        events = await call_ok(client, "get_events", {"name": preview})
        seen.append(("get_events", events))
        for key in ("preview", "namespace"):
            expect(isinstance(events.get(key), list), f"get_events to return a list `{key}`", events)
            for event in events[key]:
                expect(
                    isinstance(event, dict) and {"type", "reason"} <= event.keys(),
                    "each event to be an object {time, type, reason, note, object}",
                    event,
                )

        diagnosis = await call_ok(client, "diagnose_preview", {"name": preview})
        seen.append(("diagnose_preview", diagnosis))
        expect(diagnosis.get("ready") is True, f"diagnose_preview {preview!r} to say ready: true", diagnosis)
        expect(isinstance(diagnosis.get("summary"), str), "diagnose_preview to carry a summary string", diagnosis)
        for key in ("failing", "warnings", "logs"):
            expect(isinstance(diagnosis.get(key), list), f"diagnose_preview to carry a list `{key}`", diagnosis)

        templates = await client.list_resource_templates()
        template_uris = [template.uri_template for template in templates.resource_templates]
        expect(
            PREVIEW_TEMPLATE in template_uris, f"resources/templates/list to include {PREVIEW_TEMPLATE}", template_uris
        )

        uri = f"sandcastle://previews/{preview}"
        read = await client.read_resource(uri)
        seen.append(("resources/read", dump(read)))
        expect(len(read.contents) == 1, f"resources/read {uri} to return one content", dump(read))
        content = read.contents[0]
        expect(isinstance(content, TextResourceContents), f"resources/read {uri} to return text", dump(read))
        expect(
            content.mime_type == "application/json",
            f"resources/read {uri} to have mimeType application/json",
            dump(read),
        )
        try:
            resource = json.loads(content.text)
        except ValueError:
            resource = None
        expect(
            isinstance(resource, dict) and resource.get("name") == preview,
            f"resources/read {uri} to hold the preview object named {preview!r}",
            content.text,
        )

        resources = await list_resources(client)
        resource_uris = [r.uri for r in resources]
        expect(uri in resource_uris, f"resources/list to include {uri}", resource_uris)

        missing = await call_refused(client, "get_preview", {"name": "no-such-preview"}, "preview_not_found")

        latency: dict[str, list[float]] = {"get_preview": [], "list_previews": []}
        for _ in range(10):
            for tool, arguments in (("get_preview", {"name": preview}), ("list_previews", {})):
                start = time.perf_counter()
                result = await call(client, tool, arguments)
                latency[tool].append(round((time.perf_counter() - start) * 1000, 3))
                expect(not result.is_error, f"{tool} to succeed on every timed call", result)

        protocol = client.protocol_version

    for label, value in seen:
        leaked = [s for s in strings(value) if secret in s]
        expect(not leaked, f"the secret value never to appear in the {label} result", leaked)

    return {
        "sdk": SDK,
        "protocolVersion": protocol,
        "tools": names,
        "annotations": annotations,
        "progress": progress,
        "notFound": missing,
        "latencyMs": latency,
    }


async def scenario_unauthenticated(case: dict[str, Any]) -> dict[str, Any]:
    log = StatusLog()
    # case.token, if given, is a wrong token to send; without it no Authorization header is sent.
    token = case.get("token")
    try:
        async with http_client(case, token=token, log=log) as client:
            await client.list_tools()
    except Exception as exc:  # noqa: BLE001 - whatever the SDK raises for the refused handshake
        error = connect_error(exc, log)
        expect(401 in log.statuses, "the refused connection to have been answered with HTTP 401", error)
        return {"sdk": SDK, "refused": True, "status": 401, "error": f"HTTP 401: {error}"}
    raise Failure(
        f"expected the connection {'with a wrong token' if token else 'without a token'} to be refused with "
        f"HTTP 401; it was accepted and tools/list answered (HTTP statuses: {log.statuses})"
    )


async def scenario_write(case: dict[str, Any]) -> dict[str, Any]:
    name = case["name"]
    async with http_client(case, token=case["token"]) as client:
        names = check_tools(await list_tools(client), writes=True)

        arguments = {
            "blueprint": case["blueprint"],
            "repository": case["repository"],
            "commit": case["commit"],
            "name": name,
            "idempotencyKey": case["idempotencyKey"],
            "ttl": "2h",
        }
        created = await call_ok(client, "create_preview", arguments)
        expect(created.get("name") == name, f"create_preview to create the preview named {name!r}", created)
        again = await call_ok(client, "create_preview", arguments)
        expect(again.get("name") == name, f"create_preview again (same idempotencyKey) to answer {name!r}", again)

        waited = await call_ok(client, "wait_for_preview", {"name": name, "timeout": "120s"}, timeout=180.0)
        expect(waited.get("outcome") == "ready", f"wait_for_preview {name!r} to end with outcome ready", waited)

        extended = await call_ok(client, "extend", {"name": name, "duration": "1h"})

        shared = await call_ok(client, "share_preview", {"name": name, "expiresIn": "30m", "label": "review"})
        link = shared.get("url")
        expect(
            isinstance(link, str) and "/.sandcastle/share/" in link and shared.get("label") == "review",
            "share_preview to answer the link (…/.sandcastle/share/…) and its label",
            shared,
        )
        listed = await call_ok(client, "get_preview", {"name": name})
        ids = [s.get("id") for s in listed.get("shares", [])]
        expect(ids == [shared.get("id")], "get_preview to list the link by its id", listed)
        expect(link.rsplit("/", 1)[-1] not in json.dumps(listed), "get_preview not to show the link itself", listed)
        revoked = await call_ok(client, "revoke_share", {"name": name, "id": shared["id"]})
        expect(not revoked.get("shares"), "revoke_share to answer the preview without the link", revoked)
        secret = await call_ok(client, "get_header_secret", {"name": name})
        expect(
            secret.get("header") == "x-sandcastle-preview-secret" and len(secret.get("value", "")) == 64,
            "get_header_secret to answer the header and a 64-hex-digit secret",
            secret,
        )

        asked = await call_ok(client, "destroy", {"name": name})
        token = asked.get("confirm")
        expect(isinstance(token, str) and token, "destroy without confirm to return a `confirm` token", asked)
        expect(
            isinstance(asked.get("expiresInSeconds"), int) and asked["expiresInSeconds"] > 0,
            "destroy without confirm to say when the token expires (expiresInSeconds)",
            asked,
        )
        still = await call_ok(client, "get_preview", {"name": name})
        expect(still.get("phase") != "Removed", f"{name!r} still there after destroy without confirm", still)

        await call_refused(client, "destroy", {"name": name, "confirm": "bogus"}, "confirmation_invalid")

        destroyed = await call_ok(client, "destroy", {"name": name, "confirm": token})
        expect(destroyed.get("name") == name, f"destroy with the token to return the preview {name!r}", destroyed)

    return {
        "sdk": SDK,
        "tools": names,
        "created": name,
        "confirm": token,
        "extended": extended,
        "shared": {"id": shared.get("id"), "expiresAt": shared.get("expiresAt")},
        "destroyed": destroyed,
    }


async def scenario_ask_destroy(case: dict[str, Any]) -> dict[str, Any]:
    async with http_client(case, token=case["token"]) as client:
        asked = await call_ok(client, "destroy", {"name": case["name"]})
    token = asked.get("confirm")
    expect(isinstance(token, str) and token, "destroy without confirm to return a `confirm` token", asked)
    return {"sdk": SDK, "confirm": token, "expiresInSeconds": asked.get("expiresInSeconds")}


async def call_outcome(case: dict[str, Any], tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call, reported without judging it. A JSON-RPC error (rather than a tool result)
    comes back as `rpcError` with `isError` null, so the Rust test can tell the two apart."""
    async with http_client(case, token=case["token"]) as client:
        try:
            result = await call(client, tool, arguments)
        except MCPError as exc:
            error = {"code": exc.code, "message": exc.message, "data": exc.data}
            return {"sdk": SDK, "isError": None, "text": None, "structured": None, "rpcError": error}
    return {
        "sdk": SDK,
        "isError": result.is_error,
        "text": first_text(result),
        "structured": result.structured_content,
    }


async def scenario_confirm_destroy(case: dict[str, Any]) -> dict[str, Any]:
    return await call_outcome(case, "destroy", {"name": case["name"], "confirm": case["confirm"]})


async def scenario_call(case: dict[str, Any]) -> dict[str, Any]:
    return await call_outcome(case, case["tool"], case.get("arguments") or {})


async def scenario_tools(case: dict[str, Any]) -> dict[str, Any]:
    async with http_client(case, token=case["token"]) as client:
        tools = await list_tools(client)
    return {
        "sdk": SDK,
        "tools": [tool.name for tool in tools],
        "annotations": {tool.name: _ann(tool) for tool in tools},
    }


async def scenario_stdio(case: dict[str, Any]) -> dict[str, Any]:
    preview = case["preview"]
    async with stdio_client(case) as client:
        tools = [tool.name for tool in await list_tools(client)]
        expect(set(READ_TOOLS) <= set(tools), f"the read tools {READ_TOOLS} over stdio", tools)
        got = await call_ok(client, "get_preview", {"name": preview})
        expect(got.get("name") == preview, f"get_preview over stdio to return the preview named {preview!r}", got)
        protocol = client.protocol_version
    return {"sdk": SDK, "protocolVersion": protocol, "tools": tools, "name": got.get("name"), "phase": got.get("phase")}


async def scenario_stdio_call(case: dict[str, Any]) -> dict[str, Any]:
    """One tool call through `<sandcastle> mcp` (with `--write` when the case says `write`),
    reported without judging it."""
    async with stdio_client(case) as client:
        result = await call(client, case["tool"], case.get("arguments") or {})
    return {
        "sdk": SDK,
        "isError": result.is_error,
        "text": first_text(result),
        "structured": result.structured_content,
    }


async def scenario_stdio_refused(case: dict[str, Any]) -> dict[str, Any]:
    """`<sandcastle> mcp` started without a token must refuse the connection; what the SDK said."""
    try:
        async with stdio_client(case) as client:
            await client.list_tools()
    except Exception as exc:  # noqa: BLE001 - whatever the SDK raises for the refused session
        error = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves(exc))
        return {"sdk": SDK, "refused": True, "error": error}
    raise Failure("expected the stdio server without a token to refuse the session; tools/list answered")


SCENARIOS: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "read": scenario_read,
    "unauthenticated": scenario_unauthenticated,
    "write": scenario_write,
    "ask-destroy": scenario_ask_destroy,
    "confirm-destroy": scenario_confirm_destroy,
    "call": scenario_call,
    "tools": scenario_tools,
    "stdio": scenario_stdio,
    "stdio-call": scenario_stdio_call,
    "stdio-refused": scenario_stdio_refused,
}


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        print(f"usage: SANDCASTLE_MCP_CASE='{{...}}' {sys.argv[0]} {'|'.join(SCENARIOS)}", file=sys.stderr)
        return 2
    scenario = sys.argv[1]
    try:
        case = json.loads(os.environ["SANDCASTLE_MCP_CASE"])
    except (KeyError, ValueError) as exc:
        print(f"client.py {scenario}: SANDCASTLE_MCP_CASE must hold a JSON object: {exc}", file=sys.stderr)
        return 2
    if not isinstance(case, dict):
        print(f"client.py {scenario}: SANDCASTLE_MCP_CASE must hold a JSON object", file=sys.stderr)
        return 2

    limit = float(case.get("timeoutSeconds", SCENARIO_TIMEOUT))

    async def run() -> dict[str, Any]:
        with anyio.fail_after(limit):
            return await SCENARIOS[scenario](case)

    try:
        output = anyio.run(run)
    except BaseException as exc:  # noqa: BLE001 - every way out is reported, then exit 1
        failures = [leaf for leaf in leaves(exc) if isinstance(leaf, Failure)]
        if failures:
            for failure in failures:
                print(f"client.py {scenario} ({SDK}): {failure}", file=sys.stderr)
        elif isinstance(exc, TimeoutError):
            print(
                f"client.py {scenario} ({SDK}): expected the scenario to finish within {limit:g}s; it did not",
                file=sys.stderr,
            )
        else:
            summary = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves(exc))
            if all(isinstance(leaf, KeyError) for leaf in leaves(exc)):
                summary = f"SANDCASTLE_MCP_CASE lacks {summary.removeprefix('KeyError: ')}"
            traceback.print_exception(exc, file=sys.stderr)
            print(f"client.py {scenario} ({SDK}): failed with an error: {summary}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

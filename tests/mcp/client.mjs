#!/usr/bin/env node
// An MCP client for Sandcastle's integration tests, on the official TypeScript SDK
// (@modelcontextprotocol/sdk), as plain ESM JavaScript.
//
// Usage: SANDCASTLE_MCP_CASE='{"url": ..., "token": ...}' node client.mjs SCENARIO
//
// The case is a JSON object in the environment; the scenario is the first argument (see SCENARIOS
// at the end, and README.md). On success the last line on stdout is one JSON object with what the
// Rust test checks, and the exit code is 0. On an unmet expectation a message saying what was
// expected and what came goes to stderr, and the exit code is 1. Every request has a timeout;
// nothing sleeps.

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const SDK = `@modelcontextprotocol/sdk ${sdkVersion()}`;

const READ_TOOLS = ['list_previews', 'get_preview', 'wait_for_preview', 'get_logs', 'get_events', 'diagnose_preview'];
const WRITE_TOOLS = [
  'create_preview', 'redeploy', 'extend', 'stop', 'wake', 'reset', 'destroy', 'mint_preview_token',
  'share_preview', 'revoke_share', 'get_header_secret', 'run_tests', 'refresh_blueprint_data',
];
const PREVIEW_TEMPLATE = 'sandcastle://previews/{name}';

const CALL_TIMEOUT_MS = 60_000; // for each request (initialize, list, call, read)
const SCENARIO_TIMEOUT_MS = 600_000; // for a whole scenario
const PAGE_CAP = 50; // pages followed on a paginated listing

class Failure extends Error {}

function expect(condition, expected, got) {
  if (!condition) throw new Failure(`expected ${expected}; got ${show(got)}`);
}

function show(value, limit = 2000) {
  let text;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length <= limit ? text : `${text.slice(0, limit)}... (${text.length} characters)`;
}

function sdkVersion() {
  // The package exports no ./package.json; find it beside the module this script imports.
  let url;
  try {
    url = new URL('../../../package.json', import.meta.resolve('@modelcontextprotocol/sdk/client/index.js'));
  } catch {
    url = new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url);
  }
  return JSON.parse(readFileSync(url, 'utf8')).version;
}

// --- connecting --------------------------------------------------------------------------------

async function connect(c, token) {
  const headers = token === undefined || token === null ? {} : { Authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(new URL(c.url), { requestInit: { headers } });
  const client = new Client({ name: 'sandcastle-tests', version: '0' });
  await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
  return { client, transport };
}

async function disconnect({ client, transport }) {
  try {
    await transport.terminateSession(); // DELETE the session, as the Python SDK does on exit
  } catch (error) {
    console.error(`client.mjs: ending the session failed (ignored): ${error.message}`);
  }
  await client.close();
}

// --- helpers -----------------------------------------------------------------------------------

async function paginate(fetchPage, key, what) {
  const all = [];
  let cursor;
  for (let i = 0; i < PAGE_CAP; i++) {
    const page = await fetchPage(cursor === undefined ? {} : { cursor });
    all.push(...page[key]);
    cursor = page.nextCursor;
    if (cursor === undefined || cursor === null) return all;
  }
  throw new Failure(`expected ${what} to end within ${PAGE_CAP} pages; it kept returning a cursor`);
}

const listTools = (client) => paginate((p) => client.listTools(p, { timeout: CALL_TIMEOUT_MS }), 'tools', 'tools/list');
const listResources = (client) =>
  paginate((p) => client.listResources(p, { timeout: CALL_TIMEOUT_MS }), 'resources', 'resources/list');
const listTemplates = (client) =>
  paginate(
    (p) => client.listResourceTemplates(p, { timeout: CALL_TIMEOUT_MS }),
    'resourceTemplates',
    'resources/templates/list',
  );

function checkTools(tools, writes) {
  const names = tools.map((tool) => tool.name);
  const wanted = [...READ_TOOLS, ...(writes ? WRITE_TOOLS : [])].sort();
  expect(new Set(names).size === names.length, 'each tool listed once', names);
  expect(
    show([...names].sort()) === show(wanted),
    `exactly the ${wanted.length} tools ${show(wanted)} (${writes ? 'writes enabled' : 'read-only'})`,
    names,
  );
  for (const tool of tools) {
    expect(tool.inputSchema?.type === 'object', `tool ${tool.name} to have an inputSchema of type object`, tool.inputSchema);
    expect(tool.annotations, `tool ${tool.name} to carry annotations`, tool);
    if (READ_TOOLS.includes(tool.name)) {
      expect(tool.annotations.readOnlyHint === true, `read tool ${tool.name} to have readOnlyHint true`, tool.annotations);
    }
    if (tool.name === 'destroy') {
      expect(tool.annotations.destructiveHint === true, 'destroy to have destructiveHint true', tool.annotations);
    }
  }
  return names;
}

function firstText(result) {
  return (result.content ?? []).find((block) => block.type === 'text')?.text ?? null;
}

function call(client, name, args, { timeout = CALL_TIMEOUT_MS, onprogress } = {}) {
  const options = { timeout };
  if (onprogress) options.onprogress = onprogress; // makes the SDK send a progressToken
  return client.callTool({ name, arguments: args }, undefined, options);
}

// A tool call that must succeed: its structuredContent (a JSON object), checked against content[0].
async function callOk(client, name, args, options) {
  const result = await call(client, name, args, options);
  expect(!result.isError, `${name} ${show(args)} to succeed`, result);
  const structured = result.structuredContent;
  expect(structured && typeof structured === 'object' && !Array.isArray(structured), `${name} to return structuredContent as a JSON object`, result);
  expect(result.content?.[0]?.type === 'text', `${name}'s content[0] to be a text block`, result);
  let echoed;
  try {
    echoed = JSON.parse(result.content[0].text);
  } catch {
    echoed = undefined;
  }
  expect(deepEqual(echoed, structured), `${name}'s content[0].text to hold the same JSON as structuredContent`, result);
  return structured;
}

async function callRefused(client, name, args, code) {
  const result = await call(client, name, args);
  const text = firstText(result);
  expect(
    result.isError === true && typeof text === 'string' && text.startsWith(`${code}: `),
    `${name} ${show(args)} to be refused (isError) with text starting '${code}: '`,
    result,
  );
  return text;
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

// Every string in a JSON value, keys included.
function* strings(value) {
  if (typeof value === 'string') {
    yield value;
  } else if (Array.isArray(value)) {
    for (const item of value) yield* strings(item);
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      yield key;
      yield* strings(item);
    }
  }
}

// --- scenarios ---------------------------------------------------------------------------------

async function scenarioRead(c) {
  const preview = c.preview;
  const writes = Boolean(c.writes);
  const seen = []; // every result, to look for the secret in
  const connection = await connect(c, c.token);
  const { client } = connection;
  let output;
  try {
    const tools = await listTools(client);
    const names = checkTools(tools, writes);

    const listed = await callOk(client, 'list_previews', {});
    seen.push(['list_previews', listed]);
    expect(Array.isArray(listed.items), 'list_previews to return {items: [...], continue}', listed);
    expect('continue' in listed, 'list_previews to return a `continue` field', listed);
    const itemNames = listed.items.map((item) => item?.name);
    expect(itemNames.includes(preview), `list_previews items to include ${show(preview)}`, itemNames);

    const got = await callOk(client, 'get_preview', { name: preview });
    seen.push(['get_preview', got]);
    expect(got.name === preview, `get_preview to return the preview named ${show(preview)}`, got);
    expect(got.phase === 'Ready', `get_preview ${show(preview)} to be in phase Ready`, got);
    for (const field of ['url', 'namespace']) {
      expect(field in got, `get_preview to return a preview object with \`${field}\``, got);
    }

    const progress = [];
    const waited = await callOk(
      client,
      'wait_for_preview',
      { name: preview, timeout: '30s' },
      { timeout: 90_000, onprogress: (p) => progress.push(p) },
    );
    seen.push(['wait_for_preview', waited]);
    expect(waited.outcome === 'ready', `wait_for_preview ${show(preview)} to end with outcome ready`, waited);
    expect(waited.preview?.name === preview, 'wait_for_preview to return the preview', waited);

    const logs = await callOk(client, 'get_logs', { name: preview });
    seen.push(['get_logs', logs]);
    expect(Array.isArray(logs.entries) && logs.entries.length > 0, 'get_logs to return a non-empty list of entries', logs);
    const lines = [];
    for (const entry of logs.entries) {
      expect(
        entry && typeof entry === 'object' && 'pod' in entry && 'container' in entry && Array.isArray(entry.lines),
        'each log entry to be {pod, container, lines: [...]}',
        entry,
      );
      lines.push(...entry.lines);
    }
    expect(lines.some((line) => line.includes(c.logLine)), `a log line containing ${show(c.logLine)}`, lines);
    expect(typeof logs.redacted === 'number' && logs.redacted >= 1, 'get_logs to report redacted >= 1', logs);
    expect(typeof logs.truncated === 'boolean', 'get_logs to report truncated as a boolean', logs);

    const events = await callOk(client, 'get_events', { name: preview });
    seen.push(['get_events', events]);
    for (const key of ['preview', 'namespace']) {
      expect(Array.isArray(events[key]), `get_events to return a list \`${key}\``, events);
      for (const event of events[key]) {
        expect(
          event && typeof event === 'object' && 'type' in event && 'reason' in event,
          'each event to be an object {time, type, reason, note, object}',
          event,
        );
      }
    }

    const diagnosis = await callOk(client, 'diagnose_preview', { name: preview });
    seen.push(['diagnose_preview', diagnosis]);
    expect(diagnosis.ready === true, `diagnose_preview ${show(preview)} to say ready: true`, diagnosis);
    expect(typeof diagnosis.summary === 'string', 'diagnose_preview to carry a summary string', diagnosis);
    for (const key of ['failing', 'warnings', 'logs']) {
      expect(Array.isArray(diagnosis[key]), `diagnose_preview to carry a list \`${key}\``, diagnosis);
    }

    const templates = (await listTemplates(client)).map((t) => t.uriTemplate);
    expect(templates.includes(PREVIEW_TEMPLATE), `resources/templates/list to include ${PREVIEW_TEMPLATE}`, templates);

    const uri = `sandcastle://previews/${preview}`;
    const read = await client.readResource({ uri }, { timeout: CALL_TIMEOUT_MS });
    seen.push(['resources/read', read]);
    expect(read.contents.length === 1, `resources/read ${uri} to return one content`, read);
    const [content] = read.contents;
    expect(typeof content.text === 'string', `resources/read ${uri} to return text`, read);
    expect(content.mimeType === 'application/json', `resources/read ${uri} to have mimeType application/json`, read);
    let resource;
    try {
      resource = JSON.parse(content.text);
    } catch {
      resource = undefined;
    }
    expect(resource?.name === preview, `resources/read ${uri} to hold the preview object named ${show(preview)}`, content.text);

    const resourceUris = (await listResources(client)).map((r) => r.uri);
    expect(resourceUris.includes(uri), `resources/list to include ${uri}`, resourceUris);

    const notFound = await callRefused(client, 'get_preview', { name: 'no-such-preview' }, 'preview_not_found');

    for (const [label, value] of seen) {
      const leaked = [...strings(value)].filter((s) => s.includes(c.secretValue));
      expect(leaked.length === 0, `the secret value never to appear in the ${label} result`, leaked);
    }

    const annotations = Object.fromEntries(tools.map((tool) => [tool.name, tool.annotations ?? null]));
    output = { sdk: SDK, protocolVersion: connection.transport.protocolVersion ?? null, tools: names, annotations, progress, notFound };
  } finally {
    await disconnect(connection);
  }
  return output;
}

async function scenarioTools(c) {
  const connection = await connect(c, c.token);
  try {
    const tools = await listTools(connection.client);
    return {
      sdk: SDK,
      tools: tools.map((tool) => tool.name),
      annotations: Object.fromEntries(tools.map((tool) => [tool.name, tool.annotations ?? null])),
    };
  } finally {
    await disconnect(connection);
  }
}

async function scenarioUnauthenticated(c) {
  // c.token, if given, is a wrong token to send; without it no Authorization header is sent.
  let connection;
  try {
    connection = await connect(c, c.token);
  } catch (error) {
    // Without an authProvider the SDK throws StreamableHTTPError with the HTTP status as `code`.
    const status = error instanceof StreamableHTTPError ? error.code : undefined;
    expect(status === 401, 'the refused connection to have been answered with HTTP 401', `${error.name}: ${error.message} (code ${error.code})`);
    return { sdk: SDK, refused: true, status, error: `HTTP ${status}: ${error.message}` };
  }
  await disconnect(connection);
  throw new Failure(`expected the connection ${c.token ? 'with a wrong token' : 'without a token'} to be refused with HTTP 401; it was accepted`);
}

const SCENARIOS = {
  read: scenarioRead,
  tools: scenarioTools,
  unauthenticated: scenarioUnauthenticated,
};
const NEEDS = {
  read: ['url', 'token', 'preview', 'logLine', 'secretValue'],
  tools: ['url', 'token'],
  unauthenticated: ['url'],
};

async function main() {
  const scenario = process.argv[2];
  if (process.argv.length !== 3 || !Object.hasOwn(SCENARIOS, scenario)) {
    console.error(`usage: SANDCASTLE_MCP_CASE='{...}' node client.mjs ${Object.keys(SCENARIOS).join('|')}`);
    return 2;
  }
  let c;
  try {
    c = JSON.parse(process.env.SANDCASTLE_MCP_CASE ?? '');
  } catch (error) {
    console.error(`client.mjs ${scenario}: SANDCASTLE_MCP_CASE must hold a JSON object: ${error.message}`);
    return 2;
  }
  if (!c || typeof c !== 'object' || Array.isArray(c)) {
    console.error(`client.mjs ${scenario}: SANDCASTLE_MCP_CASE must hold a JSON object`);
    return 2;
  }
  const missing = NEEDS[scenario].filter((key) => !Object.hasOwn(c, key));
  if (missing.length > 0) {
    console.error(`client.mjs ${scenario}: SANDCASTLE_MCP_CASE lacks ${missing.join(', ')}`);
    return 2;
  }
  const limit = Number(c.timeoutSeconds ?? SCENARIO_TIMEOUT_MS / 1000) * 1000;
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`expected the scenario to finish within ${limit / 1000}s; it did not`)), limit);
  });
  try {
    const output = await Promise.race([SCENARIOS[scenario](c), deadline]);
    await new Promise((resolve) => process.stdout.write(`${JSON.stringify(output)}\n`, resolve));
    return 0;
  } catch (error) {
    if (error instanceof Failure) {
      console.error(`client.mjs ${scenario} (${SDK}): ${error.message}`);
    } else {
      console.error(error);
      console.error(`client.mjs ${scenario} (${SDK}): failed with an error: ${error?.name}: ${error?.message}${error?.cause ? ` (cause: ${error.cause.message ?? error.cause})` : ''}`);
    }
    return 1;
  } finally {
    clearTimeout(timer);
  }
}

// Exit explicitly: an event stream the server keeps open must not keep the process alive.
process.exit(await main());

// Interop: the official TypeScript SDK client, the way real clients connect, against the MCP
// reference servers (everything, memory, filesystem), once directly and once through
// mcp-simple-aggregator. Names, listings, call results and errors must match, apart from the
// prefixed names.
//
// Run with `make interop` (which builds the aggregator), or `npm test` here with AGGREGATOR set
// to the binary.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { outcome, untimed } from "./results.mjs";

const here = import.meta.dirname;
const aggregator = process.env.AGGREGATOR || path.resolve(here, "../../bin/mcp-simple-aggregator");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-interop-"));
const shared = path.join(work, "files");
fs.mkdirSync(shared);
fs.writeFileSync(path.join(shared, "hello.txt"), "hello from the interop test\n");

const bin = (pkg) => path.join(here, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js");

// The servers, each as a config entry; the memory file differs per run so both start empty.
function servers(run) {
  return {
    everything: { command: process.execPath, args: [bin("server-everything"), "stdio"] },
    memory: {
      command: process.execPath,
      args: [bin("server-memory")],
      env: { MEMORY_FILE_PATH: path.join(work, `memory-${run}.jsonl`) },
    },
    files: { command: process.execPath, args: [bin("server-filesystem"), shared] },
  };
}

// The aggregator tells its servers the capabilities its client declared (those it routes:
// sampling, elicitation, roots), and servers offer more tools to clients that can do more: by
// default these clients declare sampling, elicitation and roots, directly and through the
// aggregator alike.
const capable = { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } };

async function connect(command, args, env, { name = "interop-test", capabilities = capable } = {}) {
  const client = new Client({ name, version: "1.0.0" }, { capabilities });
  await client.connect(new StdioClientTransport({ command, args, env: { ...process.env, ...env }, stderr: "ignore" }));
  return client;
}

const direct = {};
let through;

before(async () => {
  assert.ok(fs.existsSync(aggregator), `no aggregator binary at ${aggregator}: run make interop, or set AGGREGATOR`);
  for (const [key, s] of Object.entries(servers("direct"))) {
    direct[key] = await connect(s.command, s.args, s.env);
  }
  const config = path.join(work, "config.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: servers("aggregated") }));
  through = await connect(aggregator, ["--config", config]);
});

after(async () => {
  await Promise.all([...Object.values(direct), through].map((c) => c?.close()));
  fs.rmSync(work, { recursive: true, force: true });
});

test("every tool is listed under key:name with the server's definition", async () => {
  const { tools } = await through.listTools();
  const byName = new Map(tools.map((t) => [t.name, t]));
  let compared = 0;
  for (const [key, client] of Object.entries(direct)) {
    const own = (await client.listTools()).tools;
    assert.ok(own.length > 0, `${key} lists no tools`);
    for (const t of own) {
      const exposed = byName.get(`${key}:${t.name}`);
      assert.ok(exposed, `${key}:${t.name} is not listed through the aggregator`);
      assert.deepEqual({ ...exposed, name: t.name }, t, `definition of ${key}:${t.name}`);
      compared++;
    }
  }
  const known = new Set();
  for (const [key, client] of Object.entries(direct)) for (const t of (await client.listTools()).tools) known.add(`${key}:${t.name}`);
  assert.deepEqual(tools.map((t) => t.name).filter((n) => !known.has(n)), [], "the aggregator lists tools no server has");
  assert.equal(tools.length, compared);
});

// Calls whose results do not depend on time or randomness; each runs directly and through the
// aggregator, in the same order, so stateful servers (memory) see the same history.
const calls = [
  ["everything", "echo", { message: "héllo from interop" }],
  ["everything", "get-sum", { a: 2, b: 40.5 }],
  ["everything", "get-tiny-image", {}],
  ["everything", "get-annotated-message", { messageType: "error", includeImage: true }],
  ["everything", "get-structured-content", { location: "New York" }],
  ["everything", "get-sum", { a: "not a number" }],
  ["memory", "create_entities", { entities: [{ name: "aggregator", entityType: "program", observations: ["bundles servers"] }] }],
  ["memory", "add_observations", { observations: [{ entityName: "aggregator", contents: ["keeps names"] }] }],
  ["memory", "read_graph", {}],
  ["memory", "search_nodes", { query: "bundles" }],
  ["files", "list_allowed_directories", {}],
  ["files", "read_text_file", { path: path.join(shared, "hello.txt") }],
  ["files", "list_directory", { path: shared }],
  ["files", "read_text_file", { path: "/etc/hostname-outside-the-allowed-directory" }],
  ["files", "get_file_info", { path: path.join(shared, "missing.txt") }],
];

test("calls return what the server returns directly: results, tool errors and protocol errors", async () => {
  for (const [key, tool, args] of calls) {
    const want = await outcome(direct[key].callTool({ name: tool, arguments: args }));
    const got = await outcome(through.callTool({ name: `${key}:${tool}`, arguments: args }));
    assert.deepEqual(got, want, `${key}:${tool}(${JSON.stringify(args)})`);
  }
});

test("a tool no server has gets -32602 naming it", async () => {
  const { error } = await outcome(through.callTool({ name: "everything:no-such-tool", arguments: {} }));
  assert.equal(error?.code, -32602);
  assert.match(error.message, /Unknown tool: everything:no-such-tool/);
});

test("the aggregator identifies itself and offers tools with listChanged", async () => {
  assert.equal(through.getServerVersion()?.name, "mcp-simple-aggregator");
  assert.deepEqual(through.getServerCapabilities()?.tools, { listChanged: true });
});

// The handshake. The servers are initialized with the client's own initialize: its protocol
// version, its clientInfo and its capabilities (those the aggregator routes). The everything
// server shows neither the clientInfo nor the protocol version it was given (the Go tests check
// those with a fixture), but it adapts its tools to the client's capabilities: four tools only
// for a client that can answer them.
const onlyForCapable = ["get-roots-list", "trigger-elicitation-request", "trigger-sampling-request", "trigger-url-elicitation"];

// The tools of server key in an aggregated listing, under their own names; every one must be
// the server's own definition.
function toolsOf(key, aggregated) {
  return aggregated.filter((t) => t.name.startsWith(`${key}:`)).map((t) => ({ ...t, name: t.name.slice(key.length + 1) }));
}

function assertSameTools(got, want, what) {
  const byName = (tools) => [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  assert.deepEqual(byName(got), byName(want), what);
}

test("everything lists through the aggregator what it lists directly, for a client without capabilities and for one with them", async () => {
  const s = servers("bare").everything;
  const config = path.join(work, "config-bare.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { everything: s } }));
  const bare = { name: "interop-bare", capabilities: {} };
  const [bareDirect, bareThrough] = await Promise.all([
    connect(s.command, s.args, s.env, bare),
    connect(aggregator, ["--config", config], undefined, bare),
  ]);
  try {
    const plain = (await bareDirect.listTools()).tools;
    const rich = (await direct.everything.listTools()).tools;
    // The difference matters: the client with capabilities gets four tools more.
    const minus = (a, b) => a.map((t) => t.name).filter((n) => !b.some((t) => t.name === n)).sort();
    assert.deepEqual(minus(rich, plain), onlyForCapable);
    assert.deepEqual(minus(plain, rich), []);

    const bareListed = (await bareThrough.listTools()).tools;
    assertSameTools(toolsOf("everything", bareListed), plain, "a client without capabilities");
    assert.equal(bareListed.length, plain.length, "the aggregator lists tools the server does not list");
    assertSameTools(toolsOf("everything", (await through.listTools()).tools), rich, "a client with sampling, elicitation and roots");
  } finally {
    await Promise.all([bareDirect.close(), bareThrough.close()]);
  }
});

// The servers' instructions, combined: each server's text between <instructions server="<key>">
// and </instructions>, after a line naming its tools; servers without instructions (memory,
// files) add nothing.
const instructionsURI = (key) => `mcp-simple-aggregator://instructions/${encodeURIComponent(key)}`;
const cutMarker = (key) => `[Cut to fit the client's limit; the full text is the resource ${instructionsURI(key)}]`;

function section(instructions, key) {
  const open = `\n<instructions server=${JSON.stringify(key)}>\n`;
  const start = instructions.indexOf(open);
  assert.ok(start >= 0, `no section for ${key} in ${JSON.stringify(instructions)}`);
  const body = instructions.slice(start + open.length);
  const nl = body.indexOf("\n");
  assert.match(body.slice(0, nl), new RegExp(`tools and prompts are named "${key.replace(/[/.*+?^${}()|[\]\\]/g, "\\$&")}:<name>"`));
  const end = body.indexOf("\n</instructions>");
  assert.ok(end > nl, `the section of ${key} is not closed`);
  return { start, text: body.slice(nl + 1, end) };
}

test("everything's instructions reach the client, in full, and as a resource", async () => {
  const own = direct.everything.getInstructions();
  assert.ok(own?.length > 1000, `everything gives no instructions: ${JSON.stringify(own)}`);
  const combined = through.getInstructions();
  assert.ok(combined, "the aggregator gives no instructions");
  const { text } = section(combined, "everything");
  assert.equal(text, own.trim(), "everything's full instructions in its section");
  for (const key of ["memory", "files"]) assert.ok(!combined.includes(`<instructions server="${key}">`), `a section for ${key}, which has no instructions`);
  assert.ok(!combined.includes("[Cut to fit"), "the text is cut for a client without a limit");

  const { contents } = await through.readResource({ uri: instructionsURI("everything") });
  assert.deepEqual(contents, [{ uri: instructionsURI("everything"), mimeType: "text/markdown", text: own }]);
  const listed = (await through.listResources()).resources.filter((r) => r.uri.startsWith("mcp-simple-aggregator://"));
  assert.deepEqual(listed.map((r) => r.uri), [instructionsURI("everything")]);
});

test("for Claude Code the instructions fit 2048 characters, each server's cut and marked, the full text a resource", async () => {
  // One everything server's text fits the limit with room to spare: two of them do not. The
  // second key needs percent-encoding in the URI.
  const keys = ["everything", "everything/again"];
  const s = servers("claude").everything;
  const config = path.join(work, "config-claude.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: Object.fromEntries(keys.map((k) => [k, s])) }));
  const client = await connect(aggregator, ["--config", config], undefined, { name: "claude-code", capabilities: {} });
  try {
    const own = direct.everything.getInstructions();
    const combined = client.getInstructions();
    assert.ok(combined, "the aggregator gives no instructions");
    assert.ok(combined.length <= 2048, `${combined.length} characters: ${combined}`);
    const starts = [];
    for (const key of keys) {
      const { start, text } = section(combined, key);
      starts.push(start);
      assert.ok(text.endsWith(cutMarker(key)), `${key}: no cut marker at the end of ${JSON.stringify(text)}`);
      const kept = text.slice(0, -cutMarker(key).length).trim();
      // Cut, not rewritten: the server's opening, up to a paragraph or sentence boundary.
      assert.ok(kept.length > 200, `${key}: only ${JSON.stringify(kept)} kept`);
      assert.ok(own.startsWith(kept), `${key}: ${JSON.stringify(kept)} does not open everything's instructions`);
      assert.ok(kept.length < own.trim().length);

      const { contents } = await client.readResource({ uri: instructionsURI(key) });
      assert.deepEqual(contents, [{ uri: instructionsURI(key), mimeType: "text/markdown", text: own }], `the resource of ${key}`);
    }
    assert.ok(starts[0] < starts[1], "the sections are in key order");
    assert.equal(instructionsURI("everything/again"), "mcp-simple-aggregator://instructions/everything%2Fagain");
  } finally {
    await client.close();
  }
});

// The rest of the protocol against the "everything" server, which offers all of it: a client
// with sampling, elicitation and roots, once directly and once through the aggregator.
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const seen = { direct: [], through: [] };

async function fullClient(command, args, side) {
  const client = new Client(
    { name: "interop-full", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    seen[side].push(["sampling", req.params]);
    return { role: "assistant", model: "test-model", content: { type: "text", text: `sampled: ${req.params.messages.length} message(s)` } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen[side].push(["elicitation", req.params.message]);
    return { action: "decline" };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: `file://${shared}`, name: "shared" }] }));
  client.logs = [];
  client.updates = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => client.logs.push(n.params));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => client.updates.push(n.params));
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  return client;
}

let fullDirect, fullThrough;

async function both(fn) {
  return [await outcome(fn(fullDirect, "")), await outcome(fn(fullThrough, "everything:"))];
}

test("everything: capabilities, prompts, resources and templates", async () => {
  const s = servers("full").everything;
  fullDirect = await fullClient(s.command, s.args, "direct");
  const config = path.join(work, "config-full.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { everything: s } }));
  fullThrough = await fullClient(aggregator, ["--config", config], "through");

  const caps = fullThrough.getServerCapabilities();
  const own = fullDirect.getServerCapabilities();
  for (const k of ["prompts", "resources", "completions", "logging"]) {
    assert.ok(caps[k], `the aggregator does not offer ${k}, which everything offers`);
  }
  assert.equal(caps.resources.subscribe, own.resources.subscribe);

  const prompts = (await fullDirect.listPrompts()).prompts;
  assert.ok(prompts.length > 0);
  assert.deepEqual((await fullThrough.listPrompts()).prompts, prompts.map((p) => ({ ...p, name: `everything:${p.name}` })));
  // The aggregator adds a resource of its own: the server's full instructions.
  const listed = (await fullThrough.listResources()).resources;
  const extra = listed.filter((r) => r.uri.startsWith("mcp-simple-aggregator://"));
  assert.deepEqual(listed.filter((r) => !extra.includes(r)), (await fullDirect.listResources()).resources);
  assert.deepEqual(extra.map((r) => [r.uri, r.mimeType]), [["mcp-simple-aggregator://instructions/everything", "text/markdown"]]);
  assert.deepEqual((await fullThrough.listResourceTemplates()).resourceTemplates, (await fullDirect.listResourceTemplates()).resourceTemplates);

  for (const [name, args] of [
    ["simple-prompt", undefined],
    ["args-prompt", { city: "Oslo", state: "none" }],
    ["resource-prompt", { resourceType: "Text", resourceId: "3" }],
    ["no-such-prompt", {}],
  ]) {
    const [want, got] = await both((c, p) => c.getPrompt({ name: p + name, arguments: args }));
    if (want.error) want.error.message = want.error.message.replace(name, `everything:${name}`);
    if (name !== "no-such-prompt") assert.deepEqual(untimed(got), untimed(want), `prompt ${name}`);
    else assert.ok(got.error, "an unknown prompt is an error");
  }
  const { resources } = await fullDirect.listResources();
  for (const uri of [resources[0].uri, "demo://resource/dynamic/text/7", "demo://resource/dynamic/blob/2"]) {
    const [want, got] = await both((c) => c.readResource({ uri }));
    assert.deepEqual(untimed(got), untimed(want), `read ${uri}`);
  }
});

test("everything: completions for prompts and templates", async () => {
  for (const [ref, argument] of [
    [{ type: "ref/prompt", name: "completable-prompt" }, { name: "department", value: "E" }],
    [{ type: "ref/resource", uri: "demo://resource/dynamic/text/{resourceId}" }, { name: "resourceId", value: "1" }],
  ]) {
    const [want, got] = await both((c, p) =>
      c.complete({ ref: ref.type === "ref/prompt" ? { ...ref, name: p + ref.name } : ref, argument }),
    );
    assert.ok(want.result, `direct completion failed: ${JSON.stringify(want)}`);
    assert.deepEqual(got, want, `complete ${JSON.stringify(ref)}`);
  }
});

test("everything: progress and cancellation", async () => {
  const progress = { direct: [], through: [] };
  const [want, got] = await both((c, p) =>
    c.callTool({ name: p + "trigger-long-running-operation", arguments: { duration: 1, steps: 4 } }, undefined, {
      onprogress: (n) => progress[p ? "through" : "direct"].push(n),
    }),
  );
  assert.deepEqual(got, want);
  assert.ok(progress.direct.length > 0, "no progress directly");
  assert.ok(progress.through.length > 0, "no progress through the aggregator");
  // The server sends its last progress notification together with its answer, and the client
  // ignores progress that arrives after the answer: either side may miss the last one.
  const n = Math.min(progress.direct.length, progress.through.length);
  assert.ok(Math.abs(progress.direct.length - progress.through.length) <= 1, JSON.stringify(progress));
  assert.deepEqual(progress.through.slice(0, n), progress.direct.slice(0, n));

  for (const c of [fullDirect, fullThrough]) {
    const prefix = c === fullThrough ? "everything:" : "";
    const ac = new AbortController();
    setTimeout(() => ac.abort("enough"), 300);
    const { error } = await outcome(
      c.callTool({ name: prefix + "trigger-long-running-operation", arguments: { duration: 10, steps: 10 } }, undefined, { signal: ac.signal }),
    );
    assert.ok(error, "a cancelled call fails on the client");
    // The connection goes on.
    const { result } = await outcome(c.callTool({ name: prefix + "echo", arguments: { message: "after" } }));
    assert.deepEqual(result?.content, [{ type: "text", text: "Echo: after" }]);
  }
});

test("everything: sampling, elicitation and roots reach the client and back", async () => {
  for (const [tool, args] of [
    ["trigger-sampling-request", { prompt: "hello", maxTokens: 20 }],
    ["trigger-elicitation-request", {}],
    ["get-roots-list", {}],
  ]) {
    const [want, got] = await both((c, p) => c.callTool({ name: p + tool, arguments: args }));
    assert.ok(want.result, `${tool} directly: ${JSON.stringify(want)}`);
    assert.deepEqual(got, want, tool);
  }
  assert.deepEqual(seen.through, seen.direct, "the client's handlers got the same requests");
  assert.ok(seen.direct.length >= 2);
});

test("everything: tasks, with an elicitation on the way", async () => {
  assert.deepEqual(fullThrough.getServerCapabilities().tasks, fullDirect.getServerCapabilities().tasks);
  const before = { direct: seen.direct.length, through: seen.through.length };
  const run = async (c, p) => {
    const kinds = [];
    let result, taskId;
    const stream = c.experimental.tasks.callToolStream(
      { name: p + "simulate-research-query", arguments: { topic: "pipes", ambiguous: true } },
      undefined,
      { task: { ttl: 60000 } },
    );
    for await (const m of stream) {
      if (kinds.at(-1) !== m.type) kinds.push(m.type);
      if (m.type === "taskCreated") taskId = m.task.taskId;
      if (m.type === "result") result = m.result;
      if (m.type === "error") throw m.error;
    }
    // The result names its task, whose ID differs between the two runs.
    const related = result?._meta?.["io.modelcontextprotocol/related-task"];
    if (related?.taskId === taskId) related.taskId = "<the task>";
    const listed = (await c.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === taskId);
    const { status } = await c.experimental.tasks.getTask(taskId);
    return { kinds, result, listed, status };
  };
  const [want, got] = await both(run);
  assert.ok(want.result, `the task directly: ${JSON.stringify(want)}`);
  assert.deepEqual(want.result.kinds, ["taskCreated", "taskStatus", "result"]);
  assert.equal(want.result.status, "completed");
  assert.ok(want.result.listed);
  assert.deepEqual(got, want);
  // The server asked the client for clarification on both sides.
  assert.deepEqual(seen.through.slice(before.through), seen.direct.slice(before.direct));
  assert.equal(seen.direct.length - before.direct, 1);
});

test("everything: logging and subscriptions", async () => {
  for (const c of [fullDirect, fullThrough]) {
    await c.setLoggingLevel("debug");
  }
  const [want, got] = await both((c, p) => c.callTool({ name: p + "toggle-simulated-logging", arguments: {} }));
  assert.deepEqual(got, want);
  const uri = (await fullDirect.listResources()).resources[0].uri;
  for (const c of [fullDirect, fullThrough]) {
    assert.deepEqual(await c.subscribeResource({ uri }), {});
  }
  const [w2, g2] = await both((c, p) => c.callTool({ name: p + "toggle-subscriber-updates", arguments: {} }));
  assert.deepEqual(g2, w2);
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline && (fullThrough.logs.length === 0 || fullThrough.updates.length === 0 || fullDirect.logs.length === 0)) {
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(fullDirect.logs.length > 0, "no log message directly");
  assert.ok(fullThrough.logs.length > 0, "no log message through the aggregator");
  for (const l of fullThrough.logs) assert.ok(l.logger, "a log message without a logger");
  assert.ok(fullThrough.updates.length > 0, "no resource update through the aggregator");
  assert.equal(fullThrough.updates[0].uri, uri);
  for (const c of [fullDirect, fullThrough]) {
    assert.deepEqual(await c.unsubscribeResource({ uri }), {});
    await c.close();
  }
});

// Issue #30: the scan finds no hidden character in what the reference servers tell the model
// (every list and the instructions), and a lock pinned from them compares equal on the next
// start: pin, then check against the lock succeeds, with no difference.
test("no hidden characters in the reference servers' definitions, and as pinned on the next start", () => {
  const config = path.join(work, "config-trust.json");
  fs.writeFileSync(config, JSON.stringify({ mcpServers: servers("trust") }));
  const check = () => {
    const run = spawnSync(aggregator, ["check", "--config", config, "--json"], { encoding: "utf8" });
    return { status: run.status, report: JSON.parse(run.stdout) };
  };
  const first = check();
  assert.equal(first.report.servers.length, 3);
  for (const s of first.report.servers) {
    assert.deepEqual(s.hiddenCharacters ?? [], [], `hidden characters in ${s.key}'s definitions`);
  }
  const pin = spawnSync(aggregator, ["pin", "--config", config], { encoding: "utf8" });
  assert.equal(pin.status, 0, `pin: ${pin.stdout}${pin.stderr}`);
  const again = check();
  assert.equal(again.report.lockFile, path.join(work, "config-trust.lock.json"));
  for (const s of again.report.servers) assert.deepEqual(s.lock ?? [], [], `${s.key} differs from the lock pinned a moment ago`);
  assert.equal(again.status, 0);
});

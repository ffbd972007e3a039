// Interop: the TypeScript SDK v2 client (@modelcontextprotocol/client) in each of its handshake
// modes against the real aggregator binary, compared with the same client connected directly to
// the same servers.
//
// The servers behind the aggregator are legacy (2025-11-25): the "everything" reference server
// (TypeScript SDK v1) and servers/modern-server.mjs --legacy (SDK v2, wired the classic way). A
// client pinned to 2026-07-28 cannot reach either directly (the pin fails on a legacy server):
// through the aggregator it can, and what it gets is compared with what a client of the only
// mode such a server serves (legacy) gets directly, apart from the prefixed names and the
// modern result envelope (resultType, ttlMs, cacheScope, _meta serverInfo).
//
// The modes (see eras.test.mjs and docs/protocol-eras.md §11): default "legacy" (initialize),
// "auto" (a server/discover probe in a throwaway sibling process, whose DiscoverResult gives the
// session its capabilities and instructions, then the session in a process of its own) and
// { pin: "2026-07-28" } (the same probe, no fall back).
//
// Run with AGGREGATOR set to the binary, or after `make build` (bin/mcp-simple-aggregator).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { readTrace } from "./trace.mjs";
import { bare, outcome, untimed } from "./results.mjs";

const here = import.meta.dirname;
const aggregator = process.env.AGGREGATOR || path.resolve(here, "../../bin/mcp-simple-aggregator");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-modern-client-"));
const modernServer = path.join(here, "servers", "modern-server.mjs");
const bin = (pkg) => path.join(here, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js");

const PIN = { pin: "2026-07-28" };

// Every process this file starts carries this marker in its environment (the aggregator passes
// its environment to its servers), so the processes left behind can be found.
const MARKER = "MCP_MODERN_CLIENT_TEST";
const marker = crypto.randomUUID();

// The legacy servers, as config entries and as direct commands.
const legacyServers = {
  everything: { command: process.execPath, args: [bin("server-everything"), "stdio"] },
  legacy: { command: process.execPath, args: [modernServer, "--legacy"] },
};

// writeConfig writes an aggregator configuration of the given servers.
function writeConfig(name, servers) {
  const file = path.join(work, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({ mcpServers: servers }));
  return file;
}

// The client: elicitation (form) and sampling, answered by handlers that note what they were
// asked; roots are not declared, so that no server asks for them at start-up (a legacy server's
// request outside any call has no call to ride on for a modern client).
const capabilities = { elicitation: { form: {} }, sampling: {} };
const clients = [];
const transports = new Map(); // by client

async function connect(mode, command, args, { env = {}, listChanged, inputRequired } = {}) {
  const asked = [];
  const client = new Client(
    { name: "modern-client-test", version: "1.0.0" },
    { capabilities, ...(mode && { versionNegotiation: { mode } }), ...(listChanged && { listChanged }), ...(inputRequired && { inputRequired }) },
  );
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push(["elicitation", request.params]);
    return { action: "accept", content: { name: "Ada" } };
  });
  client.setRequestHandler("sampling/createMessage", async (request) => {
    asked.push(["sampling", request.params]);
    return { role: "assistant", model: "test-model", content: { type: "text", text: `sampled ${request.params.messages.length}` } };
  });
  clients.push(client);
  const transport = new StdioClientTransport({ command, args, env: { ...process.env, [MARKER]: marker, ...env }, stderr: "ignore" });
  transports.set(client, transport);
  await client.connect(transport);
  return { client, asked, transport };
}

const viaAggregator = (mode, config, options) => connect(mode, aggregator, ["--config", config], options);
const direct = (mode, s, options) => connect(mode, s.command, s.args, options);

// The tools of server key in an aggregated listing, under their own names.
function toolsOf(key, tools) {
  return tools.filter((t) => t.name.startsWith(`${key}:`)).map((t) => ({ ...t, name: t.name.slice(key.length + 1) }));
}

const byName = (list) => [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

async function until(what, check, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// Shared: the direct legacy clients, and the pinned client through the aggregator.
const directs = {};
let pinned;
const resourceChanges = [];
const legacyConfig = writeConfig("legacy", legacyServers);

before(async () => {
  assert.ok(fs.existsSync(aggregator), `no aggregator binary at ${aggregator}: run make build, or set AGGREGATOR`);
  const [everything, legacy, through] = await Promise.all([
    direct(undefined, legacyServers.everything),
    direct(undefined, legacyServers.legacy),
    viaAggregator(PIN, legacyConfig, {
      listChanged: { resources: { onChanged: (err, resources) => resourceChanges.push(err ?? resources) } },
    }),
  ]);
  Object.assign(directs, { everything, legacy });
  pinned = through;
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  fs.rmSync(work, { recursive: true, force: true });
});

// 1. A client pinned to 2026-07-28, through the aggregator, to legacy servers.

test("pinned: the session is modern, which the legacy servers cannot give directly", async () => {
  assert.equal(pinned.client.getProtocolEra(), "modern");
  assert.equal(pinned.client.getServerVersion()?.name, "mcp-simple-aggregator");
  const caps = pinned.client.getServerCapabilities();
  assert.deepEqual(caps.tools, { listChanged: true });
  assert.equal(caps.tasks, undefined, "the legacy tasks capability, which 2026-07-28 has not");
  // Directly, the pin fails on a legacy server: only the aggregator makes this session possible.
  await assert.rejects(direct(PIN, legacyServers.legacy), (err) => {
    assert.equal(err.code, "ERA_NEGOTIATION_FAILED", err.message);
    return true;
  });
});

// withoutExecution is a tool definition without "execution" (the legacy tasks' taskSupport):
// 2026-07-28's Tool has no such member, and the client's 2026 codec deletes it from what it
// reads (the aggregator passes it on as the server wrote it).
const withoutExecution = ({ execution, ...tool }) => tool;

test("pinned: every tool is listed under key:name with the server's definition", async () => {
  const { tools } = await pinned.client.listTools();
  for (const key of Object.keys(directs)) {
    const own = (await directs[key].client.listTools()).tools;
    assert.ok(own.length > 0, `${key} lists no tools`);
    // A tool that runs only as a legacy task is not listed to a modern client (the legacy tasks
    // are not in its era), and the others lose execution.
    const servable = own.filter((t) => t.execution?.taskSupport !== "required");
    assert.deepEqual(byName(toolsOf(key, tools)), byName(servable.map(withoutExecution)), `the tools of ${key}`);
  }
  assert.equal(tools.length, toolsOf("everything", tools).length + toolsOf("legacy", tools).length, "tools of no server");
});

test("pinned: calls return what the server returns directly, apart from the envelope", async () => {
  for (const [key, tool, args] of [
    ["everything", "echo", { message: "héllo from a modern client" }],
    ["everything", "get-sum", { a: 2, b: 40.5 }],
    ["everything", "get-structured-content", { location: "New York" }],
    ["everything", "get-annotated-message", { messageType: "error", includeImage: true }],
    ["everything", "get-sum", { a: "not a number" }],
    ["legacy", "echo", { text: "héllo", n: 1.5 }],
    ["legacy", "era", {}],
  ]) {
    const want = await outcome(directs[key].client.callTool({ name: tool, arguments: args }));
    const got = await outcome(pinned.client.callTool({ name: `${key}:${tool}`, arguments: args }));
    if (got.result) got.result = bare(got.result);
    assert.deepEqual(got, want, `${key}:${tool}(${JSON.stringify(args)})`);
  }
});

test("pinned: a legacy server's elicitation and sampling reach the client's handlers (input_required and a retry) and back", async () => {
  for (const [key, tool, args] of [
    ["everything", "trigger-elicitation-request", {}],
    ["everything", "trigger-sampling-request", { prompt: "hello", maxTokens: 20 }],
    ["legacy", "elicit", { message: "Who?" }],
  ]) {
    const before = { direct: directs[key].asked.length, through: pinned.asked.length };
    const want = await outcome(directs[key].client.callTool({ name: tool, arguments: args }));
    const got = await outcome(pinned.client.callTool({ name: `${key}:${tool}`, arguments: args }));
    assert.ok(want.result, `${key}:${tool} directly: ${JSON.stringify(want)}`);
    if (got.result) got.result = bare(got.result);
    assert.deepEqual(got, want, `${key}:${tool}`);
    const asked = { direct: directs[key].asked.slice(before.direct), through: pinned.asked.slice(before.through) };
    assert.equal(asked.direct.length, 1, `${key}:${tool} asked ${JSON.stringify(asked.direct)}`);
    assert.deepEqual(asked.through, asked.direct, `what ${key}:${tool} asked the client`);
  }
});

test("pinned: progress notifications of a legacy server's call", async () => {
  // modern-server pauses before its answer, so every notification arrives; everything sends its
  // last one with its answer, and a client may miss that one on either side.
  const run = async (c, name, args) => {
    const seen = [];
    const r = await c.callTool({ name, arguments: args }, { onprogress: (p) => seen.push(p) });
    return { result: bare(r), seen };
  };
  const [want, got] = await Promise.all([
    run(directs.legacy.client, "progress", { steps: 3 }),
    run(pinned.client, "legacy:progress", { steps: 3 }),
  ]);
  assert.deepEqual(want.seen.map((p) => p.message), ["step 1", "step 2", "step 3"]);
  assert.deepEqual(got, want);

  const args = { duration: 1, steps: 4 };
  const [w, g] = await Promise.all([
    run(directs.everything.client, "trigger-long-running-operation", args),
    run(pinned.client, "everything:trigger-long-running-operation", args),
  ]);
  assert.deepEqual(g.result, w.result);
  assert.ok(w.seen.length >= 3 && g.seen.length >= 3, `progress directly ${JSON.stringify(w.seen)}, through ${JSON.stringify(g.seen)}`);
  const n = Math.min(w.seen.length, g.seen.length);
  assert.deepEqual(g.seen.slice(0, n), w.seen.slice(0, n));
});

test("pinned: resources, templates and prompts as the server gives them, reads with cache hints", async () => {
  const c = pinned.client;
  const own = directs.everything.client;
  const listed = (await c.listResources()).resources;
  const ours = listed.filter((r) => r.uri.startsWith("mcp-simple-aggregator://"));
  assert.deepEqual(ours.map((r) => r.uri).sort(), ["mcp-simple-aggregator://instructions/everything", "mcp-simple-aggregator://instructions/legacy"]);
  assert.deepEqual(listed.filter((r) => !ours.includes(r)), (await own.listResources()).resources);
  assert.deepEqual((await c.listResourceTemplates()).resourceTemplates, (await own.listResourceTemplates()).resourceTemplates);

  const uri = (await own.listResources()).resources[0].uri;
  const read = await c.readResource({ uri });
  // A modern client requires the hints on resources/read; a legacy server gives none, so the
  // aggregator says: stale at once, private.
  assert.equal(read.ttlMs, 0);
  assert.equal(read.cacheScope, "private");
  assert.deepEqual(bare(read), await own.readResource({ uri }));

  const instructions = await c.readResource({ uri: "mcp-simple-aggregator://instructions/everything" });
  assert.equal(instructions.contents[0].text, own.getInstructions());

  // Not found: -32602 in the modern era (the legacy server's own code is -32602 as well).
  const missing = "demo://resource/no-such-resource";
  const [want, got] = [await outcome(own.readResource({ uri: missing })), await outcome(c.readResource({ uri: missing }))];
  assert.equal(got.error?.code, -32602, JSON.stringify(got));
  assert.deepEqual(got, want);

  assert.deepEqual(
    toolsOf("everything", (await c.listPrompts()).prompts),
    (await own.listPrompts()).prompts,
  );
  for (const [name, args] of [
    ["simple-prompt", undefined],
    ["args-prompt", { city: "Oslo", state: "none" }],
    ["resource-prompt", { resourceType: "Text", resourceId: "3" }],
  ]) {
    const want = await own.getPrompt({ name, arguments: args });
    assert.deepEqual(untimed(bare(await c.getPrompt({ name: `everything:${name}`, arguments: args }))), untimed(want), `prompt ${name}`);
  }
});

test("pinned: a legacy server's list change reaches the client's listChanged handler (subscriptions/listen)", async () => {
  // everything registers a resource for the file gzip-file-as-resource makes, and says so.
  const args = { name: "modern.txt.gz", data: "data:text/plain,hello%20modern", outputType: "resourceLink" };
  const uri = "demo://resource/session/modern.txt.gz";
  const want = await directs.everything.client.callTool({ name: "gzip-file-as-resource", arguments: args });
  const got = await pinned.client.callTool({ name: "everything:gzip-file-as-resource", arguments: args });
  assert.deepEqual(bare(got), want);
  await until("the resources' list change", () => resourceChanges.some((r) => Array.isArray(r) && r.some((x) => x.uri === uri)));
  assert.ok(!resourceChanges.some((r) => r instanceof Error), String(resourceChanges.find((r) => r instanceof Error)));
  const latest = resourceChanges.at(-1).filter((r) => !r.uri.startsWith("mcp-simple-aggregator://"));
  assert.deepEqual(latest, (await directs.everything.client.listResources()).resources);
  const read = await pinned.client.readResource({ uri });
  assert.deepEqual(bare(read), await directs.everything.client.readResource({ uri }));
});

// 2. A probing client (auto): the probe runs in a sibling process of its own.

test("auto: the probe's aggregator answers server/discover and exits at once, with its servers; the session is modern", async () => {
  const trace = path.join(work, "trace-auto");
  const config = writeConfig("auto", {
    ...legacyServers,
    legacy: { ...legacyServers.legacy, env: { MODERN_SERVER_TRACE: trace } },
  });
  // The SDK disposes of the probe's process with _dispose (internal, 2.4.0): stdin closed and
  // SIGTERM at once, SIGKILL after 1 s. Note how each ended.
  const probes = [];
  const dispose = StdioClientTransport.prototype._dispose;
  StdioClientTransport.prototype._dispose = async function () {
    const proc = this._process;
    const started = Date.now();
    await dispose.call(this);
    probes.push({ pid: proc?.pid, ms: Date.now() - started, exitCode: proc?.exitCode, signal: proc?.signalCode });
  };
  let auto;
  try {
    auto = await viaAggregator("auto", config);
  } finally {
    StdioClientTransport.prototype._dispose = dispose;
  }
  const { client, asked, transport } = auto;
  assert.equal(client.getProtocolEra(), "modern");
  assert.equal(probes.length, 1, `probes ${JSON.stringify(probes)}`);
  const [probe] = probes;
  assert.notEqual(probe.pid, transport.pid);
  // Ended by itself on the end of its input or SIGTERM, not killed at the SDK's 1 s deadline.
  assert.equal(probe.signal, null, `the probe's aggregator ${JSON.stringify(probe)}`);
  assert.equal(probe.exitCode, 0, `the probe's aggregator ${JSON.stringify(probe)}`);

  // No process of the probe is left: every process with this run's marker is the session's
  // aggregator or one of its descendants (its servers, its watchdog), or one of the other
  // sessions of this file.
  const others = clients.filter((c) => c !== client).map((c) => transports.get(c).pid);
  assert.ok(marked().includes(transport.pid), "the marker does not reach the aggregator: the check below would see nothing");
  await until("the probe's processes to end", () => strays(transport.pid, others).length === 0, 3000).catch(() => {
    assert.deepEqual(strays(transport.pid, others), [], "processes left by the probe");
  });

  // The probe's aggregator started its servers for the discover (modern-server was probed with
  // server/discover, which it answers -32601, initialized, its tools listed) and nothing more;
  // the session's servers are others, started afresh.
  const [ofProbe, ...rest] = readTrace(trace);
  assert.deepEqual(ofProbe, ["server/discover", "initialize", "notifications/initialized", "tools/list"]);
  assert.deepEqual(rest, [], "the session's servers are initialized on its first request");

  // The instructions came from the probe's DiscoverResult: the aggregator's combined ones, the
  // same a legacy client gets with initialize.
  const legacyThrough = await viaAggregator(undefined, legacyConfig);
  assert.equal(client.getInstructions(), legacyThrough.client.getInstructions());
  assert.ok(client.getInstructions().includes(directs.everything.client.getInstructions().trim()), "everything's instructions");
  assert.ok(client.getInstructions().includes('<instructions server="legacy">\n'), "modern-server's section");
  assert.ok(client.getInstructions().includes(directs.legacy.client.getInstructions()), "modern-server's instructions");

  // The session works.
  const { tools } = await client.listTools();
  assert.deepEqual(byName(toolsOf("legacy", tools)), byName((await directs.legacy.client.listTools()).tools));
  const echo = await client.callTool({ name: "legacy:echo", arguments: { text: "auto" } });
  assert.deepEqual(echo.structuredContent, { text: "auto" });
  const elicit = await client.callTool({ name: "legacy:elicit", arguments: { message: "Auto?" } });
  assert.deepEqual(elicit.structuredContent, { answer: { action: "accept", content: { name: "Ada" } } });
  assert.deepEqual(asked.map(([kind, p]) => [kind, p.message]), [["elicitation", "Auto?"]]);
  const [, ofSession, ...more] = readTrace(trace);
  assert.deepEqual(ofSession.slice(0, 4), ["server/discover", "initialize", "notifications/initialized", "tools/list"]);
  assert.deepEqual(more, []);
});

// marked are the live processes with this run's marker; parents, when given, gets each live
// process's parent.
function marked(parents = new Map()) {
  const found = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue; // a zombie: ended, its parent not yet told
      parents.set(pid, Number(fields[1]));
      if (fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`${MARKER}=${marker}`)) found.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

// strays are the processes with this run's marker that are neither session (nor others) nor
// descend from one of them.
function strays(session, others) {
  const parent = new Map();
  const mine = marked(parent);
  const roots = new Set([session, ...others]);
  const descends = (pid) => {
    for (let p = pid; p > 1; p = parent.get(p)) if (roots.has(p)) return true;
    return false;
  };
  return mine
    .filter((pid) => !descends(pid))
    .map((pid) => {
      try {
        return `${pid}: ${fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")}`;
      } catch {
        return `${pid}`;
      }
    });
}

// 3. A legacy client (the SDK's default): unchanged.

test("legacy: initialize, the same tools, calls and elicitation as a request", async () => {
  const { client, asked } = await viaAggregator(undefined, legacyConfig);
  assert.equal(client.getProtocolEra(), "legacy");
  const { tools } = await client.listTools();
  for (const key of Object.keys(directs)) {
    const own = (await directs[key].client.listTools()).tools;
    assert.deepEqual(toolsOf(key, tools).map((t) => t.name), own.map((t) => t.name), `the tools of ${key}`);
  }
  const echo = await client.callTool({ name: "everything:echo", arguments: { message: "legacy" } });
  assert.deepEqual(echo, await directs.everything.client.callTool({ name: "echo", arguments: { message: "legacy" } }));
  const elicit = await client.callTool({ name: "legacy:elicit", arguments: { message: "Legacy?" } });
  assert.deepEqual(elicit.structuredContent, { answer: { action: "accept", content: { name: "Ada" } } });
  assert.deepEqual(asked.map(([kind, p]) => [kind, p.message]), [["elicitation", "Legacy?"]]);
  // No modern envelope for a legacy client.
  const uri = (await directs.everything.client.listResources()).resources[0].uri;
  assert.deepEqual(await client.readResource({ uri }), await directs.everything.client.readResource({ uri }));
});

// 4. Modern servers behind the aggregator: modern-server.mjs modern-only and --dual, reached by
// a pinned client, compared with the same client connected to them directly; and by a legacy
// client, which cannot reach the modern-only one directly.

for (const [key, args] of [
  ["modern", [modernServer]],
  ["dual", [modernServer, "--dual"]],
]) {
  test(`pinned → aggregator → modern-server ${args.slice(1).join(" ") || "(modern only)"}: tools, calls, and input_required passed through`, async () => {
    const s = { command: process.execPath, args };
    const config = writeConfig(`modern-${key}`, { [key]: s });
    const [own, through, manual] = await Promise.all([
      direct(PIN, s),
      viaAggregator(PIN, config),
      viaAggregator(PIN, config, { inputRequired: { autoFulfill: false } }),
    ]);
    assert.deepEqual(byName(toolsOf(key, (await through.client.listTools()).tools)), byName((await own.client.listTools()).tools));
    for (const [tool, a] of [
      ["echo", { text: "héllo", n: 1.5 }],
      ["era", {}],
      ["elicit", { message: "Who?" }],
    ]) {
      const want = await own.client.callTool({ name: tool, arguments: a });
      const got = await through.client.callTool({ name: `${key}:${tool}`, arguments: a });
      assert.deepEqual(bare(got), bare(want), `${key}:${tool}`);
    }
    assert.deepEqual((await through.client.callTool({ name: `${key}:era`, arguments: {} })).structuredContent, { era: "modern" });
    assert.deepEqual(through.asked, own.asked);
    // The server's own input_required, as it wrote it: its key, its request.
    const first = await manual.client.callTool({ name: `${key}:elicit`, arguments: { message: "Raw?" } }, { allowInputRequired: true });
    assert.equal(first.resultType, "input_required");
    assert.deepEqual(Object.keys(first.inputRequests), ["name"]);
    assert.equal(first.inputRequests.name.method, "elicitation/create");
    assert.equal(first.inputRequests.name.params.message, "Raw?");
  });
}

test("legacy → aggregator → modern-server (modern only): the same tools and calls as a pinned client gets directly, its input_required as a request", async () => {
  const s = { command: process.execPath, args: [modernServer] };
  const config = writeConfig("modern-for-legacy", { modern: s });
  const [own, through] = await Promise.all([direct(PIN, s), viaAggregator(undefined, config)]);
  assert.deepEqual(byName(toolsOf("modern", (await through.client.listTools()).tools)), byName((await own.client.listTools()).tools));
  for (const [tool, a] of [
    ["echo", { text: "héllo", n: 1.5 }],
    ["era", {}],
    ["elicit", { message: "Legacy, who?" }],
  ]) {
    const want = bare(await own.client.callTool({ name: tool, arguments: a }));
    const got = await through.client.callTool({ name: `modern:${tool}`, arguments: a });
    assert.deepEqual(got, want, `modern:${tool}`);
  }
  // Asked as elicitation/create, the one request a legacy client knows, with the server's params.
  assert.deepEqual(through.asked, own.asked);
  const progress = [];
  await through.client.callTool({ name: "modern:progress", arguments: { steps: 3 } }, { onprogress: (p) => progress.push(p.progress) });
  assert.deepEqual(progress, [1, 2, 3]);
});

// A legacy server's request outside any call (issue #27, item 5): the filesystem server started
// with no directory asks the client for roots/list as soon as it is initialized. A pinned client
// takes no requests; through the aggregator the request waits for the client's next call, which
// is answered with an InputRequiredResult carrying it first: the client's roots handler answers,
// and the call goes on. list_allowed_directories then shows the client's root (the server
// applies the roots as it gets them: asked until it does).
test("pinned: the filesystem server with no directory gets the client's roots, asked at its first call", async () => {
  const root = fs.mkdtempSync(path.join(work, "root-"));
  const config = writeConfig("roots", {
    fs: { command: process.execPath, args: [path.join(here, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")] },
  });
  const client = new Client({ name: "modern-roots-test", version: "1.0.0" }, { capabilities: { roots: {} }, versionNegotiation: { mode: PIN } });
  let asked = 0;
  client.setRequestHandler("roots/list", async () => {
    asked++;
    return { roots: [{ uri: `file://${root}`, name: "the client's root" }] };
  });
  clients.push(client);
  await client.connect(new StdioClientTransport({ command: aggregator, args: ["--config", config], env: { ...process.env, [MARKER]: marker }, stderr: "ignore" }));
  assert.equal(client.getProtocolEra(), "modern");
  const real = fs.realpathSync(root);
  let text = "";
  const deadline = Date.now() + 15000;
  while (!text.includes(real)) {
    if (Date.now() > deadline) assert.fail(`list_allowed_directories never showed the client's root ${real}; last: ${text}`);
    const result = await client.callTool({ name: "fs:list_allowed_directories", arguments: {} });
    text = result.content.map((c) => c.text ?? "").join("\n");
    if (!text.includes(real)) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(asked >= 1, "the client's roots handler was asked");
});

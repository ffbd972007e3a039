// Interop: definitions that break the MCP schema. The TypeScript SDK clients, v1
// (@modelcontextprotocol/sdk) and v2 (@modelcontextprotocol/client), reject a whole list when
// one definition in it is malformed; through the aggregator that would cost every server's
// tools. The aggregator withholds such a definition and serves the rest: these tests hold it
// to the clients' own verdicts, on a catalog with a malformed server and on a corpus of
// definitions (internal/mcpschema/testdata/clients.json).
//
// Run with `make interop`, or `npm test` here with AGGREGATOR and FIXTURE set to the binaries
// (the aggregator, and the fixture server of internal/fixture/server).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { outcome } from "./results.mjs";

const here = import.meta.dirname;
const aggregator = process.env.AGGREGATOR || path.resolve(here, "../../bin/mcp-simple-aggregator");
const fixture = process.env.FIXTURE || path.resolve(here, "../../bin/fixture-server");
const corpus = JSON.parse(fs.readFileSync(path.resolve(here, "../../internal/mcpschema/testdata/clients.json"), "utf8")).cases;
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-interop-withheld-"));
const bin = (pkg) => path.join(here, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js");
fs.mkdirSync(path.join(work, "files"));

const sdks = {
  v1: { Client: ClientV1, Stdio: StdioV1 },
  v2: { Client: ClientV2, Stdio: StdioV2 },
};

const lists = [
  { field: "tools", method: "tools/list", call: (c) => c.listTools(), id: "name" },
  { field: "prompts", method: "prompts/list", call: (c) => c.listPrompts(), id: "name" },
  { field: "resources", method: "resources/list", call: (c) => c.listResources(), id: "uri" },
  { field: "resourceTemplates", method: "resources/templates/list", call: (c) => c.listResourceTemplates(), id: "uriTemplate" },
];

// The catalog: the reference servers (real servers' definitions, which must all pass), a
// well-formed fixture and one with a malformed tool, prompt, resource and template (-malformed).
const servers = {
  everything: { command: process.execPath, args: [bin("server-everything"), "stdio"] },
  files: { command: process.execPath, args: [bin("server-filesystem"), path.join(work, "files")] },
  memory: { command: process.execPath, args: [bin("server-memory")], env: { MEMORY_FILE_PATH: path.join(work, "memory.jsonl") } },
  good: { command: fixture, args: ["-full", "-scheme", "good"] },
  raw: { command: fixture, args: ["-full", "-malformed", "-scheme", "raw"] },
};
const config = path.join(work, "config.json");

const withheldLines = [
  `server "raw": tool "plain" is withheld: /inputSchema/type is missing; the MCP schema requires "object"`,
  `server "raw": prompt "unnamed_args" is withheld: /arguments/0/name is missing; the MCP schema requires a string`,
  `server "raw": resource "raw://static/late" is withheld: /annotations/lastModified is "yesterday"; the TypeScript clients require an ISO 8601 date-time with seconds and a time zone ("2025-01-12T15:00:58Z")`,
  `server "raw": resource template "raw://drafts/{id}" is withheld: /name is missing; the MCP schema requires a string`,
];
const withheldIds = { tools: ["plain"], prompts: ["unnamed_args"], resources: ["raw://static/late"], resourceTemplates: ["raw://drafts/{id}"] };

// raw talks JSON-RPC to a command, line by line, and returns the results as parsed JSON (key
// order kept) of initialize and the four lists.
async function raw(command, args, env) {
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"], env: { ...process.env, ...env } });
  const lines = readline.createInterface({ input: child.stdout });
  const answers = new Map();
  const waiting = new Map();
  lines.on("line", (line) => {
    const m = JSON.parse(line);
    if (m.id === undefined) return;
    if (waiting.has(m.id)) waiting.get(m.id)(m);
    else answers.set(m.id, m);
  });
  let next = 0;
  const ask = (method, params) =>
    new Promise((resolve) => {
      const id = ++next;
      waiting.set(id, resolve);
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  await ask("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } });
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  const out = {};
  for (const l of lists) out[l.field] = (await ask(l.method, {})).result?.[l.field] ?? [];
  child.stdin.end();
  child.kill();
  return out;
}

// connect starts the aggregator on file with a client of the SDK sdk; the aggregator's stderr
// is collected in client.stderr, its log messages in client.logs.
async function connect(sdk, file) {
  const { Client, Stdio } = sdks[sdk];
  const client = new Client({ name: `interop-withheld-${sdk}`, version: "1.0.0" }, { capabilities: {} });
  client.logs = [];
  if (sdk === "v1") client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => client.logs.push(n.params));
  else client.setNotificationHandler("notifications/message", (n) => client.logs.push(n.params));
  const transport = new Stdio({ command: aggregator, args: ["--config", file], stderr: "pipe" });
  client.stderr = "";
  transport.stderr?.on("data", (b) => (client.stderr += b));
  await client.connect(transport);
  return client;
}

before(() => {
  for (const bin of [aggregator, fixture]) assert.ok(fs.existsSync(bin), `no binary at ${bin}: run make interop, or set AGGREGATOR and FIXTURE`);
  fs.writeFileSync(config, JSON.stringify({ mcpServers: servers }));
});

after(() => fs.rmSync(work, { recursive: true, force: true }));

test("the malformed server's lists are rejected by both clients when connected directly", async () => {
  for (const sdk of Object.keys(sdks)) {
    const { Client, Stdio } = sdks[sdk];
    const client = new Client({ name: "interop-direct", version: "1.0.0" }, { capabilities: {} });
    await client.connect(new Stdio({ command: fixture, args: servers.raw.args, stderr: "ignore" }));
    try {
      for (const l of lists) {
        const { error } = await outcome(l.call(client));
        assert.ok(error, `${sdk} accepts the ${l.field} of the malformed server`);
      }
    } finally {
      await client.close();
    }
  }
});

test("through the aggregator both clients list every valid definition of every server, as the servers wrote it", async () => {
  const direct = {};
  for (const [key, s] of Object.entries(servers)) direct[key] = await raw(s.command, s.args, s.env);
  const through = await raw(aggregator, ["--config", config]);
  for (const l of lists) {
    // What the servers list, in key order, without the withheld definitions, tools and
    // prompts renamed: the aggregator's raw list, in order, with every member in its order.
    const want = [];
    for (const key of Object.keys(servers).sort()) {
      for (const def of direct[key][l.field]) {
        if (key === "raw" && withheldIds[l.field].includes(def[l.id])) continue;
        want.push(l.id === "name" ? JSON.stringify({ ...def, name: `${key}:${def.name}` }) : JSON.stringify(def));
      }
    }
    const got = through[l.field].filter((d) => !String(d.uri).startsWith("mcp-simple-aggregator://")).map((d) => JSON.stringify(d));
    assert.deepEqual(got, want, l.method);
  }
  for (const sdk of Object.keys(sdks)) {
    const client = await connect(sdk, config);
    try {
      for (const l of lists) {
        const { result, error } = await outcome(l.call(client));
        assert.ok(result, `${sdk} rejects the aggregated ${l.field}: ${error?.message}`);
        const ids = result[l.field].map((d) => d[l.id]).filter((id) => !String(id).startsWith("mcp-simple-aggregator://"));
        const want = through[l.field].map((d) => d[l.id]).filter((id) => !String(id).startsWith("mcp-simple-aggregator://"));
        assert.deepEqual(ids, want, `${sdk}: ${l.method}`);
      }
    } finally {
      await client.close();
    }
  }
});

test("each withheld definition is named once on stderr, to the client as a warning, and in check", async () => {
  for (const sdk of Object.keys(sdks)) {
    const client = await connect(sdk, config);
    try {
      await client.listTools();
      const deadline = Date.now() + 10000;
      while (client.logs.length < withheldLines.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const warnings = client.logs.filter((l) => l.level === "warning" && String(l.data).includes("is withheld")).map((l) => l.data);
      assert.deepEqual(warnings, withheldLines, `${sdk}: the log messages`);
      // stderr is written by a writer of its own (it never holds up the protocol): it may trail
      // the client's log messages by a moment.
      while (withheldLines.some((line) => !client.stderr.includes(line)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      for (const line of withheldLines) {
        assert.equal(client.stderr.split(line).length - 1, 1, `${sdk}: stderr names it once: ${line}\n${client.stderr}`);
      }
    } finally {
      await client.close();
    }
  }
  let out;
  try {
    out = execFileSync(aggregator, ["check", "--config", config], { encoding: "utf8" });
  } catch (err) {
    assert.fail(`check failed (${err.status}): ${err.stdout}`);
  }
  for (const line of withheldLines) assert.ok(out.includes(`\n${line}\n`), `check does not name: ${line}\n${out}`);
  assert.match(out, /^5 of 5 servers healthy, \d+ tools; 4 definitions withheld/m);
});

test("a call to a withheld tool, or a get of a withheld prompt, says it is withheld and why", async () => {
  for (const sdk of Object.keys(sdks)) {
    const client = await connect(sdk, config);
    try {
      const call = await outcome(client.callTool({ name: "raw:plain", arguments: {} }));
      assert.equal(call.error?.code, -32602, `${sdk}: ${JSON.stringify(call)}`);
      assert.match(call.error.message, /Unknown tool: raw:plain: server "raw" lists this tool, but it is withheld because clients would reject the whole list over its definition: \/inputSchema\/type is missing; the MCP schema requires "object"/);
      const get = await outcome(client.getPrompt({ name: "raw:unnamed_args" }));
      assert.equal(get.error?.code, -32602, `${sdk}: ${JSON.stringify(get)}`);
      assert.match(get.error.message, /Unknown prompt: raw:unnamed_args: .* withheld .*\/arguments\/0\/name is missing/);
      const read = await outcome(client.readResource({ uri: "raw://static/late" }));
      // -32002, which v2 reports as -32602 (the code 2026-07-28 gives a resource not found).
      assert.equal(read.error?.code, sdk === "v1" ? -32002 : -32602, `${sdk}: ${JSON.stringify(read)}`);
      assert.match(read.error.message, /withheld .*\/annotations\/lastModified/);
      // The rest of the server works.
      const echo = await outcome(client.callTool({ name: "raw:echo", arguments: { text: "still here" } }));
      assert.deepEqual(echo.result?.structuredContent, { text: "still here" }, `${sdk}: ${JSON.stringify(echo)}`);
    } finally {
      await client.close();
    }
  }
});

// One list of one definition, answered in memory: what a client makes of a definition, with
// the client's own code (its schemas, and v1's compilation of output schemas).
class OneList {
  constructor(field, defs) {
    this.field = field;
    this.defs = defs;
  }
  async start() {}
  async close() {
    this.onclose?.();
  }
  async send(m) {
    if (m.id === undefined) return;
    const answer = (msg) => queueMicrotask(() => this.onmessage?.({ jsonrpc: "2.0", id: m.id, ...msg }));
    if (m.method === "initialize") {
      return answer({ result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {}, prompts: {}, resources: {} }, serverInfo: { name: "one", version: "1" } } });
    }
    const l = lists.find((l) => l.method === m.method);
    if (l?.field === this.field) return answer({ result: { [this.field]: this.defs } });
    answer({ error: { code: -32601, message: "Method not found" } });
  }
}

const fields = { tool: "tools", prompt: "prompts", resource: "resources", resourceTemplate: "resourceTemplates" };

async function accepts(sdk, field, def) {
  const client = new sdks[sdk].Client({ name: "interop-verdict", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new OneList(field, [def]));
  try {
    const { result } = await outcome(lists.find((l) => l.field === field).call(client));
    return result !== undefined;
  } finally {
    await client.close();
  }
}

test("the corpus: the clients' verdicts are the recorded ones, and the aggregator serves exactly what both accept", async () => {
  const defs = { tools: [], prompts: [], resources: [], resourceTemplates: [] };
  for (const c of corpus) {
    const field = fields[c.kind];
    const verdicts = { v1: await accepts("v1", field, c.definition), v2: await accepts("v2", field, c.definition) };
    assert.equal(verdicts.v1 && verdicts.v2, c.accept, `${c.kind} (${c.note}): v1 ${verdicts.v1}, v2 ${verdicts.v2}: ${JSON.stringify(c.definition)}`);
    defs[field].push(c.definition);
  }
  const file = path.join(work, "corpus-defs.json");
  fs.writeFileSync(file, JSON.stringify(defs));
  const corpusConfig = path.join(work, "config-corpus.json");
  fs.writeFileSync(corpusConfig, JSON.stringify({ mcpServers: { c: { command: fixture, args: ["-full", "-defs", file] } } }));
  const own = await raw(fixture, ["-full"]); // the fixture's own definitions, served too
  for (const sdk of Object.keys(sdks)) {
    const client = await connect(sdk, corpusConfig);
    try {
      for (const l of lists) {
        const { result, error } = await outcome(l.call(client));
        assert.ok(result, `${sdk} rejects the ${l.field} of the corpus through the aggregator: ${error?.message}`);
        const ownIds = own[l.field].map((d) => (l.id === "name" ? `c:${d.name}` : d[l.id]));
        const got = result[l.field].map((d) => d[l.id]).filter((id) => !ownIds.includes(id) && !String(id).startsWith("mcp-simple-aggregator://"));
        const want = corpus
          .filter((c) => fields[c.kind] === l.field && c.accept)
          .map((c) => (l.id === "name" ? `c:${c.definition.name}` : c.definition[l.id]));
        assert.deepEqual(got, want, `${sdk}: ${l.method} serves what both clients accept`);
      }
    } finally {
      await client.close();
    }
  }
});

// The patterns the aggregator judges as the v1 client's Ajv does (new RegExp(pattern, "u")):
// their recorded verdicts hold in this Node (those marked doubt may be valid in newer ones).
test("the patterns' recorded verdicts are JavaScript's", () => {
  const { patterns } = JSON.parse(fs.readFileSync(path.resolve(here, "../../internal/mcpschema/testdata/patterns.json"), "utf8"));
  for (const { pattern, valid, doubt } of patterns) {
    if (doubt) continue;
    let compiles = true;
    try {
      new RegExp(pattern, "u");
    } catch {
      compiles = false;
    }
    assert.equal(compiles, valid, `new RegExp(${JSON.stringify(pattern)}, "u")`);
  }
});

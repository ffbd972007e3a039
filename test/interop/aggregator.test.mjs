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
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

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

async function connect(command, args, env) {
  const client = new Client({ name: "interop-test", version: "1.0.0" });
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
  assert.equal(tools.length, compared, "the aggregator lists tools no server has");
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

async function outcome(promise) {
  try {
    return { result: await promise };
  } catch (err) {
    return { error: { code: err.code, message: err.message, data: err.data } };
  }
}

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

// Interop of --tool-search: the official TypeScript SDK client against the MCP reference
// servers through the aggregator in its search mode. The SDK validates every answer (a tool
// list it cannot parse loses every tool): the aggregator's own tools must pass, searches must
// find the servers' tools with their definitions as listed without the mode, and calls through
// call_tool and call_read_only_tool must return what a direct call returns.
//
// Run with `make interop`, or `npm test` here with AGGREGATOR set to the binary.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = import.meta.dirname;
const aggregator = process.env.AGGREGATOR || path.resolve(here, "../../bin/mcp-simple-aggregator");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-interop-search-"));
const shared = path.join(work, "files");
fs.mkdirSync(shared);
fs.writeFileSync(path.join(shared, "hello.txt"), "hello from the tool search test\n");

const bin = (pkg) => path.join(here, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js");

function config(run) {
  const file = path.join(work, `config-${run}.json`);
  fs.writeFileSync(file, JSON.stringify({
    mcpServers: {
      everything: { command: process.execPath, args: [bin("server-everything"), "stdio"] },
      memory: { command: process.execPath, args: [bin("server-memory")], env: { MEMORY_FILE_PATH: path.join(work, `memory-${run}.jsonl`) }, alwaysLoad: true },
      files: { command: process.execPath, args: [bin("server-filesystem"), shared] },
    },
  }));
  return file;
}

async function connect(args) {
  const client = new Client({ name: "interop-test", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StdioClientTransport({ command: aggregator, args, stderr: "ignore" }));
  return client;
}

let plain, search;

before(async () => {
  assert.ok(fs.existsSync(aggregator), `no aggregator binary at ${aggregator}: run make interop, or set AGGREGATOR`);
  plain = await connect(["--config", config("plain")]);
  search = await connect(["--config", config("search"), "--tool-search"]);
});

after(async () => {
  await Promise.all([plain, search].map((c) => c?.close()));
  fs.rmSync(work, { recursive: true, force: true });
});

async function find(args) {
  const res = await search.callTool({ name: "search_tools", arguments: args });
  assert.ok(!res.isError, `search_tools ${JSON.stringify(args)}: ${res.content?.[0]?.text}`);
  return JSON.parse(res.content[0].text);
}

test("the list: the aggregator's three tools and the alwaysLoad server's, as the SDK parses them", async () => {
  const all = (await plain.listTools()).tools;
  const { tools } = await search.listTools();
  const memory = all.filter((t) => t.name.startsWith("memory:"));
  assert.deepEqual(tools.map((t) => t.name), ["search_tools", "call_tool", "call_read_only_tool", ...memory.map((t) => t.name)]);
  assert.deepEqual(tools.slice(3), memory);
  assert.equal(tools[2].annotations.readOnlyHint, true);
  assert.equal(tools[1].annotations.readOnlyHint, false);
  assert.match(search.getInstructions() ?? "", /files \(\d+ tools\)/);
});

test("a search finds tools with the definitions the list has without the mode", async () => {
  const all = new Map((await plain.listTools()).tools.map((t) => [t.name, t]));
  const found = await find({ query: "show me what is inside a text file", limit: 3 });
  assert.ok(found.tools.length > 0 && found.tools.length <= 3, JSON.stringify(found));
  assert.ok(found.tools.some((t) => t.name === "files:read_text_file"), found.tools.map((t) => t.name).join(", "));
  for (const t of found.tools) assert.deepEqual(t, all.get(t.name));
  assert.equal((await find({ query: "everything:get-sum" })).tools[0].name, "everything:get-sum");
  const none = await find({ query: "bake a chocolate cake" });
  assert.deepEqual(none.tools, []);
  assert.match(none.hint, /other words/);
});

test("calls through call_tool and call_read_only_tool return what a direct call returns", async () => {
  const cases = [
    ["call_tool", "everything:echo", { message: "héllo through the search" }],
    ["call_tool", "everything:get-sum", { a: 2, b: 40.5 }],
    ["call_read_only_tool", "files:read_text_file", { path: path.join(shared, "hello.txt") }],
    ["call_read_only_tool", "files:list_directory", { path: shared }],
  ];
  for (const [via, name, args] of cases) {
    const want = await plain.callTool({ name, arguments: args });
    const got = await search.callTool({ name: via, arguments: { name, arguments: args } });
    assert.deepEqual(got, want, `${via} ${name}`);
  }
  const refused = await search.callTool({ name: "call_read_only_tool", arguments: { name: "files:write_file", arguments: { path: path.join(shared, "x.txt"), content: "no" } } });
  assert.equal(refused.isError, true);
  assert.match(refused.content[0].text, /not marked read-only/);
  assert.ok(!fs.existsSync(path.join(shared, "x.txt")), "the refused write happened");
});

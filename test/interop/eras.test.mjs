// Protocol eras: the TypeScript SDK v2 client (@modelcontextprotocol/client) against the v2
// server of servers/modern-server.mjs, directly, to prove the peers the era tests use work here.
// No aggregator is involved: `node --test eras.test.mjs` runs these alone.
//
// What the v2 client does (2.4.0): versionNegotiation.mode picks the handshake. Absent or
// "legacy": initialize, no probe. "auto": a server/discover probe, falling back to initialize
// on a legacy server. { pin: "2026-07-28" }: the probe, and no fall back. On StdioClientTransport
// the probe runs in a short-lived sibling process started from the same command, which is
// closed once the era is known; the session's own process never sees server/discover.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { readTrace } from "./trace.mjs";

const here = import.meta.dirname;
const server = path.join(here, "servers", "modern-server.mjs");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-eras-"));
const clients = [];

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  fs.rmSync(work, { recursive: true, force: true });
});

// connect starts the server (--dual when dual) with a client of the given negotiation mode,
// whose elicitation handler answers {"name": "Ada"}. It returns the client, the messages it
// elicited, and the file tracing what each server process received.
async function connect(mode, { dual = false } = {}) {
  const tracePath = path.join(work, `trace-${clients.length}`);
  const elicited = [];
  const client = new Client(
    { name: "eras-test", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, ...(mode && { versionNegotiation: { mode } }) },
  );
  client.setRequestHandler("elicitation/create", async (request) => {
    elicited.push(request.params.message);
    return { action: "accept", content: { name: "Ada" } };
  });
  clients.push(client);
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [server, ...(dual ? ["--dual"] : [])],
      env: { ...process.env, MODERN_SERVER_TRACE: tracePath },
      stderr: "ignore",
    }),
  );
  return { client, elicited, trace: () => readTrace(tracePath) };
}

// features lists and calls every tool, elicitation answered by the client's handler.
async function features(client, elicited, era) {
  assert.equal(client.getProtocolEra(), era);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ["echo", "elicit", "era", "progress"]);
  const echo = await client.callTool({ name: "echo", arguments: { text: "héllo", n: 1.5 } });
  assert.deepEqual(echo.structuredContent, { text: "héllo", n: 1.5 });
  const served = await client.callTool({ name: "era", arguments: {} });
  assert.deepEqual(served.structuredContent, { era });
  // Modern: an input_required result the client fulfils and retries inside callTool. Legacy:
  // the server's legacy shim sends elicitation/create and runs the tool again.
  const elicit = await client.callTool({ name: "elicit", arguments: { message: "Who?" } });
  assert.deepEqual(elicit.structuredContent, { answer: { action: "accept", content: { name: "Ada" } } });
  assert.deepEqual(elicited, ["Who?"]);
  const progress = [];
  await client.callTool({ name: "progress", arguments: { steps: 2 } }, { onprogress: (p) => progress.push(p.message) });
  assert.deepEqual(progress, ["step 1", "step 2"]);
}

test("a client pinned to 2026-07-28 and the modern-only server: modern, the probe in a process of its own", async () => {
  const { client, elicited, trace } = await connect({ pin: "2026-07-28" });
  await features(client, elicited, "modern");
  const [probe, session, ...rest] = trace();
  assert.deepEqual(probe, ["server/discover"]);
  assert.ok(!session.includes("server/discover") && !session.includes("initialize"), `the session's process got ${session}`);
  assert.deepEqual(rest, []);
});

test("a probing client (auto) and the modern-only server: modern", async () => {
  const { client, elicited } = await connect("auto");
  await features(client, elicited, "modern");
});

test("a probing client (auto) and the dual server: modern", async () => {
  const { client, elicited } = await connect("auto", { dual: true });
  await features(client, elicited, "modern");
});

test("a legacy client and the dual server: legacy, initialize first, elicitation as a request", async () => {
  const { client, elicited, trace } = await connect(undefined, { dual: true });
  await features(client, elicited, "legacy");
  const [session, ...rest] = trace();
  assert.equal(session[0], "initialize");
  assert.ok(session.includes("response"), "the answer to elicitation/create");
  assert.deepEqual(rest, []);
});

test("a legacy client and the modern-only server: initialize is refused with the supported versions", async () => {
  await assert.rejects(connect(undefined), (err) => {
    assert.equal(err.code, -32022);
    assert.deepEqual(err.data, { supported: ["2026-07-28"], requested: "2025-11-25" });
    return true;
  });
});

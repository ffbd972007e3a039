// Interop: --share with real TypeScript SDK clients of both eras. Several sessions at once (the
// aggregator processes the clients start, each with --share --linger 1s) run their servers in
// one shared background process, and each session must see exactly what the same client sees
// from an aggregator without --share on the same configuration.
//
// The sessions: three v1 clients (@modelcontextprotocol/sdk, legacy), two of them alike (the
// same clientInfo and capabilities) and one not, and two v2 clients (@modelcontextprotocol/
// client) alike but for their mode, one pinned to 2026-07-28 and one in the default (legacy)
// mode. The servers: the "everything" reference server (legacy, initialized once, so shared only
// by sessions whose clients tell it the same initialize; the tools it lists depend on the
// client's capabilities) and servers/modern-server.mjs (modern only: each request carries its
// client, so one process serves every session).
//
// What is proven, each against the same client connected to an unshared aggregator: the same
// tools/list (on the wire, byte for byte; across eras, the same tools), the same call results;
// one shared process, running the modern server once and the legacy one once per group of
// alike clients, and no server in a session's own aggregator; concurrent calls with progress
// from every session each get all their own progress and none of another's; a shared legacy
// server's elicitation reaches the session whose call asks; and after the last client closes,
// within the linger and a few seconds, no process of the test is left; and sessions of
// different clients that start all at once share the modern server.
//
// The test has a runtime directory of its own (XDG_RUNTIME_DIR), where its sessions find their
// shared process, and no other's.
//
// Run with AGGREGATOR set to the binary, or after `make build` (bin/mcp-simple-aggregator).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { Client as ClientV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";
import { bare, outcome } from "./results.mjs";

const here = import.meta.dirname;
const aggregator = process.env.AGGREGATOR || path.resolve(here, "../../bin/mcp-simple-aggregator");
const work = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-shared-"));
// Short: the shared process's socket is made in it, and a socket's path is at most 107 bytes.
const runtime = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-sh-"));
const modernServer = path.join(here, "servers", "modern-server.mjs");
const bin = (pkg) => path.join(here, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js");

const PIN = { pin: "2026-07-28" };
const LINGER_MS = 1000;
const share = ["--share", "--linger", `${LINGER_MS / 1000}s`];

// Every process this file starts carries this marker in its environment (the aggregator passes
// its environment to its servers, and a session to the shared process it starts), so the
// processes left behind can be found.
const MARKER = "MCP_SHARED_TEST";
const marker = crypto.randomUUID();

function writeConfig(name, servers) {
  const file = path.join(work, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify({ mcpServers: servers }));
  return file;
}

const config = writeConfig("servers", {
  everything: { command: process.execPath, args: [bin("server-everything"), "stdio"] },
  modern: { command: process.execPath, args: [modernServer] },
});

// The clients. Those of one group tell a legacy server the same initialize: the same
// clientInfo and capabilities (roots are not declared: everything asks for them at start-up).
// The v2 pinned client's session is modern, but the aggregator tells a legacy server what a
// legacy client of the latest legacy version would say, which is what the v2 client in legacy
// mode says: the two are one group. B declares no elicitation, and everything lists it fewer
// tools.
const full = { elicitation: { form: {} }, sampling: {} };
const kinds = {
  A: { sdk: "v1", info: { name: "shared-test-a", version: "1.0.0" }, capabilities: full, group: "A" },
  B: { sdk: "v1", info: { name: "shared-test-b", version: "1.0.0" }, capabilities: { sampling: {} }, group: "B" },
  pinned: { sdk: "v2", mode: PIN, info: { name: "shared-test-v2", version: "1.0.0" }, capabilities: full, group: "V2" },
  legacy2: { sdk: "v2", info: { name: "shared-test-v2", version: "1.0.0" }, capabilities: full, group: "V2" },
};
const sessionKinds = [
  ["A1", "A"],
  ["A2", "A"],
  ["B", "B"],
  ["pinned", "pinned"],
  ["legacy2", "legacy2"],
];

const all = []; // every connection of this file, shared or not

// connect starts the aggregator (with --share when shared) for a client of kind, and notes
// what crosses its stdio: the requests it sends (by ID) and every message it receives, before
// its SDK handles them (an SDK runs a notification's handler a microtask after it reads it, and
// may settle the request first: progress read with the result is lost at the client, not on
// the wire).
async function connect(label, kind, { shared, configFile = config, runtimeDir = runtime } = {}) {
  const k = kinds[kind];
  const c = { label, kind, ...k, shared, sent: new Map(), received: [], asked: [], errors: [] };
  const args = ["--config", configFile, ...(shared ? share : [])];
  const env = { ...process.env, [MARKER]: marker, XDG_RUNTIME_DIR: runtimeDir };
  // Each answers elicitation with its own label: whose answer a server got shows whom it asked.
  const elicit = (params) => {
    c.asked.push(["elicitation", params.message]);
    return { action: "accept", content: { name: label } };
  };
  const sample = (params) => {
    c.asked.push(["sampling", params.messages.length]);
    return { role: "assistant", model: "test-model", content: { type: "text", text: `sampled by ${label}` } };
  };
  if (k.sdk === "v1") {
    c.client = new ClientV1(k.info, { capabilities: k.capabilities });
    if (k.capabilities.elicitation) c.client.setRequestHandler(ElicitRequestSchema, async (r) => elicit(r.params));
    if (k.capabilities.sampling) c.client.setRequestHandler(CreateMessageRequestSchema, async (r) => sample(r.params));
    c.transport = new StdioV1({ command: aggregator, args, env, stderr: "ignore" });
  } else {
    c.client = new ClientV2(k.info, { capabilities: k.capabilities, ...(k.mode && { versionNegotiation: { mode: k.mode } }) });
    if (k.capabilities.elicitation) c.client.setRequestHandler("elicitation/create", async (r) => elicit(r.params));
    if (k.capabilities.sampling) c.client.setRequestHandler("sampling/createMessage", async (r) => sample(r.params));
    c.transport = new StdioV2({ command: aggregator, args, env, stderr: "ignore" });
  }
  c.client.onerror = (err) => c.errors.push(err.message);
  all.push(c);
  await c.client.connect(c.transport);
  c.pid = c.transport.pid;
  const send = c.transport.send.bind(c.transport);
  c.transport.send = (message, options) => {
    if (message.method && message.id !== undefined) c.sent.set(JSON.stringify(message.id), message);
    return send(message, options);
  };
  const onmessage = c.transport.onmessage;
  c.transport.onmessage = (message, extra) => {
    c.received.push(message);
    return onmessage.call(c.transport, message, extra);
  };
  return c;
}

// call calls a tool in either SDK (v1 takes a result schema before the options).
const call = (c, name, args, options) =>
  c.sdk === "v1" ? c.client.callTool({ name, arguments: args }, undefined, options) : c.client.callTool({ name, arguments: args }, options);

// raw is the result of c's last request of method as it came on the wire, re-serialized
// (JSON.parse keeps the order of members): what the aggregator wrote, apart from spacing.
function raw(c, method) {
  for (let i = c.received.length - 1; i >= 0; i--) {
    const m = c.received[i];
    if (m.method || m.id === undefined) continue;
    if (c.sent.get(JSON.stringify(m.id))?.method === method) return JSON.stringify(m.result ?? { error: m.error });
  }
  assert.fail(`${c.label}: no answer to ${method} on the wire`);
}

// withoutExecution is a tool definition without "execution" (the legacy tasks' taskSupport),
// which 2026-07-28's Tool has not.
const withoutExecution = ({ execution, ...tool }) => tool;
const byName = (list) => [...list].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

async function until(what, check, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// marked are the live processes with this run's marker: pid, parent, command line.
function marked() {
  const found = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue; // a zombie: ended, its parent not yet told
      if (!fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`${MARKER}=${marker}`)) continue;
      const args = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").slice(0, -1);
      found.push({ pid, ppid: Number(fields[1]), args });
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

const listing = (ps) => ps.map((p) => `${p.pid} (parent ${p.ppid}): ${p.args.join(" ")}`).join("\n");

// serverOf names the server a process runs, if it is one.
function serverOf(p) {
  if (p.args.some((a) => a.includes(`${path.sep}server-everything${path.sep}`))) return "everything";
  if (p.args.includes(modernServer)) return "modern";
  return undefined;
}

// sharedProcesses are the shared processes whose socket is in dir.
const sharedProcesses = (ps, dir = runtime) => ps.filter((p) => p.args[1] === "__shared" && p.args[2]?.startsWith(dir + path.sep));

// status is what check says the shared process runs (its sessions and servers), or null.
function status(dir = runtime) {
  const empty = writeConfig("empty", {});
  const r = spawnSync(aggregator, ["check", "--config", empty, "--json"], {
    env: { ...process.env, XDG_RUNTIME_DIR: dir },
    encoding: "utf8",
    timeout: 20000,
  });
  return JSON.parse(r.stdout).shared ?? null;
}

const sessions = []; // with --share, in the order of sessionKinds
const unshared = {}; // without, one per kind

before(async () => {
  assert.ok(fs.existsSync(aggregator), `no aggregator binary at ${aggregator}: run make build, or set AGGREGATOR`);
  // The first session starts the shared process and learns each server's era; the others come
  // all at once, with the unshared ones. (Sessions that all come at once, before the modern
  // server's era is known, share it too: see the test at the end.)
  const first = await connect(...sessionKinds[0], { shared: true });
  const rest = await Promise.all([
    ...sessionKinds.slice(1).map(([label, kind]) => connect(label, kind, { shared: true })),
    ...Object.keys(kinds).map((kind) => connect(`unshared ${kind}`, kind, { shared: false })),
  ]);
  sessions.push(first, ...rest.slice(0, sessionKinds.length - 1));
  for (const c of rest.slice(sessionKinds.length - 1)) unshared[c.kind] = c;
});

after(async () => {
  await Promise.all(all.map((c) => c.client.close().catch(() => {})));
  // Whatever a failed test left: this run's processes alone, by their IDs.
  for (const p of marked()) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  fs.rmSync(work, { recursive: true, force: true });
  fs.rmSync(runtime, { recursive: true, force: true });
});

test("each session's era is its client's", () => {
  for (const c of sessions) {
    if (c.sdk === "v2") assert.equal(c.client.getProtocolEra(), c.mode ? "modern" : "legacy", c.label);
    assert.equal(c.client.getServerVersion()?.name, "mcp-simple-aggregator", c.label);
  }
});

test("every session lists, byte for byte, the tools its client gets unshared; across eras, the same tools", async () => {
  // All at once. Each session lists the catalog it read from the shared servers at its start.
  const listed = await Promise.all([...sessions, ...Object.values(unshared)].map((c) => c.client.listTools()));
  const tools = new Map([...sessions, ...Object.values(unshared)].map((c, i) => [c, listed[i].tools]));
  for (const c of sessions) {
    const twin = unshared[c.kind];
    assert.ok(tools.get(c).some((t) => t.name.startsWith("everything:")) && tools.get(c).some((t) => t.name.startsWith("modern:")), `${c.label} lists both servers`);
    assert.equal(raw(c, "tools/list"), raw(twin, "tools/list"), `${c.label}: tools/list on the wire`);
    assert.deepEqual(tools.get(c), tools.get(twin), `${c.label}: the tools`);
  }
  const [a1, , b, pinned, legacy2] = sessions;
  // Legacy clients with the same capabilities get the same tools whatever their SDK; a pinned
  // client gets them without the legacy tasks (execution), and none that runs only as a task.
  assert.deepEqual(tools.get(legacy2), tools.get(a1));
  const servable = tools.get(a1).filter((t) => t.execution?.taskSupport !== "required");
  assert.deepEqual(byName(tools.get(pinned)), byName(servable.map(withoutExecution)));
  // everything offers elicitation's tools to a client that declares it: B's own process does
  // not list what the others' do.
  const names = (c) => tools.get(c).map((t) => t.name);
  assert.ok(names(a1).includes("everything:trigger-elicitation-request"));
  assert.ok(!names(b).includes("everything:trigger-elicitation-request"), `B lists ${names(b)}`);
  assert.ok(names(b).includes("everything:trigger-sampling-request"));
});

test("process counts: one shared process; the modern server once for all sessions, the legacy one once per client initialize", async () => {
  // The groups of clients that tell a legacy server the same initialize.
  const groups = new Map();
  for (const c of sessions) groups.set(c.group, (groups.get(c.group) ?? 0) + 1);
  const want = { everything: [...groups.values()].sort(), modern: [sessions.length] };

  // A process the pinned client's probe started for its own aggregator may linger a while.
  let st;
  let ps;
  const counts = () => {
    ps = marked();
    st = status();
    const got = {};
    for (const s of st?.servers ?? []) (got[s.keys.join(",")] ??= []).push(s.sessions);
    for (const list of Object.values(got)) list.sort();
    return JSON.stringify(got, Object.keys(got).sort()) === JSON.stringify(want);
  };
  await until("the shared servers' final count", counts, LINGER_MS + 8000).catch(() => {
    assert.fail(`the shared process runs ${JSON.stringify(st?.servers)}, want sessions per process ${JSON.stringify(want)}\n${listing(ps)}`);
  });

  // One shared process, in this test's runtime directory, which check names.
  const daemons = sharedProcesses(ps);
  assert.equal(daemons.length, 1, `shared processes:\n${listing(daemons)}`);
  const [daemon] = daemons;
  assert.equal(st.pid, daemon.pid);
  assert.deepEqual(st.sessions.map((s) => s.pid).sort(), sessions.map((c) => c.pid).sort(), "the sessions check names");

  // Its servers are the processes /proc shows, its children; and every server of a session
  // runs there: a session's aggregator has no server of its own.
  const children = ps.filter((p) => p.ppid === daemon.pid && serverOf(p));
  const count = (list, key) => list.filter((p) => serverOf(p) === key).length;
  assert.equal(count(children, "modern"), 1, listing(children));
  assert.equal(count(children, "everything"), groups.size, listing(children));
  assert.deepEqual(children.map((p) => p.pid).sort(), st.servers.map((s) => s.pid).sort());
  assert.deepEqual(st.servers.filter((s) => s.keys[0] === "modern").map((s) => s.era), ["modern"]);
  assert.deepEqual(st.servers.filter((s) => s.keys[0] === "everything").map((s) => s.era), ["legacy", "legacy", "legacy"]);
  for (const c of sessions) {
    const own = ps.filter((p) => p.ppid === c.pid && serverOf(p));
    assert.deepEqual(own, [], `${c.label}'s aggregator runs servers of its own`);
  }
  // Unshared, each session runs its own (the check above would see nothing otherwise).
  for (const c of Object.values(unshared)) {
    const own = ps.filter((p) => p.ppid === c.pid).map(serverOf).filter(Boolean).sort();
    assert.deepEqual(own, ["everything", "modern"], `${c.label}'s servers`);
  }
});

test("calls from every session at once return what the same client gets unshared", async () => {
  const calls = [
    ["everything:echo", { message: "héllo from a shared session" }],
    ["everything:get-sum", { a: 2, b: 40.5 }],
    ["everything:get-structured-content", { location: "New York" }],
    ["everything:get-annotated-message", { messageType: "error", includeImage: true }],
    ["everything:get-sum", { a: "not a number" }],
    ["everything:no-such-tool", {}],
    ["modern:echo", { text: "héllo", n: 1.5 }],
    ["modern:era", {}],
  ];
  const run = async (c) => {
    const out = [];
    for (const [name, args] of calls) out.push({ ...(await outcome(call(c, name, args))), raw: raw(c, "tools/call") });
    return out;
  };
  const got = await Promise.all(sessions.map(run));
  const want = new Map(await Promise.all(Object.values(unshared).map(async (c) => [c.kind, await run(c)])));
  sessions.forEach((c, i) => {
    calls.forEach(([name, args], j) => {
      assert.deepEqual(got[i][j], want.get(c.kind)[j], `${c.label}: ${name}(${JSON.stringify(args)})`);
    });
  });
  // Across eras: the pinned client gets what the legacy ones get, in the modern envelope.
  const [a1, , , pinned, legacy2] = got;
  calls.forEach(([name], j) => {
    const strip = (o) => (o.result ? { result: bare(o.result) } : { error: o.error });
    if (name === "everything:no-such-tool") return; // the error's wording is the era's
    assert.deepEqual(strip(pinned[j]), strip(a1[j]), `pinned and v1: ${name}`);
    assert.deepEqual(strip(legacy2[j]), strip(a1[j]), `v2 legacy and v1: ${name}`);
  });
});

test("concurrent calls with progress from every session: each gets its own progress, and only its own", async () => {
  // One call of each server from every session at once, each with its own number of steps
  // (which every progress notification carries as its total): notifications misrouted to
  // another session would show there. Sessions of the same SDK and history send the same
  // progress tokens, which the shared process tells apart.
  const before = new Map(sessions.map((c) => [c, c.received.length]));
  const seen = new Map(sessions.map((c) => [c, { modern: [], everything: [] }]));
  const steps = (i, key) => (key === "modern" ? 3 + i : 2 + i);
  const results = await Promise.all(
    sessions.flatMap((c, i) => [
      call(c, "modern:progress", { steps: steps(i, "modern") }, { onprogress: (p) => seen.get(c).modern.push(p) }),
      call(c, "everything:trigger-long-running-operation", { duration: 1, steps: steps(i, "everything") }, {
        onprogress: (p) => seen.get(c).everything.push(p),
      }),
    ]),
  );

  // On the wire: the progress notifications each session got, by the server of the call whose
  // token they carry; a token the session did not send fails at once.
  const tokens = new Map(); // by session: token → server key
  for (const c of sessions) {
    const own = new Map();
    for (const m of c.sent.values()) {
      const token = m.params?._meta?.progressToken;
      if (m.method === "tools/call" && token !== undefined && /:(progress|trigger-long-running-operation)$/.test(m.params.name)) {
        own.set(JSON.stringify(token), m.params.name.split(":")[0]);
      }
    }
    assert.equal(own.size, 2, `${c.label}'s progress tokens`);
    tokens.set(c, own);
  }
  const [a1, a2] = sessions;
  assert.deepEqual([...tokens.get(a2)], [...tokens.get(a1)], "A1 and A2 (one process of everything) sent the same tokens");
  const wire = (c) => {
    const got = { modern: [], everything: [] };
    for (const m of c.received.slice(before.get(c))) {
      if (m.method !== "notifications/progress") continue;
      const key = tokens.get(c).get(JSON.stringify(m.params.progressToken));
      assert.ok(key, `${c.label} got progress for a token it did not send: ${JSON.stringify(m.params)}`);
      got[key].push(m.params);
    }
    return got;
  };
  // The last may come just after the answer it goes with.
  const complete = (c, i) => wire(c).modern.length >= steps(i, "modern") && wire(c).everything.length >= steps(i, "everything");
  await until("every progress notification", () => sessions.every(complete), 3000).catch(() => {});

  sessions.forEach((c, i) => {
    const [modern, everything] = results.slice(2 * i, 2 * i + 2).map(bare);
    assert.deepEqual(modern.structuredContent, { steps: steps(i, "modern") }, c.label);
    assert.equal(everything.content[0].text, `Long running operation completed. Duration: 1 seconds, Steps: ${steps(i, "everything")}.`, c.label);
    const got = wire(c);
    for (const key of ["modern", "everything"]) {
      // Every step of the session's own call, and nothing else.
      const n = steps(i, key);
      assert.deepEqual(got[key].map((p) => [p.progress, p.total]), Array.from({ length: n }, (_, j) => [j + 1, n]), `${c.label}: ${key}'s progress on the wire`);
      if (key === "modern") assert.deepEqual(got[key].map((p) => p.message), Array.from({ length: n }, (_, j) => `step ${j + 1}`));
      // What the SDK gave the call's onprogress is of those (it may miss the ones it reads with
      // the result: it runs a notification's handler a microtask later).
      const given = seen.get(c)[key].map((p) => [p.progress, p.total]);
      assert.ok(given.every(([p, t]) => t === n && p >= 1 && p <= n), `${c.label}: ${key}'s onprogress got ${JSON.stringify(given)}`);
    }
  });
});

test("a shared legacy server's elicitation goes to the session whose call asks, from every session at once", async () => {
  // A1 and A2 share everything's process, and pinned and legacy2 another. The first time a
  // tool asks, the shared process learns that it does (were another session's call in flight
  // then, the question could not be told apart, and would be answered with an error): once
  // alone in each process. From then on such calls take turns between sessions, and each
  // question reaches the handler of the session whose call asks, whose answer (its label)
  // comes back in the result.
  const askers = sessions.filter((c) => c.capabilities.elicitation);
  assert.deepEqual(askers.map((c) => c.label), ["A1", "A2", "pinned", "legacy2"]);
  const asks = async (c) => {
    const before = c.asked.length;
    const result = await call(c, "everything:trigger-elicitation-request", {});
    const text = result.content.map((x) => x.text ?? "").join("\n");
    assert.match(text, new RegExp(`^- Name: ${c.label}$`, "m"), `${c.label} got ${text}`);
    for (const other of askers) if (other !== c) assert.doesNotMatch(text, new RegExp(`^- Name: ${other.label}$`, "m"), `${c.label} got ${other.label}'s answer`);
    assert.deepEqual(c.asked.slice(before).map(([kind]) => kind), ["elicitation"], `${c.label} was asked`);
    return text;
  };
  await asks(askers[0]);
  await asks(askers[2]);
  const texts = await Promise.all(askers.map(asks));
  // The same question, and so the same result but for the name, as unshared.
  const twin = await asks(unshared.A);
  const unnamed = (text, c) => text.replaceAll(c.label, "NAME");
  askers.forEach((c, i) => assert.equal(unnamed(texts[i], c), unnamed(twin, unshared.A), c.label));
});

// Sessions of different clients that start all at once, before any has learned the modern
// server's era, share it: a session does not start a process of its own while one started for
// another client has not said its era.
test("sessions of different clients that start at once share the modern server", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-sh-"));
  const modernOnly = writeConfig("modern-only", { modern: { command: process.execPath, args: [modernServer] } });
  const at = (label, kind) => connect(label, kind, { shared: true, configFile: modernOnly, runtimeDir: dir });
  const cs = await Promise.all([at("at once A", "A"), at("at once B", "B"), at("at once legacy2", "legacy2")]);
  try {
    await Promise.all(cs.map((c) => call(c, "modern:era", {})));
    const ps = marked();
    const [daemon, ...more] = sharedProcesses(ps, dir);
    assert.ok(daemon && more.length === 0, listing(sharedProcesses(ps, dir)));
    const modern = ps.filter((p) => p.ppid === daemon.pid && serverOf(p) === "modern");
    assert.equal(modern.length, 1, `the modern server's processes:\n${listing(modern)}`);
  } finally {
    await Promise.all(cs.map((c) => c.client.close()));
    await until("the sessions' processes to end", () => sharedProcesses(marked(), dir).length === 0, LINGER_MS + 6000).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("after every client closes, nothing is left: no server, no shared process, no aggregator", async () => {
  assert.ok(marked().some((p) => sharedProcesses([p]).length), "the marker does not reach the shared process: the check below would see nothing");
  const closed = Date.now();
  await Promise.all(all.map((c) => c.client.close()));
  let left = [];
  await until("every process to end", () => (left = marked()).length === 0, LINGER_MS + 6000).catch(() => {
    assert.fail(`left ${Date.now() - closed} ms after the clients closed:\n${listing(left)}`);
  });
  assert.equal(status(), null, "check still finds a shared process");
  assert.ok(!fs.readdirSync(path.join(runtime, "mcp-simple-aggregator")).some((f) => f.endsWith(".sock")), "the socket is left");
});

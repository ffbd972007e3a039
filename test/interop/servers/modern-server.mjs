// A small MCP server on the TypeScript SDK v2 (@modelcontextprotocol/server), over stdio, for
// the protocol-era tests: the modern era (2026-07-28) only, or with --dual (or MODERN_SERVER_DUAL=1)
// the legacy era too, or with --legacy (or MODERN_SERVER_LEGACY=1) the legacy era only.
//
// serveStdio owns the era: the connection's opening (server/discover or a request with _meta
// protocolVersion 2026-07-28, or initialize) picks it. With legacy: "reject" an initialize is
// answered with -32022 naming 2026-07-28, and the connection stays open for a modern opening.
//
// Tools:
//   echo      returns its arguments as structuredContent
//   elicit    asks the client for {"name"} (form elicitation, {"message"} optional) and returns
//             {"answer": <the elicitation result>}; written the multi round-trip way
//             (inputRequired), which the SDK's legacy shim turns into elicitation/create for a
//             legacy client
//   progress  sends {"steps"} (default 3) progress notifications for the call's progressToken,
//             and answers 20 ms later
//   era       returns the era serving the connection, as the factory was told
//
// --legacy wires the server the classic way, McpServer.connect(new StdioServerTransport()):
// server/discover is answered -32601 (so a probing client falls back to initialize, and a
// pinned one fails), and elicit's inputRequired goes out as elicitation/create through the
// SDK's legacy shim, as with --dual to a legacy client.
//
// With MODERN_SERVER_TRACE=<file> every message received is noted there as a line
// "<pid> <method>" ("<pid> response" for answers), so tests see which process got what.
import fs from "node:fs";
import { McpServer, fromJsonSchema, inputRequired } from "@modelcontextprotocol/server";
import { serveStdio, StdioServerTransport } from "@modelcontextprotocol/server/stdio";

const dual = process.argv.includes("--dual") || process.env.MODERN_SERVER_DUAL === "1";
const legacy = process.argv.includes("--legacy") || process.env.MODERN_SERVER_LEGACY === "1";
const trace = process.env.MODERN_SERVER_TRACE;

const anyObject = () => fromJsonSchema({ type: "object", additionalProperties: true });

function build(ctx) {
  const server = new McpServer(
    { name: "modern-server", version: "1.0.0" },
    { capabilities: { tools: {} }, instructions: "A TypeScript SDK v2 server for the era tests." },
  );
  server.registerTool("echo", { description: "Returns its arguments.", inputSchema: anyObject() }, async (args) => ({
    content: [{ type: "text", text: "echo" }],
    structuredContent: args,
  }));
  server.registerTool("elicit", { description: "Asks the client for a name.", inputSchema: anyObject() }, async (args, c) => {
    const answer = c.mcpReq.inputResponses?.name;
    if (answer === undefined) {
      return inputRequired({
        inputRequests: {
          name: inputRequired.elicit({
            message: args.message ?? "What is your name?",
            requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
          }),
        },
      });
    }
    return { content: [{ type: "text", text: "elicited" }], structuredContent: { answer } };
  });
  server.registerTool("progress", { description: "Sends {steps} progress notifications.", inputSchema: anyObject() }, async (args, c) => {
    const steps = Number.isInteger(args.steps) && args.steps > 0 ? args.steps : 3;
    const progressToken = c.mcpReq._meta?.progressToken;
    if (progressToken !== undefined) {
      for (let i = 1; i <= steps; i++) {
        await c.mcpReq.notify({
          method: "notifications/progress",
          params: { progressToken, progress: i, total: steps, message: `step ${i}` },
        });
      }
    }
    // The v2 client runs notification handlers a microtask later but settles a response at
    // once: progress read in the same chunk as the result finds its handler gone ("unknown
    // token") and is lost. A pause before the answer keeps them apart.
    await new Promise((resolve) => setTimeout(resolve, 20));
    return { content: [{ type: "text", text: `${steps} steps` }], structuredContent: { steps } };
  });
  server.registerTool("era", { description: "Returns the era serving the connection.", inputSchema: anyObject() }, async () => ({
    content: [{ type: "text", text: ctx.era }],
    structuredContent: { era: ctx.era },
  }));
  return server;
}

// traced notes each message the transport delivers, by wrapping the handler serveStdio sets.
function traced(transport) {
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () =>
      handler &&
      ((message, extra) => {
        fs.appendFileSync(trace, `${process.pid} ${message.method ?? "response"}\n`);
        return handler(message, extra);
      }),
    set: (fn) => {
      handler = fn;
    },
  });
  return transport;
}

if (legacy) {
  const transport = new StdioServerTransport();
  await build({ era: "legacy" }).connect(trace ? traced(transport) : transport);
} else {
  serveStdio(build, {
    legacy: dual ? "serve" : "reject",
    transport: trace ? traced(new StdioServerTransport()) : undefined,
    onerror: (err) => console.error("modern-server:", err.message),
  });
}

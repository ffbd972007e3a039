// readTrace reads the file servers/modern-server.mjs writes with MODERN_SERVER_TRACE: the
// methods each server process received, by process, in the order the processes started.
import fs from "node:fs";

export function readTrace(file) {
  const byPid = new Map();
  for (const line of fs.readFileSync(file, "utf8").trim().split("\n")) {
    const [pid, method] = line.split(" ");
    if (!byPid.has(pid)) byPid.set(pid, []);
    byPid.get(pid).push(method);
  }
  return [...byPid.values()];
}

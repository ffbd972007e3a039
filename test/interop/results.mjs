// How the suites compare what a client gets through the aggregator with what it gets directly.

// outcome is a request's result or its error, as a value to compare.
export async function outcome(promise) {
  try {
    return { result: await promise };
  } catch (err) {
    return { error: { code: err.code, message: err.message, data: err.data } };
  }
}

// bare is a result without the modern envelope: what the server wrote.
export function bare(result) {
  if (!result || typeof result !== "object") return result;
  const { resultType, ttlMs, cacheScope, ...rest } = result;
  if (rest._meta) {
    const { "io.modelcontextprotocol/serverInfo": _, ...meta } = rest._meta;
    if (Object.keys(meta).length) rest._meta = meta;
    else delete rest._meta;
  }
  return rest;
}

// untimed: the everything server writes the wall-clock time into its dynamic resources ("... created at
// 12:27:03 AM"), in text and in base64 blobs alike, so a read directly and the same read through the
// aggregator differ whenever a second turns between them. untimed gives a copy of a result with
// those times replaced by a fixed mark; everything else is compared as it is.

const time = /created at \d{1,2}:\d{2}:\d{2}(\s?[AP]M)?/gu;

function unstamp(text) {
  return text.replace(time, "created at <time>");
}

export function untimed(value) {
  if (Array.isArray(value)) return value.map(untimed);
  if (value === null || typeof value !== "object") return typeof value === "string" ? unstamp(value) : value;
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === "blob" && typeof v === "string") {
      const text = Buffer.from(v, "base64").toString("utf8");
      const plain = unstamp(text);
      out[k] = plain === text ? v : Buffer.from(plain).toString("base64");
    } else {
      out[k] = untimed(v);
    }
  }
  return out;
}

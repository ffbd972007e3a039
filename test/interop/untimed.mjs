// The everything server writes the wall-clock time into its dynamic resources ("... created at
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
      out[k] = time.test(text) ? Buffer.from(unstamp(text)).toString("base64") : v;
      time.lastIndex = 0;
    } else {
      out[k] = untimed(v);
    }
  }
  return out;
}

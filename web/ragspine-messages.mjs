// The search worker's messages to the page (the protocol is in ragspine-worker.mjs): progress
// with the boot's byte count, log lines, and errors described as {name, message}.

export const post = (message) => self.postMessage(message);
export const log = (level, message) => post({ type: "log", level, message });

export class BundleError extends Error {
  constructor(message, name = "BundleError") {
    super(message);
    this.name = name;
  }
}

export function describe(err) {
  if (err && err.constructor && err.constructor.name === "PythonError") {
    // The message is a whole traceback; its last line is "Type: what went wrong".
    const lines = String(err.message).trim().split("\n");
    const last = lines[lines.length - 1] || "Python error";
    const match = /^([A-Za-z_][\w.]*): (.*)$/s.exec(last);
    return match ? { name: match[1], message: match[2] } : { name: "PythonError", message: last };
  }
  if (err instanceof Error) return { name: err.name || "Error", message: err.message };
  return { name: "Error", message: String(err) };
}

// ------------------------------------------------------------------ progress and bytes

let tracker = null; // the boot's byte counter (trackBytes), while a boot runs

export function progress(phase, message, extra = {}) {
  const overall = tracker ? tracker.overall() : undefined;
  if (tracker && extra.loaded === undefined) Object.assign(tracker, { phase, message });
  post({ type: "progress", phase, message, ...extra, ...(overall ? { overall } : {}) });
}

// Credits `bytes` of `url` (so far) to the boot's count, when one runs.
export function credit(url, bytes) {
  if (tracker) tracker.credit(url, bytes);
}

// Starts counting the boot's downloads against the manifest's sizes of `paths`: `credit(url,
// bytes)` from a streamed fetch, and a PerformanceObserver for what Pyodide and micropip fetch.
export function trackBytes(manifest, bundleURL, paths) {
  const sizes = new Map();
  for (const path of paths) if (manifest.files && manifest.files[path]) sizes.set(bundleURL + path, manifest.files[path].bytes);
  tracker = byteCounter(sizes);
  observeResources(tracker, sizes);
}

export function stopTracking() {
  if (tracker) tracker.stop();
  tracker = null;
}

function byteCounter(sizes) {
  const done = new Map();
  let total = 0;
  for (const size of sizes.values()) total += size;
  const t = {
    phase: "manifest",
    message: "",
    credit(url, bytes) {
      if (!sizes.has(url)) return false;
      const before = done.get(url) || 0;
      const now = Math.min(sizes.get(url), Math.max(before, bytes));
      done.set(url, now);
      return now !== before;
    },
    overall() {
      let loaded = 0;
      for (const bytes of done.values()) loaded += bytes;
      return { loaded, total };
    },
    stop() {
      if (t.observer) t.observer.disconnect();
    },
  };
  return t;
}

// Files fetched by others (Pyodide, micropip) count in full once the browser has them.
function observeResources(t, sizes) {
  if (typeof PerformanceObserver !== "function") return;
  t.observer = new PerformanceObserver((list) => {
    let changed = false;
    for (const entry of list.getEntries()) {
      const url = entry.name.split("#")[0];
      if (sizes.has(url)) changed = t.credit(url, sizes.get(url)) || changed;
    }
    if (changed) progress(t.phase, t.message);
  });
  try {
    t.observer.observe({ type: "resource", buffered: true });
  } catch {
    t.observer = null;
  }
}

// `result` with what its request loaded, as result.worker.files.
export function withFiles(result, files, fetchMs = undefined) {
  if (result && typeof result === "object" && !Array.isArray(result)) {
    result.worker = { ...(result.worker || {}), files };
    if (fetchMs !== undefined) result.worker.fetchMs = fetchMs;
  }
  return result;
}

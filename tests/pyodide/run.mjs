// Runs the pytest suite inside Pyodide (Python 3.14 / WebAssembly) on Node.
//
//   node tests/pyodide/run.mjs --wheels DIR [--stdlib ZIP] [-- PYTEST_ARGS...]
//
// DIR holds the ragspine_lite wheel and the pure test wheels (see requirements.txt).
// --stdlib: Pyodide's standard library archive to start with (scripts/test.sh passes one
// trimmed the way build-site trims a site's, so the suite proves the trimmed archive).
// The package is imported from the installed wheel, never from the source tree; the
// tests directory and pyproject.toml (pytest config) are mounted read-only from the repo.
// Exit code = pytest's exit code (non-zero when a test fails).
import { existsSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadPyodide } from "pyodide";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");

function parseArgs(argv) {
  const sep = argv.indexOf("--");
  const own = sep === -1 ? argv : argv.slice(0, sep);
  const pytestArgs = sep === -1 ? [] : argv.slice(sep + 1);
  const i = own.indexOf("--wheels");
  if (i === -1 || !own[i + 1]) {
    throw new Error("usage: node tests/pyodide/run.mjs --wheels DIR [-- PYTEST_ARGS...]");
  }
  const s = own.indexOf("--stdlib");
  const stdlib = s === -1 ? null : realpathSync(path.resolve(own[s + 1]));
  return { wheels: realpathSync(path.resolve(own[i + 1])), stdlib, pytestArgs };
}

async function main() {
  const { wheels, stdlib, pytestArgs } = parseArgs(process.argv.slice(2));
  const files = readdirSync(wheels).filter((f) => f.endsWith(".whl")).sort();
  const micropipWheel = files.find((f) => f.startsWith("micropip-"));
  if (!micropipWheel) throw new Error(`no micropip wheel in ${wheels}`);
  if (!files.some((f) => f.startsWith("ragspine_lite-"))) {
    throw new Error(`no ragspine_lite wheel in ${wheels}: build it first`);
  }

  const t0 = Date.now();
  const py = await loadPyodide(stdlib ? { stdLibURL: stdlib } : {});
  // Raw writes, so pytest's progress dots stay on one line.
  const raw = (stream) => ({ write: (buf) => { stream.write(buf); return buf.length; } });
  py.setStdout(raw(process.stdout));
  py.setStderr(raw(process.stderr));
  const loaded = await py.loadPackage(path.join(wheels, micropipWheel), {
    errorCallback: (msg) => console.error(msg),
  });
  if (!loaded.length) throw new Error(`could not load ${micropipWheel}`);

  py.FS.mkdirTree("/wheels");
  py.FS.mount(py.FS.filesystems.NODEFS, { root: wheels }, "/wheels");
  py.FS.mkdirTree("/project/tests");
  py.FS.mount(py.FS.filesystems.NODEFS, { root: realpathSync(path.join(repo, "tests")) }, "/project/tests");
  py.FS.writeFile("/project/pyproject.toml", readFileSync(path.join(repo, "pyproject.toml")));
  const tBoot = Date.now();

  const wheelUrls = files.filter((f) => f !== micropipWheel).map((f) => `emfs:/wheels/${f}`);
  py.globals.set("wheel_urls", py.toPy(wheelUrls));
  py.globals.set("pytest_args", py.toPy(pytestArgs));
  const rc = await py.runPythonAsync(`
import os, sys, micropip
await micropip.install(list(wheel_urls), deps=False)
os.chdir("/project")
sys.dont_write_bytecode = True
import ragspine_lite
if not ragspine_lite.__file__.startswith(tuple(p for p in sys.path if "site-packages" in p)):
    raise RuntimeError(f"ragspine_lite imported from {ragspine_lite.__file__}, not the wheel")
print(f"pyodide lane: Python {sys.version.split()[0]} on {sys.platform}, "
      f"ragspine_lite {ragspine_lite.__version__} from the wheel")
import pytest
int(pytest.main(["-p", "no:cacheprovider", "-m", "not cpython_only", *pytest_args, "tests"]))
`);
  console.log(`pyodide lane: boot ${((tBoot - t0) / 1000).toFixed(1)} s, total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(rc);
}

main().catch((err) => {
  console.error(`pyodide lane: ${err && err.message ? err.message : err}`);
  process.exit(3);
});

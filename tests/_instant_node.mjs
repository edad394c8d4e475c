// Test driver: runs web/ragspine-instant.mjs under Node for tests/test_instant_lane.py.
//
//   node tests/_instant_node.mjs search BUNDLE_ROOT CASES.json   → [{query, topK, highlight, result}]
//   node tests/_instant_node.mjs functions CASES.json            → [{restricted, variants, synonyms, spans, excerpt, tokens}]
//   node tests/_instant_node.mjs codepoints START END BLOCK      → {hashes, word, space} (see below)
// CASES.json is written with ensure_ascii (lone surrogates survive as \ud800 escapes).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  InstantLane, excerpt, highlightSpans, isRestricted, isSpaceChar, isWordChar, queryVariants, tokenize,
  withSynonyms,
} from "../web/ragspine-instant.mjs";

const [mode, ...rest] = process.argv.slice(2);
const out = (value) => process.stdout.write(JSON.stringify(value));

if (mode === "search") {
  const [root, casesPath] = rest;
  const manifest = JSON.parse(readFileSync(join(root, "manifest.json"), "utf8"));
  const lane = await InstantLane.open((path) => readFile(join(root, path)), manifest.entry.index);
  const answers = [];
  for (const c of JSON.parse(readFileSync(casesPath, "utf8"))) {
    const result = await lane.search(c.query, { topK: c.topK, highlight: c.highlight });
    delete result.took_ms;
    answers.push(result);
  }
  out(answers);
} else if (mode === "functions") {
  const { glossary, cases } = JSON.parse(readFileSync(rest[0], "utf8"));
  out(cases.map(({ query, text, startLine, label }) => ({
    restricted: isRestricted(label),
    variants: queryVariants(query, glossary),
    synonyms: withSynonyms(query, glossary),
    spans: highlightSpans(query, text),
    excerpt: excerpt(query, text, { startLine }),
    tokens: tokenize(text),
  })));
} else if (mode === "codepoints") {
  // Per block of code points, a sha256 of the tokens of a string putting each c between ASCII
  // letters, twice in a row and next to a CJK character; and the [start, end) ranges of the
  // code points that are Python's \w and \s.
  const [start, end, block] = rest.map(Number);
  const hashes = [];
  const ranges = { word: [], space: [] };
  const note = (list, cp, yes) => {
    const last = list[list.length - 1];
    if (!yes) return;
    if (last && last[1] === cp) last[1] = cp + 1;
    else list.push([cp, cp + 1]);
  };
  for (let b = start; b < end; b += block) {
    const hash = createHash("sha256");
    for (let cp = b; cp < Math.min(b + block, end); cp++) {
      const c = cp >= 0xd800 && cp <= 0xdfff ? String.fromCharCode(cp) : String.fromCodePoint(cp);
      hash.update(`${cp}:${JSON.stringify(tokenize(`A${c}b${c}${c}中${c}Z9`))}\n`);
      note(ranges.word, cp, isWordChar(c));
      note(ranges.space, cp, isSpaceChar(c));
    }
    hashes.push([b, hash.digest("hex")]);
  }
  out({ hashes, ...ranges });
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}

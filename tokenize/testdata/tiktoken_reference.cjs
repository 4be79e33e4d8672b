// The reference side of package tokenize's tiktoken tests: tiktoken (the
// npm package, its Rust core compiled to WebAssembly;
// scripts/ensure-tiktoken.sh installs it) encodes the texts the Go
// package must encode identically, and writes the rank files of its
// named encodings as the .tiktoken files OpenAI publishes. Node's
// standard library and tiktoken only.
//
//   node tiktoken_reference.cjs SPEC.json OUT.json
//     SPEC: {"texts": PATH, "dir": DIR, "encodings": [NAME, ...]}
//     PATH holds one text a line, hex-encoded, so that any bytes can be a
//     text; they are decoded by the WHATWG decoder (TextDecoder, not
//     fatal), which replaces each maximal subpart of an ill-formed
//     sequence by U+FFFD, as Python's bytes.decode(errors="replace")
//     does.
//     DIR/NAME.tiktoken: the encoding's ranks from the package's
//     encoders/NAME.json ("! OFFSET TOKEN TOKEN ..." lines, each token
//     base64, ranks counting up from OFFSET), one "TOKEN RANK" line a
//     token in order of rank: load_tiktoken_bpe's format.
//     OUT: {NAME: {"ids": [[ID, ...], ...]}, ...}: each text encoded by
//     get_encoding(NAME).encode_ordinary(text) (special tokens are text).
"use strict";
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");

const [specPath, outPath] = process.argv.slice(2);
const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const texts = fs
  .readFileSync(spec.texts, "utf8")
  .split("\n")
  .slice(0, -1)
  .map((h) => decoder.decode(Buffer.from(h, "hex")));
const encoders = path.join(path.dirname(require.resolve("tiktoken")), "encoders");
const out = {};
for (const name of spec.encodings) {
  const ranks = JSON.parse(fs.readFileSync(path.join(encoders, name + ".json"), "utf8")).bpe_ranks;
  const lines = [];
  for (const line of ranks.split("\n")) {
    if (line === "") continue;
    const parts = line.split(" ");
    const offset = Number(parts[1]);
    parts.slice(2).forEach((tok, i) => lines.push(tok + " " + (offset + i) + "\n"));
  }
  fs.writeFileSync(path.join(spec.dir, name + ".tiktoken"), lines.join(""));
  const enc = get_encoding(name);
  out[name] = { ids: texts.map((t) => Array.from(enc.encode_ordinary(t))) };
  enc.free();
}
fs.writeFileSync(outPath, JSON.stringify(out));

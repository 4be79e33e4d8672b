// The reference side of package tokenize's byte-level BPE tests: Hugging
// Face's tokenizers (the npm package, its Rust core with Node bindings;
// scripts/ensure-hf-tokenizers.sh installs it) encodes the texts the Go
// package must encode identically. Node's standard library and tokenizers
// only.
//
//   node hf_reference.cjs SPEC.json OUT.json
//     SPEC: {"texts": PATH, "tokenizers": {NAME: TOKENIZER_JSON_PATH, ...}}
//     PATH holds one text a line, hex-encoded, so that any bytes can be a
//     text. A JavaScript string cannot hold invalid UTF-8: the bytes are
//     decoded by the WHATWG decoder (TextDecoder, not fatal), which
//     replaces each maximal subpart of an ill-formed sequence by U+FFFD,
//     as Python's bytes.decode(errors="replace") and Rust's
//     String::from_utf8_lossy do.
//     OUT: {NAME: {"vocab": N, "ids": [[ID, ...], ...]}, ...}: each text
//     encoded with encode(text, null, {addSpecialTokens: false}), the
//     post-processor not applied.
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

async function main() {
  const [specPath, outPath] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const texts = fs
    .readFileSync(spec.texts, "utf8")
    .split("\n")
    .slice(0, -1)
    .map((h) => decoder.decode(Buffer.from(h, "hex")));
  const out = {};
  for (const [name, path] of Object.entries(spec.tokenizers)) {
    const tok = Tokenizer.fromFile(path);
    const ids = [];
    for (const t of texts) {
      const enc = await tok.encode(t, null, { addSpecialTokens: false });
      ids.push(enc.getIds());
    }
    out[name] = { vocab: tok.getVocabSize(true), ids };
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

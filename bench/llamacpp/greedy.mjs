// Greedy decoding with llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU binary) on a GGUF file,
// from token ids, so it needs no tokenizer in the file. Prints one JSON line:
//   {"generated": [ids], "prompt_tokens": P, "prefill_ms": ..., "decode_tok_s": ...}
// decode_tok_s counts the tokens after the first over the time after the first (the prefill
// yields the first). Usage:
//   node greedy.mjs --model M.gguf --ids 1,2,3 -n 16 [--threads 1]
import {getLlama, LlamaLogLevel} from 'node-llama-cpp';

import {parseArgs} from './args.mjs';

const a = parseArgs(process.argv.slice(2), {threads: 1, n: 16});
const llama = await getLlama({gpu: false, build: 'never', logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: a.model, gpuLayers: 0});
const context = await model.createContext({
  contextSize: a.ids.length + a.n + 16,
  batchSize: a.ids.length,
  threads: a.threads,
});
const sequence = context.getSequence();
const generated = [];
const t0 = performance.now();
let tFirst = t0;
for await (const token of sequence.evaluate(a.ids, {temperature: 0})) {
  if (generated.length === 0) tFirst = performance.now();
  generated.push(token);
  if (generated.length >= a.n) break;
}
const tEnd = performance.now();
console.log(JSON.stringify({
  generated,
  prompt_tokens: a.ids.length,
  prefill_ms: tFirst - t0,
  decode_tok_s: generated.length > 1 ? (generated.length - 1) / ((tEnd - tFirst) / 1000) : null,
  threads: a.threads,
}));
await context.dispose();
await model.dispose();
await llama.dispose();

// llama.cpp's next-token distribution at every position of a prompt (node-llama-cpp 3.21.1's
// prebuilt CPU binary), from token ids, so it needs no tokenizer in the file. Prints one JSON line:
//   {"argmax": [id per position], "top2_gap": [p1 - p2 per position], "logp_next": [...]}
// where logp_next[i] is log p(ids[i + 1]) at position i (the last position has none).
// Usage: node prompt_logits.mjs --model M.gguf --ids 1,2,3 [--threads 1]
import {getLlama, LlamaLogLevel} from 'node-llama-cpp';

import {parseArgs} from './args.mjs';

const a = parseArgs(process.argv.slice(2), {threads: 1});
const llama = await getLlama({gpu: false, build: 'never', logLevel: LlamaLogLevel.warn});
const model = await llama.loadModel({modelPath: a.model, gpuLayers: 0});
const context = await model.createContext({
  contextSize: a.ids.length + 16,
  batchSize: a.ids.length,
  threads: a.threads,
});
const sequence = context.getSequence();
// temperature 0 keeps the probabilities the softmax of the raw logits.
const input = a.ids.map((id) => [id, {generateNext: {probabilities: true, options: {temperature: 0}}}]);
const out = await sequence.controlledEvaluate(input);
const argmax = [], top2Gap = [], logpNext = [];
for (let i = 0; i < a.ids.length; i++) {
  const probs = out[i].next.probabilities;  // sorted, highest first
  const it = probs.entries();
  const [t1, p1] = it.next().value;
  const second = it.next().value;
  argmax.push(t1);
  top2Gap.push(second ? p1 - second[1] : p1);
  if (i + 1 < a.ids.length) logpNext.push(Math.log(probs.get(a.ids[i + 1]) ?? 0));
}
console.log(JSON.stringify({argmax, top2_gap: top2Gap, logp_next: logpNext}));
await context.dispose();
await model.dispose();
await llama.dispose();

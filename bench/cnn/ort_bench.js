// ONNX Runtime (CPU, onnxruntime-node) baseline: node ort_bench.js MODEL.onnx INPUT.npy THREADS RUNS
// Prints one JSON line: the run times in ms (after one warm-up run) and the first output.
const ort = require('onnxruntime-node');
const fs = require('fs');

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + 10 + headerLen, buf.byteOffset + buf.length));
  return { shape, data };
}

(async () => {
  const [model, input, threads, runs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'});
  const x = readNpy(input);
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) };
  let out = await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); ++i) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const first = out[session.outputNames[0]];
  console.log(JSON.stringify({ ms: times, output: Array.from(first.data.slice(0, 1000)) }));
})();

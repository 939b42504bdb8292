// llama.cpp behind an OpenAI-style HTTP endpoint, as the peer for bench/serve/serve_bench.py
// (--peer-llamacpp): node-llama-cpp 3.21.1's prebuilt CPU binary (installed in bench/llamacpp,
// kept out of the C++ build and of ctest) under node's built-in `http` module. Not llama-server
// itself (node-llama-cpp ships llama.cpp as a library, without its HTTP server), but the same
// shape as `llama-server -m X.gguf -np 1 --threads T --no-cache-prompt` (one slot; the prompt
// cache off, see below):
//
//   node bench/serve/llamacpp_server.mjs --model X.gguf [--port 8080] [--host 127.0.0.1]
//       [--threads 2] [--ctx-size 512] [--batch-size 512]
//
// - Prints `listening on HOST:PORT` on stdout once the socket is bound (port 0: any free port),
//   before the model loads; `GET /health` answers 503 {"status":"loading"} until the model and its
//   context are ready, then 200 {"status":"ok"} (as `huddle serve` does, so the benchmark starts
//   both the same way).
// - `POST /v1/completions`: `prompt` a list of token ids (used as given) or a string (tokenized
//   with the model's special tokens), `max_tokens` (default 16), `temperature` 0 only (greedy;
//   anything else is a 400: this is a benchmark peer, not a server), `stream`,
//   `stream_options.include_usage`, `return_tokens` (as llama-server: the generated ids in `tokens`,
//   per chunk when streamed, to check that both engines generate the same ids). Streamed: one `data: {chunk}` per generated token whose
//   `choices[0].text` is that token's text as llama.cpp detokenizes it (possibly "": llama.cpp
//   renders unused/padding vocabulary entries as nothing), a chunk with empty text and the
//   finish_reason (`stop` at an end-of-generation token, which counts in completion_tokens as in
//   `huddle serve`; `length` at max_tokens or the context's end), with include_usage a chunk with
//   no choices and the usage, then `data: [DONE]`. Not streamed: one JSON response.
// - One model, one context, one sequence: requests are served one at a time in arrival order
//   (a FIFO promise chain), like llama-server with one slot (`-np 1`). Each request starts from an
//   empty KV cache (clearHistory): llama-server's default `cache_prompt` would reuse the common
//   prefix of the previous request, and the benchmark sends the same prompt every time, which
//   would turn its time to first token into one token's decode; `huddle serve` has no prompt
//   cache, so both prefill the whole prompt for every request.
// - A client that disconnects cancels its request (queued: never runs; running: stops at the next
//   token).
// Stops on SIGINT/SIGTERM.
import http from 'node:http';

// node-llama-cpp is installed in bench/llamacpp (one copy for both benchmarks).
const {getLlama, LlamaLogLevel} =
    await import(new URL('../llamacpp/node_modules/node-llama-cpp/dist/index.js', import.meta.url));

function parseArgs(argv) {
  const a = {host: '127.0.0.1', port: 8080, threads: 2, ctxSize: 512, batchSize: 512};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (k === '--model') a.model = v;
    else if (k === '--host') a.host = v;
    else if (k === '--port') a.port = Number(v);
    else if (k === '--threads') a.threads = Number(v);
    else if (k === '--ctx-size') a.ctxSize = Number(v);
    else if (k === '--batch-size') a.batchSize = Number(v);
    else throw new Error(`unknown argument ${k}`);
    i++;
  }
  if (!a.model) throw new Error('usage: llamacpp_server.mjs --model X.gguf [--port P] [--threads T]');
  return a;
}

const args = parseArgs(process.argv.slice(2));
let model = null, sequence = null, nVocab = Infinity, ready = false;
let queue = Promise.resolve();  // FIFO: each request chains on the previous one
let nextId = 0;

function sendJson(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body)});
  res.end(body);
}

function sendError(res, status, message, type = 'invalid_request_error', code = null) {
  sendJson(res, status, {error: {message, type, param: null, code}});
}

function readBody(req, limit = 1 << 20) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on('data', (d) => {
      size += d.length;
      if (size > limit) reject(Object.assign(new Error('request body too large'), {status: 413}));
      else parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function validate(body) {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('the body must be a JSON object');
  let prompt = body.prompt;
  if (typeof prompt === 'string') prompt = model.tokenize(prompt, true);
  else if (!Array.isArray(prompt) || prompt.length === 0 ||
           !prompt.every((t) => Number.isInteger(t) && t >= 0 && t < nVocab))
    throw new Error(`prompt must be a string or a non-empty list of token ids below ${nVocab}`);
  const maxTokens = body.max_tokens ?? 16;
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new Error('max_tokens must be a positive integer');
  if ((body.temperature ?? 1) !== 0) throw new Error('this peer serves greedy requests only (temperature: 0)');
  if (prompt.length >= args.ctxSize) throw new Error(`the prompt (${prompt.length} tokens) does not fit the context (${args.ctxSize})`);
  return {prompt, maxTokens, stream: body.stream === true, usage: body.stream_options?.include_usage === true,
          returnTokens: body.return_tokens === true};
}

// Generates for one request; `emit(text, token)` per token; returns {tokens, finish}.
async function generate(r, emit, cancelled) {
  await sequence.clearHistory();
  const budget = Math.min(r.maxTokens, args.ctxSize - r.prompt.length);
  const generated = [];
  let shown = 0, finish = 'length';
  if (cancelled()) return {tokens: 0, finish: 'cancelled'};
  for await (const token of sequence.evaluate(r.prompt, {temperature: 0})) {
    generated.push(token);
    if (model.isEogToken(token)) {
      finish = 'stop';
      break;
    }
    // The text so far minus what was sent; hold an incomplete UTF-8 sequence back.
    const text = model.detokenize(generated, false);
    let piece = text.slice(shown);
    if (piece.endsWith('\uFFFD')) piece = '';
    shown += piece.length;
    emit(piece, token);
    if (generated.length >= budget || cancelled()) {
      if (cancelled()) finish = 'cancelled';
      break;
    }
  }
  return {tokens: generated.length, finish};
}

async function completions(req, res) {
  let r;
  try {
    const raw = await readBody(req);
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      return sendError(res, 400, 'malformed JSON');
    }
    r = validate(body);
  } catch (e) {
    return sendError(res, e.status ?? 400, e.message);
  }
  const id = `cmpl-${process.pid.toString(16)}${(nextId++).toString(16).padStart(8, '0')}`;
  const created = Math.floor(Date.now() / 1000);
  const base = {id, object: 'text_completion', created, model: args.model.split('/').pop()};
  let closed = false;
  res.on('close', () => { if (!res.writableFinished) closed = true; });
  const chunk = (obj) => res.write(`data: ${JSON.stringify({...base, ...obj})}\n\n`);
  const choice = (text, finish) => ({choices: [{text, index: 0, logprobs: null, finish_reason: finish}]});

  const turn = queue.then(async () => {
    if (closed) return;
    if (r.stream) {
      res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'close'});
      res.flushHeaders();
    }
    let text = '';
    const tokens = [];
    const out = await generate(r, (piece, token) => {
      if (r.stream) chunk({...choice(piece, null), ...(r.returnTokens ? {tokens: [token]} : {})});
      else text += piece, tokens.push(token);
    }, () => closed);
    if (closed) return;
    const usage = {prompt_tokens: r.prompt.length, completion_tokens: out.tokens,
                   total_tokens: r.prompt.length + out.tokens};
    if (r.stream) {
      chunk(choice('', out.finish));
      if (r.usage) chunk({choices: [], usage});
      res.end('data: [DONE]\n\n');
    } else {
      sendJson(res, 200, {...base, ...choice(text, out.finish), ...(r.returnTokens ? {tokens} : {}), usage});
    }
  });
  queue = turn.catch(() => {});
  try {
    await turn;
  } catch (e) {
    if (!res.headersSent) sendError(res, 500, String(e?.message ?? e), 'server_error');
    else res.destroy();
  }
}

const server = http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path === '/health')
    return ready ? sendJson(res, 200, {status: 'ok'}) : sendJson(res, 503, {status: 'loading'});
  if (!ready) return sendError(res, 503, 'loading', 'unavailable_error');
  if (req.method === 'GET' && path === '/v1/models')
    return sendJson(res, 200, {object: 'list', data: [{id: args.model.split('/').pop(), object: 'model', owned_by: 'llama.cpp'}]});
  if (req.method === 'POST' && path === '/v1/completions') return void completions(req, res);
  sendError(res, 404, `no route ${req.method} ${path}`, 'invalid_request_error', 'not_found');
});
server.keepAliveTimeout = 5000;
server.listen(args.port, args.host, () => {
  const {address, port} = server.address();
  process.stdout.write(`listening on ${address}:${port}\n`);
});

const llama = await getLlama({gpu: false, build: 'never', logLevel: LlamaLogLevel.error});
model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
{
  const m = model.fileInfo.metadata;
  nVocab = m?.[m?.general?.architecture]?.vocab_size ?? m?.tokenizer?.ggml?.tokens?.length ?? Infinity;
}
const context = await model.createContext({contextSize: args.ctxSize, batchSize: args.batchSize,
                                           threads: args.threads, sequences: 1});
sequence = context.getSequence();
ready = true;

async function stop() {
  server.close();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

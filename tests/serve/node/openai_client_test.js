// The official `openai` npm client against `huddle serve` (gpt2-tiny, an API key set): models,
// a greedy completion equal to `huddle run`'s text, a streamed completion that reassembles to
// it, and the client's typed errors for a wrong key (401) and a bad field (400).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';

import { greedyText, HuddleServer, parseArgs, requirePackages } from './huddle_server.js';

const args = parseArgs(process.argv.slice(2), ['huddle', 'fixtures']);
requirePackages(['openai']);
const { default: OpenAI } = await import('openai');

const model = join(args.fixtures, 'models', 'gpt2-tiny');
const apiKey = 'sesame';
const prompt = 'The quick brown fox';
const maxTokens = 12;
let server;
let client;

before(async () => {
  server = await HuddleServer.start(args.huddle, model, ['--api-key', apiKey]);
  client = new OpenAI({ apiKey, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 60000 });
});

after(async () => {
  if (server) await server.stop();
});

test('models.list names the served model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['gpt2-tiny']);
});

test('a greedy completion is the text huddle run generates', async () => {
  const expected = greedyText(args.huddle, model, prompt, maxTokens);
  assert.ok(expected.length > 0, 'the reference text is empty');
  const c = await client.completions.create({
    model: 'gpt2-tiny', prompt, max_tokens: maxTokens, temperature: 0,
  });
  assert.equal(c.object, 'text_completion');
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0].text, expected);
  assert.ok(['stop', 'length'].includes(c.choices[0].finish_reason));
  // 'length' after max_tokens tokens; 'stop' at an end-of-sequence id before.
  if (c.choices[0].finish_reason === 'length') assert.equal(c.usage.completion_tokens, maxTokens);
  else assert.ok(c.usage.completion_tokens <= maxTokens);
  assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + c.usage.completion_tokens);
});

test('a streamed completion reassembles to the non-streamed text, with usage', async () => {
  const whole = await client.completions.create({
    model: 'gpt2-tiny', prompt, max_tokens: maxTokens, temperature: 0,
  });
  const stream = await client.completions.create({
    model: 'gpt2-tiny', prompt, max_tokens: maxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let pieces = 0;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length === 0) continue;
    if (chunk.choices[0].text) pieces += 1;
    text += chunk.choices[0].text;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, whole.choices[0].text);
  assert.ok(pieces > 1, `expected the text in several chunks, got ${pieces}`);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage, whole.usage);
});

test('a wrong API key raises AuthenticationError (401, invalid_api_key)', async () => {
  const wrong = new OpenAI({ apiKey: 'not-it', baseURL: `${server.url}/v1`, maxRetries: 0 });
  await assert.rejects(
    wrong.completions.create({ model: 'gpt2-tiny', prompt, max_tokens: 2 }),
    (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, `got ${e.constructor.name}: ${e}`);
      assert.equal(e.status, 401);
      assert.equal(e.code, 'invalid_api_key');
      return true;
    });
});

test('a bad field raises BadRequestError (400) naming it', async () => {
  await assert.rejects(
    client.completions.create({ model: 'gpt2-tiny', prompt, max_tokens: -1 }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}: ${e}`);
      assert.equal(e.status, 400);
      assert.equal(e.param, 'max_tokens');
      return true;
    });
});

// TODO(chat, issue 16): gpt2-tiny has no chat template, so a chat request must be a clear 400.
// Once /v1/chat/completions renders templates and a fixture model ships one, add a test here
// that chats with that model (chat.completions.create, streamed and not) and compares the reply
// with `huddle run` on the rendered prompt.
test('a chat request to a model without a chat template is a 400 no_chat_template', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: 'gpt2-tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4,
    }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}: ${e}`);
      assert.equal(e.code, 'no_chat_template');
      return true;
    });
});

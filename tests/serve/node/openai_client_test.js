// The official `openai` npm client against `huddle serve` (gpt2-tiny, an API key set): models,
// a greedy completion equal to `huddle run`'s text, a streamed completion that reassembles to
// it, and the client's typed errors for a wrong key (401) and a bad field (400); and a chat,
// streamed and not, with a chat-capable copy of llama-tiny; and chats with tools.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

// gpt2-tiny has no chat template: a chat request is a clear 400.
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

// A chat-capable copy of llama-tiny, made as tests/serve/chat_model.h makes it: its special
// token <|pad|> renamed <|eot_id|> and a chat template (default: the real Llama 3 template) in
// tokenizer_config.json.
function makeChatModel(dir, template) {
  cpSync(join(args.fixtures, 'models', 'llama-tiny'), dir, { recursive: true });
  const tokenizer = readFileSync(join(dir, 'tokenizer.json'), 'utf8');
  writeFileSync(join(dir, 'tokenizer.json'), tokenizer.replaceAll('"<|pad|>"', '"<|eot_id|>"'));
  const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
  config.pad_token = '<|eot_id|>';
  config.chat_template = template ??
    readFileSync(join(args.fixtures, 'chat_templates', 'llama-3.jinja'), 'utf8');
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
}

test('chat: a greedy reply, and the streamed deltas reassemble to it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'huddle-chat-'));
  const chatModel = join(dir, 'llama-chat');
  makeChatModel(chatModel);
  const chatServer = await HuddleServer.start(args.huddle, chatModel, ['--api-key', apiKey]);
  try {
    const chat = new OpenAI({ apiKey, baseURL: `${chatServer.url}/v1`, maxRetries: 0 });
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi there' }];
    const whole = await chat.chat.completions.create({
      model: 'llama-chat', messages, max_tokens: maxTokens, temperature: 0,
    });
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.choices[0].message.role, 'assistant');
    assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
    assert.ok(whole.usage.prompt_tokens > 0);
    const stream = await chat.chat.completions.create({
      model: 'llama-chat', messages, max_tokens: maxTokens, temperature: 0, stream: true,
    });
    let text = '';
    let finish = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.choices.length === 0) continue;
      text += chunk.choices[0].delta.content ?? '';
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(finish, whole.choices[0].finish_reason);
  } finally {
    await chatServer.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

const tools = [{
  type: 'function',
  function: { name: 'get_time', description: 'The time.', parameters: { type: 'object', properties: {} } },
}];

// A short Hermes-style template (it names <tool_call>) that fits llama-tiny's context, as
// tests/serve/chat_http_test.cpp's kToolTemplate.
const toolTemplate =
  '{# calls: <tool_call> #}{% if tools %}T:{% for t in tools %}{{ t.function.name }}{% endfor %}' +
  '\n{% endif %}{% for m in messages %}{{ m.role[:1] }}:{{ m.content }}' +
  '{% if m.tool_calls %}{{ m.tool_calls[0].function.name }}(){% endif %}\n{% endfor %}' +
  '{% if add_generation_prompt %}a:{% endif %}';

// The random model does not call tools (the parsing of calls is tested in C++ on given replies):
// the client must accept the reply to a request with tools and a tool-call history, streamed and
// not; a template without tools is a typed 400.
test('chat with tools: valid replies through the client; tools_unsupported for Llama 3', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'huddle-tools-'));
  const plainModel = join(dir, 'llama-chat');
  const toolModel = join(dir, 'llama-tools');
  makeChatModel(plainModel);
  makeChatModel(toolModel, toolTemplate);
  const plainServer = await HuddleServer.start(args.huddle, plainModel, []);
  const toolServer = await HuddleServer.start(args.huddle, toolModel, []);
  try {
    const plain = new OpenAI({ apiKey: 'x', baseURL: `${plainServer.url}/v1`, maxRetries: 0 });
    await assert.rejects(
      plain.chat.completions.create({
        model: 'llama-chat', messages: [{ role: 'user', content: 'Time?' }], tools, max_tokens: 2,
      }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}: ${e}`);
        assert.equal(e.code, 'tools_unsupported');
        return true;
      });
    const chat = new OpenAI({ apiKey: 'x', baseURL: `${toolServer.url}/v1`, maxRetries: 0 });
    const messages = [
      { role: 'user', content: 'Time?' },
      { role: 'assistant', content: null, tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'noon' },
    ];
    const request = { model: 'llama-tools', messages, tools, tool_choice: 'auto', max_tokens: 8, temperature: 0 };
    const whole = await chat.chat.completions.create(request);
    const message = whole.choices[0].message;
    assert.equal(message.role, 'assistant');
    if (message.tool_calls?.length) {
      assert.equal(whole.choices[0].finish_reason, 'tool_calls');
      for (const call of message.tool_calls) JSON.parse(call.function.arguments);
    } else {
      assert.equal(typeof message.content, 'string');
      assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
    }
    let text = '';
    let finish = null;
    for await (const chunk of await chat.chat.completions.create({ ...request, stream: true })) {
      if (chunk.choices.length === 0) continue;
      text += chunk.choices[0].delta.content ?? '';
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    assert.equal(text, message.content ?? '');
    assert.equal(finish, whole.choices[0].finish_reason);
  } finally {
    await plainServer.stop();
    await toolServer.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

// The dashboard in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// against `huddle serve --local-devices 2` on llama-tiny: the page loads with no console errors,
// shows both devices, their link and the galaxy plan; a message typed in the chat box streams a
// reply that grows chunk by chunk and ends as the greedy completion `huddle run` gives; the
// request then appears in the table and the timeline, one row per device, and op by op on both
// devices (a step picked on the timeline). A screenshot goes to
// <artifacts>/dashboard.png.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import {
  greedyText, HuddleServer, parseArgs, requireFile, requirePackages,
} from './huddle_server.js';

const args = parseArgs(process.argv.slice(2), ['huddle', 'fixtures', 'artifacts']);
requirePackages(['playwright-core']);
const chromiumPath = process.env.HUDDLE_CHROMIUM || '/usr/bin/chromium';
requireFile(chromiumPath, "Debian's chromium package; scripts/deps installs it");
const { chromium } = await import('playwright-core');

const model = join(args.fixtures, 'models', 'llama-tiny');
const prompt = 'The quick brown fox';
const maxTokens = 24;
let server;
let browser;
let page;
const errors = []; // console errors and uncaught exceptions of the page

before(async () => {
  server = await HuddleServer.start(args.huddle, model, ['--local-devices', '2']);
  // The flags keep Chromium off the network (this machine has none) and run it as root.
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`exception: ${e.message}`));
});

after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
});

test('the page shows the devices, their link and the plan', async () => {
  await page.goto(`${server.url}/`);
  await page.locator('#device-1').waitFor({ timeout: 30000 });
  assert.equal(await page.locator('#devices .device').count(), 2);
  const primary = await page.locator('#device-0').textContent();
  assert.match(primary, /0: primary/);
  assert.match(primary, /this process/);
  const worker = await page.locator('#device-1').textContent();
  assert.match(worker, /1: 127\.0\.0\.1:\d+/);
  assert.equal(await page.locator('#links li').count(), 1);
  assert.match(await page.locator('#links').textContent(), /primary ⟷ 127\.0\.0\.1:\d+/);
  assert.equal(await page.locator('#plan-strategy').textContent(), 'galaxy');
  for (const d of [0, 1]) {
    const plan = await page.locator(`#plan-device-${d}`).textContent();
    assert.match(plan, /50% of the tokens/);
    assert.match(plan, /heads \d+-\d+ of \d+/);
  }
  assert.equal(await page.locator('#health').textContent(), 'ready');
  assert.deepEqual(errors, []);
});

test('a chat message streams the greedy completion, then shows in the table and timeline',
     async () => {
       const expected = greedyText(args.huddle, model, prompt, maxTokens);
       assert.ok(expected.length > 0);
       // Every text the reply shows, in order: setting textContent puts in a new text node.
       await page.evaluate(() => {
         window.replyTexts = [];
         new MutationObserver((records) => {
           for (const r of records) {
             if (!r.target.classList || !r.target.classList.contains('reply')) continue;
             for (const n of r.addedNodes) window.replyTexts.push(n.textContent);
           }
         }).observe(document.getElementById('chat-log'), { childList: true, subtree: true });
       });
       await page.fill('#chat-input', prompt);
       await page.fill('#chat-max-tokens', String(maxTokens));
       await page.fill('#chat-temperature', '0');
       await page.click('#chat-send');
       const reply = page.locator('#chat-reply-1');
       await page.waitForSelector('#chat-reply-1:is([data-state="done"], [data-state="error"])',
                                  { timeout: 60000 });
       assert.equal(await reply.getAttribute('data-state'), 'done', await reply.textContent());
       assert.equal(await reply.textContent(), expected);

       const texts = await page.evaluate(() => window.replyTexts);
       assert.ok(texts.length > 1, `the reply came in one piece: ${JSON.stringify(texts)}`);
       for (let i = 1; i < texts.length; i += 1) {
         assert.ok(texts[i].startsWith(texts[i - 1]) && texts[i].length > texts[i - 1].length,
                   `the reply did not grow: ${JSON.stringify(texts)}`);
       }
       assert.equal(texts.at(-1), expected);
       assert.equal(Number(await reply.getAttribute('data-chunks')), texts.length);

       // The request in the table, finished, and its steps on both devices' rows.
       const row = page.locator('#request-1');
       await row.waitFor({ timeout: 10000 });
       await page.waitForFunction(() => !document.getElementById('request-1')
         .classList.contains('running'), null, { timeout: 10000 });
       assert.match(await row.textContent(), /(length|stop)$/);
       await page.locator('#timeline-chart').waitFor();
       const steps = await page.locator('#timeline-chart rect.step').count();
       assert.ok(steps >= 2 * 2, `expected steps on both devices, got ${steps} bars`);
       assert.equal(steps % 2, 0, 'every step has a bar on each device');
       assert.match(await page.locator('#timeline-summary').textContent(),
                    /request 1: \d+ prompt tokens, \d+ generated/);
       // Op by op: a step kept with every device's ops (both rows), then the prompt's step once
       // its bar is clicked.
       await page.locator('#ops-chart').waitFor({ timeout: 10000 });
       const opsOn = async (d) => page.locator(`#ops-chart rect.op[data-device="${d}"]`).count();
       for (const d of [0, 1]) assert.ok(await opsOn(d) > 0, `no ops on device ${d}`);
       await page.locator('#timeline-chart rect.step.kept[data-step="0"]').first()
         .dispatchEvent('click');
       await page.waitForFunction(
         () => /request 1, step 0 \(the prompt/.test(
           document.getElementById('ops-summary').textContent),
         null, { timeout: 10000 });
       for (const d of [0, 1]) assert.ok(await opsOn(d) > 0, `no prompt ops on device ${d}`);
       assert.ok(await page.locator('#ops-chart rect.op-comm').count() > 0,
                 'no op moving data between the devices');
       assert.equal(await page.locator('#timeline-chart rect.step.picked').count(), 2,
                    'the picked step outlined on both rows');
       // The devices' speed comes from that request once the page refreshes them.
       await page.waitForFunction(
         () => /tok\/s prefill/.test(document.getElementById('device-1').textContent), null,
         { timeout: 15000 });

       mkdirSync(args.artifacts, { recursive: true });
       const shot = join(args.artifacts, 'dashboard.png');
       await page.screenshot({ path: shot, fullPage: true });
       console.log(`screenshot: ${shot}`);
       assert.deepEqual(errors, []);
     });

test('with --api-key the page asks for the key, then shows one device holding the model',
     async () => {
       const keyed = await HuddleServer.start(
         args.huddle, join(args.fixtures, 'models', 'gpt2-tiny'), ['--api-key', 'sesame']);
       const other = await browser.newPage();
       const thrown = [];
       other.on('pageerror', (e) => thrown.push(e.message));
       try {
         await other.goto(`${keyed.url}/`);
         // The data routes answer 401 (the browser logs those): the key form shows.
         await other.locator('#key-form').waitFor({ state: 'visible', timeout: 30000 });
         assert.equal(await other.locator('#devices .device').count(), 0);
         await other.fill('#key-input', 'sesame');
         await other.click('#key-form button');
         await other.locator('#device-0').waitFor({ timeout: 30000 });
         assert.equal(await other.locator('#devices .device').count(), 1);
         assert.equal(await other.locator('#plan-strategy').textContent(), 'local');
         assert.match(await other.locator('#plan-device-0').textContent(),
                      /the whole model \(\d+ layers\)/);
         assert.match(await other.locator('#links').textContent(), /none: one device/);
         // Polls sent before the key was entered answer 401 after it: the form stays hidden.
         await new Promise((resolve) => setTimeout(resolve, 1000));
         assert.ok(await other.locator('#key-form').isHidden());
         assert.deepEqual(thrown, []);
       } finally {
         await other.close();
         await keyed.stop();
       }
     });

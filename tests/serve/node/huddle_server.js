// Shared by the node tests of tests/serve: arguments, the skip rule, and a `huddle serve` process
// on 127.0.0.1 (a free port) that the tests talk to over real HTTP.
//
// The tests are run by ctest (tests/serve/CMakeLists.txt) as
//   node <test>.js --huddle build/huddle --fixtures tests/fixtures --artifacts build/test-artifacts
// and exit 77 (ctest: skipped) with a message saying what is missing when a package of
// package.json is not installed (scripts/node-deps installs them) or Chromium is absent.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SKIP = 77;
const here = dirname(fileURLToPath(import.meta.url));

// --name value pairs into an object; every name in `required` must be given.
export function parseArgs(argv, required) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) {
      throw new Error(`usage: --name value pairs; got '${argv[i]}'`);
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const name of required) {
    if (!(name in out)) throw new Error(`missing --${name}`);
  }
  return out;
}

// Exits with SKIP, saying why, unless every package is installed in tests/serve/node.
export function requirePackages(names) {
  const missing = names.filter((n) => !existsSync(join(here, 'node_modules', n, 'package.json')));
  if (missing.length > 0) {
    console.log(`SKIPPED: npm packages missing in ${here}: ${missing.join(', ')} ` +
                '(run scripts/node-deps)');
    process.exit(SKIP);
  }
}

// Exits with SKIP, saying why, unless `path` exists (an executable such as /usr/bin/chromium).
export function requireFile(path, why) {
  if (!existsSync(path)) {
    console.log(`SKIPPED: ${path} is missing (${why})`);
    process.exit(SKIP);
  }
}

// The text `huddle run --prompt P --n-predict N` generates greedily (what a server must give
// for temperature 0).
export function greedyText(huddle, model, prompt, n) {
  const out = execFileSync(huddle, ['run', '--model', model, '--prompt', prompt, '--n-predict',
                                    String(n), '--json', '--threads', '1'],
                           { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return JSON.parse(out).text;
}

// A running `huddle serve`: `url` is http://127.0.0.1:PORT, ready (health 200) once start()
// resolves. stop() sends SIGTERM and waits for the process to exit.
export class HuddleServer {
  static async start(huddle, model, extraArgs = [], timeoutMs = 60000) {
    const server = new HuddleServer();
    const args = ['serve', '--model', model, '--port', '0', '--threads', '1', ...extraArgs];
    server.process = spawn(huddle, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    server.stderr = '';
    server.process.stderr.on('data', (d) => { server.stderr += d; });
    server.exited = new Promise((resolve) => server.process.on('exit', resolve));
    const port = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`no 'listening on' line: ${server.stderr}`)),
                               timeoutMs);
      server.process.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/listening on [^\s]+:(\d+)/);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      server.process.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`huddle serve exited with ${code}: ${server.stderr}`));
      });
    });
    server.url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const res = await fetch(`${server.url}/health`);
        if (res.status === 200) break;
      } catch {
        // not accepting yet
      }
      if (Date.now() > deadline) {
        await server.stop();
        throw new Error(`the server never became healthy: ${server.stderr}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return server;
  }

  async stop() {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.process.kill('SIGTERM');
    const killer = setTimeout(() => this.process.kill('SIGKILL'), 20000);
    await this.exited;
    clearTimeout(killer);
  }
}

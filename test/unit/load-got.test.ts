import { execFile } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';

interface Observed {
  /** Intl.ListFormat instances built while got loaded and served a request (the first loads ICU's locale data). */
  readonly listFormatsBuiltByUse: number;
  /** After two overlapping importGot() calls. */
  readonly listFormatRestored: boolean;
  readonly sameGot: boolean;
  readonly body: string;
  /** got's own option error, whose text @sindresorhus/is writes with its (lazy) Intl.ListFormat. */
  readonly optionError: string;
  readonly listFormatsBuiltInAll: number;
}

/**
 * A fresh Node process (the vitest worker's module cache and globals would hide what a first import does): it counts
 * Intl.ListFormat constructions with a Proxy installed before anything loads, imports got through importGot, makes a
 * request with a body as the service client does, and has got refuse an option so that the lazily built formatter
 * writes a message.
 */
const CHILD = `
const counted = [];
const Real = Intl.ListFormat;
const proxy = new Proxy(Real, { construct(target, args, newTarget) { counted.push(args); return Reflect.construct(target, args, newTarget); } });
Intl.ListFormat = proxy;
const { importGot } = await import(process.env.LOAD_GOT_URL);
// Two overlapping imports, as two first service calls at once would make.
const [got, again] = await Promise.all([importGot(), importGot()]);
const listFormatRestored = Intl.ListFormat === proxy;
const sameGot = got === again;
const http = process.getBuiltinModule('node:http');
const server = http.createServer((req, res) => { let text = ''; req.on('data', (c) => (text += c)); req.on('end', () => res.end(req.method + ' ' + text)); });
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const body = await got.put('http://127.0.0.1:' + server.address().port + '/api/user', { body: '{"user_group_id":"a"}', retry: { limit: 0 } }).text();
server.close();
const listFormatsBuiltByUse = counted.length;
let optionError = '';
try { await got('http://127.0.0.1:1/', { retry: { limit: -1 } }); } catch (error) { optionError = error.message; }
process.stdout.write(JSON.stringify({ listFormatsBuiltByUse, listFormatRestored, sameGot, body, optionError, listFormatsBuiltInAll: counted.length }));
`;

async function observe(): Promise<Observed> {
  const loadGot = pathToFileURL(path.join(repoRoot, 'src/service/load-got.ts')).href;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CHILD], {
    cwd: repoRoot,
    env: { ...process.env, LOAD_GOT_URL: loadGot, NODE_OPTIONS: '' },
    timeout: 30_000,
  });
  return JSON.parse(stdout) as Observed;
}

describe('importGot (src/service/load-got.ts): got without ICU locale data', () => {
  it('loads and uses got without building an Intl.ListFormat, and got still works', async () => {
    const seen = await observe();
    expect(seen.listFormatsBuiltByUse, 'Intl.ListFormat built (ICU data loaded) while got loaded or sent a request').toBe(0);
    expect(seen.body).toBe('PUT {"user_group_id":"a"}');
    // Changed for the import only, even with two imports overlapping.
    expect(seen.listFormatRestored).toBe(true);
    expect(seen.sameGot).toBe(true);
    // The deferred formatter is real when a message needs it: got's own option error, written by @sindresorhus/is.
    expect(seen.optionError).toMatch(/^Option 'retry\.limit': Expected values which are `non-negative integer`\. Received values of type `number`\.$/);
    expect(seen.listFormatsBuiltInAll).toBe(2);
  });
});

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const queueModule = fileURLToPath(new URL('../../src/kube/workqueue.js', import.meta.url));

// A real Node process, because only the process itself can show that nothing
// the queue left behind holds its event loop open.
function runScript(body: string): { status: number | null; signal: NodeJS.Signals | null; stdout: string } {
  const script = `import { WorkQueue } from ${JSON.stringify(queueModule)};\n${body}`;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 5000,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout };
}

describe('WorkQueue and process exit', () => {
  it('lets the process exit with a long delayed add, a backoff and a drain still pending', () => {
    const r = runScript(`
      const delayed = new WorkQueue();
      delayed.addAfter('ns/a', 60_000);
      delayed.addRateLimited('ns/b');
      void delayed.get();
      const draining = new WorkQueue();
      draining.add('ns/c');
      await draining.get();
      void draining.shutDownWithDrain(60_000);
      console.log('armed');
    `);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('armed\n');
  });
});

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';

/** What a flood came to: objects created, and what kubectl said of any that were not. */
export interface FloodResult {
  readonly created: number;
  readonly failures: readonly string[];
}

export interface Flood {
  /** Objects created so far (kubectl's "created" lines). */
  created(): number;
  /** Every kubectl has exited. */
  ended(): boolean;
  readonly done: Promise<FloodResult>;
}

/**
 * A tenant's flood from processes of its own: `writers` real kubectl processes with the tenant's credentials,
 * each creating its share of `objects` one after another (`kubectl create -f -` of a List), as a tenant writing
 * from its own machine would. The test process that measures someone else's latency then does nothing else:
 * written from it with client-node, the same flood held its event loop at ~100 % of a core, and that lag was
 * counted into the figures it measured.
 */
export function kubectlFlood(tenant: KubeConfig, objects: readonly object[], writers: number): Flood {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-flood-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  fs.writeFileSync(kubeconfig, tenant.exportConfig(), { mode: 0o600 });
  const kubectl = path.join(inject('binDir'), 'kubectl');
  let created = 0;
  const shares = Array.from({ length: writers }, (_, w) => objects.filter((_o, i) => i % writers === w)).filter((share) => share.length > 0);
  const runs = shares.map(
    (items) =>
      new Promise<string[]>((resolve) => {
        const child = spawn(kubectl, ['--kubeconfig', kubeconfig, 'create', '-f', '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
        let pending = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          const lines = (pending + chunk).split('\n');
          pending = lines.pop() ?? '';
          created += lines.filter((line) => line.endsWith(' created')).length;
        });
        let stderr = '';
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
        child.on('close', (code) => resolve(code === 0 ? [] : [`kubectl exited ${String(code)}: ${stderr.trim().slice(0, 500)}`]));
        child.stdin.end(JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
      }),
  );
  let ended = false;
  const done = Promise.all(runs).then((failures) => {
    ended = true;
    fs.rmSync(dir, { recursive: true, force: true });
    return { created, failures: failures.flat() };
  });
  return { created: () => created, ended: () => ended, done };
}

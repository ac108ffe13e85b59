import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { asError } from './errors.js';

/** The admin KubeConfig of the shared test control plane, or of another one (a test's private control plane). */
export function adminKubeConfig(kubeconfigPath: string = inject('kubeconfig')): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return kc;
}

/** A KubeConfig that authenticates with a bearer token only (e.g. a ServiceAccount token). */
export function tokenKubeConfig(token: string, admin: KubeConfig = adminKubeConfig()): KubeConfig {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: 'token', token }],
    contexts: [{ name: 'token', cluster: cluster.name, user: 'token' }],
    currentContext: 'token',
  });
  return kc;
}

interface KubeconfigFile {
  clusters: { cluster: { server: string } }[];
}

/** A kubeconfig like `source` whose server is 127.0.0.1:<port> (the TLS name stays 127.0.0.1), e.g. a proxy's. */
export function kubeconfigVia(source: string, port: number): string {
  const config = parseYaml(fs.readFileSync(source, 'utf8')) as KubeconfigFile;
  for (const c of config.clusters) c.cluster.server = `https://127.0.0.1:${port}`;
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ug-proxy-kc-')), 'kubeconfig');
  fs.writeFileSync(file, stringifyYaml(config), { mode: 0o600 });
  return file;
}

/** The port of the (first) apiserver a kubeconfig file points at. */
export function apiserverPort(kubeconfigPath: string): number {
  const config = parseYaml(fs.readFileSync(kubeconfigPath, 'utf8')) as KubeconfigFile;
  return Number(new URL(config.clusters[0]?.cluster.server ?? '').port);
}

/** A fresh namespace per test file, so files can share one control plane. */
export async function createNamespace(prefix: string, kc: KubeConfig = adminKubeConfig()): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name, labels: { 'usergroup.dev/test': 'true' } } } });
  return name;
}

export async function deleteNamespace(name: string, kc: KubeConfig = adminKubeConfig()): Promise<void> {
  await kc.makeApiClient(CoreV1Api).deleteNamespace({ name });
}

export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The real kubectl built with the control plane, against the test cluster. */
export function kubectl(args: readonly string[], options: { input?: string; timeoutMs?: number } = {}): Promise<CommandResult> {
  return run(path.join(inject('binDir'), 'kubectl'), ['--kubeconfig', inject('kubeconfig'), ...args], options);
}

export function run(bin: string, args: readonly string[], options: { input?: string; timeoutMs?: number; cwd?: string } = {}): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      args,
      { timeout: options.timeoutMs ?? 60_000, maxBuffer: 16 << 20, ...(options.cwd ? { cwd: options.cwd } : {}) },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

/** Polls until `check` returns a value other than undefined. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: Error | undefined;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = asError(err);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `; last error: ${String(lastError)}` : ''}`);
}

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { WatchedChild } from './watched-child.js';

/**
 * The reference operator of the `peer` phase: a Go (controller-runtime) operator doing the core job, kept outside
 * the product (by default in ../shared/peer next to the checkout). The bench only runs its build script and the
 * binary it prints; it never copies its code.
 */

/** Why the peer cannot run from `dir`, or undefined when its build script is there. */
export function peerMissing(dir: string): string | undefined {
  return fs.existsSync(path.join(dir, 'build.sh')) ? undefined : `no reference peer at ${dir} (build.sh not found)`;
}

/** Where Go's official archive installs it: used when `go` is not on PATH, as on a fresh shell of a dev machine. */
const GO_HOME_BIN = '/usr/local/go/bin';

/**
 * Runs the peer's build.sh (cached: a rebuild after the first is quick) and resolves with the binary's path, the
 * last line it prints. Asynchronous, because the simulator serves from this process.
 */
export function buildPeer(dir: string, logFile: string): Promise<string> {
  const pathVar = process.env['PATH'] ?? '';
  const env = { ...process.env, PATH: fs.existsSync(GO_HOME_BIN) && !pathVar.split(':').includes(GO_HOME_BIN) ? `${pathVar}:${GO_HOME_BIN}` : pathVar };
  return new Promise((resolve, reject) => {
    const log = fs.openSync(logFile, 'a');
    const child = spawn('bash', [path.join(dir, 'build.sh')], { env, stdio: ['ignore', 'pipe', log] });
    fs.closeSync(log);
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      const bin = stdout.trim().split('\n').pop() ?? '';
      if (code === 0 && bin && fs.existsSync(bin)) resolve(bin);
      else reject(new Error(`${path.join(dir, 'build.sh')} failed (exit ${code}); see ${logFile}`));
    });
  });
}

export interface PeerOperatorOptions {
  readonly bin: string;
  readonly kubeconfigPath: string;
  readonly namespace: string;
  readonly serviceUrl: string;
  readonly apiKeyFile: string;
  readonly concurrency: number;
  /** Its Kubernetes client QPS and burst (controller-runtime's rate limiter; the TypeScript operator has none). */
  readonly qps: number;
  readonly burst: number;
  readonly logFile: string;
}

/** The peer's flags (reported with the results); metrics, health probes and leader election off, as it defaults. */
export function peerFlags(
  o: Pick<PeerOperatorOptions, 'kubeconfigPath' | 'namespace' | 'serviceUrl' | 'apiKeyFile' | 'concurrency' | 'qps' | 'burst'>,
): string[] {
  return [
    '--kubeconfig',
    o.kubeconfigPath,
    '--namespace',
    o.namespace,
    '--service-url',
    o.serviceUrl,
    '--api-key-file',
    o.apiKeyFile,
    '--concurrency',
    String(o.concurrency),
    '--qps',
    String(o.qps),
    '--burst',
    String(o.burst),
  ];
}

/** Every peer process this bench started, so an interrupted run can end them. */
export const spawnedPeers: PeerOperator[] = [];

/** The Go peer as its own process, watched through /proc like the bench's controller. */
export class PeerOperator extends WatchedChild {
  static spawn(o: PeerOperatorOptions): PeerOperator {
    fs.mkdirSync(path.dirname(o.logFile), { recursive: true });
    const out = fs.openSync(o.logFile, 'a');
    // Its flags say everything: no configuration from the bench's own environment.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('USERGROUP_') && k !== 'KUBECONFIG'));
    const child = spawn(o.bin, peerFlags(o), { env, stdio: ['ignore', out, out] });
    fs.closeSync(out);
    if (child.pid === undefined) throw new Error(`could not spawn ${o.bin}`);
    const peer = new PeerOperator(child, child.pid, o.logFile);
    spawnedPeers.push(peer);
    return peer;
  }
}

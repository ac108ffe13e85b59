import { execFile } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { ensureBinaries, type Binaries } from './binaries.js';
import { createPki, type Pki } from './pki.js';
import { ManagedProcess, Watchdog } from './process.js';

export interface ControlPlaneOptions {
  /** Where to write the admin kubeconfig; defaults to a file in the work dir. */
  readonly kubeconfigPath?: string;
  /** Called with one line per step, for people watching a start. */
  readonly progress?: (line: string) => void;
  /**
   * CRD manifests to apply (with the real kubectl) before kube-controller-manager starts. Its garbage
   * collector only discovers resource types added later at a periodic resync (30 s and more), so types
   * known at its start make owner-reference cleanup of custom resources immediate.
   */
  readonly crds?: readonly string[];
  /**
   * etcd's --quota-backend-bytes; etcd's own default (2 GiB) when absent. The bench's `scale` phase raises it:
   * 100,000 UserGroups with their Secrets, UserGroupClaims, Events and the history between compactions outgrow 2 GiB.
   */
  readonly etcdQuotaBackendBytes?: number;
  /**
   * A node's address (devtools/node's one-node cluster): kube-apiserver then serves on every address of its network
   * namespace (the kubeconfig still names 127.0.0.1), advertises this one with the default lease endpoint
   * reconciler, so that the default/kubernetes Service gets real endpoints and Pods reach the apiserver as on any
   * cluster, and its serving certificate names it. Without it: loopback only, no endpoints (as envtest).
   */
  readonly nodeAddress?: string;
  /** More kube-apiserver flags, after the usual ones: e.g. --runtime-config to serve another set of API versions. */
  readonly apiserverFlags?: readonly string[];
}

/**
 * etcd + kube-apiserver + kube-controller-manager on loopback, the way
 * controller-runtime's envtest runs them, plus kube-controller-manager so that
 * garbage collection, namespace deletion and ServiceAccount controllers work.
 */
export class ControlPlane {
  private constructor(
    readonly binaries: Binaries,
    readonly workDir: string,
    readonly pki: Pki,
    readonly kubeconfigPath: string,
    readonly serverUrl: string,
    readonly etcdUrl: string,
    readonly etcd: ManagedProcess,
    readonly apiserver: ManagedProcess,
    readonly controllerManager: ManagedProcess,
    private readonly watchdog: Watchdog,
  ) {}

  static async start(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    // freePorts releases its ports before etcd and kube-apiserver bind them; in that gap any process on the machine
    // may take one (an outgoing connection's local port comes from the same range), so a lost race starts afresh.
    for (let attempt = 1; ; attempt++) {
      try {
        return await ControlPlane.startOnce(options);
      } catch (err) {
        if (attempt >= 3 || !(err instanceof Error) || !err.message.includes('address already in use')) throw err;
        options.progress?.(`a port was taken before it was bound; starting again (attempt ${attempt + 1})`);
      }
    }
  }

  private static async startOnce(options: ControlPlaneOptions): Promise<ControlPlane> {
    const progress = options.progress ?? (() => undefined);
    const binaries = ensureBinaries();
    const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'usergroup-operator-cp-'));
    const watchdog = new Watchdog(workDir);
    const processes: ManagedProcess[] = [];
    try {
      const pki = createPki(path.join(workDir, 'pki'), options.nodeAddress !== undefined ? [options.nodeAddress] : []);
      const [etcdPort, etcdPeerPort, apiPort] = await freePorts(3);
      const etcdUrl = `http://127.0.0.1:${etcdPort}`;
      const serverUrl = `https://127.0.0.1:${apiPort}`;
      forgetDiscovery('127.0.0.1', apiPort);
      const logs = path.join(workDir, 'logs');
      fs.mkdirSync(logs);

      const etcd = new ManagedProcess(
        'etcd',
        binaries.etcd,
        [
          '--name=etcd',
          `--data-dir=${path.join(workDir, 'etcd')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
          `--initial-cluster=etcd=http://127.0.0.1:${etcdPeerPort}`,
          '--unsafe-no-fsync=true',
          '--log-level=warn',
          ...(options.etcdQuotaBackendBytes !== undefined ? [`--quota-backend-bytes=${options.etcdQuotaBackendBytes}`] : []),
        ],
        path.join(logs, 'etcd.log'),
        watchdog,
      );
      processes.push(etcd);
      progress(`starting etcd ${binaries.versions.etcd} on ${etcdUrl}`);
      etcd.start();
      await waitUntil(etcd, 'etcd', () => httpOk(`${etcdUrl}/health`));

      const apiserver = new ManagedProcess(
        'kube-apiserver',
        binaries.kubeApiserver,
        [
          `--etcd-servers=${etcdUrl}`,
          `--cert-dir=${path.join(workDir, 'apiserver-certs')}`,
          `--tls-cert-file=${pki.serverCert}`,
          `--tls-private-key-file=${pki.serverKey}`,
          `--client-ca-file=${pki.caCert}`,
          `--secure-port=${apiPort}`,
          ...(options.nodeAddress !== undefined
            ? ['--bind-address=0.0.0.0', `--advertise-address=${options.nodeAddress}`]
            : [
                '--bind-address=127.0.0.1',
                '--advertise-address=127.0.0.1',
                // Since 1.37 the endpoint reconciler refuses a loopback advertise address; nothing here reaches the
                // apiserver through the default/kubernetes Service, so its endpoints are not maintained (as envtest).
                '--endpoint-reconciler-type=none',
              ]),
          '--service-cluster-ip-range=10.0.0.0/24',
          '--allow-privileged=true',
          '--authorization-mode=RBAC',
          `--service-account-issuer=${serverUrl}`,
          `--service-account-key-file=${pki.serviceAccountPub}`,
          `--service-account-signing-key-file=${pki.serviceAccountKey}`,
          '--profiling=false',
          '--v=1',
          ...(options.apiserverFlags ?? []),
        ],
        path.join(logs, 'kube-apiserver.log'),
        watchdog,
      );
      processes.push(apiserver);
      progress(`starting kube-apiserver ${binaries.versions.kubernetes} on ${serverUrl}`);
      apiserver.start();
      const admin = adminAgent(pki);
      await waitUntil(apiserver, 'kube-apiserver', () => httpsOk(`${serverUrl}/readyz`, admin), 90_000);

      fs.mkdirSync(path.dirname(options.kubeconfigPath ?? workDir), { recursive: true });
      const kubeconfigPath = options.kubeconfigPath ?? path.join(workDir, 'admin.kubeconfig');
      writeKubeconfig(kubeconfigPath, serverUrl, pki);
      const kcmKubeconfig = path.join(workDir, 'kube-controller-manager.kubeconfig');
      writeKubeconfig(kcmKubeconfig, serverUrl, pki);

      for (const crds of options.crds ?? []) {
        progress(`applying ${crds}`);
        await kubectlApplyCrds(binaries.kubectl, kubeconfigPath, crds);
      }

      const controllerManager = new ManagedProcess(
        'kube-controller-manager',
        binaries.kubeControllerManager,
        [
          `--kubeconfig=${kcmKubeconfig}`,
          '--leader-elect=false',
          '--secure-port=0',
          `--service-account-private-key-file=${pki.serviceAccountKey}`,
          `--root-ca-file=${pki.caCert}`,
          '--controllers=*',
          '--v=1',
        ],
        path.join(logs, 'kube-controller-manager.log'),
        watchdog,
      );
      processes.push(controllerManager);
      progress('starting kube-controller-manager');
      controllerManager.start();
      // The ServiceAccount controller creating "default" proves the controller manager is up and syncing.
      await waitUntil(
        controllerManager,
        'kube-controller-manager',
        () => httpsOk(`${serverUrl}/api/v1/namespaces/default/serviceaccounts/default`, admin),
        90_000,
      );

      progress(`control plane ready; kubeconfig: ${kubeconfigPath}`);
      return new ControlPlane(binaries, workDir, pki, kubeconfigPath, serverUrl, etcdUrl, etcd, apiserver, controllerManager, watchdog);
    } catch (err) {
      for (const p of processes.reverse()) await p.stop(3_000);
      watchdog.disarm();
      fs.rmSync(workDir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Stops kube-apiserver and starts it again on the same port with the same storage. */
  async restartApiserver(): Promise<void> {
    await this.apiserver.stop();
    this.apiserver.start();
    await waitUntil(this.apiserver, 'kube-apiserver', () => httpsOk(`${this.serverUrl}/readyz`, adminAgent(this.pki)), 90_000);
  }

  /** Compacts etcd up to its current revision so that watches from older resourceVersions get 410 Gone. */
  async compactEtcd(): Promise<number> {
    const range = await postJson(`${this.etcdUrl}/v3/kv/range`, { key: Buffer.from('/').toString('base64'), limit: 1 });
    const revision = Number((range as { header?: { revision?: string } }).header?.revision);
    if (!Number.isInteger(revision) || revision <= 0) throw new Error(`etcd returned no revision: ${JSON.stringify(range)}`);
    await postJson(`${this.etcdUrl}/v3/kv/compaction`, { revision: String(revision), physical: true });
    return revision;
  }

  /** Gives etcd's free pages back (after compaction), so a later benchmark phase starts from a compact store. */
  async defragmentEtcd(): Promise<void> {
    await postJson(`${this.etcdUrl}/v3/maintenance/defragment`, {});
  }

  /** etcd's database size (bytes allocated on disk, what the quota is checked against) and the part in use. */
  async etcdDbSize(): Promise<{ dbSizeBytes: number; inUseBytes: number }> {
    const status = (await postJson(`${this.etcdUrl}/v3/maintenance/status`, {})) as { dbSize?: string; dbSizeInUse?: string };
    return { dbSizeBytes: Number(status.dbSize ?? NaN), inUseBytes: Number(status.dbSizeInUse ?? NaN) };
  }

  async stop(): Promise<void> {
    await this.controllerManager.stop();
    await this.apiserver.stop();
    await this.etcd.stop();
    this.watchdog.disarm();
    fs.rmSync(this.workDir, { recursive: true, force: true });
  }
}

async function kubectlApplyCrds(kubectl: string, kubeconfig: string, manifests: string): Promise<void> {
  const run = (args: string[]): Promise<void> =>
    new Promise((resolve, reject) => {
      execFile(kubectl, ['--kubeconfig', kubeconfig, ...args], { timeout: 90_000 }, (err, _stdout, stderr) => {
        if (err) reject(new Error(`kubectl ${args.join(' ')} failed: ${stderr || err.message}`, { cause: err }));
        else resolve();
      });
    });
  await run(['apply', '--server-side', '-f', manifests]);
  await run(['wait', '--for=condition=Established', '--timeout=60s', '-f', manifests]);
}

function writeKubeconfig(file: string, server: string, pki: Pki): void {
  const b64 = (f: string): string => fs.readFileSync(f).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'usergroup-operator-test', cluster: { server, 'certificate-authority-data': b64(pki.caCert) } }],
    users: [{ name: 'admin', user: { 'client-certificate-data': b64(pki.adminCert), 'client-key-data': b64(pki.adminKey) } }],
    contexts: [{ name: 'usergroup-operator-test', context: { cluster: 'usergroup-operator-test', user: 'admin', namespace: 'default' } }],
    'current-context': 'usergroup-operator-test',
  };
  fs.writeFileSync(file, stringify(config), { mode: 0o600 });
}

function adminAgent(pki: Pki): https.Agent {
  return new https.Agent({
    ca: fs.readFileSync(pki.caCert),
    cert: fs.readFileSync(pki.adminCert),
    key: fs.readFileSync(pki.adminKey),
    keepAlive: false,
  });
}

async function waitUntil(proc: ManagedProcess, what: string, ready: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const state = { exited: false };
  void proc.exited().then(() => {
    state.exited = true;
  });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (state.exited) throw new Error(`${what} exited during start-up; last lines of ${proc.logFile}:\n${proc.logTail()}`);
    if (await ready()) return;
    await sleep(100);
  }
  throw new Error(`${what} was not ready after ${timeoutMs} ms; last lines of ${proc.logFile}:\n${proc.logTail()}`);
}

function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

function httpsOk(url: string, agent: https.Agent): Promise<boolean> {
  return new Promise((resolve) => {
    const req = https.get(url, { agent, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

function postJson(url: string, body: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) reject(new Error(`POST ${url}: ${res.statusCode} ${text}`));
        else resolve(JSON.parse(text) as unknown);
      });
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`POST ${url} timed out`)));
    req.end(JSON.stringify(body));
  });
}

/** Ports the kernel hands out for port 0, released again for the servers to bind. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('no TCP address');
    return address.port;
  });
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/**
 * kubectl and helm cache each server's API discovery for hours, keyed by host and port only. A new control plane on a
 * port an earlier one used (with other CRD versions) would be read through that stale map: seen as kubectl patching
 * usergroup.dev/v1 on an apiserver serving only v1alpha1 ("the server could not find the requested resource").
 */
function forgetDiscovery(host: string, port: number | undefined): void {
  if (port === undefined) return;
  const cacheDir = process.env['KUBECACHEDIR'] || path.join(os.homedir(), '.kube', 'cache');
  fs.rmSync(path.join(cacheDir, 'discovery', `${host}_${port}`), { recursive: true, force: true });
}

import fs from 'node:fs';
import path from 'node:path';
import { ManagedProcess, type Watchdog } from '../controlplane/process.js';
import type { NodeBinaries } from './binaries.js';
import { GiveUp, run, waitFor } from './exec.js';
import { POD_CIDR, type NodeLayout } from './layout.js';

/** The CRI sandbox image: Debian's static busybox as a shell that waits for TERM (devtools/node/busybox-image.sh). */
export const PAUSE_IMAGE = 'usergroup-operator.dev/e2e/pause:1';

/**
 * containerd's registry hosts directory (`<host:port>/hosts.toml`, read at every pull, so a test can add a registry
 * to a running node): how the e2e suite tells the kubelet's pulls that its registry speaks plain HTTP.
 */
export const registryHostsDir = (layout: Pick<NodeLayout, 'root'>): string => path.join(layout.root, 'containerd', 'certs.d');

/** Lets the node's containerd pull from `host` (host:port) over plain HTTP, as a hosts.toml of its own says. */
export function trustPlainHttpRegistry(layout: Pick<NodeLayout, 'root'>, host: string): void {
  const dir = path.join(registryHostsDir(layout), host);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'hosts.toml'), `server = "http://${host}"\n\n[host."http://${host}"]\n  capabilities = ["pull", "resolve"]\n`);
}

export interface Containerd {
  readonly process: ManagedProcess;
  readonly socket: string;
  /** ctr against this containerd, CRI namespace k8s.io. */
  ctr(args: readonly string[], timeoutMs?: number): Promise<string>;
}

/**
 * containerd 2.4 with Debian's runc, cgroupfs, the overlayfs snapshotter and the CNI bridge, all state under
 * the work dir. Config version 4: there `[grpc] address` is ignored, the socket is the grpc server plugin's.
 * `restrict_oom_score_adj`: root here lacks CAP_SYS_RESOURCE, so runc cannot lower oom_score_adj (the pause
 * container asks for -998: "can't get final child's PID from pipe: EOF"); clamped to containerd's own.
 */
export async function startContainerd(layout: NodeLayout, bins: NodeBinaries, logs: string, watchdog: Watchdog): Promise<Containerd> {
  const dir = path.join(layout.root, 'containerd');
  const netConf = path.join(layout.root, 'cni', 'net.d');
  fs.mkdirSync(dir, { recursive: true });
  fs.mkdirSync(netConf, { recursive: true });
  fs.writeFileSync(
    path.join(netConf, '10-ugo-e2e.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'ugo-e2e',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: POD_CIDR }]], routes: [{ dst: '0.0.0.0/0' }] },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    }),
  );
  const socket = path.join(dir, 'containerd.sock');
  const q = (s: string): string => JSON.stringify(s);
  const config = [
    'version = 4',
    `root = ${q(path.join(dir, 'root'))}`,
    `state = ${q(path.join(dir, 'state'))}`,
    'imports = []',
    '[plugins."io.containerd.server.v1.grpc"]',
    `  address = ${q(socket)}`,
    '[plugins."io.containerd.server.v1.ttrpc"]',
    `  address = ${q(`${socket}.ttrpc`)}`,
    '[plugins."io.containerd.cri.v1.runtime"]',
    '  enable_selinux = false',
    '  restrict_oom_score_adj = true',
    '  [plugins."io.containerd.cri.v1.runtime".containerd]',
    '    default_runtime_name = "runc"',
    '    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]',
    '      runtime_type = "io.containerd.runc.v2"',
    '      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]',
    `        BinaryName = ${q(bins.runc)}`,
    '        SystemdCgroup = false',
    '  [plugins."io.containerd.cri.v1.runtime".cni]',
    `    bin_dirs = [${q(bins.cniDir)}]`,
    `    conf_dir = ${q(netConf)}`,
    '[plugins."io.containerd.cri.v1.images"]',
    '  snapshotter = "overlayfs"',
    '  [plugins."io.containerd.cri.v1.images".registry]',
    `    config_path = ${q(registryHostsDir(layout))}`,
    '  [plugins."io.containerd.cri.v1.images".pinned_images]',
    `    sandbox = ${q(PAUSE_IMAGE)}`,
    '',
  ].join('\n');
  const configFile = path.join(dir, 'config.toml');
  fs.writeFileSync(configFile, config);

  // The shim is found on PATH, next to containerd.
  const pathEnv = `${bins.dir}:${path.dirname(bins.runc)}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
  const proc = new ManagedProcess(
    'containerd',
    'env',
    [`PATH=${pathEnv}`, bins.containerd, '--config', configFile, '--log-level', 'info'],
    path.join(logs, 'containerd.log'),
    watchdog,
  );
  proc.start();
  const ctr = (args: readonly string[], timeoutMs = 120_000): Promise<string> => run(bins.ctr, ['--address', socket, '-n', 'k8s.io', ...args], { timeoutMs });
  await waitFor(
    'containerd answering on its socket',
    async () => {
      if (!proc.running) throw new GiveUp(`containerd exited:\n${proc.logTail()}`);
      if (!fs.existsSync(socket)) return undefined;
      await ctr(['version'], 5_000);
      return true;
    },
    30_000,
    () => proc.logTail(),
  );
  return { process: proc, socket, ctr };
}

import fs from 'node:fs';
import path from 'node:path';
import { ManagedProcess, Watchdog } from '../controlplane/process.js';
import type { NodeBinaries } from './binaries.js';
import { startContainerd, type Containerd } from './containerd.js';
import { GiveUp, run, waitFor } from './exec.js';
import { kubeletArgs, writeKubeletConfig } from './kubelet.js';
import { POD_CIDR, type NodeLayout } from './layout.js';

export interface NodeOptions {
  readonly layout: NodeLayout;
  readonly binaries: NodeBinaries;
  /** An admin kubeconfig of a control plane reachable from the node's namespaces. */
  readonly kubeconfig: string;
  /** kubectl of the control plane's build. */
  readonly kubectl: string;
  /** OCI image layout tarballs imported into containerd's CRI namespace before the kubelet starts. */
  readonly images: readonly string[];
  readonly progress?: (line: string) => void;
}

/**
 * A node joined to a control plane: containerd, kubelet, kube-proxy (nftables) and kube-scheduler (the test
 * control plane runs none). Must run inside the node's namespaces (run-in-node.ts starts the command that
 * calls this there): the daemons are plain children of this process, each in its own process group, and a
 * Watchdog kills those groups if this process dies. Containers and shims, which are not in those groups, are
 * the launcher's TeardownGuard's (cgroup subtree, network namespace).
 */
export class Node {
  private constructor(
    readonly layout: NodeLayout,
    readonly containerd: Containerd,
    private readonly daemons: readonly ManagedProcess[],
    private readonly watchdog: Watchdog,
  ) {}

  static async start(options: NodeOptions): Promise<Node> {
    const { layout, binaries: bins } = options;
    const progress = options.progress ?? (() => undefined);
    const logs = path.join(layout.root, 'logs');
    fs.mkdirSync(logs, { recursive: true });
    // The Watchdog removes its dir after killing: give it an empty one, never the state (mounts may be live).
    const watchdogDir = path.join(layout.root, 'watchdog');
    fs.mkdirSync(watchdogDir, { recursive: true });
    const watchdog = new Watchdog(watchdogDir);
    const daemons: ManagedProcess[] = [];
    const daemon = (name: string, bin: string, args: readonly string[]): ManagedProcess => {
      const proc = new ManagedProcess(name, bin, args, path.join(logs, `${name}.log`), watchdog);
      daemons.push(proc);
      proc.start();
      return proc;
    };
    const kubectl = (args: readonly string[]): Promise<string> => run(options.kubectl, ['--kubeconfig', options.kubeconfig, ...args]);
    try {
      progress(`containerd ${bins.versions.containerd}, runc ${bins.runc}`);
      const containerd = await startContainerd(layout, bins, logs, watchdog);
      daemons.push(containerd.process);
      for (const image of options.images) {
        progress(`importing ${path.basename(image)}`);
        await containerd.ctr(['images', 'import', '--snapshotter', 'overlayfs', image], 300_000);
      }

      progress(`kubelet ${bins.versions.kubernetes} (node ${layout.nodeName}, ${layout.address}, cgroup v${layout.cgroupVersion})`);
      const kubelet = daemon('kubelet', bins.kubelet, kubeletArgs(layout, writeKubeletConfig(layout, containerd.socket), options.kubeconfig));
      await waitFor(
        `node ${layout.nodeName} Ready`,
        async () => {
          if (!kubelet.running) throw new GiveUp(`the kubelet exited:\n${kubelet.logTail()}`);
          const status = await kubectl(['get', 'node', layout.nodeName, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
          return status === 'True' ? true : undefined;
        },
        120_000,
        () => kubelet.logTail(),
      );

      progress('kube-proxy (nftables), kube-scheduler');
      daemon('kube-proxy', bins.kubeProxy, [
        `--kubeconfig=${options.kubeconfig}`,
        `--hostname-override=${layout.nodeName}`,
        '--proxy-mode=nftables',
        `--cluster-cidr=${POD_CIDR}`,
        // Leaves the conntrack sysctls alone.
        '--conntrack-max-per-core=0',
        '--metrics-bind-address=127.0.0.1:10249',
        '--healthz-bind-address=127.0.0.1:10256',
        '--v=2',
      ]);
      daemon('kube-scheduler', bins.kubeScheduler, [
        `--kubeconfig=${options.kubeconfig}`,
        `--authentication-kubeconfig=${options.kubeconfig}`,
        `--authorization-kubeconfig=${options.kubeconfig}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        '--v=1',
      ]);
      return new Node(layout, containerd, daemons, watchdog);
    } catch (err) {
      for (const d of daemons.reverse()) await d.stop(3_000);
      watchdog.disarm();
      throw err;
    }
  }

  /** Imports one more OCI image layout tarball (e.g. a second operator image for an upgrade). */
  async importImage(tarball: string): Promise<void> {
    await this.containerd.ctr(['images', 'import', '--snapshotter', 'overlayfs', tarball], 300_000);
  }

  /**
   * Stops the daemons, newest first (scheduler, proxy, kubelet, containerd). Pods, shims and containers are
   * left to the launcher's teardown, which kills the node's cgroup subtree and network namespace.
   */
  async stop(): Promise<void> {
    for (const d of [...this.daemons].reverse()) await d.stop(10_000);
    this.watchdog.disarm();
  }

  logFile(name: string): string {
    return path.join(this.layout.root, 'logs', `${name}.log`);
  }
}

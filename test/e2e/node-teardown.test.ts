import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/repo-root.js';
import { GiveUp, run } from '../../devtools/node/exec.js';
import { LAYOUT_ENV } from '../../devtools/node/layout.js';
import { CLUSTER_FILE, type ClusterFile } from '../../devtools/node/cluster.js';
import { kubectl, waitFor } from './support/cluster.js';

// The harness leaves nothing behind when what runs the tests is SIGKILLed (issue 19): a second, nested node
// (`npm run node:up`'s launcher and cluster, started from inside this run's node) with a Pod running, then a
// SIGKILL to the process serving it (as to vitest) or to the launcher itself; afterwards no process of it, no
// network namespace, no cgroup, no mount and no work dir may remain, and this run's own node is untouched.

const runInNode = path.join(repoRoot, 'devtools/node/run-in-node.ts');
const serveCli = path.join(repoRoot, 'devtools/node/serve-cli.ts');

interface NestedNode {
  readonly launcher: ChildProcess;
  readonly name: string;
  readonly root: string;
  readonly cluster: ClusterFile;
  readonly stderr: () => string;
}

async function startNestedNode(): Promise<NestedNode> {
  // A launcher of its own, not this run's layout.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => key !== LAYOUT_ENV));
  const launcher = spawn(process.execPath, ['--import', 'tsx', runInNode, '--', process.execPath, '--import', 'tsx', serveCli], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  launcher.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString('utf8')));
  const alive = (): void => {
    if (launcher.exitCode !== null || launcher.signalCode !== null) throw new GiveUp(`the launcher ended early:\n${stderr}`);
  };
  const made = await waitFor(
    'the nested node launched',
    async () => {
      alive();
      return /namespaces (\S+) ready in \d+ ms \(holder \d+, work dir (\S+)\)/.exec(stderr) ?? undefined;
    },
    60_000,
  );
  const [, name = '', root = ''] = made;
  const cluster = await waitFor(
    'the nested cluster up',
    async () => {
      alive();
      return JSON.parse(fs.readFileSync(path.join(root, CLUSTER_FILE), 'utf8')) as ClusterFile;
    },
    300_000,
    () => stderr,
  );
  return { launcher, name, root, cluster, stderr: () => stderr };
}

/** kubectl against the nested cluster, from inside its namespaces (its apiserver is reachable only there). */
function nestedKubectl(node: NestedNode, args: readonly string[]): Promise<string> {
  return run('nsenter', ['-t', String(node.cluster.holderPid), '-n', '-m', '--', node.cluster.kubectl, '--kubeconfig', node.cluster.kubeconfig, ...args], {
    timeoutMs: 150_000,
  });
}

function cgroupDirs(name: string): string[] {
  const base = '/sys/fs/cgroup';
  return [path.join(base, name), ...fs.readdirSync(base).map((h) => path.join(base, h, name))].filter((d) => fs.existsSync(d));
}

function pidsUnder(dir: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...pidsUnder(full));
    else if (entry.name === 'cgroup.procs') found.push(...fs.readFileSync(full, 'utf8').split('\n').filter(Boolean).map(Number));
  }
  return found;
}

async function netnsPids(name: string): Promise<number[]> {
  return (await run('ip', ['netns', 'pids', name])).split('\n').filter(Boolean).map(Number);
}

/** Those of `pids` still running. A zombie is not: it holds nothing, and this machine's init reaps slowly. */
function alivePids(pids: readonly number[]): number[] {
  return [...new Set(pids)].filter((pid) => {
    try {
      const state = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
      return state !== 'Z' && state !== 'X';
    } catch {
      return false;
    }
  });
}

const mountsUnder = (root: string): string[] =>
  fs
    .readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((m) => m === root || m.startsWith(`${root}/`));

describe('the node harness after a SIGKILL', () => {
  it.each([
    ['the process serving the cluster (as vitest)', 'command'],
    ['the launcher', 'launcher'],
  ] as const)('SIGKILL to %s: nothing of the node remains, and the other node is untouched', async (_what, victim) => {
    const node = await startNestedNode();
    // A container in the node's cgroup subtree, in a Pod network namespace of its own: what the kubelet leaves.
    await waitFor(
      'a Pod created (the default ServiceAccount exists)',
      () =>
        nestedKubectl(node, [
          'run',
          'sleeper',
          '--image=usergroup-operator.dev/e2e/busybox:1',
          '--image-pull-policy=Never',
          '--restart=Never',
          '--',
          'sleep',
          '3600',
        ]),
      60_000,
    );
    await nestedKubectl(node, ['wait', '--for=condition=Ready', 'pod/sleeper', '--timeout=120s']);

    const inNetns = await netnsPids(node.name);
    const cgroups = cgroupDirs(node.name);
    const inCgroups = [...new Set(cgroups.flatMap(pidsUnder))];
    expect(inNetns).toContain(node.cluster.pid);
    expect(inNetns).toContain(node.cluster.holderPid);
    // etcd, kube-apiserver, kube-controller-manager, containerd, kubelet, kube-proxy, kube-scheduler, holder, server
    expect(inNetns.length).toBeGreaterThanOrEqual(9);
    expect(cgroups.length).toBeGreaterThan(0);
    expect(inCgroups.length, 'the Pod sandbox and its container in the node cgroup').toBeGreaterThanOrEqual(2);
    expect(mountsUnder(node.root)).toEqual([]);
    expect(fs.existsSync(`/run/netns/${node.name}`)).toBe(true);

    const ended = new Promise<void>((resolve) => node.launcher.once('exit', () => resolve()));
    const killed = Date.now();
    if (victim === 'command') process.kill(node.cluster.pid, 'SIGKILL');
    else node.launcher.kill('SIGKILL');
    await ended;
    if (victim === 'command') {
      // The launcher saw its command die and tore the node down before it exited.
      expect(node.stderr()).toMatch(/was killed by SIGKILL/);
      expect(node.stderr()).toMatch(/torn down in \d+ ms/);
    }
    // With the launcher gone, its detached guard does the same on its own: give it the time it takes.
    await waitFor(
      'the nested node torn down',
      async () => (!fs.existsSync(node.root) && !fs.existsSync(`/run/netns/${node.name}`) && cgroupDirs(node.name).length === 0 ? true : undefined),
      60_000,
      () => node.stderr(),
    );
    process.stderr.write(`[e2e] SIGKILL to the ${victim}: nested node torn down ${Date.now() - killed} ms later\n`);
    await waitFor(
      'every process of the nested node gone',
      async () => (alivePids([...inNetns, ...inCgroups]).length === 0 ? true : undefined),
      10_000,
      () =>
        alivePids([...inNetns, ...inCgroups])
          .map((pid) => `${pid} ${fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').slice(0, 120)}`)
          .join('\n'),
    );
    expect(mountsUnder(node.root)).toEqual([]);

    // This run's node, whose namespaces the nested one was made from, still serves.
    const nodes = await kubectl(['get', 'nodes', '-o', 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}']);
    expect(nodes).toBe('True');
  });
});

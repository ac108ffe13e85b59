import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from './exec.js';
import { NODE_ADDRESS, NODE_NAME, type NodeLayout } from './layout.js';

/**
 * The node's namespaces, made from the host's namespaces by the launcher:
 * - a network namespace `name` with lo and a veth pair whose both ends stay inside (eth0 = NODE_ADDRESS, a
 *   default route to an address nobody has): nothing the node does leaves it. The kernel here has no dummy
 *   driver; veth and bridge work.
 * - a private mount namespace (slave of the host's, then shared inside for the kubelet's and containerd's
 *   mounts) held by a `sleep infinity` in that network namespace: a tmpfs on /run (containerd's shim sockets,
 *   pod netns files), the work dir's var-lib-cni on /var/lib/cni (libcni's cache, host-local's leases), and
 *   its own /etc/hosts (the node's name) and /etc/resolv.conf (no resolver outside). Overlay, pod netns and
 *   volume mounts never show in the host's mount table.
 * - a cgroup parent `name` in every hierarchy (the kubelet's cgroupRoot).
 * `ip netns exec` is not used: it remounts /sys, which hides /sys/fs/cgroup.
 */
export async function createNamespaces(name: string, root: string): Promise<NodeLayout> {
  const ip = (...args: string[]): Promise<string> => run('ip', args);
  await ip('netns', 'add', name);
  await ip('-n', name, 'link', 'set', 'lo', 'up');
  await ip('-n', name, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1');
  await ip('-n', name, 'link', 'set', 'eth1', 'up');
  await ip('-n', name, 'addr', 'add', `${NODE_ADDRESS}/24`, 'dev', 'eth0');
  await ip('-n', name, 'link', 'set', 'eth0', 'up');
  await ip('-n', name, 'route', 'add', 'default', 'via', '10.250.0.1', 'dev', 'eth0');

  // A mount point must exist to be covered. Left behind (empty) when made: another run may have it mounted.
  fs.mkdirSync('/var/lib/cni', { recursive: true });
  fs.mkdirSync(path.join(root, 'var-lib-cni'), { recursive: true });
  fs.writeFileSync(path.join(root, 'hosts'), `127.0.0.1 localhost\n${NODE_ADDRESS} ${NODE_NAME}\n`);
  fs.writeFileSync(path.join(root, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  const holderPid = await startHolder(name, root);
  const cgroupVersion = makeCgroupParent(name);
  return { name, root, address: NODE_ADDRESS, nodeName: NODE_NAME, holderPid, cgroupVersion };
}

/** nsenter arguments that run a command in the node's namespaces, in `cwd`. */
export function nsenterArgs(holderPid: number, cwd: string): string[] {
  return ['-t', String(holderPid), '-n', '-m', `--wd=${cwd}`, '--'];
}

const HOLDER = String.raw`
set -e
mount --make-rshared /
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/netns /run/containerd
mount --bind "$1/var-lib-cni" /var/lib/cni
mount --bind "$1/hosts" /etc/hosts
mount --bind "$1/resolv.conf" /etc/resolv.conf
exec sleep infinity
`;

async function startHolder(name: string, root: string): Promise<number> {
  const logFile = path.join(root, 'holder.log');
  const log = fs.openSync(logFile, 'a');
  const child = spawn('nsenter', [`--net=/run/netns/${name}`, '--', 'unshare', '--mount', '--propagation', 'slave', '--', 'sh', '-c', HOLDER, 'holder', root], {
    stdio: ['ignore', log, log],
    detached: true,
  });
  fs.closeSync(log);
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not start the mount namespace holder (nsenter/unshare missing?)');
  // nsenter and unshare exec, so the pid is the shell's and then sleep's: sleep runs once every mount is made.
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    if (readComm(pid) === 'sleep') return pid;
    await sleep(50);
  }
  throw new Error(`the mount namespace holder did not come up: ${fs.readFileSync(logFile, 'utf8').trim() || '(no output)'}`);
}

function readComm(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** A parent cgroup for the kubelet's cgroupRoot: in every v1 hierarchy (cpuset copied from the root), or in v2. */
function makeCgroupParent(name: string): 1 | 2 {
  const base = '/sys/fs/cgroup';
  if (fs.existsSync(path.join(base, 'cgroup.controllers'))) {
    const dir = path.join(base, name);
    fs.mkdirSync(dir, { recursive: true });
    const available = fs.readFileSync(path.join(base, 'cgroup.subtree_control'), 'utf8').trim().split(/\s+/).filter(Boolean);
    for (const controller of available) {
      try {
        fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), `+${controller}`);
      } catch {
        // Not delegable here; the kubelet reports what it misses.
      }
    }
    return 2;
  }
  for (const entry of fs.readdirSync(base, { withFileTypes: true })) {
    // Named hierarchies only (cpu and cpuacct are symlinks to cpu,cpuacct); unified is the v2 hybrid mount.
    if (!entry.isDirectory() || entry.name === 'unified') continue;
    const dir = path.join(base, entry.name, name);
    fs.mkdirSync(dir, { recursive: true });
    if (entry.name === 'cpuset') {
      for (const file of ['cpuset.cpus', 'cpuset.mems']) fs.writeFileSync(path.join(dir, file), fs.readFileSync(path.join(base, entry.name, file)));
    }
  }
  return 1;
}

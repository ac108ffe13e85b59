import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * go-containerregistry's registry (`crane registry serve`, crane built from its Go module by devtools/crane/build.sh),
 * an implementation of the OCI distribution spec, serving plain HTTP with its blobs in a directory: the release
 * command signs in one on 127.0.0.1, the e2e suite pushes the release to one on the node's address and the kubelet
 * pulls from it. Chosen over CNCF distribution's `registry` (which works the same here) because crane is built
 * anyway: one Go build less on a fresh CI machine (distribution's took 2 min 15 s).
 */
export interface Registry {
  /** host:port, how image references and `oci://` URLs name it. */
  readonly host: string;
  readonly stop: () => Promise<void>;
}

export async function startRegistry(options: {
  readonly crane: string;
  readonly dir: string;
  readonly address?: string;
  readonly port?: number;
}): Promise<Registry> {
  const address = options.address ?? '127.0.0.1';
  const port = options.port ?? (await freePort(address));
  const host = `${address}:${port}`;
  fs.mkdirSync(options.dir, { recursive: true });
  const log = fs.openSync(path.join(options.dir, 'registry.log'), 'a');
  fs.mkdirSync(path.join(options.dir, 'blobs'), { recursive: true });
  const child = spawn(options.crane, ['registry', 'serve', '--address', host, '--disk', path.join(options.dir, 'blobs')], { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  try {
    await waitUntilServing(host, child);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${String(err)}\n${fs.readFileSync(path.join(options.dir, 'registry.log'), 'utf8').slice(-2000)}`, { cause: err });
  }
  return { host, stop: () => stopChild(child) };
}

/** The registry's API root answers 200 once it serves (the distribution spec's "end-1" check). */
async function waitUntilServing(host: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the registry exited with ${child.exitCode}`);
    const ok = await fetch(`http://${host}/v2/`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`the registry did not answer on http://${host}/v2/ within 15 s`);
    await sleep(100);
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

function freePort(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, address, () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify as stringifyYaml } from 'yaml';
import { resolveCluster } from '../../src/cli/kubectl/kubeconfig.js';
import { loadKubeConfig } from '../../src/cli/run.js';
import { kubeAccessFromKubeConfig, KubeconfigNotFoundError, loadKubeAccess, type KubeAccess } from '../../src/kube/kubeconfig.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-kubeconfig-'));
  dirs.push(d);
  return d;
}

function write(file: string, content: string | Buffer): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content);
  return file;
}

interface Kubeconfig {
  clusters?: { name: string; cluster: Record<string, unknown> }[];
  users?: { name: string; user: Record<string, unknown> }[];
  contexts?: { name: string; context: Record<string, unknown> }[];
  'current-context'?: string;
}

function kubeconfig(file: string, config: Kubeconfig): string {
  return write(file, stringifyYaml({ apiVersion: 'v1', kind: 'Config', ...config }));
}

/** One cluster, one user, one context named "ctx", current. */
function simple(file: string, cluster: Record<string, unknown>, user: Record<string, unknown>, context: Record<string, unknown> = {}): string {
  return kubeconfig(file, {
    clusters: [{ name: 'c', cluster }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u', ...context } }],
    'current-context': 'ctx',
  });
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');
/** No ~/.kube/config and not in a cluster, unless a test says otherwise. */
const isolated = (extra: Record<string, string> = {}): Record<string, string> => ({ HOME: tempDir(), ...extra });

/** A clock the test moves. */
function clock(start = 1_000_000): { now: () => number; advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

describe('loadKubeAccess: a kubeconfig file', () => {
  it('server, CA file relative to the kubeconfig, TLS name, client certificate and key files, token, namespace', async () => {
    const dir = tempDir();
    write(path.join(dir, 'pki/ca.crt'), 'CA PEM');
    write(path.join(dir, 'pki/client.crt'), 'CERT PEM');
    write(path.join(dir, 'pki/client.key'), 'KEY PEM');
    const file = simple(
      path.join(dir, 'config'),
      { server: 'https://10.1.2.3:6443/', 'certificate-authority': 'pki/ca.crt', 'tls-server-name': 'kubernetes.default' },
      { token: 'tok-1', 'client-certificate': 'pki/client.crt', 'client-key': 'pki/client.key' },
      { namespace: 'team-a' },
    );
    // A working directory elsewhere: relative paths are relative to the kubeconfig, not to it.
    const access = await loadKubeAccess({ path: path.relative(process.cwd(), file), env: isolated() });
    expect(access.server).toBe('https://10.1.2.3:6443');
    expect(access.tls.ca?.toString()).toBe('CA PEM');
    expect(access.tls.cert?.toString()).toBe('CERT PEM');
    expect(access.tls.key?.toString()).toBe('KEY PEM');
    expect(access.tls.servername).toBe('kubernetes.default');
    expect(access.tls.rejectUnauthorized).toBeUndefined();
    expect(await access.authorization()).toBe('Bearer tok-1');
    expect(access.namespace).toBe('team-a');
    expect(access.context).toBe('ctx');
  });

  it('inline -data (base64) wins over files; insecure-skip-tls-verify', async () => {
    const dir = tempDir();
    const file = simple(
      path.join(dir, 'config'),
      { server: 'https://k:6443', 'certificate-authority-data': b64('CA DATA'), 'certificate-authority': 'missing.crt', 'insecure-skip-tls-verify': true },
      { 'client-certificate-data': b64('CERT DATA'), 'client-key-data': b64('KEY DATA'), 'client-certificate': 'missing.crt' },
    );
    const access = await loadKubeAccess({ path: file, env: isolated() });
    expect(access.tls).toEqual({ ca: Buffer.from('CA DATA'), cert: Buffer.from('CERT DATA'), key: Buffer.from('KEY DATA'), rejectUnauthorized: false });
    expect(await access.authorization()).toBeUndefined();
    expect(access.namespace).toBeUndefined();
  });

  it('username/password: Basic', async () => {
    const file = simple(path.join(tempDir(), 'config'), { server: 'http://127.0.0.1:8080' }, { username: 'admin', password: 's3cr:et' });
    const access = await loadKubeAccess({ path: file, env: isolated() });
    expect(await access.authorization()).toBe(`Basic ${b64('admin:s3cr:et')}`);
    expect(access.server).toBe('http://127.0.0.1:8080');
  });

  it('a context without a user is anonymous', async () => {
    const file = kubeconfig(path.join(tempDir(), 'config'), {
      clusters: [{ name: 'c', cluster: { server: 'https://k' } }],
      contexts: [{ name: 'anon', context: { cluster: 'c' } }],
      'current-context': 'anon',
    });
    expect(await (await loadKubeAccess({ path: file, env: isolated() })).authorization()).toBeUndefined();
  });

  it('tokenFile (relative) is re-read at most every 10 s, and a failed re-read keeps the last token', async () => {
    const dir = tempDir();
    const tokenFile = write(path.join(dir, 'secrets/token'), 'first\n');
    const file = simple(path.join(dir, 'config'), { server: 'https://k' }, { tokenFile: 'secrets/token', token: 'static' });
    const t = clock();
    const access = await loadKubeAccess({ path: file, env: isolated(), now: t.now });
    expect(await access.authorization()).toBe('Bearer first');
    write(tokenFile, 'second');
    t.advance(9_999);
    expect(await access.authorization()).toBe('Bearer first');
    t.advance(1);
    expect(await access.authorization()).toBe('Bearer second');
    fs.rmSync(tokenFile);
    t.advance(10_000);
    expect(await access.authorization()).toBe('Bearer second');
  });

  it('tokenFile unreadable at load: the static token, else an error', async () => {
    const dir = tempDir();
    const withToken = simple(path.join(dir, 'a'), { server: 'https://k' }, { tokenFile: 'nope', token: 'static' });
    expect(await (await loadKubeAccess({ path: withToken, env: isolated() })).authorization()).toBe('Bearer static');
    const without = simple(path.join(dir, 'b'), { server: 'https://k' }, { tokenFile: 'nope' });
    await expect(loadKubeAccess({ path: without, env: isolated() })).rejects.toThrow(`cannot read the token file ${path.join(dir, 'nope')}: ENOENT`);
  });

  it('--context picks another context; errors name what is missing', async () => {
    const dir = tempDir();
    const file = kubeconfig(path.join(dir, 'config'), {
      clusters: [
        { name: 'c1', cluster: { server: 'https://one' } },
        { name: 'noserver', cluster: {} },
      ],
      users: [
        { name: 'u1', user: { token: 'one' } },
        { name: 'u2', user: { token: 'two' } },
      ],
      contexts: [
        { name: 'first', context: { cluster: 'c1', user: 'u1' } },
        { name: 'second', context: { cluster: 'c1', user: 'u2', namespace: 'ns2' } },
        { name: 'lost-cluster', context: { cluster: 'gone', user: 'u1' } },
        { name: 'lost-user', context: { cluster: 'c1', user: 'gone' } },
        { name: 'no-server', context: { cluster: 'noserver' } },
      ],
      'current-context': 'first',
    });
    const env = isolated();
    expect(await (await loadKubeAccess({ path: file, env })).authorization()).toBe('Bearer one');
    const second = await loadKubeAccess({ path: file, context: 'second', env });
    expect([await second.authorization(), second.namespace, second.context]).toEqual(['Bearer two', 'ns2', 'second']);
    await expect(loadKubeAccess({ path: file, context: 'x', env })).rejects.toThrow('context "x" does not exist in the kubeconfig');
    await expect(loadKubeAccess({ path: file, context: 'lost-cluster', env })).rejects.toThrow(
      'cluster "gone" of context "lost-cluster" does not exist in the kubeconfig',
    );
    await expect(loadKubeAccess({ path: file, context: 'lost-user', env })).rejects.toThrow(
      'user "gone" of context "lost-user" does not exist in the kubeconfig',
    );
    await expect(loadKubeAccess({ path: file, context: 'no-server', env })).rejects.toThrow('cluster "noserver" has no server');

    const noCurrent = kubeconfig(path.join(dir, 'no-current'), {
      clusters: [{ name: 'c', cluster: { server: 'https://k' } }],
      contexts: [{ name: 'a', context: { cluster: 'c' } }],
    });
    await expect(loadKubeAccess({ path: noCurrent, env })).rejects.toThrow('no current context');
    expect((await loadKubeAccess({ path: noCurrent, context: 'a', env })).server).toBe('https://k');
  });

  it('unreadable, unparsable and mistyped files are refused with the file named', async () => {
    const dir = tempDir();
    const env = isolated();
    await expect(loadKubeAccess({ path: path.join(dir, 'absent'), env })).rejects.toThrow(
      new RegExp(`^cannot load kubeconfig ${path.join(dir, 'absent')}: ENOENT`),
    );
    const broken = write(path.join(dir, 'broken'), 'clusters: [\n');
    await expect(loadKubeAccess({ path: broken, env })).rejects.toThrow(`cannot load kubeconfig ${broken}: `);
    const list = write(path.join(dir, 'list'), '- 1\n');
    await expect(loadKubeAccess({ path: list, env })).rejects.toThrow('not a kubeconfig');
    const insecure = simple(path.join(dir, 'insecure'), { server: 'https://k', 'insecure-skip-tls-verify': 'yes' }, {});
    await expect(loadKubeAccess({ path: insecure, env })).rejects.toThrow(
      `kubeconfig ${insecure}: cluster "c": insecure-skip-tls-verify must be true or false`,
    );
    const token = simple(path.join(dir, 'token'), { server: 'https://k' }, { token: 42 });
    await expect(loadKubeAccess({ path: token, env })).rejects.toThrow('user "u": token must be a string');
    const noScheme = simple(path.join(dir, 'scheme'), { server: 'k:6443' }, {});
    await expect(loadKubeAccess({ path: noScheme, env })).rejects.toThrow('is not an http(s) URL');
    const ca = simple(path.join(dir, 'ca'), { server: 'https://k', 'certificate-authority': 'gone.crt' }, {});
    await expect(loadKubeAccess({ path: ca, env })).rejects.toThrow(`cannot read certificate-authority ${path.join(dir, 'gone.crt')} of cluster "c": ENOENT`);
  });
});

describe('loadKubeAccess: where the kubeconfig comes from', () => {
  it('KUBECONFIG: merged in order, the first to set a name or current-context wins, missing files skipped, paths relative to each file', async () => {
    const dir = tempDir();
    write(path.join(dir, 'b/ca.crt'), 'CA OF B');
    // a: no current-context; its cluster "shared" and user "u" win over b's.
    const a = kubeconfig(path.join(dir, 'a/config'), {
      clusters: [{ name: 'shared', cluster: { server: 'https://from-a' } }],
      users: [{ name: 'u', user: { token: 'from-a' } }],
      contexts: [{ name: 'in-a', context: { cluster: 'shared', user: 'u', namespace: 'a-ns' } }],
    });
    const b = kubeconfig(path.join(dir, 'b/config'), {
      clusters: [
        { name: 'shared', cluster: { server: 'https://from-b' } },
        { name: 'only-b', cluster: { server: 'https://only-b', 'certificate-authority': 'ca.crt' } },
      ],
      users: [{ name: 'u', user: { token: 'from-b' } }],
      contexts: [
        { name: 'in-b', context: { cluster: 'only-b', user: 'u' } },
        { name: 'in-a', context: { cluster: 'only-b', user: 'u' } },
      ],
      'current-context': 'in-b',
    });
    const c = kubeconfig(path.join(dir, 'c/config'), { 'current-context': 'in-a' });
    const env = isolated({ KUBECONFIG: [a, path.join(dir, 'missing'), '', b, c].join(path.delimiter) });

    const current = await loadKubeAccess({ env });
    expect(current.context).toBe('in-b'); // b is the first to set current-context; c's comes too late
    expect(current.server).toBe('https://only-b');
    expect(current.tls.ca?.toString()).toBe('CA OF B'); // relative to b's directory
    expect(await current.authorization()).toBe('Bearer from-a');

    const inA = await loadKubeAccess({ env, context: 'in-a' });
    expect([inA.server, inA.namespace]).toEqual(['https://from-a', 'a-ns']);
  });

  it('KUBECONFIG naming no existing file is an error, not a fallback', async () => {
    const dir = tempDir();
    await expect(loadKubeAccess({ env: isolated({ KUBECONFIG: path.join(dir, 'nope') }) })).rejects.toThrow(
      `cannot load kubeconfig ${path.join(dir, 'nope')}: the file in KUBECONFIG does not exist`,
    );
  });

  it('precedence: path, then KUBECONFIG, then ~/.kube/config, then in-cluster', async () => {
    const home = tempDir();
    const sa = tempDir();
    write(path.join(sa, 'token'), 'sa-token');
    const one = (server: string): string => simple(path.join(tempDir(), 'config'), { server }, {});
    const explicit = one('https://explicit');
    const listed = one('https://listed');
    const inCluster = { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const server = async (options: Parameters<typeof loadKubeAccess>[0]): Promise<string> =>
      (await loadKubeAccess({ serviceAccountDir: sa, ...options })).server;

    expect(await server({ env: { HOME: home, ...inCluster } })).toBe('https://10.0.0.1:443');
    simple(path.join(home, '.kube/config'), { server: 'https://home' }, {});
    expect(await server({ env: { HOME: home, ...inCluster } })).toBe('https://home');
    expect(await server({ env: { HOME: home, ...inCluster, KUBECONFIG: listed } })).toBe('https://listed');
    expect(await server({ path: explicit, env: { HOME: home, ...inCluster, KUBECONFIG: listed } })).toBe('https://explicit');
  });

  it('nothing at all: KubeconfigNotFoundError', async () => {
    const err = await loadKubeAccess({ env: isolated(), serviceAccountDir: tempDir() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeconfigNotFoundError);
    expect((err as Error).message).toMatch(/^no kubeconfig found/);
  });
});

describe('loadKubeAccess: in-cluster', () => {
  it('the ServiceAccount token (re-read every 10 s), CA and namespace; an IPv6 host in brackets', async () => {
    const sa = tempDir();
    write(path.join(sa, 'token'), 'token-1\n');
    write(path.join(sa, 'ca.crt'), 'CLUSTER CA');
    write(path.join(sa, 'namespace'), 'operators\n');
    const t = clock();
    const access = await loadKubeAccess({
      env: isolated({ KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '443' }),
      serviceAccountDir: sa,
      now: t.now,
    });
    expect(access.server).toBe('https://[fd00:10:96::1]:443');
    expect(access.tls).toEqual({ ca: Buffer.from('CLUSTER CA') });
    expect(access.namespace).toBe('operators');
    expect(access.context).toBeUndefined();
    expect(await access.authorization()).toBe('Bearer token-1');
    write(path.join(sa, 'token'), 'token-2');
    t.advance(5_000);
    expect(await access.authorization()).toBe('Bearer token-1');
    t.advance(5_000);
    expect(await access.authorization()).toBe('Bearer token-2');
  });

  it('no token file: a clear error; --context without a kubeconfig: not found', async () => {
    const sa = tempDir();
    const env = isolated({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' });
    await expect(loadKubeAccess({ env, serviceAccountDir: sa })).rejects.toThrow(`cannot read the token file ${path.join(sa, 'token')}: ENOENT`);
    write(path.join(sa, 'token'), 't');
    await expect(loadKubeAccess({ env, serviceAccountDir: sa, context: 'x' })).rejects.toBeInstanceOf(KubeconfigNotFoundError);
  });
});

describe('loadKubeAccess: exec and auth-provider users go through client-node', () => {
  it('exec: the credential the command prints, TLS from the cluster (relative CA)', async () => {
    const dir = tempDir();
    write(path.join(dir, 'ca.crt'), 'EXEC CLUSTER CA');
    const credential = { apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 'exec-token' } };
    const file = simple(
      path.join(dir, 'config'),
      { server: 'https://exec-cluster:6443', 'certificate-authority': 'ca.crt' },
      {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: process.execPath,
          args: ['-e', `process.stdout.write(${JSON.stringify(JSON.stringify(credential))})`],
          interactiveMode: 'Never',
        },
      },
      { namespace: 'exec-ns' },
    );
    const access = await loadKubeAccess({ path: file, env: isolated() });
    expect(await access.authorization()).toBe('Bearer exec-token');
    expect(access.server).toBe('https://exec-cluster:6443');
    expect(access.tls.ca?.toString()).toBe('EXEC CLUSTER CA');
    expect([access.namespace, access.context]).toEqual(['exec-ns', 'ctx']);
  });

  it('exec: a command given as a relative path runs from the kubeconfig directory; a failing one rejects', async () => {
    const dir = tempDir();
    const script = write(
      path.join(dir, 'bin/cred.sh'),
      `#!/bin/sh\nprintf '%s' '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-script"}}'\n`,
    );
    fs.chmodSync(script, 0o755);
    const file = simple(
      path.join(dir, 'config'),
      { server: 'https://k' },
      { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './bin/cred.sh' } },
    );
    expect(await (await loadKubeAccess({ path: file, env: isolated() })).authorization()).toBe('Bearer from-script');

    const failing = simple(
      path.join(dir, 'failing'),
      { server: 'https://k' },
      { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: ['-e', 'process.stderr.write("denied"); process.exit(1)'] } },
    );
    await expect(loadKubeAccess({ path: failing, env: isolated() })).rejects.toThrow('denied');
  });

  it("auth-provider: delegated too (client-node's tokenFile provider)", async () => {
    const dir = tempDir();
    const token = write(path.join(dir, 'provider-token'), 'provided');
    const file = simple(path.join(dir, 'config'), { server: 'https://k' }, { 'auth-provider': { name: 'file', config: { tokenFile: token } } });
    expect(await (await loadKubeAccess({ path: file, env: isolated() })).authorization()).toBe('Bearer provided');
  });
});

describe('kubeAccessFromKubeConfig', () => {
  function kc(user: Record<string, unknown>, cluster: Record<string, unknown> = {}): KubeConfig {
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://adapted:6443/', skipTLSVerify: false, caData: b64('ADAPTED CA'), ...cluster }],
      users: [{ name: 'u', ...user }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u', namespace: 'adapted-ns' }],
      currentContext: 'x',
    });
    return config;
  }

  it('server, TLS, token, namespace and context from a KubeConfig', async () => {
    const access: KubeAccess = await kubeAccessFromKubeConfig(
      kc({ token: 'adapted-token', certData: b64('C'), keyData: b64('K') }, { tlsServerName: 'tls-name' }),
    );
    expect(access.server).toBe('https://adapted:6443');
    expect(access.tls).toEqual({ ca: Buffer.from('ADAPTED CA'), cert: Buffer.from('C'), key: Buffer.from('K'), servername: 'tls-name' });
    expect(await access.authorization()).toBe('Bearer adapted-token');
    expect([access.namespace, access.context]).toEqual(['adapted-ns', 'x']);
  });

  it('username/password: Basic; insecure-skip-tls-verify', async () => {
    const access = await kubeAccessFromKubeConfig(kc({ username: 'a', password: 'b' }, { skipTLSVerify: true }));
    expect(await access.authorization()).toBe(`Basic ${b64('a:b')}`);
    expect(access.tls.rejectUnauthorized).toBe(false);
  });
});

describe('callers', () => {
  it('the plugin: friendly advice when there is no kubeconfig; -n, else the context namespace, else default', async () => {
    const env = isolated();
    await expect(resolveCluster({ kubeconfig: undefined, context: undefined, namespace: undefined }, env)).rejects.toThrow(
      /^no kubeconfig: pass --kubeconfig, set KUBECONFIG, or create ~\/\.kube\/config$/,
    );
    const file = simple(path.join(tempDir(), 'config'), { server: 'https://k' }, {}, { namespace: 'ctx-ns' });
    expect((await resolveCluster({ kubeconfig: file, context: undefined, namespace: undefined }, env)).namespace).toBe('ctx-ns');
    expect((await resolveCluster({ kubeconfig: file, context: undefined, namespace: 'flag-ns' }, env)).namespace).toBe('flag-ns');
    const plain = simple(path.join(tempDir(), 'config'), { server: 'https://k' }, {});
    expect((await resolveCluster({ kubeconfig: plain, context: undefined, namespace: undefined }, env)).namespace).toBe('default');
    await expect(resolveCluster({ kubeconfig: plain, context: 'nope', namespace: undefined }, env)).rejects.toThrow(
      'context "nope" does not exist in the kubeconfig',
    );
  });

  it('run: --kubeconfig (or KUBECONFIG through it) may be a list', async () => {
    const a = simple(path.join(tempDir(), 'config'), { server: 'https://first' }, {});
    const b = simple(path.join(tempDir(), 'config'), { server: 'https://second' }, {});
    expect((await loadKubeConfig(`${a}${path.delimiter}${b}`, isolated())).server).toBe('https://first');
    expect((await loadKubeConfig(b, isolated({ KUBECONFIG: a }))).server).toBe('https://second');
  });
});

describe('@kubernetes/client-node stays out of the runtime import graph', () => {
  function sources(dir: string): string[] {
    return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
    });
  }

  it('src/ imports it for types only, except the lazy import for exec/auth-provider users', () => {
    const offenders: string[] = [];
    for (const file of sources(path.join(repo, 'src'))) {
      const rel = path.relative(repo, file);
      const text = fs.readFileSync(file, 'utf8');
      // Statement-level `import type`/`export type` is erased; `import { type X }` is not under verbatimModuleSyntax.
      for (const m of text.matchAll(/^(?:import|export)\b[^;]*?from\s*['"]@kubernetes\/client-node(?:\/[^'"]*)?['"]/gms)) {
        if (!/^(?:import|export)\s+type\b/.test(m[0])) offenders.push(`${rel}: ${m[0].replace(/\s+/g, ' ')}`);
      }
      for (const m of text.matchAll(/^\s*import\s*['"]@kubernetes\/client-node[^'"]*['"]/gm)) offenders.push(`${rel}: ${m[0].trim()}`);
      for (const m of text.matchAll(/\bimport\(\s*['"]@kubernetes\/client-node[^'"]*['"]\s*\)/g)) {
        if (rel !== path.join('src', 'kube', 'kubeconfig.ts')) offenders.push(`${rel}: ${m[0]}`);
      }
      if (/\brequire\(\s*['"]@kubernetes\/client-node/.test(text)) offenders.push(`${rel}: require`);
    }
    expect(offenders).toEqual([]);
  });
});

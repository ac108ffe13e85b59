// Finds and loads apiserver access as kubectl would: kubeconfig files, in-cluster, exec and auth-provider plugins.
import { readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { RequestOptions } from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
// Type only: the library costs ~90 MiB RSS once loaded, so only exec/auth-provider users load it (below).
import type { KubeConfig } from '@kubernetes/client-node';
import { isRecord } from '../platform/json-value.js';

/** TLS material for the apiserver connection, named as node:tls names it. */
export interface KubeTls {
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly rejectUnauthorized?: boolean;
  readonly servername?: string;
}

type Authorization = string | undefined;

/** How to reach and authenticate to one apiserver. */
export interface KubeAccess {
  /** Without trailing slash. */
  readonly server: string;
  readonly tls: KubeTls;
  /**
   * Authorization header value for the next request; re-derived as the source allows (token files rotate). A value
   * while the cached one is fresh, a promise only when it must be re-read: most requests then wait for nothing.
   */
  authorization(): Authorization | Promise<Authorization>;
  /** The context's namespace, if any (the kubectl plugin uses it); in-cluster, the ServiceAccount's. */
  readonly namespace: string | undefined;
  /** The kubeconfig context in use; undefined in-cluster. */
  readonly context: string | undefined;
}

export interface LoadKubeAccessOptions {
  /** A kubeconfig file; $KUBECONFIG and ~/.kube/config are not consulted then. */
  readonly path?: string | undefined;
  /** Instead of the kubeconfig's current-context. */
  readonly context?: string | undefined;
  /** KUBECONFIG, HOME and KUBERNETES_SERVICE_HOST/PORT come from here (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Where the in-cluster ServiceAccount files are (tests point it elsewhere). */
  readonly serviceAccountDir?: string;
  /** The clock that paces token re-reads (tests). */
  readonly now?: () => number;
}

/** Nothing to load: no kubeconfig file anywhere and not in a cluster. Callers word the advice for their flags. */
export class KubeconfigNotFoundError extends Error {}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * Kubelet rotates projected ServiceAccount tokens well before they expire; re-reading every
 * 10 s picks a new one up promptly without a file read per request.
 */
const AUTH_REFRESH_MS = 10_000;

/**
 * The apiserver access kubectl would use: `path`, else the files in $KUBECONFIG (merged),
 * else ~/.kube/config, else in-cluster; then `context`, else the current-context.
 */
export async function loadKubeAccess(options: LoadKubeAccessOptions = {}): Promise<KubeAccess> {
  const env = options.env ?? process.env;
  const now = options.now ?? Date.now;
  const files = kubeconfigFiles(options.path, env);
  if (files.length === 0) {
    if (options.context === undefined && env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT']) {
      return inCluster(env['KUBERNETES_SERVICE_HOST'], env['KUBERNETES_SERVICE_PORT'], options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR, now);
    }
    throw new KubeconfigNotFoundError('no kubeconfig found: set KUBECONFIG, create ~/.kube/config, or run in a cluster');
  }
  // The YAML parser (~2 MiB of RSS) only for a kubeconfig file: in a cluster the ServiceAccount's files need none.
  const { parse: parseYaml } = await import('yaml');
  const merged = merge(files.map((file) => readConfigFile(file, parseYaml)));
  const contextName = options.context ?? merged.currentContext;
  if (contextName === undefined) throw new Error('no current context: the kubeconfig sets no current-context and no context was given');
  const context = merged.contexts.get(contextName);
  if (!context) throw new Error(`context "${contextName}" does not exist in the kubeconfig`);

  const clusterName = optionalString(context, 'cluster');
  if (!clusterName) throw new Error(`context "${contextName}" names no cluster (${context.origin})`);
  const cluster = merged.clusters.get(clusterName);
  if (!cluster) throw new Error(`cluster "${clusterName}" of context "${contextName}" does not exist in the kubeconfig`);
  const userName = optionalString(context, 'user');
  // A context without a user is anonymous access (kubectl allows it); one naming a missing user is a mistake.
  const user = userName ? merged.users.get(userName) : undefined;
  if (userName && !user) throw new Error(`user "${userName}" of context "${contextName}" does not exist in the kubeconfig`);
  const namespace = optionalString(context, 'namespace') || undefined;

  const server = clusterServer(cluster);
  if (user && (user.body['exec'] ?? user.body['auth-provider'] ?? null) !== null) {
    return viaClientNode(contextName, context, cluster, user, now);
  }

  const tls: Mutable<KubeTls> = {};
  const ca = material(cluster, 'certificate-authority');
  if (ca) tls.ca = ca;
  const insecure = cluster.body['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') throw fieldError(cluster, 'insecure-skip-tls-verify', 'must be true or false');
  if (insecure === true) tls.rejectUnauthorized = false;
  const servername = optionalString(cluster, 'tls-server-name');
  if (servername) tls.servername = servername;
  const authorization = user ? userAuthorization(user, now, tls) : constant(undefined);
  return { server, tls, authorization, namespace, context: contextName };
}

/**
 * A KubeAccess from a client-node KubeConfig: TLS material once, the Authorization header
 * at most every 10 s (its exec and auth-provider plugins cache credentials themselves).
 */
export async function kubeAccessFromKubeConfig(kc: KubeConfig, options: { now?: () => number } = {}): Promise<KubeAccess> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const now = options.now ?? Date.now;
  const applied: RequestOptions = {};
  await kc.applyToHTTPSOptions(applied);
  const tls: Mutable<KubeTls> = {};
  const ca = toBuffer(applied.ca);
  if (ca) tls.ca = ca;
  const cert = toBuffer(applied.cert);
  if (cert) tls.cert = cert;
  const key = toBuffer(applied.key);
  if (key) tls.key = key;
  if (applied.rejectUnauthorized !== undefined) tls.rejectUnauthorized = applied.rejectUnauthorized;
  if (applied.servername !== undefined) tls.servername = applied.servername;
  const contextName = kc.getCurrentContext();
  const namespace = kc.getContextObject(contextName)?.namespace || undefined;
  const authorization = refreshing(now, { value: authorizationOf(applied), at: now() }, async () => {
    const again: RequestOptions = {};
    await kc.applyToHTTPSOptions(again);
    return authorizationOf(again);
  });
  return { server: cluster.server.replace(/\/+$/, ''), tls, authorization, namespace, context: contextName || undefined };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** One named entry of a kubeconfig list, with the file it came from (relative paths are relative to it). */
interface Entry {
  readonly name: string;
  readonly body: Readonly<Record<string, unknown>>;
  readonly origin: string;
  readonly kind: 'cluster' | 'user' | 'context';
}

interface ConfigFile {
  readonly file: string;
  readonly clusters: readonly Entry[];
  readonly users: readonly Entry[];
  readonly contexts: readonly Entry[];
  readonly currentContext: string | undefined;
}

interface Merged {
  readonly clusters: ReadonlyMap<string, Entry>;
  readonly users: ReadonlyMap<string, Entry>;
  readonly contexts: ReadonlyMap<string, Entry>;
  readonly currentContext: string | undefined;
}

function kubeconfigFiles(explicit: string | undefined, env: Readonly<Record<string, string | undefined>>): string[] {
  if (explicit) return [explicit];
  const list = env['KUBECONFIG'];
  if (list) {
    const files = list.split(path.delimiter).filter((f) => f !== '');
    // kubectl skips the listed files that do not exist; none existing is still an error, not a silent fallback.
    const present = files.filter((f) => exists(f));
    if (present.length === 0)
      throw new Error(
        `cannot load kubeconfig ${list}: ${files.length > 1 ? 'none of the files in KUBECONFIG exist' : 'the file in KUBECONFIG does not exist'}`,
      );
    return present;
  }
  const home = path.join(env['HOME'] || os.homedir(), '.kube', 'config');
  return exists(home) ? [home] : [];
}

function exists(file: string): boolean {
  try {
    return statSync(file, { throwIfNoEntry: false }) !== undefined;
  } catch {
    // Present but not stat-able (a parent without x permission): the read will say why.
    return true;
  }
}

function readConfigFile(file: string, parseYaml: (text: string) => unknown): ConfigFile {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    // No cause attached: a parser's error object can quote the file, and kubeconfigs hold credentials.
    // eslint-disable-next-line preserve-caught-error
    throw new Error(`cannot load kubeconfig ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  // An empty file is an empty config, as for kubectl.
  if (doc === null || doc === undefined) return { file, clusters: [], users: [], contexts: [], currentContext: undefined };
  if (!isRecord(doc)) throw new Error(`cannot load kubeconfig ${file}: not a kubeconfig (expected a mapping at the top)`);
  const current = doc['current-context'];
  if (current !== undefined && current !== null && typeof current !== 'string')
    throw new Error(`cannot load kubeconfig ${file}: current-context must be a string`);
  return {
    file,
    clusters: entries(doc, 'clusters', 'cluster', file),
    users: entries(doc, 'users', 'user', file),
    contexts: entries(doc, 'contexts', 'context', file),
    currentContext: current || undefined,
  };
}

function entries(doc: Readonly<Record<string, unknown>>, list: string, kind: Entry['kind'], file: string): Entry[] {
  const raw = doc[list];
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new Error(`cannot load kubeconfig ${file}: ${list} must be a list`);
  return raw.map((item: unknown, i) => {
    if (!isRecord(item) || typeof item['name'] !== 'string' || item['name'] === '')
      throw new Error(`cannot load kubeconfig ${file}: ${list}[${i}] has no name`);
    const body = item[kind] ?? {};
    if (!isRecord(body)) throw new Error(`cannot load kubeconfig ${file}: ${list}[${i}].${kind} must be a mapping`);
    return { name: item['name'], body, origin: file, kind };
  });
}

/** kubectl's merge: the first file to define a name wins, and so does the first current-context. */
function merge(files: readonly ConfigFile[]): Merged {
  const clusters = new Map<string, Entry>();
  const users = new Map<string, Entry>();
  const contexts = new Map<string, Entry>();
  let currentContext: string | undefined;
  for (const f of files) {
    for (const [into, from] of [
      [clusters, f.clusters],
      [users, f.users],
      [contexts, f.contexts],
    ] as const) {
      for (const e of from) if (!into.has(e.name)) into.set(e.name, e);
    }
    currentContext ??= f.currentContext;
  }
  return { clusters, users, contexts, currentContext };
}

function fieldError(entry: Entry, field: string, problem: string): Error {
  return new Error(`kubeconfig ${entry.origin}: ${entry.kind} "${entry.name}": ${field} ${problem}`);
}

function optionalString(entry: Entry, field: string): string | undefined {
  const v = entry.body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw fieldError(entry, field, 'must be a string');
  return v;
}

function relativeTo(entry: Entry, file: string): string {
  return path.resolve(path.dirname(entry.origin), file);
}

function clusterServer(cluster: Entry): string {
  const server = optionalString(cluster, 'server');
  if (!server) throw new Error(`cluster "${cluster.name}" has no server (${cluster.origin})`);
  if (!/^https?:\/\//.test(server)) throw fieldError(cluster, 'server', `"${server}" is not an http(s) URL`);
  return server.replace(/\/+$/, '');
}

/** `<field>-data` (base64) wins over `<field>` (a file), as in kubectl. */
function material(entry: Entry, field: string): Buffer | undefined {
  const data = optionalString(entry, `${field}-data`);
  if (data) return Buffer.from(data, 'base64');
  const file = optionalString(entry, field);
  if (!file) return undefined;
  const resolved = relativeTo(entry, file);
  try {
    return readFileSync(resolved);
  } catch (err) {
    throw new Error(`cannot read ${field} ${resolved} of ${entry.kind} "${entry.name}": ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
  }
}

function userAuthorization(user: Entry, now: () => number, tls: Mutable<KubeTls>): KubeAccess['authorization'] {
  const cert = material(user, 'client-certificate');
  if (cert) tls.cert = cert;
  const key = material(user, 'client-key');
  if (key) tls.key = key;
  const token = optionalString(user, 'token') || undefined;
  // tokenFile is kubectl's spelling; token-file is what client-node read, and some kubeconfigs carry it.
  const tokenFile = optionalString(user, 'tokenFile') || optionalString(user, 'token-file');
  if (tokenFile) return tokenFileAuthorization(relativeTo(user, tokenFile), token, now);
  if (token) return constant(`Bearer ${token}`);
  const username = optionalString(user, 'username');
  if (username) {
    const password = optionalString(user, 'password') ?? '';
    return constant(`Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`);
  }
  return constant(undefined);
}

function constant(value: Authorization): () => Authorization {
  return () => value;
}

/**
 * As client-go: the file's latest readable content wins over a static token, and a failed
 * re-read keeps the last good value (a rotation in progress may briefly leave no file).
 */
function tokenFileAuthorization(file: string, fallback: string | undefined, now: () => number): KubeAccess['authorization'] {
  let last = fallback;
  try {
    const first = readFileSync(file, 'utf8').trim();
    if (first) last = first;
    else if (last === undefined) throw new Error('the file is empty');
  } catch (err) {
    if (last === undefined)
      throw new Error(`cannot read the token file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err))}`, {
        cause: err,
      });
  }
  const header = (token: string | undefined): string | undefined => (token === undefined ? undefined : `Bearer ${token}`);
  return refreshing(now, { value: header(last), at: now() }, async () => {
    try {
      const token = (await readFile(file, 'utf8')).trim();
      if (token) last = token;
    } catch {
      // Keep the last good token; the apiserver says 401 if it really expired.
    }
    return header(last);
  });
}

/**
 * A value re-loaded at most every 10 s; callers arriving during a reload share it, and a
 * failed reload is retried by the next caller rather than cached.
 */
function refreshing<T>(now: () => number, initial: { value: T; at: number }, load: () => Promise<T>): () => T | Promise<T> {
  let cached = initial;
  let pending: Promise<T> | undefined;
  return () => {
    if (now() - cached.at < AUTH_REFRESH_MS) return cached.value;
    pending ??= load().then(
      (value) => {
        cached = { value, at: now() };
        pending = undefined;
        return value;
      },
      (err: unknown) => {
        pending = undefined;
        throw err;
      },
    );
    return pending;
  };
}

function inCluster(host: string, port: string, dir: string, now: () => number): KubeAccess {
  const server = `https://${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
  const tls: Mutable<KubeTls> = {};
  // Without ca.crt the system roots apply, as in client-go (which only logs the missing file).
  const ca = readIfPresent(path.join(dir, 'ca.crt'));
  if (ca) tls.ca = ca;
  const namespace = readIfPresent(path.join(dir, 'namespace'))?.toString('utf8').trim() || undefined;
  return { server, tls, authorization: tokenFileAuthorization(path.join(dir, 'token'), undefined, now), namespace, context: undefined };
}

function readIfPresent(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, { cause: err });
  }
}

/**
 * exec and auth-provider users need client-node's plugins; only they pay for loading it.
 * It gets the selected context, cluster and user alone, their paths made absolute (they were
 * relative to files it never sees), so other entries it would reject cannot get in the way.
 */
async function viaClientNode(contextName: string, context: Entry, cluster: Entry, user: Entry, now: () => number): Promise<KubeAccess> {
  const clusterBody: Record<string, unknown> = { ...cluster.body };
  absolutize(clusterBody, cluster, 'certificate-authority');
  const userBody: Record<string, unknown> = { ...user.body };
  for (const field of ['client-certificate', 'client-key', 'tokenFile', 'token-file']) absolutize(userBody, user, field);
  const exec = userBody['exec'];
  // kubectl resolves a command given as a path (not a bare name looked up on PATH) against the kubeconfig's directory.
  if (isRecord(exec) && typeof exec['command'] === 'string' && exec['command'].includes(path.sep)) {
    userBody['exec'] = { ...exec, command: relativeTo(user, exec['command']) };
  }
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: cluster.name, cluster: clusterBody }],
    users: [{ name: user.name, user: userBody }],
    contexts: [{ name: contextName, context: context.body }],
    'current-context': contextName,
  };
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  kc.loadFromString(JSON.stringify(doc));
  kc.setCurrentContext(contextName);
  return kubeAccessFromKubeConfig(kc, { now });
}

function absolutize(body: Record<string, unknown>, entry: Entry, field: string): void {
  const v = body[field];
  if (typeof v === 'string' && v !== '') body[field] = relativeTo(entry, v);
}

function authorizationOf(applied: RequestOptions): string | undefined {
  const headers = applied.headers;
  const value = headers && !Array.isArray(headers) ? (headers as Record<string, unknown>)['Authorization'] : undefined;
  if (typeof value === 'string') return value;
  // client-node puts username/password in `auth` (for node:https to encode), not in a header.
  return typeof applied.auth === 'string' && applied.auth !== '' ? `Basic ${Buffer.from(applied.auth).toString('base64')}` : undefined;
}

function toBuffer(value: unknown): Buffer | undefined {
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value);
  if (Array.isArray(value)) {
    const parts = value.map(toBuffer).filter((b): b is Buffer => b !== undefined);
    return parts.length > 0 ? Buffer.concat(parts.flatMap((b) => [b, Buffer.from('\n')])) : undefined;
  }
  return undefined;
}

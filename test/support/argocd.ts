import { buildGoTool } from './go-tool.js';
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { repoRoot } from './repo-root.js';

/**
 * deploy/argocd's scripts judged by Argo CD's own code: devtools/argocd/argocd-lua (built from Argo CD's Go
 * module by devtools/argocd/build.sh) loads argocd-cm.yaml through Argo CD's settings manager and answers with
 * the functions Argo CD's application controller (health) and API server (action discovery, actions and
 * the merge patch it sends) call. No Lua stand-in: what passes here is what Argo CD does.
 */

export const ARGOCD_CM = path.join(repoRoot, 'deploy/argocd/argocd-cm.yaml');

export interface ArgoCdHealth {
  readonly status: string;
  /** Argo CD drops an empty message (omitempty); undefined here then. */
  readonly message?: string;
}

export interface ArgoCdAction {
  readonly name: string;
  readonly disabled: boolean;
  readonly displayName?: string;
  readonly iconClass?: string;
}

export interface ArgoCdActionResult {
  readonly operation: string;
  /** What the API server sends as application/merge-patch+json; {} means it sends nothing. */
  readonly patch?: Record<string, unknown>;
  /** The object the action returned, after Argo CD's cleanReturnedObj. */
  readonly object: Record<string, unknown>;
}

export interface ArgoCdActionRun {
  readonly results: readonly ArgoCdActionResult[];
  /** Wall-clock seconds just before and after the script ran (os.date reads the real clock). */
  readonly unixBefore: number;
  readonly unixAfter: number;
}

interface Answer {
  health?: ArgoCdHealth;
  actions?: ArgoCdAction[];
  results?: ArgoCdActionResult[];
  unixBefore?: number;
  unixAfter?: number;
  error?: string;
}

/** Builds argocd-lua (or finds it in the cache) and returns its path; build progress goes to stderr. */
export function buildArgoCdLua(): string {
  return buildGoTool('argocd-lua', 'devtools/argocd/build.sh');
}

export class ArgoCdError extends Error {}

/** Argo CD's comparison of one Git manifest with the cluster (argocd-lua diff; devtools/argocd/diff.go). */
export interface ArgoCdDiff {
  /** What the app shows as OutOfSync for this resource. */
  readonly modified: boolean;
  /** The version Argo CD's cluster cache holds the object in (what its watch delivers: the preferred version). */
  readonly cachedApiVersion?: string;
  /** The version the live object was compared in (Argo CD converts it to the manifest's). */
  readonly liveApiVersion?: string;
  readonly liveResourceVersion?: string;
  /** The two sides of the diff Argo CD shows: live normalized, and live as the sync would leave it. */
  readonly normalizedLive?: Record<string, unknown>;
  readonly predictedLive?: Record<string, unknown>;
}

function runArgoCdLua(binary: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new ArgoCdError(`argocd-lua ${args[0] ?? ''} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The manifest as Argo CD's sync applies it: with the app's tracking annotation (argocd-lua target). */
export async function argoCdTarget(binary: string, app: string, namespace: string, manifestFile: string): Promise<Record<string, unknown>> {
  return JSON.parse(await runArgoCdLua(binary, ['target', app, namespace, manifestFile])) as Record<string, unknown>;
}

/**
 * The application controller's comparison of `manifestFile` with the cluster behind `kubeconfig`: its cluster
 * cache, GetManagedLiveObjs (the version conversion), sync.Reconcile and argodiff.StateDiffs, default client-side diff.
 */
export async function argoCdDiff(
  binary: string,
  kubeconfig: string,
  app: string,
  namespace: string,
  manifestFile: string,
  configMap: string = ARGOCD_CM,
): Promise<ArgoCdDiff> {
  const answer = JSON.parse(await runArgoCdLua(binary, ['diff', configMap, kubeconfig, app, namespace, manifestFile])) as ArgoCdDiff & { error?: string };
  if (answer.error) throw new ArgoCdError(answer.error);
  return answer;
}

/** One argocd-lua process; requests are answered in order, one line each. */
export class ArgoCd {
  private readonly waiting: { resolve: (a: Answer) => void; reject: (e: Error) => void }[] = [];
  private stderr = '';
  private exited: Error | undefined;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const next = this.waiting.shift();
      if (!next) return;
      try {
        next.resolve(JSON.parse(line) as Answer);
      } catch (err) {
        next.reject(new Error(`argocd-lua answered with something that is not JSON: ${line} (${String(err)})`));
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString('utf8');
    });
    child.on('exit', (code, signal) => {
      this.exited = new Error(`argocd-lua exited (${String(code ?? signal)}): ${this.stderr.trim()}`);
      for (const w of this.waiting.splice(0)) w.reject(this.exited);
    });
  }

  /** Starts argocd-lua with the resource customizations of `configMap` (default: deploy/argocd/argocd-cm.yaml). */
  static start(binary: string, configMap: string = ARGOCD_CM): ArgoCd {
    return new ArgoCd(spawn(binary, [configMap], { stdio: ['pipe', 'pipe', 'pipe'] }));
  }

  /** The application controller's verdict: gitops-engine's GetResourceHealth with the Lua overrides. */
  async health(obj: unknown): Promise<ArgoCdHealth> {
    const answer = await this.ask({ op: 'health', object: obj });
    if (answer.error) throw new ArgoCdError(answer.error);
    return answer.health ?? { status: '' };
  }

  /** The actions the API server lists for the object (discovery.lua), by name. */
  async actions(obj: unknown): Promise<Record<string, ArgoCdAction>> {
    const answer = await this.ask({ op: 'actions', object: obj });
    if (answer.error) throw new ArgoCdError(answer.error);
    return Object.fromEntries((answer.actions ?? []).map((a) => [a.name, a]));
  }

  /** Runs an action as the API server does (RunResourceActionV2, up to the requests it would send). */
  async run(obj: unknown, action = 'rotate'): Promise<ArgoCdActionRun> {
    const answer = await this.ask({ op: 'run', object: obj, action });
    if (answer.error) throw new ArgoCdError(answer.error);
    return { results: answer.results ?? [], unixBefore: answer.unixBefore ?? 0, unixAfter: answer.unixAfter ?? 0 };
  }

  /** The patch the API server sends for a single-object action ({} = no request at all). */
  async patch(obj: unknown, action = 'rotate'): Promise<Record<string, unknown>> {
    const { results } = await this.run(obj, action);
    const [only, ...more] = results;
    if (!only || more.length > 0 || only.operation !== 'patch' || !only.patch) {
      throw new Error(`expected one patch operation, got ${JSON.stringify(results)}`);
    }
    return only.patch;
  }

  /** Any script in the sandbox Argo CD gives custom scripts; it must return {status=…, message=…}. */
  async script(obj: unknown, source: string): Promise<ArgoCdHealth> {
    const answer = await this.ask({ op: 'script', object: obj, script: source });
    if (answer.error) throw new ArgoCdError(answer.error);
    return answer.health ?? { status: '' };
  }

  close(): void {
    this.child.stdin.end();
  }

  private ask(request: object): Promise<Answer> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.child.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }
}

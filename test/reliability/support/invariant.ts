import { createHash } from 'node:crypto';
import type { TestEnv, UserGroupObject } from '../../support/operator.js';
import { group, plural, version } from '../../support/operator.js';

const ROTATE_ANNOTATION = 'usergroup.dev/rotate-requested-at';
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * Every rotation request value a scenario made, per userGroupId, in order. A scenario must not
 * supersede a value before the controller could see it unless it means to (then it records only
 * the values that must execute).
 */
export class RotationLedger {
  private readonly values = new Map<string, string[]>();

  /** Sets the annotation and records the value. */
  async request(env: TestEnv, name: string, userGroupId: string, value: string): Promise<void> {
    await env.requestRotation(name, value);
    this.record(userGroupId, value);
  }

  record(userGroupId: string, value: string): void {
    const list = this.values.get(userGroupId) ?? [];
    list.push(value);
    this.values.set(userGroupId, list);
  }

  requested(userGroupId: string): readonly string[] {
    return this.values.get(userGroupId) ?? [];
  }

  get total(): number {
    let n = 0;
    for (const list of this.values.values()) n += list.length;
    return n;
  }

  ids(): string[] {
    return [...this.values.keys()];
  }
}

export interface InvariantResult {
  readonly converged: boolean;
  readonly objects: number;
  /** UserGroups whose Secret is missing or does not hold the token the service considers valid. */
  readonly tokensLost: number;
  /** Rotations executed at the simulator beyond one per requested value. */
  readonly duplicateRotations: number;
  /** Requested values never executed. */
  readonly missingRotations: number;
  /** Up to 10 descriptions of what is not (yet) right; never a token. */
  readonly problems: readonly string[];
  readonly elapsedMs: number;
}

interface SecretItem {
  metadata?: { name?: string };
  data?: Record<string, string>;
}

/** One evaluation of the invariant over every UserGroup of the env's namespace. */
async function evaluateInvariant(env: TestEnv, ledger: RotationLedger): Promise<Omit<InvariantResult, 'elapsedMs' | 'converged'> & { ok: boolean }> {
  const list = (await env.custom.listNamespacedCustomObject({ group, version, namespace: env.namespace, plural })) as { items: UserGroupObject[] };
  const secrets = new Map(((await env.core.listNamespacedSecret({ namespace: env.namespace })).items as SecretItem[]).map((s) => [s.metadata?.name ?? '', s]));
  const atService = new Map(env.sim.groups(env.apiKey).map((g) => [g.userGroupId, g.tokenSha256]));
  const rotations = env.sim.stats(env.apiKey).rotationsByUserGroupId;
  const problems: string[] = [];
  let notReady = 0;
  let tokensLost = 0;
  let duplicateRotations = 0;
  let missingRotations = 0;
  for (const ug of list.items) {
    const ref = ug.metadata.name;
    const spec = ug.spec as { userGroupId?: string; tokenSecret?: { name?: string; key?: string } };
    const userGroupId = spec.userGroupId ?? '';
    const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status !== 'True' || ug.status?.observedGeneration !== ug.metadata.generation) {
      notReady++;
      problems.push(
        `${ref}: Ready=${ready?.status ?? 'none'} ${ready?.reason ?? ''} (generation ${ug.metadata.generation}, observed ${ug.status?.observedGeneration ?? 'none'})`,
      );
    }
    const requested = ledger.requested(userGroupId);
    const last = requested[requested.length - 1];
    if (last !== undefined && ug.metadata.annotations?.[ROTATE_ANNOTATION] === last && ug.status?.rotation?.lastHandledRequest !== last) {
      notReady++;
      problems.push(`${ref}: rotation "${last}" not handled yet`);
    }
    const secret = secrets.get(spec.tokenSecret?.name ?? ref);
    const data = secret?.data?.[spec.tokenSecret?.key ?? 'token'];
    const held = data === undefined ? undefined : sha256(Buffer.from(data, 'base64').toString('utf8'));
    if (held === undefined || held !== atService.get(userGroupId)) {
      tokensLost++;
      problems.push(`${ref}: ${held === undefined ? 'no token Secret' : "Secret token differs from the service's"}`);
    }
    const executed = rotations[userGroupId] ?? 0;
    if (executed > requested.length) duplicateRotations += executed - requested.length;
    if (executed < requested.length) {
      missingRotations += requested.length - executed;
      problems.push(`${ref}: ${executed} of ${requested.length} rotations executed`);
    }
  }
  return {
    ok: notReady === 0 && tokensLost === 0 && duplicateRotations === 0 && missingRotations === 0,
    objects: list.items.length,
    tokensLost,
    duplicateRotations,
    missingRotations,
    problems: problems.slice(0, 10),
  };
}

/**
 * Waits until the invariant holds or the timeout passes, then returns the last evaluation: a scenario
 * records it in the summary either way, then asserts.
 */
export async function awaitInvariant(env: TestEnv, ledger: RotationLedger, timeoutMs: number): Promise<InvariantResult> {
  const started = Date.now();
  for (;;) {
    const result = await evaluateInvariant(env, ledger);
    const elapsedMs = Date.now() - started;
    if (result.ok || elapsedMs > timeoutMs) return { ...result, converged: result.ok, elapsedMs };
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Creates `count` UserGroups named `${prefix}${i}` with userGroupId `${prefix}-id-${i}`, `parallel` at a time. */
export async function createUserGroups(
  env: TestEnv,
  prefix: string,
  count: number,
  parallel = 20,
  spec: (i: number) => Record<string, unknown> = () => ({}),
): Promise<{ name: string; userGroupId: string }[]> {
  const made: { name: string; userGroupId: string }[] = [];
  for (let i = 0; i < count; i += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - i) }, (_, j) => i + j);
    await Promise.all(
      batch.map(async (k) => {
        const name = `${prefix}${k}`;
        const userGroupId = `${prefix}-id-${k}`;
        await env.createUserGroup(name, { userGroupId, name: `Group ${prefix} ${k}`, ...spec(k) });
        made.push({ name, userGroupId });
      }),
    );
  }
  return made;
}

// Pod prompts through the reconciler's ports: after a new token is stored, each consenting Pod is prompted once for it
// (the Pods' own marks, the status and the Events say so); never for a sync that kept the token. No I/O.
import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import type { UserGroupStatus } from '../../src/api/usergroup.js';
import { ApiError } from '../../src/kube/api-error.js';
import { sealedSecret, syncedHarness, syncedStatus, userGroup, type Harness, type World } from '../support/reconciler-harness.js';

const ISSUED = '2026-11-20T00:00:00.000Z';
const NOW = Date.parse('2026-11-22T01:00:00.250Z');
const NEW_ISSUED = new Date(NOW).toISOString();

async function world(
  init: { rotate?: boolean; promptedFor?: string | undefined; pods?: Record<string, string | undefined>; status?: Partial<UserGroupStatus> } & Partial<
    Omit<World, 'pods'>
  > = {},
): Promise<Harness & { readonly pods: Map<string, string | undefined> }> {
  const { rotate, pods: initial, status, ...rest } = init;
  const pods = new Map(Object.entries(initial ?? { 'web-1': ISSUED, 'web-2': undefined }));
  const synced = await syncedStatus();
  const promptedFor = 'promptedFor' in init ? init.promptedFor : ISSUED;
  const ug = userGroup({
    status: { ...synced, ...(promptedFor !== undefined ? { podPrompts: { tokenIssuedTime: promptedFor } } : {}), ...status },
    ...(rotate === false ? {} : { annotations: { [ROTATE_ANNOTATION]: 'r1' } }),
  });
  return Object.assign(syncedHarness(ug, ISSUED, NOW, { podPrompts: true, pods, ...rest }), { pods });
}

const events = (h: Harness): string[] => h.calls.filter((c) => c.startsWith('Event '));

describe('Pod prompts: once per new token, after it is stored', () => {
  it('a rotation: every consenting Pod carries the new token mark, status and a Normal Event say when', async () => {
    const h = await world();
    expect(await h.reconcile()).toMatchObject({ kind: 'done' });
    expect(Object.fromEntries(h.pods)).toEqual({ 'web-1': NEW_ISSUED, 'web-2': NEW_ISSUED });
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: NEW_ISSUED, lastPromptTime: '2026-11-22T01:00:00Z', pods: 2 });
    expect(events(h)).toContain('Event Normal PodsPrompted');
    // Protocol: a Pod is prompted only after the new token is stored (its kubelet would rewrite the old one).
    expect(h.order('replace Secret', 'prompt Pod/web-1')).toEqual(['replace Secret', 'replace Secret', 'prompt Pod/web-1']);
  });

  it('a spec-only sync (the token kept) lists no Pod and prompts none', async () => {
    const h = await world({ rotate: false, status: { syncedHash: 'an older spec' } });
    await h.reconcile();
    expect(h.calls).toContain('PUT');
    expect(h.calls.filter((c) => c.includes('Pod'))).toEqual([]);
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('prompts enabled for the first time: nothing prompted, the current token recorded', async () => {
    const h = await world({ rotate: false, promptedFor: undefined });
    await h.reconcile();
    expect(h.calls.filter((c) => c.includes('Pod'))).toEqual([]);
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('prompts off: no Pod read, and no status field', async () => {
    const h = await world({ podPrompts: false });
    await h.reconcile();
    expect(h.calls.filter((c) => c.includes('Pod'))).toEqual([]);
    expect(h.statuses.at(-1)?.podPrompts).toBeUndefined();
  });

  it('a Pod prompted before a crash (it carries the new token mark) is not prompted again', async () => {
    const stored = sealedSecret('tok-r1', { issuedAt: NEW_ISSUED });
    const h = await world({ rotate: false, pods: { 'web-1': NEW_ISSUED, 'web-2': ISSUED }, cached: stored, live: stored, serviceToken: 'tok-r1' });
    await h.reconcile();
    expect(h.calls.filter((c) => c.startsWith('prompt Pod/'))).toEqual(['prompt Pod/web-2']);
    expect(h.calls).not.toContain('POST');
    // Both carry the mark now: the one from before the crash, and the one just prompted.
    expect(h.statuses.at(-1)?.podPrompts).toMatchObject({ tokenIssuedTime: NEW_ISSUED, pods: 2 });
  });

  it('no consenting Pod: the token is noted as served, no Event', async () => {
    const h = await world({ pods: {} });
    await h.reconcile();
    expect(events(h).filter((e) => e.includes('Prompt'))).toEqual([]);
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: NEW_ISSUED });
  });

  it('a pass after a cap slot prompts the rest; the status counts every Pod marked for the token', async () => {
    const stored = sealedSecret('tok-r1', { issuedAt: NEW_ISSUED });
    const h = await world({
      rotate: false,
      pods: { 'web-1': NEW_ISSUED, 'web-2': ISSUED, 'web-3': NEW_ISSUED },
      cached: stored,
      live: stored,
      serviceToken: 'tok-r1',
    });
    await h.reconcile();
    expect(h.calls.filter((c) => c.startsWith('prompt Pod/'))).toEqual(['prompt Pod/web-2']);
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: NEW_ISSUED, lastPromptTime: '2026-11-22T01:00:00Z', pods: 3 });
  });

  it('the cap keeps a slot: the key comes back then, status still owes the prompts', async () => {
    const h = await world({ promptCapWaitMs: 4_000 });
    expect(h.requeue(await h.reconcile())).toEqual([['forget'], ['addAfter', 4_000]]);
    expect(h.calls.filter((c) => c.startsWith('prompt Pod/'))).toEqual([]);
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: ISSUED });
  });

  it('a refused prompt (RBAC, the admission policy): a Warning, a retry with backoff, Ready stays True with the token stored', async () => {
    const h = await world({ promptRefusal: new ApiError('PATCH', '/api/v1/namespaces/ns/pods/web-1', 403, 'Forbidden', 'pods "web-1" is forbidden') });
    expect(await h.reconcile()).toEqual({ kind: 'failed', cause: 'prompt-refused' });
    expect(events(h)).toContain('Event Warning PodPromptFailed');
    expect(h.statuses.at(-1)?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(h.statuses.at(-1)?.podPrompts).toEqual({ tokenIssuedTime: ISSUED });
  });
});

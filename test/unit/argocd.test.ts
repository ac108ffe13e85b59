import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { Reason } from '../../src/controller/policies/conditions.js';
import { ArgoCd, ArgoCdError, type ArgoCdActionRun } from '../support/argocd.js';

/**
 * deploy/argocd judged by Argo CD's own code (test/support/argocd.ts, devtools/argocd): the resource
 * customizations loaded from argocd-cm.yaml by Argo CD's settings manager, health through the
 * application controller's path, discovery and actions through the API server's, and the merge patch
 * the API server computes from an action's result.
 */

const DIR = fileURLToPath(new URL('../../deploy/argocd/', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../fixtures/argocd/', import.meta.url));
const read = (file: string): string => fs.readFileSync(path.join(DIR, file), 'utf8');
const ROTATE = 'usergroup.dev/rotate-requested-at';
const SYNC = 'usergroup.dev/sync-requested-at';
const TYPE = { apiVersion: 'usergroup.dev/v1', kind: 'UserGroup' } as const;

type Obj = Record<string, unknown>;

let argo: ArgoCd;
beforeAll(() => {
  argo = ArgoCd.start(inject('argocdLua'));
});
afterAll(() => argo.close());

/** The value os.date("!%Y-%m-%dT%H:%M:%SZ") gives at a Unix second. */
const stampAt = (unix: number): string => new Date(unix * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const nowUnix = (): number => Math.floor(Date.now() / 1000);

function ready(status: string, reason: string, message = `about ${reason}`): Obj {
  return { type: 'Ready', status, reason, message, lastTransitionTime: '2025-01-01T00:00:00Z', observedGeneration: 3 };
}

/** A UserGroup at generation 3 whose status describes generation `observed`; `status` adds fields to its status. */
function userGroup(
  over: {
    conditions?: unknown;
    observed?: number;
    suspend?: boolean;
    annotations?: Obj;
    rotation?: Obj;
    status?: Obj;
    spec?: Obj;
    deleting?: boolean;
    finalizers?: string[];
  } = {},
): Obj {
  return {
    ...TYPE,
    metadata: {
      name: 'acme',
      namespace: 'customers',
      generation: 3,
      ...(over.annotations ? { annotations: over.annotations } : {}),
      ...(over.deleting ? { deletionTimestamp: '2025-01-02T00:00:00Z', finalizers: over.finalizers ?? ['example.com/hold'] } : {}),
    },
    spec: { userGroupId: 'acme', name: 'Acme', suspend: over.suspend ?? false, ...over.spec },
    status: {
      observedGeneration: over.observed ?? 3,
      conditions: over.conditions ?? [ready('True', 'Synced', 'user group synced; token in Secret acme')],
      ...(over.rotation ? { rotation: over.rotation } : {}),
      ...over.status,
    },
  };
}

const fixtures = (): [string, Obj][] =>
  fs
    .readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => [f.replace(/\.json$/, ''), JSON.parse(fs.readFileSync(path.join(FIXTURES, f), 'utf8')) as Obj]);

const annotationsOf = (obj: Obj): Obj => (obj['metadata'] as { annotations: Obj }).annotations;

/** The value of `annotation` an action run wrote. */
function requested(run: ArgoCdActionRun, annotation: string): string {
  const [result] = run.results;
  return annotationsOf(result?.object ?? {})[annotation] as string;
}

/**
 * Runs `attempt` until its action runs all fell within one wall-clock second (Argo CD's os.date reads
 * the real clock, which no test can pin); `attempt` gets that second and returns its runs.
 */
async function withinOneSecond<T>(attempt: (second: number) => Promise<{ runs: ArgoCdActionRun[]; value: T }>): Promise<{ second: number; value: T }> {
  for (let i = 0; i < 10; i++) {
    const second = nowUnix();
    const { runs, value } = await attempt(second);
    if (runs.every((r) => r.unixBefore === second && r.unixAfter === second)) return { second, value };
  }
  throw new Error('ten attempts each crossed a second boundary');
}

describe("Argo CD's sandbox for custom scripts (its own VM, not a stand-in)", () => {
  const probe = (source: string): Promise<string | undefined> => argo.script({ ...TYPE }, source).then((h) => h.message);

  it('has the base, table and package libraries; no global os, string, math, io, debug or coroutine', async () => {
    const globals = ['string', 'math', 'io', 'os', 'debug', 'coroutine', 'table', 'package', 'require', 'pairs', 'tostring', 'error'];
    const message = await probe(`
      local out = {}
      for _, name in ipairs({ ${globals.map((g) => `"${g}"`).join(', ')} }) do out[#out + 1] = name .. "=" .. type(_G[name]) end
      return { status = "Healthy", message = table.concat(out, " ") }`);
    expect(message).toBe(
      'string=nil math=nil io=nil os=nil debug=nil coroutine=nil table=table package=table require=function pairs=function tostring=function error=function',
    );
  });

  it('gives the safe os (time and date, nothing else) only through require("os")', async () => {
    const message = await probe(`
      local os = require("os")
      local names = {}
      for name in pairs(os) do names[#names + 1] = name end
      table.sort(names)
      return { status = "Healthy", message = table.concat(names, ",") .. " " .. os.date("!%Y", 0) }`);
    expect(message).toBe('date,time 1970');
  });

  it('fails a script that uses the global os, string methods or the string library', async () => {
    await expect(probe('return { status = "Healthy", message = os.date("!%Y") }')).rejects.toThrow(
      /attempt to index a non-table object\(nil\) with key 'date'/,
    );
    await expect(probe('return { status = "Healthy", message = ("x"):upper() }')).rejects.toThrow(ArgoCdError);
    await expect(probe('return { status = "Healthy", message = string.upper("x") }')).rejects.toThrow(/string/);
  });

  it('is gopher-lua, not C Lua 5.1: tonumber("1e1") is nil, large numbers print in full', async () => {
    expect(await probe('return { status = "Healthy", message = tostring(tonumber("1e1")) .. " " .. tostring(1e15) }')).toBe('nil 1000000000000000');
  });

  it('loses what JSON has and Lua has not: null in a list or as a value, and the kind of an empty table', async () => {
    const { message } = await argo.script(
      { ...TYPE, spec: { list: [1, null, 3], value: null, empty: {}, inList: [{}] } },
      `
      local s = obj.spec
      return { status = "Healthy", message = #s.list .. " " .. tostring(s.list[2]) .. " " .. tostring(s.value == nil) .. " " .. type(s.empty) .. " " .. type(s.inList[1]) }`,
    );
    expect(message).toBe('2 3 true table table');
  });
});

describe("health.lua, through the application controller's health path", () => {
  const cases: { what: string; obj: unknown; status: string; message?: string | RegExp }[] = [
    // No verdict from the controller yet.
    {
      what: 'no status at all',
      obj: { ...TYPE, metadata: { name: 'a', generation: 1 }, spec: {} },
      status: 'Progressing',
      message: 'Waiting for the controller to report the Ready condition',
    },
    { what: 'status without conditions', obj: { ...TYPE, metadata: { generation: 1 }, status: { observedGeneration: 1 } }, status: 'Progressing' },
    { what: 'conditions without Ready', obj: userGroup({ conditions: [{ type: 'Other', status: 'True' }] }), status: 'Progressing' },
    { what: 'conditions that are not a list', obj: userGroup({ conditions: 'Ready' }), status: 'Progressing' },
    {
      what: 'a condition that is not a table',
      obj: userGroup({ conditions: ['Ready', 7, ready('True', 'Synced', 'ok')] }),
      status: 'Healthy',
      message: 'Synced: ok',
    },
    { what: 'nothing but the type', obj: { ...TYPE }, status: 'Progressing' },
    { what: 'spec and status of the wrong types', obj: { ...TYPE, metadata: { name: 'a' }, spec: 7, status: true }, status: 'Progressing' },
    // Generations.
    {
      what: 'an older generation, Ready=True',
      obj: userGroup({ observed: 2 }),
      status: 'Progressing',
      message: 'Waiting for the controller to observe generation 3 (status describes 2)',
    },
    { what: 'an older generation, Ready=False', obj: userGroup({ observed: 2, conditions: [ready('False', 'Rejected')] }), status: 'Progressing' },
    {
      what: 'no observedGeneration anywhere',
      obj: { ...TYPE, metadata: { generation: 3 }, status: { conditions: [{ type: 'Ready', status: 'True', reason: 'Synced' }] } },
      status: 'Progressing',
      message: 'Waiting for the controller to observe generation 3 (status describes no generation)',
    },
    {
      what: "status.observedGeneration missing, the condition's current",
      obj: { ...TYPE, metadata: { generation: 3 }, status: { conditions: [ready('True', 'Synced', 'ok')] } },
      status: 'Healthy',
    },
    { what: 'no metadata.generation: Ready alone decides', obj: { ...TYPE, status: { conditions: [ready('True', 'Synced', 'ok')] } }, status: 'Healthy' },
    {
      what: 'generations as strings',
      obj: { ...TYPE, metadata: { generation: '3' }, status: { observedGeneration: '2', conditions: [ready('True', 'Synced')] } },
      status: 'Progressing',
    },
    { what: 'a newer observedGeneration (never older)', obj: userGroup({ observed: 4 }), status: 'Healthy' },
    // Verdicts.
    { what: 'Ready=True Synced', obj: userGroup(), status: 'Healthy', message: 'Synced: user group synced; token in Secret acme' },
    {
      what: 'Ready=True without reason or message (Argo CD drops an empty message)',
      obj: userGroup({ conditions: [{ type: 'Ready', status: 'True' }] }),
      status: 'Healthy',
      message: '',
    },
    {
      what: 'Ready=False without a reason',
      obj: userGroup({ conditions: [{ type: 'Ready', status: 'False', message: 'broken' }] }),
      status: 'Degraded',
      message: 'broken',
    },
    {
      what: 'Ready=False with a reason unknown to the script',
      obj: userGroup({ conditions: [ready('False', 'SomethingNew', 'new')] }),
      status: 'Degraded',
      message: 'SomethingNew: new',
    },
    {
      what: 'Ready=Unknown',
      obj: userGroup({ conditions: [ready('Unknown', 'Reconciling', 'working')] }),
      status: 'Progressing',
      message: 'Reconciling: working',
    },
    // Suspension.
    {
      what: 'suspended and observed',
      obj: userGroup({ suspend: true, conditions: [ready('False', 'Suspended', 'no calls')] }),
      status: 'Suspended',
      message: 'Suspended: no calls',
    },
    { what: 'suspend requested, not yet observed', obj: userGroup({ suspend: true, observed: 2 }), status: 'Progressing' },
    {
      what: 'suspend requested, status of this generation says otherwise',
      obj: userGroup({ suspend: true }),
      status: 'Progressing',
      message: 'Waiting for the controller to suspend: Synced: user group synced; token in Secret acme',
    },
    {
      what: 'resumed, status still Suspended',
      obj: userGroup({ conditions: [ready('False', 'Suspended', 'no calls')] }),
      status: 'Progressing',
      message: /^Waiting for the controller to resume/,
    },
    // Rotation.
    {
      what: 'a rotation requested, never rotated before',
      obj: userGroup({ annotations: { [ROTATE]: '2' } }),
      status: 'Progressing',
      message: `Waiting for the controller to rotate the token (${ROTATE} = 2, last handled: none)`,
    },
    {
      what: 'a rotation requested, another one handled',
      obj: userGroup({ annotations: { [ROTATE]: '2' }, rotation: { lastHandledRequest: '1' } }),
      status: 'Progressing',
      message: /last handled: 1\)$/,
    },
    { what: 'the requested rotation handled', obj: userGroup({ annotations: { [ROTATE]: '2' }, rotation: { lastHandledRequest: '2' } }), status: 'Healthy' },
    { what: 'an empty request value counts as a request', obj: userGroup({ annotations: { [ROTATE]: '' } }), status: 'Progressing' },
    { what: 'other annotations only', obj: userGroup({ annotations: { 'example.com/x': 'y' } }), status: 'Healthy' },
    {
      what: 'rotation pending while failing: the failure shows',
      obj: userGroup({ annotations: { [ROTATE]: '2' }, conditions: [ready('False', 'Unauthorized')] }),
      status: 'Degraded',
    },
    {
      what: 'rotation pending while suspended: Suspended',
      obj: userGroup({ suspend: true, annotations: { [ROTATE]: '2' }, conditions: [ready('False', 'Suspended')] }),
      status: 'Suspended',
    },
    // Sync requests: the same rules as rotation requests, against status.lastHandledSyncRequest.
    {
      what: 'a sync requested, never handled before',
      obj: userGroup({ annotations: { [SYNC]: '2' } }),
      status: 'Progressing',
      message: `Waiting for the controller to sync the group (${SYNC} = 2, last handled: none)`,
    },
    {
      what: 'a sync requested, another one handled',
      obj: userGroup({ annotations: { [SYNC]: '2' }, status: { lastHandledSyncRequest: '1' } }),
      status: 'Progressing',
      message: `Waiting for the controller to sync the group (${SYNC} = 2, last handled: 1)`,
    },
    { what: 'the requested sync handled', obj: userGroup({ annotations: { [SYNC]: '2' }, status: { lastHandledSyncRequest: '2' } }), status: 'Healthy' },
    {
      what: "a sync handled, a rotation pending: the rotation's message",
      obj: userGroup({ annotations: { [SYNC]: '2', [ROTATE]: '2' }, status: { lastHandledSyncRequest: '2' } }),
      status: 'Progressing',
      message: /^Waiting for the controller to rotate the token/,
    },
    {
      what: 'both pending: the rotation comes first',
      obj: userGroup({ annotations: { [SYNC]: '3', [ROTATE]: '3' } }),
      status: 'Progressing',
      message: /^Waiting for the controller to rotate the token/,
    },
    {
      what: 'a rotation handled, a sync pending',
      obj: userGroup({ annotations: { [SYNC]: '3', [ROTATE]: '2' }, rotation: { lastHandledRequest: '2' } }),
      status: 'Progressing',
      message: /^Waiting for the controller to sync the group/,
    },
    {
      what: "the rotation's handled value does not answer a sync request",
      obj: userGroup({ annotations: { [SYNC]: '2' }, rotation: { lastHandledRequest: '2' } }),
      status: 'Progressing',
    },
    {
      what: 'sync pending while failing: the failure shows',
      obj: userGroup({ annotations: { [SYNC]: '2' }, conditions: [ready('False', 'Unauthorized')] }),
      status: 'Degraded',
    },
    {
      what: 'sync pending while suspended: Suspended',
      obj: userGroup({ suspend: true, annotations: { [SYNC]: '2' }, conditions: [ready('False', 'Suspended')] }),
      status: 'Suspended',
    },
    // Deletion: Argo CD (v3.6) runs the script, then overrides its verdict, since health.lua sets no deletionMessage.
    {
      what: 'being deleted (a finalizer holds it), whatever the status says',
      obj: userGroup({ deleting: true, conditions: [ready('False', 'Unauthorized')] }),
      status: 'Progressing',
      message: 'Pending deletion; blocked by finalizers: example.com/hold',
    },
    {
      what: "being deleted, held by the operator's rotate-on-delete finalizer (deletionPolicy: Rotate) and another",
      obj: userGroup({ deleting: true, finalizers: ['usergroup.dev/rotate-on-delete', 'example.com/hold'] }),
      status: 'Progressing',
      message: 'Pending deletion; blocked by finalizers: usergroup.dev/rotate-on-delete, example.com/hold',
    },
    {
      what: 'being deleted, no finalizers listed',
      obj: userGroup({ deleting: true, finalizers: [], annotations: { [SYNC]: '2' } }),
      status: 'Progressing',
      message: 'Pending deletion',
    },
  ];

  it.each(cases)('$what → $status', async ({ obj, status, message }) => {
    const hs = await argo.health(obj);
    expect(hs.status).toBe(status);
    if (typeof message === 'string') expect(hs.message ?? '').toBe(message);
    if (message instanceof RegExp) expect(hs.message).toMatch(message);
  });

  /** Every reason the controller can write (a Record<Reason, …>: a new reason does not compile until it is mapped here). */
  const byReason: Record<Reason, { ready: 'True' | 'False'; status: string }> = {
    Synced: { ready: 'True', status: 'Healthy' },
    Suspended: { ready: 'False', status: 'Suspended' },
    // Retried by the controller on its own; see the comment at the top of health.lua.
    ServiceUnavailable: { ready: 'False', status: 'Progressing' },
    RateLimited: { ready: 'False', status: 'Progressing' },
    Unauthorized: { ready: 'False', status: 'Degraded' },
    Rejected: { ready: 'False', status: 'Degraded' },
    InvalidResponse: { ready: 'False', status: 'Degraded' },
    SecretConflict: { ready: 'False', status: 'Degraded' },
    SecretWriteFailed: { ready: 'False', status: 'Degraded' },
    DuplicateUserGroupId: { ready: 'False', status: 'Degraded' },
    InvalidSpec: { ready: 'False', status: 'Degraded' },
    ConnectionNotFound: { ready: 'False', status: 'Degraded' },
    ConnectionInvalid: { ready: 'False', status: 'Degraded' },
    ServiceNotAllowed: { ready: 'False', status: 'Degraded' },
    // Tenancy: a cluster admin (rules, claims) or the tenant (another id) must act.
    NamespaceNotAllowed: { ready: 'False', status: 'Degraded' },
    UserGroupIdNotAllowed: { ready: 'False', status: 'Degraded' },
    UserGroupIdClaimed: { ready: 'False', status: 'Degraded' },
    AdoptionRefused: { ready: 'False', status: 'Degraded' },
  };

  it('Degraded once a scheduled rotation is more than an hour overdue, whatever Ready says; not before, not without a schedule', async () => {
    const hoursAgo = (h: number): string => new Date(Math.floor(Date.now() / 1000 - h * 3600) * 1000).toISOString().replace('.000Z', 'Z');
    const scheduled = { rotation: { maxTokenAge: '720h' } };
    // One time for the object and the expected message: computed twice, a second could tick between them.
    const due = hoursAgo(2);
    const overdue = userGroup({ spec: scheduled, rotation: { nextRotationTime: due } });
    expect(await argo.health(overdue)).toEqual({
      status: 'Degraded',
      message: `The scheduled token rotation has been due since ${due}, more than an hour: Synced: user group synced; token in Secret acme`,
    });
    // Retried by the controller (Progressing) for less than an hour; Degraded after.
    const failing = [ready('False', 'ServiceUnavailable', 'POST /api/user failed: service unavailable (HTTP 503)')];
    expect((await argo.health(userGroup({ spec: scheduled, conditions: failing, rotation: { nextRotationTime: hoursAgo(0.5) } }))).status).toBe('Progressing');
    expect((await argo.health(userGroup({ spec: scheduled, conditions: failing, rotation: { nextRotationTime: hoursAgo(1.5) } }))).status).toBe('Degraded');
    // Due soon, or in the future: Healthy. No schedule any more, or suspended: the status' old time means nothing.
    expect((await argo.health(userGroup({ spec: scheduled, rotation: { nextRotationTime: hoursAgo(0.9) } }))).status).toBe('Healthy');
    expect((await argo.health(userGroup({ spec: scheduled, rotation: { nextRotationTime: hoursAgo(-24) } }))).status).toBe('Healthy');
    expect((await argo.health(userGroup({ rotation: { nextRotationTime: hoursAgo(5) } }))).status).toBe('Healthy');
    const suspended = userGroup({
      spec: scheduled,
      suspend: true,
      conditions: [ready('False', 'Suspended', 'spec.suspend is true')],
      rotation: { nextRotationTime: hoursAgo(5) },
    });
    expect((await argo.health(suspended)).status).toBe('Suspended');
  });

  it.each(Object.values(Reason))('Ready reason %s', async (reason) => {
    const { ready: readyStatus, status } = byReason[reason];
    const obj = userGroup({ suspend: reason === 'Suspended', conditions: [ready(readyStatus, reason, `the ${reason} message`)] });
    expect(await argo.health(obj)).toEqual({ status, message: `${reason}: the ${reason} message` });
  });
});

describe('health.lua on objects fetched from the test control plane (test/fixtures/argocd)', () => {
  // Refresh: UPDATE_ARGOCD_FIXTURES=1 npm run test:integration -- test/integration/argocd.test.ts
  const expected: Record<string, string> = {
    'no-status': 'Progressing',
    synced: 'Healthy',
    suspended: 'Suspended',
    'connection-not-found': 'Degraded',
    rejected: 'Degraded',
    'service-unavailable': 'Progressing',
    'rate-limited': 'Progressing',
    'spec-not-observed': 'Progressing',
    'rotation-pending': 'Progressing',
    rotated: 'Healthy',
    'sync-pending': 'Progressing',
    'sync-handled': 'Healthy',
  };

  it('has exactly the expected fixtures', () => {
    expect(fixtures().map(([name]) => name)).toEqual(Object.keys(expected).sort());
  });

  it.each(Object.entries(expected))('%s → %s', async (name, status) => {
    const obj = JSON.parse(fs.readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8')) as unknown;
    expect((await argo.health(obj)).status).toBe(status);
  });
});

const ACTIONS = {
  rotate: { name: 'rotate', disabled: false, displayName: 'Rotate token', iconClass: 'fa fa-fw fa-key' },
  sync: { name: 'sync', disabled: false, displayName: 'Sync now', iconClass: 'fa fa-fw fa-sync' },
};
const disabled = (actions: Record<string, { disabled: boolean }>): Record<string, boolean> =>
  Object.fromEntries(Object.entries(actions).map(([name, a]) => [name, a.disabled]));

describe('actions/discovery.lua, as the API server lists actions', () => {
  it('offers rotate and sync, enabled', async () => {
    expect(await argo.actions(userGroup())).toEqual(ACTIONS);
  });

  it('disables both while spec.suspend is true, and while the object is being deleted', async () => {
    expect(await argo.actions(userGroup({ suspend: true }))).toEqual({
      rotate: { ...ACTIONS.rotate, disabled: true },
      sync: { ...ACTIONS.sync, disabled: true },
    });
    expect(disabled(await argo.actions(userGroup({ deleting: true })))).toEqual({ rotate: true, sync: true });
  });

  it('copes with a missing or odd spec', async () => {
    expect(disabled(await argo.actions({ ...TYPE, metadata: { name: 'a' } }))).toEqual({ rotate: false, sync: false });
    expect(disabled(await argo.actions({ ...TYPE, spec: 'x' }))).toEqual({ rotate: false, sync: false });
    expect(disabled(await argo.actions({ ...TYPE, spec: { suspend: 'true' } }))).toEqual({ rotate: false, sync: false });
  });

  it.each(fixtures())('%s: both are offered, disabled only for the suspended group', async (name, obj) => {
    const off = name === 'suspended';
    expect(disabled(await argo.actions(obj))).toEqual({ rotate: off, sync: off });
  });
});

/**
 * The two actions write their annotation the same way and refuse the same cases; each is checked on its own
 * annotation and handled value (status.rotation.lastHandledRequest, status.lastHandledSyncRequest).
 */
const ACTION_CASES = [
  {
    action: 'rotate',
    annotation: ROTATE,
    handled: (value: string): Obj => ({ rotation: { lastHandledRequest: value } }),
    other: SYNC,
    otherHandled: (value: string): Obj => ({ lastHandledSyncRequest: value }),
    refused: 'not rotated',
  },
  {
    action: 'sync',
    annotation: SYNC,
    handled: (value: string): Obj => ({ lastHandledSyncRequest: value }),
    other: ROTATE,
    otherHandled: (value: string): Obj => ({ rotation: { lastHandledRequest: value } }),
    refused: 'not synced',
  },
] as const;

describe.each(ACTION_CASES)('actions/$action/action.lua, as the API server runs it', ({ action, annotation, handled, other, otherHandled, refused }) => {
  const run = (live: Obj): Promise<ArgoCdActionRun> => argo.run(live, action);
  const value = (r: ArgoCdActionRun): string => requested(r, annotation);
  /** A UserGroup whose status says `v` was handled. */
  const handledAt = (v: string, over: Parameters<typeof userGroup>[0] = {}): Obj => userGroup({ ...over, status: handled(v) });

  /** The patch must be the annotation alone, stamped within the run's second(s). */
  async function onlyTheAnnotation(live: Obj): Promise<string> {
    const r = await run(live);
    expect(r.results.map((x) => x.operation)).toEqual(['patch']);
    const v = value(r);
    expect(r.results[0]?.patch).toEqual({ metadata: { annotations: { [annotation]: v } } });
    const seconds = new Set([stampAt(r.unixBefore), stampAt(r.unixAfter)]);
    expect(seconds.has(v.replace(/-\d+$/, ''))).toBe(true);
    return v;
  }

  it.each(fixtures().filter(([name]) => name !== 'suspended'))('%s: the patch is the annotation alone', async (_name, live) => {
    await onlyTheAnnotation(live);
  });

  it('patches only the annotation on a spec with empty maps, nested objects, big and fractional numbers', async () => {
    const live = userGroup({
      annotations: { 'example.com/a': '1' },
      spec: {
        mapping: {},
        tokenSecret: { name: 'acme', key: 'token', labels: {}, annotations: {} },
        properties: {
          region: 'eu',
          tier: 3,
          ratio: 0.1,
          tiny: 1.5e-7,
          huge: 1e21,
          id: Number.MAX_SAFE_INTEGER + 1,
          flags: [true, false],
          nested: { a: {}, b: [{ c: {} }], c: [[]] },
          empty: [],
        },
      },
    });
    const v = await onlyTheAnnotation(live);
    expect(v).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it("keeps the other annotations (the other action's too) and replaces a handled request", async () => {
    const live = handledAt('old', { annotations: { 'example.com/a': '1', [other]: 'pending', [annotation]: 'old' } });
    const r = await run(live);
    expect(annotationsOf(r.results[0]?.object ?? {})).toEqual({ 'example.com/a': '1', [other]: 'pending', [annotation]: value(r) });
    expect(r.results[0]?.patch).toEqual({ metadata: { annotations: { [annotation]: value(r) } } });
  });

  it('gives a new value to every request within one second (os.date has second resolution)', async () => {
    const { second, value: values } = await withinOneSecond(async () => {
      let obj: Obj = userGroup();
      const runs: ArgoCdActionRun[] = [];
      const seen: string[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await run(obj);
        runs.push(r);
        seen.push(value(r));
        obj = r.results[0]?.object ?? {};
      }
      return { runs, value: seen };
    });
    const stamp = stampAt(second);
    expect(values).toEqual([stamp, `${stamp}-1`, `${stamp}-2`, `${stamp}-3`]);
  });

  it('never repeats the last handled value, even when the annotation was removed', async () => {
    const { second, value: values } = await withinOneSecond(async (s) => {
      const handledOnly = await run(handledAt(stampAt(s)));
      const both = await run(handledAt(stampAt(s), { annotations: { [annotation]: `${stampAt(s)}-1` } }));
      return { runs: [handledOnly, both], value: [value(handledOnly), value(both)] };
    });
    expect(values).toEqual([`${stampAt(second)}-1`, `${stampAt(second)}-2`]);
  });

  it("counts against its own annotation and handled value only, not the other action's", async () => {
    const { second, value: v } = await withinOneSecond(async (s) => {
      const r = await run(userGroup({ annotations: { [other]: stampAt(s) }, status: otherHandled(stampAt(s)) }));
      return { runs: [r], value: value(r) };
    });
    expect(v).toBe(stampAt(second));
  });

  it('a request in a later second is the plain timestamp again', async () => {
    const earlier = stampAt(nowUnix() - 5);
    const r = await run(handledAt(`${earlier}-1`, { annotations: { [annotation]: `${earlier}-1` } }));
    expect(value(r)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(value(r)).not.toBe(earlier);
  });

  it('makes the health check Progressing until the controller records the value', async () => {
    const r = await run(userGroup());
    const obj = r.results[0]?.object ?? {};
    expect((await argo.health(obj)).status).toBe('Progressing');
    const done = { ...obj, status: { ...(obj['status'] as Obj), ...handled(value(r)) } };
    expect((await argo.health(done)).status).toBe('Healthy');
  });

  it('refuses a suspended group and one being deleted (argocd app actions run ignores `disabled`)', async () => {
    await expect(run(userGroup({ suspend: true }))).rejects.toThrow(
      `error executing Lua resource action: ${refused}: spec.suspend is true, so the controller makes no call to the service; resume the UserGroup first`,
    );
    await expect(run(userGroup({ deleting: true }))).rejects.toThrow(`error executing Lua resource action: ${refused}: the UserGroup is being deleted`);
  });

  it("documented exception: Argo CD's JSON-to-Lua conversion drops nulls and turns an empty object inside a list into []", async () => {
    const live = userGroup({ spec: { properties: { list: [1, null, 3], value: null, inList: [{}], kept: { empty: {} } } } });
    const r = await run(live);
    expect(r.results[0]?.patch).toEqual({
      metadata: { annotations: { [annotation]: value(r) } },
      spec: { properties: { list: [1, 3], value: null, inList: [[]] } },
    });
  });
});

describe('argocd-cm.yaml', () => {
  const cm = parseYaml(read('argocd-cm.yaml')) as {
    kind: string;
    metadata: { name: string; namespace: string; labels: Record<string, string> };
    data: Record<string, string>;
  };

  it("is a patch for the argocd-cm ConfigMap, labelled as Argo CD's settings manager requires", () => {
    expect(cm.kind).toBe('ConfigMap');
    expect(cm.metadata).toMatchObject({ name: 'argocd-cm', namespace: 'argocd', labels: { 'app.kubernetes.io/part-of': 'argocd' } });
    expect(Object.keys(cm.data).sort()).toEqual([
      'resource.customizations.actions.usergroup.dev_UserGroup',
      'resource.customizations.health.usergroup.dev_UserGroup',
    ]);
  });

  it('embeds exactly the .lua files', () => {
    expect(cm.data['resource.customizations.health.usergroup.dev_UserGroup']).toBe(read('health.lua'));
    const actions = parseYaml(cm.data['resource.customizations.actions.usergroup.dev_UserGroup'] ?? '') as {
      'discovery.lua': string;
      definitions: { name: string; 'action.lua': string }[];
    };
    expect(actions['discovery.lua']).toBe(read('actions/discovery.lua'));
    expect(actions.definitions).toEqual([
      { name: 'rotate', 'action.lua': read('actions/rotate/action.lua') },
      { name: 'sync', 'action.lua': read('actions/sync/action.lua') },
    ]);
  });

  it('is what generate-argocd-cm.sh writes (rerun it after editing a .lua file)', () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'argocd-cm-')), 'argocd-cm.yaml');
    const res = spawnSync('sh', [path.join(DIR, 'generate-argocd-cm.sh'), out], { encoding: 'utf8' });
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
    expect(read('argocd-cm.yaml'), 'deploy/argocd/argocd-cm.yaml is stale: run deploy/argocd/generate-argocd-cm.sh').toBe(fs.readFileSync(out, 'utf8'));
  });
});

describe('application.yaml', () => {
  // An empty document (before a leading ---) parses as null.
  const docs = read('application.yaml')
    .split(/^---$/m)
    .map(
      (d) =>
        parseYaml(d) as {
          kind: string;
          metadata: { name: string; annotations?: Record<string, string> };
          spec: { source: { path: string; helm?: unknown }; syncPolicy: { syncOptions: string[] } };
        } | null,
    )
    .filter((d) => d !== null);

  it('installs the operator chart before the UserGroups, both with server-side apply', () => {
    expect(docs.map((d) => d.kind)).toEqual(['Application', 'Application']);
    const [operator, groups] = docs;
    expect(operator?.spec.source.path).toBe('deploy/helm/usergroup-operator');
    expect(operator?.spec.source.helm).toBeDefined();
    const wave = (d: typeof operator): number => Number(d?.metadata.annotations?.['argocd.argoproj.io/sync-wave'] ?? 0);
    expect(wave(operator)).toBeLessThan(wave(groups));
    for (const d of docs) expect(d.spec.syncPolicy.syncOptions).toContain('ServerSideApply=true');
  });
});

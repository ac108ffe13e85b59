import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { Reason } from '../../src/controller/conditions.js';
import { argoCdActionPatch, luaVersion, runArgoCdLua, toLua } from '../support/lua.js';

/**
 * deploy/argocd's Lua run by Debian's real lua5.1 in a sandbox shaped like Argo CD's (see
 * test/support/lua.ts). No lua5.1 = these tests fail: apt-get install lua5.1.
 */

const DIR = fileURLToPath(new URL('../../deploy/argocd/', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../fixtures/argocd/', import.meta.url));
const read = (file: string): string => fs.readFileSync(path.join(DIR, file), 'utf8');
const HEALTH = read('health.lua');
const DISCOVERY = read('actions/discovery.lua');
const ACTION = read('actions/rotate/action.lua');
const ROTATE = 'usergroup.dev/rotate-requested-at';

interface Health {
  status: string;
  message: string;
}
type Obj = Record<string, unknown>;

const health = (obj: unknown, source = HEALTH): Health => runArgoCdLua(source, obj, { name: 'health.lua' }) as Health;
const discover = (obj: unknown, source = DISCOVERY): Obj => runArgoCdLua(source, obj, { name: 'discovery.lua' }) as Obj;
const act = (obj: unknown, clock?: number, source = ACTION): Obj =>
  runArgoCdLua(source, obj, { name: 'action.lua', ...(clock === undefined ? {} : { clock }) }) as Obj;

/** 2025-01-02T03:04:05Z */
const CLOCK = Date.UTC(2025, 0, 2, 3, 4, 5) / 1000;
const STAMP = '2025-01-02T03:04:05Z';

function ready(status: string, reason: string, message = `about ${reason}`): Obj {
  return { type: 'Ready', status, reason, message, lastTransitionTime: '2025-01-01T00:00:00Z', observedGeneration: 3 };
}

/** A UserGroup at generation 3 whose status describes generation `observed`. */
function userGroup(over: { conditions?: unknown; observed?: number; suspend?: boolean; annotations?: Obj; rotation?: Obj } = {}): Obj {
  return {
    apiVersion: 'usergroup.dev/v1alpha1',
    kind: 'UserGroup',
    metadata: { name: 'acme', namespace: 'customers', generation: 3, ...(over.annotations ? { annotations: over.annotations } : {}) },
    spec: { userGroupId: 'acme', name: 'Acme', suspend: over.suspend ?? false },
    status: {
      observedGeneration: over.observed ?? 3,
      conditions: over.conditions ?? [ready('True', 'Synced', 'user group synced; token in Secret acme')],
      ...(over.rotation ? { rotation: over.rotation } : {}),
    },
  };
}

describe('the Lua runner', () => {
  it('runs Debian\'s Lua 5.1 (gopher-lua, in Argo CD, implements 5.1)', () => {
    expect(luaVersion()).toMatch(/^Lua 5\.1\./);
  });

  it('passes objects in as Lua tables and results back as JSON, bytes intact', () => {
    const obj = { s: 'quote " backslash \\ newline \n tab \t nul \u0000 é ü 😀 ]] ]=]', n: 3, f: 0.25, big: 1e21, t: true, nested: { list: [1, 'two', { x: false }] } };
    expect(runArgoCdLua('return obj', obj)).toEqual(obj);
    expect(runArgoCdLua('return { obj.nested.list[2], #obj.nested.list, obj.n + 1 }', obj)).toEqual(['two', 3, 4]);
    expect(toLua({ a: undefined, b: null })).toBe('{["b"] = nil}');
    expect(() => toLua([1, null])).toThrow(/null inside an array/);
  });

  it('encodes an empty table as [] and takes the last return value, like Argo CD', () => {
    expect(runArgoCdLua('return {}', {})).toEqual([]);
    expect(runArgoCdLua('return 1, 2', {})).toBe(2);
    expect(runArgoCdLua('return', {})).toBeNull();
  });

  it('has Argo CD\'s sandbox: no string, math or io library, no string methods; os has only time and date', () => {
    expect(() => runArgoCdLua('return string.format("%d", 1)', {})).toThrow(/global 'string'/);
    expect(() => runArgoCdLua('return ("x"):upper()', {})).toThrow(/attempt to index a string value/);
    expect(() => runArgoCdLua('return math.floor(1.5)', {})).toThrow(/global 'math'/);
    expect(() => runArgoCdLua('return io.write("x")', {})).toThrow(/global 'io'/);
    expect(() => runArgoCdLua('return os.execute("true")', {})).toThrow(/field 'execute'/);
    expect(runArgoCdLua('return { table.concat({ "a", "b" }, "-"), tostring(1), select("#", 1, 2) }', {})).toEqual(['a-b', '1', 2]);
    expect(runArgoCdLua('return os.date("!%Y-%m-%dT%H:%M:%SZ")', {}, { clock: CLOCK })).toBe(STAMP);
  });

  it('reports Lua errors with the chunk name, and a script that does not compile', () => {
    expect(() => runArgoCdLua('return obj.a.b', {}, { name: 'x.lua' })).toThrow(/x\.lua:1: attempt to index field 'a'/);
    expect(() => runArgoCdLua('return (', {}, { name: 'y.lua' })).toThrow(/y\.lua:1:/);
  });
});

describe('health.lua', () => {
  const cases: { what: string; obj: unknown; status: string; message?: string | RegExp }[] = [
    // No verdict from the controller yet.
    { what: 'no status at all', obj: { metadata: { name: 'a', generation: 1 }, spec: {} }, status: 'Progressing', message: 'Waiting for the controller to report the Ready condition' },
    { what: 'status without conditions', obj: { metadata: { generation: 1 }, status: { observedGeneration: 1 } }, status: 'Progressing' },
    { what: 'conditions without Ready', obj: userGroup({ conditions: [{ type: 'Other', status: 'True' }] }), status: 'Progressing' },
    { what: 'conditions that are not a list', obj: userGroup({ conditions: 'Ready' }), status: 'Progressing' },
    { what: 'a condition that is not a table', obj: userGroup({ conditions: ['Ready', 7, ready('True', 'Synced', 'ok')] }), status: 'Healthy', message: 'Synced: ok' },
    { what: 'an empty object', obj: {}, status: 'Progressing' },
    { what: 'metadata, spec and status of the wrong types', obj: { metadata: 'x', spec: 7, status: true }, status: 'Progressing' },
    // Generations.
    { what: 'an older generation, Ready=True', obj: userGroup({ observed: 2 }), status: 'Progressing', message: 'Waiting for the controller to observe generation 3 (status describes 2)' },
    { what: 'an older generation, Ready=False', obj: userGroup({ observed: 2, conditions: [ready('False', 'Rejected')] }), status: 'Progressing' },
    {
      what: 'no observedGeneration anywhere',
      obj: { metadata: { generation: 3 }, status: { conditions: [{ type: 'Ready', status: 'True', reason: 'Synced' }] } },
      status: 'Progressing',
      message: 'Waiting for the controller to observe generation 3 (status describes no generation)',
    },
    {
      what: 'status.observedGeneration missing, the condition\'s current',
      obj: { metadata: { generation: 3 }, status: { conditions: [ready('True', 'Synced', 'ok')] } },
      status: 'Healthy',
    },
    { what: 'no metadata.generation: Ready alone decides', obj: { status: { conditions: [ready('True', 'Synced', 'ok')] } }, status: 'Healthy' },
    {
      what: 'generations as strings (a json.Number reaches Lua as a string)',
      obj: { metadata: { generation: '3' }, status: { observedGeneration: '2', conditions: [ready('True', 'Synced')] } },
      status: 'Progressing',
    },
    { what: 'a newer observedGeneration (never older)', obj: userGroup({ observed: 4 }), status: 'Healthy' },
    // Verdicts.
    { what: 'Ready=True Synced', obj: userGroup(), status: 'Healthy', message: 'Synced: user group synced; token in Secret acme' },
    { what: 'Ready=True without reason or message', obj: userGroup({ conditions: [{ type: 'Ready', status: 'True' }] }), status: 'Healthy', message: '' },
    { what: 'Ready=False without a reason', obj: userGroup({ conditions: [{ type: 'Ready', status: 'False', message: 'broken' }] }), status: 'Degraded', message: 'broken' },
    { what: 'Ready=False with a reason unknown to the script', obj: userGroup({ conditions: [ready('False', 'SomethingNew', 'new')] }), status: 'Degraded', message: 'SomethingNew: new' },
    { what: 'Ready=Unknown', obj: userGroup({ conditions: [ready('Unknown', 'Reconciling', 'working')] }), status: 'Progressing', message: 'Reconciling: working' },
    // Suspension.
    { what: 'suspended and observed', obj: userGroup({ suspend: true, conditions: [ready('False', 'Suspended', 'no calls')] }), status: 'Suspended', message: 'Suspended: no calls' },
    { what: 'suspend requested, not yet observed', obj: userGroup({ suspend: true, observed: 2 }), status: 'Progressing' },
    {
      what: 'suspend requested, status of this generation says otherwise',
      obj: userGroup({ suspend: true }),
      status: 'Progressing',
      message: 'Waiting for the controller to suspend: Synced: user group synced; token in Secret acme',
    },
    { what: 'resumed, status still Suspended', obj: userGroup({ conditions: [ready('False', 'Suspended', 'no calls')] }), status: 'Progressing', message: /^Waiting for the controller to resume/ },
    // Rotation.
    {
      what: 'a rotation requested, never rotated before',
      obj: userGroup({ annotations: { [ROTATE]: '2' } }),
      status: 'Progressing',
      message: `Waiting for the controller to rotate the token (${ROTATE} = 2, last handled: none)`,
    },
    { what: 'a rotation requested, another one handled', obj: userGroup({ annotations: { [ROTATE]: '2' }, rotation: { lastHandledRequest: '1' } }), status: 'Progressing', message: /last handled: 1\)$/ },
    { what: 'the requested rotation handled', obj: userGroup({ annotations: { [ROTATE]: '2' }, rotation: { lastHandledRequest: '2' } }), status: 'Healthy' },
    { what: 'an empty request value counts as a request', obj: userGroup({ annotations: { [ROTATE]: '' } }), status: 'Progressing' },
    { what: 'other annotations only', obj: userGroup({ annotations: { 'example.com/x': 'y' } }), status: 'Healthy' },
    { what: 'rotation pending while failing: the failure shows', obj: userGroup({ annotations: { [ROTATE]: '2' }, conditions: [ready('False', 'Unauthorized')] }), status: 'Degraded' },
    {
      what: 'rotation pending while suspended: Suspended',
      obj: userGroup({ suspend: true, annotations: { [ROTATE]: '2' }, conditions: [ready('False', 'Suspended')] }),
      status: 'Suspended',
    },
  ];

  it.each(cases)('$what → $status', ({ obj, status, message }) => {
    const hs = health(obj);
    expect(hs.status).toBe(status);
    if (typeof message === 'string') expect(hs.message).toBe(message);
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
  };

  it.each(Object.values(Reason))('Ready reason %s', (reason) => {
    const { ready: readyStatus, status } = byReason[reason];
    const obj = userGroup({ suspend: reason === 'Suspended', conditions: [ready(readyStatus, reason, `the ${reason} message`)] });
    expect(health(obj)).toEqual({ status, message: `${reason}: the ${reason} message` });
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
  };

  it('has exactly the expected fixtures', () => {
    const files = fs.readdirSync(FIXTURES).filter((f) => f.endsWith('.json')).map((f) => f.replace(/\.json$/, ''));
    expect(files.sort()).toEqual(Object.keys(expected).sort());
  });

  it.each(Object.entries(expected))('%s → %s', (name, status) => {
    const obj = JSON.parse(fs.readFileSync(path.join(FIXTURES, `${name}.json`), 'utf8')) as unknown;
    expect(health(obj).status).toBe(status);
  });
});

describe('actions/discovery.lua', () => {
  it('offers rotate, enabled', () => {
    expect(discover(userGroup())).toEqual({ rotate: { disabled: false, displayName: 'Rotate token', iconClass: 'fa fa-fw fa-key' } });
  });

  it('disables rotate while spec.suspend is true', () => {
    expect(discover(userGroup({ suspend: true }))).toMatchObject({ rotate: { disabled: true } });
  });

  it('copes with a missing or odd spec', () => {
    expect(discover({ metadata: { name: 'a' } })).toMatchObject({ rotate: { disabled: false } });
    expect(discover({ spec: 'x' })).toMatchObject({ rotate: { disabled: false } });
    expect(discover({ spec: { suspend: 'true' } })).toMatchObject({ rotate: { disabled: false } });
  });
});

describe('actions/rotate/action.lua', () => {
  const annotationsOf = (obj: Obj): Obj => (obj['metadata'] as { annotations: Obj }).annotations;

  it('adds the annotation when the object has no annotations; Argo CD then patches only that', () => {
    const live = { ...userGroup(), spec: { userGroupId: 'acme', name: 'Acme', tokenSecret: { labels: {}, annotations: {} } } };
    const result = act(live, CLOCK);
    expect(annotationsOf(result)).toEqual({ [ROTATE]: STAMP });
    expect(argoCdActionPatch(live, result)).toEqual({ metadata: { annotations: { [ROTATE]: STAMP } } });
  });

  it('keeps the other annotations', () => {
    const live = userGroup({ annotations: { 'example.com/a': '1', [ROTATE]: 'old' }, rotation: { lastHandledRequest: 'old' } });
    const result = act(live, CLOCK);
    expect(annotationsOf(result)).toEqual({ 'example.com/a': '1', [ROTATE]: STAMP });
    expect(argoCdActionPatch(live, result)).toEqual({ metadata: { annotations: { [ROTATE]: STAMP } } });
  });

  it('creates metadata when there is none', () => {
    expect(act({}, CLOCK)).toEqual({ metadata: { annotations: { [ROTATE]: STAMP } } });
  });

  it('uses the current UTC time', () => {
    const before = Math.floor(Date.now() / 1000);
    const value = annotationsOf(act(userGroup()))[ROTATE] as string;
    const after = Math.floor(Date.now() / 1000);
    expect(value).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const at = Date.parse(value) / 1000;
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(after);
  });

  it('gives a new value to every request within one second (os.date has second resolution)', () => {
    let obj: Obj = userGroup();
    const values: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      obj = act(obj, CLOCK);
      values.push(annotationsOf(obj)[ROTATE]);
    }
    expect(values).toEqual([STAMP, `${STAMP}-1`, `${STAMP}-2`, `${STAMP}-3`]);
  });

  it('never repeats the last handled value, even when the annotation was removed', () => {
    expect(annotationsOf(act(userGroup({ rotation: { lastHandledRequest: STAMP } }), CLOCK))[ROTATE]).toBe(`${STAMP}-1`);
    const both = userGroup({ annotations: { [ROTATE]: `${STAMP}-1` }, rotation: { lastHandledRequest: STAMP } });
    expect(annotationsOf(act(both, CLOCK))[ROTATE]).toBe(`${STAMP}-2`);
  });

  it('a request in a later second is the plain timestamp again', () => {
    const obj = userGroup({ annotations: { [ROTATE]: `${STAMP}-1` }, rotation: { lastHandledRequest: `${STAMP}-1` } });
    expect(annotationsOf(act(obj, CLOCK + 1))[ROTATE]).toBe('2025-01-02T03:04:06Z');
  });

  it('makes the health check Progressing until the controller records the value', () => {
    const requested = act(userGroup(), CLOCK);
    expect(health(requested).status).toBe('Progressing');
    const handled = { ...requested, status: { ...(requested['status'] as Obj), rotation: { lastHandledRequest: STAMP } } };
    expect(health(handled).status).toBe('Healthy');
  });
});

describe('argocd-cm.yaml', () => {
  const cm = parseYaml(read('argocd-cm.yaml')) as { kind: string; metadata: { name: string; namespace: string }; data: Record<string, string> };

  it('is a patch for the argocd-cm ConfigMap', () => {
    expect(cm.kind).toBe('ConfigMap');
    expect(cm.metadata).toMatchObject({ name: 'argocd-cm', namespace: 'argocd' });
    expect(Object.keys(cm.data).sort()).toEqual([
      'resource.customizations.actions.usergroup.dev_UserGroup',
      'resource.customizations.health.usergroup.dev_UserGroup',
    ]);
  });

  it('embeds exactly the .lua files', () => {
    expect(cm.data['resource.customizations.health.usergroup.dev_UserGroup']).toBe(HEALTH);
    const actions = parseYaml(cm.data['resource.customizations.actions.usergroup.dev_UserGroup'] ?? '') as {
      'discovery.lua': string;
      definitions: { name: string; 'action.lua': string }[];
    };
    expect(actions['discovery.lua']).toBe(DISCOVERY);
    expect(actions.definitions).toEqual([{ name: 'rotate', 'action.lua': ACTION }]);
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
  const docs = read('application.yaml').split(/^---$/m).map((d) => parseYaml(d) as {
    kind: string;
    metadata: { name: string; annotations?: Record<string, string> };
    spec: { source: { path: string; helm?: unknown }; syncPolicy: { syncOptions: string[] } };
  }).filter((d) => d !== null);

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

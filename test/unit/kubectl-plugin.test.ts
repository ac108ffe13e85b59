import { describe, expect, it } from 'vitest';
import { parseUserGroup, type UserGroup } from '../../src/api/usergroup.js';
import { DEFAULT_TIMEOUT_MS, parsePluginArgs, type PluginCommand } from '../../src/cli/kubectl/args.js';
import { formatGoDuration, parseGoDuration } from '../../src/platform/go-duration.js';
import { humanDuration } from '../../src/cli/kubectl/duration.js';
import { checkRotatable, judgeRotation, newRequestValue } from '../../src/cli/kubectl/rotation-outcome.js';
import { checkSyncable, judgeSync, newSyncValue } from '../../src/cli/kubectl/sync-outcome.js';
import { renderStatusTable, statusCells } from '../../src/cli/kubectl/status-table.js';
import { formatTable } from '../../src/cli/kubectl/table.js';
import { runPlugin } from '../../src/cli/kubectl/plugin.js';

const ROTATE = 'usergroup.dev/rotate-requested-at';
const NOW = Date.parse('2025-06-01T12:00:00Z');
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function command(argv: string[]): PluginCommand {
  const parsed = parsePluginArgs(argv);
  if (!parsed.ok) throw new Error(`expected ${JSON.stringify(argv)} to parse: ${parsed.error}`);
  return parsed.command;
}

function usageError(argv: string[]): { error: string; showUsage: boolean } {
  const parsed = parsePluginArgs(argv);
  if (parsed.ok) throw new Error(`expected ${JSON.stringify(argv)} to be refused, got ${JSON.stringify(parsed.command)}`);
  return { error: parsed.error, showUsage: parsed.showUsage };
}

describe('kubectl usergroup: arguments', () => {
  it('rotate: a name, the namespace in every kubectl spelling, defaults for the rest', () => {
    for (const argv of [
      ['rotate', 'acme', '-n', 'team-a'],
      ['rotate', 'acme', '--namespace', 'team-a'],
      ['rotate', 'acme', '--namespace=team-a'],
      ['rotate', 'acme', '-n=team-a'],
      ['rotate', 'acme', '-nteam-a'],
      ['-n', 'team-a', 'rotate', 'acme'],
      ['rotate', '-n', 'team-a', 'acme'],
    ]) {
      expect(command(argv), argv.join(' ')).toEqual({
        kind: 'rotate',
        name: 'acme',
        cluster: { kubeconfig: undefined, context: undefined, namespace: 'team-a' },
        timeoutMs: DEFAULT_TIMEOUT_MS,
        wait: true,
      });
    }
  });

  it('rotate: --kubeconfig, --context, --timeout as a Go duration, --no-wait', () => {
    expect(command(['rotate', 'acme', '--kubeconfig', '/tmp/kc', '--context=dev', '--timeout', '1m30s', '--no-wait'])).toEqual({
      kind: 'rotate',
      name: 'acme',
      cluster: { kubeconfig: '/tmp/kc', context: 'dev', namespace: undefined },
      timeoutMs: 90_000,
      wait: false,
    });
    expect(command(['rotate', 'acme', '--timeout=500ms'])).toMatchObject({ timeoutMs: 500 });
  });

  it('rotate: refuses a missing or second name, a bad timeout, and status-only flags', () => {
    expect(usageError(['rotate']).error).toBe('rotate needs the name of a UserGroup');
    expect(usageError(['rotate', 'a', 'b']).error).toContain('rotate takes one name');
    expect(usageError(['rotate', 'a', '--timeout', '60']).error).toContain('invalid --timeout "60"');
    expect(usageError(['rotate', 'a', '--timeout', '0s']).error).toContain('invalid --timeout');
    expect(usageError(['rotate', 'a', '--timeout']).error).toBe('flag needs an argument: --timeout');
    expect(usageError(['rotate', 'a', '-A']).error).toBe('rotate does not take --all-namespaces');
    expect(usageError(['rotate', 'a', '-o', 'wide']).error).toBe('rotate does not take --output');
    expect(usageError(['rotate', 'a', '-n', '']).error).toBe('--namespace must not be empty');
  });

  it('sync: the same arguments as rotate (a name, the namespace, --timeout, --no-wait), nothing else', () => {
    expect(command(['sync', 'acme', '-n', 'team-a'])).toEqual({
      kind: 'sync',
      name: 'acme',
      cluster: { kubeconfig: undefined, context: undefined, namespace: 'team-a' },
      timeoutMs: DEFAULT_TIMEOUT_MS,
      wait: true,
    });
    expect(command(['-n', 'team-a', 'sync', 'acme', '--timeout=2m', '--no-wait'])).toMatchObject({ kind: 'sync', timeoutMs: 120_000, wait: false });
    expect(usageError(['sync']).error).toBe('sync needs the name of a UserGroup');
    expect(usageError(['sync', 'a', 'b']).error).toContain('sync takes one name');
    expect(usageError(['sync', 'a', '--timeout', '0s']).error).toContain('invalid --timeout');
    expect(usageError(['sync', 'a', '-A']).error).toBe('sync does not take --all-namespaces');
    expect(usageError(['sync', 'a', '-o', 'wide']).error).toBe('sync does not take --output');
  });

  it('status: with and without a name, -A, -o wide', () => {
    expect(command(['status'])).toEqual({
      kind: 'status',
      name: undefined,
      cluster: { kubeconfig: undefined, context: undefined, namespace: undefined },
      allNamespaces: false,
      wide: false,
    });
    expect(command(['status', 'acme', '-n', 'x', '-o', 'wide'])).toMatchObject({ name: 'acme', wide: true, cluster: { namespace: 'x' } });
    expect(command(['status', '-A'])).toMatchObject({ name: undefined, allNamespaces: true });
    expect(command(['status', '--all-namespaces=true', '-owide'])).toMatchObject({ allNamespaces: true, wide: true });
    expect(command(['status', '--all-namespaces=false'])).toMatchObject({ allNamespaces: false });
  });

  it('status: refuses a name with -A (as kubectl does), other output formats and rotate-only flags', () => {
    expect(usageError(['status', 'acme', '-A']).error).toBe('a resource cannot be retrieved by name across all namespaces');
    expect(usageError(['status', '-o', 'yaml']).error).toContain('only -o wide');
    expect(usageError(['status', '--timeout', '5s']).error).toBe('status does not take --timeout');
    expect(usageError(['status', 'a', 'b']).error).toContain('at most one name');
  });

  it('help in any position; unknown commands and missing commands ask for the usage; unknown flags do not', () => {
    expect(command(['--help'])).toEqual({ kind: 'help' });
    expect(command(['-h'])).toEqual({ kind: 'help' });
    expect(command(['help'])).toEqual({ kind: 'help' });
    expect(command(['rotate', '--help'])).toEqual({ kind: 'help' });
    expect(usageError(['frobnicate'])).toEqual({ error: 'unknown command "frobnicate"', showUsage: true });
    expect(usageError([])).toEqual({ error: 'no command given', showUsage: true });
    expect(usageError(['status', '--bogus'])).toEqual({ error: 'unknown flag: --bogus', showUsage: false });
    expect(usageError(['status', '-x'])).toEqual({ error: 'unknown flag: -x', showUsage: false });
  });

  it('"--" ends the flags: a name that looks like a flag is still a name', () => {
    expect(command(['rotate', '--', '-odd'])).toMatchObject({ name: '-odd' });
  });
});

describe('kubectl usergroup: exit codes without a cluster', () => {
  async function capture(argv: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await runPlugin(argv, {
      out: (t) => {
        out += t;
      },
      err: (t) => {
        err += t;
      },
    });
    return { code, out, err };
  }

  it('--help: usage on stdout, exit 0', async () => {
    const r = await capture(['--help']);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toContain('kubectl usergroup rotate <name>');
    expect(r.out).toContain('kubectl usergroup sync <name>');
    expect(r.out).toContain('usergroup.dev/sync-requested-at');
  });

  it('unknown command: the usage on stderr, exit 2', async () => {
    const r = await capture(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/^error: unknown command "frobnicate"\n\n/);
    expect(r.err).toContain('kubectl usergroup status [<name>]');
  });

  it('bad flag: a hint, exit 2; an unreadable kubeconfig: exit 1', async () => {
    const bad = await capture(['status', '--nope']);
    expect(bad).toEqual({ code: 2, out: '', err: "error: unknown flag: --nope\nSee 'kubectl usergroup --help' for usage.\n" });
    const missing = await capture(['status', '--kubeconfig', '/nonexistent/kubeconfig']);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/^error: cannot load kubeconfig \/nonexistent\/kubeconfig: .*ENOENT/);
  });
});

describe('durations', () => {
  it.each<[string, number | undefined]>([
    ['60s', 60_000],
    ['1m30s', 90_000],
    ['1.5h', 5_400_000],
    ['500ms', 500],
    ['2m', 120_000],
    ['0', 0],
    ['60', undefined],
    ['', undefined],
    ['1x', undefined],
    ['s', undefined],
    ['1m 30s', undefined],
    ['-5s', undefined],
  ])('parseGoDuration(%j) = %s', (text, ms) => {
    expect(parseGoDuration(text)).toBe(ms);
  });

  it.each<[number, string]>([
    [60_000, '1m0s'],
    [90_000, '1m30s'],
    [5_000, '5s'],
    [3_600_000, '1h0m0s'],
    [250, '250ms'],
  ])('formatGoDuration(%d) = %s', (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
  });

  // kubectl's AGE column (apimachinery duration.HumanDuration), boundary by boundary.
  it.each<[number, string]>([
    [-3 * SECOND, '<invalid>'],
    [-1 * SECOND, '0s'],
    [0, '0s'],
    [59 * SECOND, '59s'],
    [119 * SECOND, '119s'],
    [2 * MINUTE, '2m'],
    [2 * MINUTE + 5 * SECOND, '2m5s'],
    [9 * MINUTE + 59 * SECOND, '9m59s'],
    [10 * MINUTE + 30 * SECOND, '10m'],
    [179 * MINUTE, '179m'],
    [3 * HOUR, '3h'],
    [3 * HOUR + 25 * MINUTE, '3h25m'],
    [8 * HOUR + 25 * MINUTE, '8h'],
    [47 * HOUR, '47h'],
    [2 * DAY, '2d'],
    [2 * DAY + 5 * HOUR, '2d5h'],
    [8 * DAY + 5 * HOUR, '8d'],
    [729 * DAY, '729d'],
    [730 * DAY, '2y'],
    [800 * DAY, '2y70d'],
    [3000 * DAY, '8y'],
  ])('humanDuration(%d) = %s', (ms, text) => {
    expect(humanDuration(ms)).toBe(text);
  });
});

// ---- UserGroups as the apiserver sends them, parsed the way the plugin parses them ----

interface GroupOptions {
  namespace?: string;
  generation?: number;
  created?: string;
  annotations?: Record<string, string>;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  resourceVersion?: string;
}

function group(name: string, options: GroupOptions = {}): UserGroup {
  const parsed = parseUserGroup({
    metadata: {
      name,
      namespace: options.namespace ?? 'team-a',
      uid: `uid-${name}`,
      resourceVersion: options.resourceVersion ?? '100',
      generation: options.generation ?? 1,
      creationTimestamp: options.created ?? '2025-06-01T11:00:00Z',
      annotations: options.annotations ?? {},
    },
    spec: options.spec ?? { userGroupId: `${name}-id`, name: `${name} Inc` },
    status: options.status,
  });
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.value;
}

function readyStatus(status: 'True' | 'False', reason: string, message = '', generation = 1, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    observedGeneration: generation,
    conditions: [{ type: 'Ready', status, reason, message, lastTransitionTime: '2025-06-01T11:00:05Z', observedGeneration: generation }],
    ...extra,
  };
}

describe('status table', () => {
  const synced = group('acme', {
    status: readyStatus('True', 'Synced', 'user group synced; token in Secret acme', 1, {
      tokenSecretName: 'acme',
      rotation: { lastHandledRequest: 'r1', lastRotationTime: '2025-06-01T11:57:30Z' },
    }),
    annotations: { [ROTATE]: 'r1' },
  });
  const broken = group('broken', {
    created: '2025-05-30T12:00:00Z',
    status: readyStatus('False', 'ConnectionNotFound', 'UserGroupService "nope" not found\nin namespace team-a'),
  });
  const fresh = group('fresh', { created: '2025-06-01T11:59:55Z' });

  it('renders the columns with kubectl ages and alignment', () => {
    expect(renderStatusTable([synced, broken, fresh], { allNamespaces: false, wide: false, now: NOW })).toBe(
      [
        'NAME     USERGROUPID   READY     REASON               SECRET   LAST ROTATION   TOKEN AGE   NEXT ROTATION   AGE',
        'acme     acme-id       True      Synced               acme     2m30s           -           -               60m',
        'broken   broken-id     False     ConnectionNotFound   -        never           -           -               2d',
        'fresh    fresh-id      Unknown   -                    -        never           -           -               5s',
        '',
      ].join('\n'),
    );
  });

  it('marks a requested rotation the operator has not handled yet', () => {
    const pending = group('acme', {
      annotations: { [ROTATE]: 'r2' },
      status: readyStatus('True', 'Synced', '', 1, {
        tokenSecretName: 'acme',
        rotation: { lastHandledRequest: 'r1', lastRotationTime: '2025-06-01T09:00:00Z' },
      }),
    });
    expect(statusCells(pending, NOW).lastRotation).toBe('3h (pending)');
    const neverRotated = group('new', { annotations: { [ROTATE]: 'first' } });
    expect(statusCells(neverRotated, NOW).lastRotation).toBe('never (pending)');
    // Handled: no mark.
    expect(statusCells(synced, NOW).lastRotation).toBe('2m30s');
  });

  it("shows the token's age and when its scheduled rotation falls due (or how overdue it is)", () => {
    const rotation = (next: string): Record<string, unknown> => ({ tokenIssuedTime: '2025-05-30T12:00:00Z', nextRotationTime: next });
    const spec = { userGroupId: 'acme-id', name: 'Acme', rotation: { maxTokenAge: '72h' } };
    const scheduled = group('acme', { spec, status: readyStatus('True', 'Synced', '', 1, { rotation: rotation('2025-06-02T09:00:00Z') }) });
    expect(statusCells(scheduled, NOW)).toMatchObject({ tokenAge: '2d', nextRotation: 'in 21h' });
    const overdue = group('acme', { spec, status: readyStatus('True', 'Synced', '', 1, { rotation: rotation('2025-06-01T11:57:00Z') }) });
    expect(statusCells(overdue, NOW).nextRotation).toBe('overdue 3m');
    // Suspended, or no schedule (any more): no next rotation, whatever the status still says.
    const suspended = group('acme', {
      spec: { ...spec, suspend: true },
      status: readyStatus('True', 'Synced', '', 1, { rotation: rotation('2025-06-02T09:00:00Z') }),
    });
    expect(statusCells(suspended, NOW).nextRotation).toBe('-');
    const unscheduled = group('acme', { status: readyStatus('True', 'Synced', '', 1, { rotation: rotation('2025-06-02T09:00:00Z') }) });
    expect(statusCells(unscheduled, NOW)).toMatchObject({ tokenAge: '2d', nextRotation: '-' });
  });

  it('marks a status that describes an older spec as stale', () => {
    const stale = group('acme', { generation: 3, status: readyStatus('True', 'Synced', '', 2) });
    expect(statusCells(stale, NOW)).toMatchObject({ ready: 'True', reason: 'Synced (stale)' });
    const current = group('acme', { generation: 3, status: readyStatus('True', 'Synced', '', 3) });
    expect(statusCells(current, NOW).reason).toBe('Synced');
  });

  it('marks a sync request not handled yet as "(sync pending)"; a handled one shows nothing', () => {
    const SYNC = 'usergroup.dev/sync-requested-at';
    const pending = group('acme', { annotations: { [SYNC]: 's2' }, status: readyStatus('True', 'Synced', '', 1, { lastHandledSyncRequest: 's1' }) });
    expect(statusCells(pending, NOW).reason).toBe('Synced (sync pending)');
    const handled = group('acme', { annotations: { [SYNC]: 's1' }, status: readyStatus('True', 'Synced', '', 1, { lastHandledSyncRequest: 's1' }) });
    expect(statusCells(handled, NOW).reason).toBe('Synced');
    expect(statusCells(group('acme', { annotations: { [SYNC]: 's1' } }), NOW).reason).toBe('- (sync pending)');
  });

  it('copes with a missing status and an unusable spec', () => {
    expect(statusCells(fresh, NOW)).toEqual({
      namespace: 'team-a',
      name: 'fresh',
      userGroupId: 'fresh-id',
      ready: 'Unknown',
      reason: '-',
      secret: '-',
      lastRotation: 'never',
      tokenAge: '-',
      nextRotation: '-',
      age: '5s',
      message: '-',
    });
    const invalid = group('odd', { spec: { name: 'no id' }, status: readyStatus('False', 'InvalidSpec', 'spec.userGroupId must be a string') });
    expect(statusCells(invalid, NOW)).toMatchObject({ userGroupId: '-', ready: 'False', reason: 'InvalidSpec' });
  });

  it('-A adds NAMESPACE first and sorts by namespace, then name; -o wide adds the message on one line', () => {
    const other = group('zeta', { namespace: 'alpha', status: readyStatus('True', 'Synced', 'ok', 1, { tokenSecretName: 'zeta-token' }) });
    const text = renderStatusTable([broken, other], { allNamespaces: true, wide: true, now: NOW });
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAMESPACE\s+NAME\s+USERGROUPID\s+READY\s+REASON\s+SECRET\s+LAST ROTATION\s+TOKEN AGE\s+NEXT ROTATION\s+AGE\s+MESSAGE$/);
    expect(lines[1]).toMatch(/^alpha\s+zeta\s+zeta-id\s+True\s+Synced\s+zeta-token\s+never\s+-\s+-\s+60m\s+ok$/);
    expect(lines[2]).toMatch(
      /^team-a\s+broken\s+broken-id\s+False\s+ConnectionNotFound\s+-\s+never\s+-\s+-\s+2d\s+UserGroupService "nope" not found in namespace team-a$/,
    );
    expect(lines).toHaveLength(3);
  });

  it('formatTable pads like kubectl: 3 spaces, at least 6 wide, the last column unpadded', () => {
    expect(formatTable(['A', 'BB', 'C'], [['x', 'yyyyyyy', 'z']])).toBe('A     BB        C\nx     yyyyyyy   z\n');
  });
});

describe('rotation: before the request', () => {
  it('refuses a suspended group, an unusable spec and a group being deleted', () => {
    expect(checkRotatable(group('acme'))).toEqual({ ok: true });
    const suspended = checkRotatable(group('acme', { spec: { userGroupId: 'a', name: 'A', suspend: true } }));
    expect(suspended.ok).toBe(false);
    expect(!suspended.ok && suspended.message).toContain('usergroup/acme is suspended (spec.suspend: true)');
    const invalid = checkRotatable(group('acme', { spec: { name: 'A' } }));
    expect(!invalid.ok && invalid.message).toContain('spec.userGroupId');
    const deleting = parseUserGroup({
      metadata: { name: 'acme', namespace: 'x', uid: 'u', resourceVersion: '1', deletionTimestamp: '2025-06-01T11:00:00Z' },
      spec: { userGroupId: 'a', name: 'A' },
    });
    expect(deleting.ok && checkRotatable(deleting.value)).toEqual({ ok: false, message: 'usergroup/acme is being deleted' });
  });

  it.each(['NamespaceNotAllowed', 'UserGroupIdNotAllowed', 'UserGroupIdClaimed', 'AdoptionRefused', 'DuplicateUserGroupId'])(
    'refuses a group the operator makes no call for (%s), but not when that status describes an older spec',
    (reason) => {
      const refused = checkRotatable(group('acme', { status: readyStatus('False', reason, 'the rules say no') }));
      expect(refused).toEqual({ ok: false, message: `usergroup/acme gets no service call: ${reason}: the rules say no` });
      expect(checkRotatable(group('acme', { generation: 2, status: readyStatus('False', reason, 'the rules say no') })).ok).toBe(true);
    },
  );

  it('the request value is the request time, never one the object already has', () => {
    expect(newRequestValue(NOW, group('acme'))).toBe('2025-06-01T12:00:00.000Z');
    const taken = group('acme', {
      annotations: { [ROTATE]: '2025-06-01T12:00:00.000Z' },
      status: { rotation: { lastHandledRequest: '2025-06-01T12:00:00.001Z' } },
    });
    expect(newRequestValue(NOW, taken)).toBe('2025-06-01T12:00:00.002Z');
  });
});

describe('rotation: judging what the controller did', () => {
  const REQUEST = '2025-06-01T12:00:00.000Z';
  const requestedAt = Date.parse(REQUEST);
  const later = requestedAt + 3 * SECOND;
  const annotated = { [ROTATE]: REQUEST };
  const judge = (ug: UserGroup | undefined, fresh = true) => judgeRotation(REQUEST, requestedAt, later, { ug, fresh });

  it('rotated once status records the request as handled, at lastRotationTime', () => {
    const done = group('acme', {
      annotations: annotated,
      status: readyStatus('True', 'Synced', '', 1, { rotation: { lastHandledRequest: REQUEST, lastRotationTime: '2025-06-01T12:00:01Z' } }),
    });
    expect(judge(done)).toEqual({ kind: 'rotated', at: '2025-06-01T12:00:01Z' });
  });

  it('handled without a new lastRotationTime (token recovered after it was rotated elsewhere): the time it was seen handled', () => {
    const recovered = group('acme', {
      annotations: annotated,
      status: readyStatus('True', 'Synced', '', 1, { rotation: { lastHandledRequest: REQUEST, lastRotationTime: '2025-05-01T00:00:00Z' } }),
    });
    expect(judge(recovered)).toEqual({ kind: 'rotated', at: '2025-06-01T12:00:03Z' });
    // lastRotationTime has whole seconds: the request's own second counts as "after the request".
    const sameSecond = group('acme', {
      annotations: { [ROTATE]: '2025-06-01T12:00:00.900Z' },
      status: { rotation: { lastHandledRequest: '2025-06-01T12:00:00.900Z', lastRotationTime: '2025-06-01T12:00:00Z' } },
    });
    expect(judgeRotation('2025-06-01T12:00:00.900Z', requestedAt + 900, later, { ug: sameSecond, fresh: true })).toEqual({
      kind: 'rotated',
      at: '2025-06-01T12:00:00Z',
    });
  });

  it('keeps waiting while Ready=True (the controller has not got to it) or the status is about an older spec', () => {
    const synced = group('acme', { annotations: annotated, status: readyStatus('True', 'Synced', '', 1, { rotation: { lastHandledRequest: 'old' } }) });
    expect(judge(synced)).toEqual({ kind: 'waiting', blocker: undefined, because: 'in-progress' });
    const staleFailure = group('acme', { generation: 2, annotations: annotated, status: readyStatus('False', 'Rejected', 'too large', 1) });
    expect(judge(staleFailure)).toEqual({ kind: 'waiting', blocker: undefined, because: 'in-progress' });
    expect(judge(group('acme', { annotations: annotated }))).toEqual({ kind: 'waiting', blocker: undefined, because: 'in-progress' });
  });

  it('keeps waiting through failures the controller retries by itself', () => {
    for (const reason of ['ServiceUnavailable', 'RateLimited']) {
      const retrying = group('acme', { annotations: annotated, status: readyStatus('False', reason, 'POST /api/user (rotate) failed: 503') });
      expect(judge(retrying, true)).toEqual({ kind: 'waiting', blocker: { reason, message: 'POST /api/user (rotate) failed: 503' }, because: 'retrying' });
    }
  });

  it('fails on a failure written after the request, but not on one that predates it (it may be fixed already)', () => {
    const rejected = group('acme', { annotations: annotated, status: readyStatus('False', 'Rejected', 'the service refused') });
    expect(judge(rejected, true)).toEqual({ kind: 'failed', reason: 'Rejected', message: 'the service refused' });
    expect(judge(rejected, false)).toEqual({ kind: 'waiting', blocker: { reason: 'Rejected', message: 'the service refused' }, because: 'predates-request' });
  });

  it('fails at once on a refusal by the tenant rules or a claim, however old: the controller will not repeat it', () => {
    const claimed = group('acme', { annotations: annotated, status: readyStatus('False', 'UserGroupIdClaimed', 'held by another namespace') });
    expect(judge(claimed, false)).toEqual({ kind: 'failed', reason: 'UserGroupIdClaimed', message: 'held by another namespace' });
  });

  it('fails when the group is deleted, suspended, or the request is replaced or removed', () => {
    expect(judge(undefined)).toMatchObject({ kind: 'failed', reason: 'Deleted' });
    const suspended = group('acme', { annotations: annotated, spec: { userGroupId: 'a', name: 'A', suspend: true }, status: readyStatus('True', 'Synced') });
    // Even in a version older than any status write: the spec alone says the controller will not rotate.
    expect(judge(suspended, false)).toMatchObject({ kind: 'failed', reason: 'Suspended' });
    const replaced = group('acme', { annotations: { [ROTATE]: 'someone-else' } });
    expect(judge(replaced)).toMatchObject({ kind: 'failed', reason: 'Superseded' });
    expect(judge(replaced)).toHaveProperty('message', expect.stringContaining('changed to "someone-else"'));
    expect(judge(group('acme'))).toHaveProperty('message', expect.stringContaining('was removed'));
  });

  it('a handled request wins over everything else in the same observation', () => {
    // E.g. the operator rotated, then someone suspended the group: the rotation still happened.
    const both = group('acme', {
      annotations: annotated,
      spec: { userGroupId: 'a', name: 'A', suspend: true },
      status: readyStatus('False', 'Suspended', '', 1, { rotation: { lastHandledRequest: REQUEST, lastRotationTime: '2025-06-01T12:00:02Z' } }),
    });
    expect(judge(both)).toEqual({ kind: 'rotated', at: '2025-06-01T12:00:02Z' });
  });
});

describe('sync: before the request and judging what the controller did', () => {
  const SYNC = 'usergroup.dev/sync-requested-at';
  const REQUEST = '2025-06-01T12:00:00.000Z';
  const annotated = { [SYNC]: REQUEST };
  const judge = (ug: UserGroup | undefined, fresh = true) => judgeSync(REQUEST, { ug, fresh });

  it('refuses what rotate refuses: a suspended group, an unusable spec, a group the rules refuse', () => {
    expect(checkSyncable(group('acme'))).toEqual({ ok: true });
    const suspended = checkSyncable(group('acme', { spec: { userGroupId: 'a', name: 'A', suspend: true } }));
    expect(!suspended.ok && suspended.message).toContain(
      'is suspended (spec.suspend: true): the operator makes no call to the service for it and would not sync it',
    );
    expect(checkSyncable(group('acme', { status: readyStatus('False', 'UserGroupIdClaimed', 'held elsewhere') }))).toEqual({
      ok: false,
      message: 'usergroup/acme gets no service call: UserGroupIdClaimed: held elsewhere',
    });
  });

  it('the request value is the request time, never one the object already has (set or handled)', () => {
    expect(newSyncValue(NOW, group('acme'))).toBe(REQUEST);
    const taken = group('acme', { annotations: { [SYNC]: REQUEST }, status: { lastHandledSyncRequest: '2025-06-01T12:00:00.001Z' } });
    expect(newSyncValue(NOW, taken)).toBe('2025-06-01T12:00:00.002Z');
  });

  it('synced once status records the value, with the Ready condition written with it', () => {
    const done = group('acme', {
      annotations: annotated,
      status: readyStatus('True', 'Synced', '', 1, { lastHandledSyncRequest: REQUEST, lastSyncTime: '2025-06-01T12:00:01Z' }),
    });
    expect(judge(done)).toEqual({ kind: 'synced', ready: 'True', reason: 'Synced', lastSyncTime: '2025-06-01T12:00:01Z' });
  });

  it('waits while not handled or retrying; fails on a fresh failure, a refusal, suspension, a superseding value, deletion', () => {
    expect(judge(group('acme', { annotations: annotated, status: readyStatus('True', 'Synced') }))).toEqual({
      kind: 'waiting',
      blocker: undefined,
      because: 'in-progress',
    });
    const retrying = group('acme', { annotations: annotated, status: readyStatus('False', 'ServiceUnavailable', 'PUT /api/user failed: 503') });
    expect(judge(retrying)).toMatchObject({ kind: 'waiting', because: 'retrying' });
    const rejected = group('acme', { annotations: annotated, status: readyStatus('False', 'Rejected', 'the service refused') });
    expect(judge(rejected, true)).toEqual({ kind: 'failed', reason: 'Rejected', message: 'the service refused' });
    expect(judge(rejected, false)).toMatchObject({ kind: 'waiting', because: 'predates-request' });
    expect(judge(group('acme', { annotations: annotated, spec: { userGroupId: 'a', name: 'A', suspend: true } }))).toMatchObject({
      kind: 'failed',
      reason: 'Suspended',
    });
    expect(judge(group('acme', { annotations: { [SYNC]: 'someone-else' } }))).toMatchObject({ kind: 'failed', reason: 'Superseded' });
    expect(judge(undefined)).toEqual({ kind: 'failed', reason: 'Deleted', message: 'the UserGroup was deleted while waiting for the sync' });
  });
});

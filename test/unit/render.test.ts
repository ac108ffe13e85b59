import { describe, expect, it } from 'vitest';
import { parseUserGroup, type UserGroup } from '../../src/api/usergroup.js';
import { renderTable } from '../../src/cli/dev.js';
import { microTime } from '../../src/kube/events.js';

describe('microTime', () => {
  it.each<[number, string]>([
    [0, '1970-01-01T00:00:00.000000Z'],
    [1_700_000_000_123, '2023-11-14T22:13:20.123000Z'],
    [1_700_000_000_001, '2023-11-14T22:13:20.001000Z'],
    [1_700_000_000_000, '2023-11-14T22:13:20.000000Z'],
  ])('%d → %s', (ms, text) => {
    expect(microTime(ms)).toBe(text);
  });

  it('always has exactly six fractional digits and a Z', () => {
    for (const ms of [Date.now(), 1, 999, 86_399_999, 4_102_444_800_000]) {
      expect(microTime(ms)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      expect(Date.parse(microTime(ms))).toBe(ms);
    }
  });
});

function group(namespace: string, name: string, spec: unknown, status: unknown = undefined): UserGroup {
  const p = parseUserGroup({ metadata: { name, namespace, uid: `uid-${namespace}-${name}`, resourceVersion: '1' }, spec, status });
  if (!p.ok) throw new Error(p.error);
  return p.value;
}

const ready = (status: string, reason: string) => ({ type: 'Ready', status, reason, message: '', lastTransitionTime: '2025-01-01T00:00:00Z' });

/** Splits a rendered table into cells by the header's column offsets. */
function cells(table: string): Record<string, string>[] {
  const [header, ...rows] = table.split('\n');
  const names = header!.split(/\s{2,}/);
  let from = 0;
  const starts = names.map((n) => {
    const at = header!.indexOf(n, from);
    from = at + n.length;
    return at;
  });
  return rows.map((row) => Object.fromEntries(names.map((n, i) => [n, row.slice(starts[i], starts[i + 1]).trim()])));
}

describe('renderTable', () => {
  const groups = [
    group('team-b', 'zeta', { userGroupId: 'z-1', name: 'Z' }, { conditions: [ready('True', 'Synced')], tokenSecretName: 'zeta', lastSyncTime: '2025-01-02T00:00:00Z' }),
    group('team-a', 'beta', { userGroupId: 'b-1', name: 'B' }, {
      conditions: [{ type: 'Other', status: 'True', reason: 'Fine', message: '', lastTransitionTime: '' }, ready('False', 'SecretConflict')],
    }),
    group('team-a', 'alpha', { userGroupId: 'a-1', name: 'A' }, {
      conditions: [ready('True', 'Synced')],
      tokenSecretName: 'alpha-token',
      lastSyncTime: '2025-01-03T00:00:00Z',
      rotation: { lastHandledRequest: '1', lastRotationTime: '2025-01-04T00:00:00Z' },
    }),
    group('team-a', 'broken', { name: 'no id' }),
  ];

  it('renders the header and one row per group, sorted by namespace then name', () => {
    const table = renderTable(groups);
    const lines = table.split('\n');
    expect(lines[0]!.split(/\s+/)).toEqual(['NAMESPACE', 'NAME', 'USERGROUPID', 'READY', 'REASON', 'SECRET', 'LAST', 'SYNC', 'LAST', 'ROTATION']);
    expect(lines).toHaveLength(5);
    expect(cells(table).map((r) => `${r['NAMESPACE']}/${r['NAME']}`)).toEqual(['team-a/alpha', 'team-a/beta', 'team-a/broken', 'team-b/zeta']);
  });

  it('shows Ready and Reason from the Ready condition, and the other columns from status', () => {
    const rows = cells(renderTable(groups));
    expect(rows[0]).toEqual({
      NAMESPACE: 'team-a', NAME: 'alpha', USERGROUPID: 'a-1', READY: 'True', REASON: 'Synced', SECRET: 'alpha-token',
      'LAST SYNC': '2025-01-03T00:00:00Z', 'LAST ROTATION': '2025-01-04T00:00:00Z',
    });
    expect(rows[1]).toMatchObject({ NAME: 'beta', USERGROUPID: 'b-1', READY: 'False', REASON: 'SecretConflict', SECRET: '' });
    expect(rows[2]).toMatchObject({ NAME: 'broken', USERGROUPID: '?', READY: 'Unknown', REASON: '' });
    expect(rows[3]).toMatchObject({ NAMESPACE: 'team-b', NAME: 'zeta', READY: 'True', REASON: 'Synced', SECRET: 'zeta' });
  });

  it('aligns columns and trims trailing spaces', () => {
    const lines = renderTable(groups).split('\n');
    const col = lines[0]!.indexOf('READY');
    for (const line of lines.slice(1)) {
      expect(line).not.toMatch(/\s$/);
      expect(line.slice(col - 2, col)).toBe('  ');
    }
  });

  it('renders only the header for no groups', () => {
    expect(renderTable([])).toBe('NAMESPACE  NAME  USERGROUPID  READY  REASON  SECRET  LAST SYNC  LAST ROTATION');
  });

  it('sorts by namespace first even when one namespace name prefixes another', () => {
    // kubectl get -A orders by namespace, then name: "team" comes before "team-b".
    const table = renderTable([
      group('team-b', 'aaa', { userGroupId: '1', name: 'x' }),
      group('team', 'zzz', { userGroupId: '2', name: 'y' }),
    ]);
    expect(cells(table).map((r) => `${r['NAMESPACE']}/${r['NAME']}`)).toEqual(['team/zzz', 'team-b/aaa']);
  });
});

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { repoRoot } from '../support/repo-root.js';
import { eventually, kubectl, type CommandResult } from '../support/kube.js';
import { TestEnv, type OperatorHandle, type UserGroupObject } from '../support/operator.js';
import { DEFAULT_REQUEST_BUDGETS } from '../../src/controller/request-budget.js';
import { ifAssigned } from '../support/teardown.js';

/** `npm run build` output; npm test builds before it runs the tests. */
const PLUGIN = path.join(repoRoot, 'dist/cli/kubectl-usergroup.js');
const ROTATE = 'usergroup.dev/rotate-requested-at';
const SYNC = 'usergroup.dev/sync-requested-at';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const ready = (ug: UserGroupObject): { status: string; reason: string; message: string } | undefined => ug.status?.conditions?.find((c) => c.type === 'Ready');
const rotateCalls = (env: TestEnv): number => Object.values(env.calls().rotate).reduce((a, b) => a + b, 0);
const putCalls = (env: TestEnv): number => Object.values(env.calls().upsert).reduce((a, b) => a + b, 0);

/** The table's rows as whitespace-separated cells, header included (no cell here contains a space). */
function tableRows(stdout: string): string[][] {
  return stdout
    .trimEnd()
    .split('\n')
    .map((line) => line.trim().split(/\s+/));
}

/**
 * kubectl get's table as one record per row keyed by column name, cut at the header's
 * column offsets, so an empty cell (kubectl prints nothing for a missing value) stays
 * in its column.
 */
function kubectlTable(stdout: string): { header: string[]; rows: Record<string, string>[] } {
  const [head = '', ...lines] = stdout.trimEnd().split('\n');
  const starts = [...head.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
  const rows = lines.map((line) => Object.fromEntries(starts.map((col, i) => [col.name, line.slice(col.at, starts[i + 1]?.at ?? line.length).trim()])));
  return { header: starts.map((s) => s.name), rows };
}

/** A running command whose output can be read while it runs. */
interface Running {
  readonly stdout: () => string;
  readonly stderr: () => string;
  readonly done: Promise<CommandResult & { readonly ms: number }>;
  running(): boolean;
}

function start(bin: string, args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs = 120_000): Running {
  const began = Date.now();
  const child = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  let exited = false;
  const done = new Promise<CommandResult & { ms: number }>((resolve) => {
    child.once('close', (code, signal) => {
      exited = true;
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr, ms: Date.now() - began });
    });
  });
  return { stdout: () => stdout, stderr: () => stderr, done, running: () => !exited };
}

/**
 * kubectl with the plugin found on PATH, the way a user installs it: a directory holding
 * `kubectl-usergroup` (a symlink to the built file, as npm's bin linking makes) first on
 * PATH, then this test's Node, which the plugin's `#!/usr/bin/env node` picks.
 * KUBECONFIG points nowhere, so the plugin can only reach the cluster through --kubeconfig.
 */
let pluginDir = '';
function pluginEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PATH: [pluginDir, path.dirname(process.execPath), process.env['PATH'] ?? ''].join(path.delimiter),
    KUBECONFIG: path.join(pluginDir, 'no-such-kubeconfig'),
    ...extra,
  };
}
const kubectlBin = (): string => path.join(inject('binDir'), 'kubectl');
const withPlugin = (args: readonly string[], extra: NodeJS.ProcessEnv = {}): Running => start(kubectlBin(), args, pluginEnv(extra));

beforeAll(() => {
  if (!fs.existsSync(PLUGIN)) throw new Error(`${PLUGIN} is missing: run npm run build first (npm test does)`);
  // `npm run build` makes it executable (as npm's bin linking does on install): kubectl execs it directly.
  pluginDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ug-kubectl-plugin-'));
  fs.symlinkSync(PLUGIN, path.join(pluginDir, 'kubectl-usergroup'));
});

afterAll(() => {
  if (pluginDir) fs.rmSync(pluginDir, { recursive: true, force: true });
});

describe('kubectl wait on the Ready condition', () => {
  let env: TestEnv;
  let operatorStarted = false;
  const ensureOperator = async (): Promise<void> => {
    if (operatorStarted) return;
    operatorStarted = true;
    await env.startOperator();
  };

  beforeAll(async () => {
    // No controller yet: the first test starts it only once kubectl wait is really waiting.
    env = await TestEnv.create('kwait');
  });

  afterAll(async () => {
    await ifAssigned(env)?.close();
  });

  it('kubectl wait --for=condition=Ready returns once the controller syncs a new group', async () => {
    await env.createUserGroup('waited', { userGroupId: 'waited-1', name: 'Waited' });
    const wait = start(
      kubectlBin(),
      ['--kubeconfig', env.kubeconfigPath, 'wait', '--for=condition=Ready', 'usergroup/waited', '-n', env.namespace, '--timeout=60s'],
      process.env,
    );
    await sleep(2_000);
    // Still waiting: no controller has written any status.
    expect(wait.running(), `kubectl wait ended early: ${wait.stdout()} ${wait.stderr()}`).toBe(true);
    expect((await env.getUserGroup('waited')).status).toBeUndefined();

    await ensureOperator();
    const result = await wait.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('usergroup.usergroup.dev/waited condition met\n');
    expect(ready(await env.getUserGroup('waited'))).toMatchObject({ status: 'True', reason: 'Synced' });
  });

  it('kubectl wait fails within its timeout for a group that stays Ready=False', async () => {
    await ensureOperator();
    await env.createUserGroup('stuck', { userGroupId: 'stuck-1', name: 'Stuck', serviceRef: { name: 'no-such-service' } });
    await env.waitForReady('stuck', 'ConnectionNotFound', 'False', 60_000);
    const result = await start(
      kubectlBin(),
      ['--kubeconfig', env.kubeconfigPath, 'wait', '--for=condition=Ready', 'usergroup/stuck', '-n', env.namespace, '--timeout=5s'],
      process.env,
    ).done;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('timed out waiting for the condition on usergroups/stuck');
    expect(result.ms).toBeGreaterThanOrEqual(4_500);
    expect(result.ms).toBeLessThan(20_000);
  });
});

describe('kubectl and the kubectl-usergroup plugin against a running controller', () => {
  let env: TestEnv;

  beforeAll(async () => {
    env = await TestEnv.create('kplugin');
    await env.startOperator();
    await env.createUserGroup('alpha', { userGroupId: 'alpha-1', name: 'Alpha', tokenSecret: { name: 'alpha-token' } });
    await env.createUserGroup('orphan', { userGroupId: 'orphan-1', name: 'Orphan', serviceRef: { name: 'missing-svc' } });
    await env.createUserGroup('paused', { userGroupId: 'paused-1', name: 'Paused', suspend: true });
    await env.waitForReady('alpha');
    await env.waitForReady('orphan', 'ConnectionNotFound', 'False', 60_000);
    await env.waitForReady('paused', 'Suspended', 'False');
  });

  afterAll(async () => {
    ifAssigned(env)?.sim.setFaults({});
    await ifAssigned(env)?.close();
  });

  it('kubectl get ug shows the printer columns with the real values', async () => {
    const res = await kubectl(['get', 'ug', '-n', env.namespace]);
    expect(res.code, res.stderr).toBe(0);
    const { header, rows } = kubectlTable(res.stdout);
    expect(header).toEqual(['NAME', 'USERGROUPID', 'READY', 'REASON', 'SECRET', 'AGE']);
    const byName = new Map(rows.map((r) => [r['NAME'], r]));
    const age = expect.stringMatching(/^\d+(s|m\d*s?)$/) as unknown;
    expect(byName.get('alpha')).toEqual({ NAME: 'alpha', USERGROUPID: 'alpha-1', READY: 'True', REASON: 'Synced', SECRET: 'alpha-token', AGE: age });
    // No Secret for a group that never synced: status.tokenSecretName is unset and the cell stays empty.
    expect(byName.get('orphan')).toEqual({ NAME: 'orphan', USERGROUPID: 'orphan-1', READY: 'False', REASON: 'ConnectionNotFound', SECRET: '', AGE: age });
    expect(byName.get('paused')).toEqual({ NAME: 'paused', USERGROUPID: 'paused-1', READY: 'False', REASON: 'Suspended', SECRET: '', AGE: age });
    expect(rows).toHaveLength(3);
  });

  it("kubectl explain prints the CRD's own description of every spec and tokenSecret field", async () => {
    const crd = parseYaml(fs.readFileSync(path.join(repoRoot, 'crds/usergroup.dev_usergroups.yaml'), 'utf8')) as CrdFile;
    const spec = crd.spec.versions[0]?.schema.openAPIV3Schema.properties?.['spec'];
    const tokenSecret = spec?.properties?.['tokenSecret'];
    const oneLine = (text: string): string => text.replace(/\s+/g, ' ').trim();
    for (const [field, schema] of [
      ['usergroup.spec', spec],
      ['usergroup.spec.tokenSecret', tokenSecret],
    ] as const) {
      const res = await kubectl(['explain', field]);
      expect(res.code, res.stderr).toBe(0);
      const shown = oneLine(res.stdout);
      const properties = Object.entries(schema?.properties ?? {});
      expect(properties.length, field).toBeGreaterThan(3);
      for (const [name, property] of properties) {
        expect(res.stdout, `${field}.${name}`).toMatch(new RegExp(`^ {2}${name}\\s+<`, 'm'));
        expect(shown, `${field}.${name}`).toContain(oneLine(property.description ?? `no description for ${name}`));
      }
    }
  });

  it('kubectl plugin list finds kubectl-usergroup on PATH', async () => {
    const res = await withPlugin(['plugin', 'list']).done;
    expect(res.stdout).toContain(path.join(pluginDir, 'kubectl-usergroup'));
    expect(res.stderr).not.toContain('kubectl-usergroup is not executable');
  });

  it('kubectl usergroup rotate: exit 0, the message, a new token in the Secret, exactly one rotation at the service', async () => {
    const before = await env.secretToken('alpha-token');
    expect(before).toBeTruthy();
    const callsBefore = rotateCalls(env);
    const okBefore = env.calls().rotate.ok;
    const startedSecond = Math.floor(Date.now() / 1_000) * 1_000;

    const res = await withPlugin(['usergroup', 'rotate', 'alpha', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(res.code, res.stderr).toBe(0);
    const match = /^usergroup\/alpha token rotated at (\S+)\n$/.exec(res.stdout);
    expect(match, res.stdout).not.toBeNull();
    expect(Date.parse(match?.[1] ?? '')).toBeGreaterThanOrEqual(startedSecond);

    // When rotate reports success, the new token is already in the Secret and matches the service's.
    const after = await env.secretToken('alpha-token');
    expect(after).toBeTruthy();
    expect(after).not.toBe(before);
    expect(sha256(after ?? '')).toBe(env.simGroup('alpha-1')?.tokenSha256);
    expect(rotateCalls(env)).toBe(callsBefore + 1);
    expect(env.calls().rotate.ok).toBe(okBefore + 1);

    const ug = await env.getUserGroup('alpha');
    const requested = ug.metadata.annotations?.[ROTATE];
    expect(requested).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(ug.status?.rotation?.lastHandledRequest).toBe(requested);
    expect(ug.status?.rotation?.lastRotationTime).toBe(match?.[1]);
    // Never a token on the terminal.
    for (const token of [before, after]) expect(res.stdout + res.stderr).not.toContain(token);

    // And no second rotation afterwards.
    await sleep(1_000);
    expect(rotateCalls(env)).toBe(callsBefore + 1);
  });

  it('kubectl usergroup status lists the groups with their reasons; -o wide adds messages; -A adds namespaces', async () => {
    const res = await withPlugin(['usergroup', 'status', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+USERGROUPID\s+READY\s+REASON\s+SECRET\s+LAST ROTATION\s+TOKEN AGE\s+NEXT ROTATION\s+AGE$/);
    // alpha was rotated: its token's age is known; none of them rotates on a schedule.
    expect(lines[1]).toMatch(/^alpha\s+alpha-1\s+True\s+Synced\s+alpha-token\s+(\d+s|\d+m\d*s?)\s+(\d+s|\d+m\d*s?)\s+-\s+\S+$/);
    expect(lines[2]).toMatch(/^orphan\s+orphan-1\s+False\s+ConnectionNotFound\s+-\s+never\s+-\s+-\s+\S+$/);
    expect(lines[3]).toMatch(/^paused\s+paused-1\s+False\s+Suspended\s+-\s+never\s+-\s+-\s+\S+$/);
    expect(lines).toHaveLength(4);

    const one = await withPlugin(['usergroup', 'status', 'orphan', '-o', 'wide', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(one.code, one.stderr).toBe(0);
    const orphanMessage = ready(await env.getUserGroup('orphan'))?.message ?? '';
    expect(orphanMessage).toContain('missing-svc');
    expect(one.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^NAME\s+USERGROUPID\s+READY\s+REASON\s+SECRET\s+LAST ROTATION\s+TOKEN AGE\s+NEXT ROTATION\s+AGE\s+MESSAGE$/),
      expect.stringMatching(
        new RegExp(`^orphan\\s+orphan-1\\s+False\\s+ConnectionNotFound\\s+-\\s+never\\s+-\\s+-\\s+\\S+\\s+${escapeRegExp(orphanMessage)}$`),
      ),
    ]);

    const all = await withPlugin(['usergroup', 'status', '-A', '--kubeconfig', env.kubeconfigPath]).done;
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout.split('\n')[0]).toMatch(/^NAMESPACE\s+NAME\s+USERGROUPID/);
    const ours = tableRows(all.stdout)
      .filter((r) => r[0] === env.namespace)
      .map((r) => r.slice(1, 5));
    expect(ours).toEqual([
      ['alpha', 'alpha-1', 'True', 'Synced'],
      ['orphan', 'orphan-1', 'False', 'ConnectionNotFound'],
      ['paused', 'paused-1', 'False', 'Suspended'],
    ]);
  });

  it('takes the namespace from the kubeconfig context when -n is not given (and KUBECONFIG, without --kubeconfig)', async () => {
    const config = parseYaml(fs.readFileSync(env.kubeconfigPath, 'utf8')) as { contexts: { context: Record<string, unknown> }[] };
    for (const c of config.contexts) c.context['namespace'] = env.namespace;
    const file = path.join(pluginDir, 'kubeconfig-with-namespace');
    fs.writeFileSync(file, stringifyYaml(config), { mode: 0o600 });
    const res = await withPlugin(['usergroup', 'status'], { KUBECONFIG: file }).done;
    expect(res.code, res.stderr).toBe(0);
    expect(
      tableRows(res.stdout)
        .slice(1)
        .map((r) => r[0]),
    ).toEqual(['alpha', 'orphan', 'paused']);

    const empty = await withPlugin(['usergroup', 'status', '-n', 'kube-public'], { KUBECONFIG: file }).done;
    expect(empty).toMatchObject({ code: 0, stdout: '', stderr: 'No resources found in kube-public namespace.\n' });
  });

  it('rotate of a missing group: exit 1 with a clear message', async () => {
    const res = await withPlugin(['usergroup', 'rotate', 'ghost', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(res).toMatchObject({ code: 1, stdout: '', stderr: `error: usergroup "ghost" not found in namespace "${env.namespace}"\n` });
  });

  it('rotate of a suspended group is refused, without requesting anything', async () => {
    const callsBefore = rotateCalls(env);
    const res = await withPlugin(['usergroup', 'rotate', 'paused', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('usergroup/paused is suspended (spec.suspend: true)');
    expect((await env.getUserGroup('paused')).metadata.annotations?.[ROTATE]).toBeUndefined();
    expect(rotateCalls(env)).toBe(callsBefore);
  });

  it('rotate of a group blocked since before the request waits, then times out with the reason; status marks it pending', async () => {
    const res = await withPlugin(['usergroup', 'rotate', 'orphan', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath, '--timeout', '3s']).done;
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    // Told at once why it may take long, then the timeout with the same reason.
    expect(res.stderr).toMatch(
      /^usergroup\/orphan: Ready=False ConnectionNotFound: .*missing-svc.* \(the token is rotated once that is fixed\); waiting up to 3s\n/,
    );
    expect(res.stderr).toMatch(
      /error: timed out after 3s waiting for usergroup\/orphan to rotate its token \(request "[^"]+"\): Ready=False ConnectionNotFound: /,
    );
    expect(res.ms).toBeGreaterThanOrEqual(3_000);
    expect(res.ms).toBeLessThan(15_000);

    const status = await withPlugin(['usergroup', 'status', 'orphan', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(tableRows(status.stdout)[1]?.slice(0, 7)).toEqual(['orphan', 'orphan-1', 'False', 'ConnectionNotFound', '-', 'never', '(pending)']);
  });

  it('rotate keeps waiting while the service is unavailable (the controller retries) and succeeds once it recovers', async () => {
    await env.createUserGroup('flaky', { userGroupId: 'flaky-1', name: 'Flaky' });
    await env.waitForReady('flaky');
    const before = await env.secretToken('flaky');
    env.sim.setFaults({ errorRate: 1 });
    try {
      const rotate = withPlugin(['usergroup', 'rotate', 'flaky', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath, '--timeout', '90s']);
      await eventually('rotate to report ServiceUnavailable', async () => (rotate.stderr().includes('ServiceUnavailable') ? true : undefined), 30_000, 100);
      expect(rotate.running()).toBe(true);
      expect(rotate.stderr()).toMatch(/^usergroup\/flaky: Ready=False ServiceUnavailable: .* \(the operator retries\); waiting up to 1m30s\n$/);
      env.sim.setFaults({});
      const res = await rotate.done;
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(/^usergroup\/flaky token rotated at \S+\n$/);
      const after = await env.secretToken('flaky');
      expect(after).not.toBe(before);
      expect(sha256(after ?? '')).toBe(env.simGroup('flaky-1')?.tokenSha256);
      expect(env.sim.stats(env.apiKey).rotationsByUserGroupId['flaky-1']).toBe(1);
      // Retried through the outage: the PUT that reads the token to rotate, or the POST, met the 5xx.
      expect(env.calls().upsert.injected_5xx + env.calls().rotate.injected_5xx).toBeGreaterThanOrEqual(1);
    } finally {
      env.sim.setFaults({});
    }
  });

  it('rotate fails at once when the controller reports a failure after the request', async () => {
    await env.createUserGroup('refused', { userGroupId: 'refused-1', name: 'Refused' });
    await env.waitForReady('refused');
    const before = await env.secretToken('refused');
    // Every answer says success 0: the rotation and the recovery PUT are both refused → Ready=False Rejected.
    env.sim.setFaults({ successZeroRate: 1 });
    try {
      const res = await withPlugin(['usergroup', 'rotate', 'refused', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath, '--timeout', '60s']).done;
      expect(res.code).toBe(1);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(/^error: usergroup\/refused rotation failed: Rejected: .*success 0/m);
      expect(res.ms).toBeLessThan(30_000);
      expect(await env.secretToken('refused')).toBe(before);
      expect(env.sim.stats(env.apiKey).rotationsByUserGroupId['refused-1'] ?? 0).toBe(0);
    } finally {
      env.sim.setFaults({});
    }
  });

  it('--no-wait requests the rotation and returns at once; the controller then handles it', async () => {
    const res = await withPlugin(['usergroup', 'rotate', 'alpha', '--no-wait', '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]).done;
    expect(res.code, res.stderr).toBe(0);
    const match = /^usergroup\/alpha rotation requested \(usergroup\.dev\/rotate-requested-at=(\S+)\)\n$/.exec(res.stdout);
    expect(match, res.stdout).not.toBeNull();
    await eventually(
      'the --no-wait request to be handled',
      async () => {
        const ug = await env.getUserGroup('alpha');
        return ug.status?.rotation?.lastHandledRequest === match?.[1] ? true : undefined;
      },
      30_000,
    );
  });

  it('bad usage through kubectl: exit 2 with the usage', async () => {
    const res = await withPlugin(['usergroup', 'frobnicate']).done;
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('error: unknown command "frobnicate"');
    expect(res.stderr).toContain('kubectl usergroup rotate <name>');
    expect(res.stderr).toContain('kubectl usergroup sync <name>');
    const help = await withPlugin(['usergroup', '--help']).done;
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Exit codes: 0 done; 1 refused, failed or timed out');
  });
});

/** Changes a group at the service directly, as another client of the account would (the operator is not told). */
async function changeAtService(env: TestEnv, body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${env.sim.url}/api/user`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Token ${env.apiKey}` },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`PUT at the service failed: ${res.status}`);
}

describe('kubectl usergroup sync: drift at the service repaired on demand', () => {
  let env: TestEnv;
  let operator: OperatorHandle;
  const plugin = (...args: string[]): Running => withPlugin(['usergroup', ...args, '-n', env.namespace, '--kubeconfig', env.kubeconfigPath]);

  beforeAll(async () => {
    env = await TestEnv.create('ksync');
    operator = await env.startOperator();
    await env.createUserGroup('drift', { userGroupId: 'drift-1', name: 'Drift', properties: { tier: 'gold' }, tokenSecret: { name: 'drift-token' } });
    await env.createUserGroup('quiet', { userGroupId: 'quiet-1', name: 'Quiet' });
    await env.waitForReady('drift');
    await env.waitForReady('quiet');
  });

  afterAll(async () => {
    await ifAssigned(env)?.close();
  });

  it('a group changed at the service: sync makes exactly one PUT, the service matches the spec again, the token stays', async () => {
    const token = await env.secretToken('drift-token');
    await changeAtService(env, { user_group_id: 'drift-1', name: 'Changed Elsewhere', properties: { tier: 'free' } });
    expect(env.simGroup('drift-1')).toMatchObject({ name: 'Changed Elsewhere', properties: { tier: 'free' } });
    // The operator does not know: nothing changed on its side, so no call, however long we wait short of the resync.
    const putsBefore = putCalls(env);
    await sleep(1_500);
    expect(putCalls(env)).toBe(putsBefore);

    const res = await plugin('sync', 'drift').done;
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^usergroup\/drift synced at \S+: Ready=True Synced\n$/);
    expect(putCalls(env)).toBe(putsBefore + 1);
    expect(env.simGroup('drift-1')).toMatchObject({ name: 'Drift', properties: { tier: 'gold' } });
    const ug = await env.getUserGroup('drift');
    const requested = ug.metadata.annotations?.[SYNC];
    expect(requested).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(ug.status?.lastHandledSyncRequest).toBe(requested);
    // The service's PUT returns the group's current token: the Secret still holds it, unchanged.
    expect(await env.secretToken('drift-token')).toBe(token);
    expect(sha256(token ?? '')).toBe(env.simGroup('drift-1')?.tokenSha256);
    expect(res.stdout + res.stderr).not.toContain(token);
    expect((await env.eventsFor('drift')).some((e) => e.reason === 'Synced' && e.note?.includes('updated at the service'))).toBe(true);

    // Nothing after: the value is handled; the other group never had a request and made no call.
    await sleep(1_000);
    expect(putCalls(env)).toBe(putsBefore + 1);
  });

  it('the same value again, and a controller restart over handled and absent requests: no call', async () => {
    const ug = await env.getUserGroup('drift');
    const value = ug.metadata.annotations?.[SYNC] ?? '';
    expect(value).not.toBe('');
    const putsBefore = putCalls(env);
    const annotate = await kubectl(['annotate', 'ug', 'drift', '-n', env.namespace, `${SYNC}=${value}`, '--overwrite']);
    expect(annotate.code, annotate.stderr).toBe(0);
    // A restart reconciles every group from scratch: a handled value (drift) and no annotation (quiet) cost nothing.
    await operator.stop();
    operator = await env.startOperator();
    await sleep(3_000);
    expect(putCalls(env)).toBe(putsBefore);
    expect((await env.getUserGroup('drift')).status?.lastHandledSyncRequest).toBe(value);
  });

  it('--no-wait requests the sync and returns at once; the controller then handles it', async () => {
    const putsBefore = putCalls(env);
    const res = await plugin('sync', 'quiet', '--no-wait').done;
    expect(res.code, res.stderr).toBe(0);
    const match = /^usergroup\/quiet sync requested \(usergroup\.dev\/sync-requested-at=(\S+)\)\n$/.exec(res.stdout);
    expect(match, res.stdout).not.toBeNull();
    await eventually(
      'the --no-wait sync to be handled',
      async () => ((await env.getUserGroup('quiet')).status?.lastHandledSyncRequest === match?.[1] ? true : undefined),
      30_000,
    );
    expect(putCalls(env)).toBe(putsBefore + 1);
  });

  it('a suspended group: sync is refused up front; a request written anyway stays pending with no call, and is answered once resumed', async () => {
    await env.patchUserGroup('quiet', { spec: { suspend: true } });
    await env.waitForReady('quiet', 'Suspended', 'False');
    const putsBefore = putCalls(env);
    const refused = await plugin('sync', 'quiet').done;
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('usergroup/quiet is suspended (spec.suspend: true)');
    const handledBefore = (await env.getUserGroup('quiet')).status?.lastHandledSyncRequest;

    const annotate = await kubectl(['annotate', 'ug', 'quiet', '-n', env.namespace, `${SYNC}=while-suspended`, '--overwrite']);
    expect(annotate.code, annotate.stderr).toBe(0);
    await sleep(2_000);
    expect(putCalls(env)).toBe(putsBefore);
    expect((await env.getUserGroup('quiet')).status?.lastHandledSyncRequest).toBe(handledBefore);
    const status = await plugin('status', 'quiet').done;
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout.split('\n')[1]).toMatch(/^quiet\s+quiet-1\s+False\s+Suspended \(sync pending\)\s/);

    await env.patchUserGroup('quiet', { spec: { suspend: false } });
    await eventually(
      'the pending request answered after resume',
      async () => ((await env.getUserGroup('quiet')).status?.lastHandledSyncRequest === 'while-suspended' ? true : undefined),
      30_000,
    );
    expect(putCalls(env)).toBe(putsBefore + 1);
  });

  it('many requests at once in one namespace: at most the budget (10, then 10 a minute) goes at once, the rest wait with an Event and are all answered', async () => {
    const rate = await TestEnv.create('ksyncrate');
    try {
      // The account's rate above the namespace's budget: the budget is what this measures.
      await rate.startOperator({ args: ['--service-qps', '10', '--service-burst', '20'] });
      const names = Array.from({ length: 13 }, (_, i) => `g${i}`);
      for (const name of names) await rate.createUserGroup(name, { userGroupId: `rate-${name}`, name });
      for (const name of names) await rate.waitForReady(name);
      const putsBefore = putCalls(rate);
      const started = Date.now();
      const annotate = await kubectl(['annotate', 'ug', '--all', '-n', rate.namespace, `${SYNC}=burst-1`, '--overwrite']);
      expect(annotate.code, annotate.stderr).toBe(0);
      await sleep(3_000);
      const early = putCalls(rate) - putsBefore;
      const allowed = DEFAULT_REQUEST_BUDGETS.sync.burst + Math.ceil(((Date.now() - started) / 60_000) * DEFAULT_REQUEST_BUDGETS.sync.perMinute);
      expect(early).toBeLessThanOrEqual(allowed);
      expect(early).toBeGreaterThanOrEqual(DEFAULT_REQUEST_BUDGETS.sync.burst);
      // None dropped: every request is answered, one PUT each, the waiting ones at their slots (6 s apart).
      await eventually(
        'every request answered',
        async () => {
          const handled = await Promise.all(names.map(async (n) => (await rate.getUserGroup(n)).status?.lastHandledSyncRequest));
          return handled.every((h) => h === 'burst-1') ? true : undefined;
        },
        60_000,
      );
      const elapsed = Date.now() - started;
      expect(putCalls(rate) - putsBefore).toBe(names.length);
      expect(elapsed).toBeGreaterThanOrEqual(((names.length - DEFAULT_REQUEST_BUDGETS.sync.burst - 1) * 60_000) / DEFAULT_REQUEST_BUDGETS.sync.perMinute);
      const waiting = (await Promise.all(names.map((n) => rate.eventsFor(n)))).flat().filter((e) => e.reason === 'SyncRequestWaiting');
      expect(waiting.length).toBe(names.length - DEFAULT_REQUEST_BUDGETS.sync.burst);
      expect(waiting[0]?.note).toMatch(
        /^sync request "burst-1" waits \d+s for its turn: sync requests in this namespace are limited to 10 at once, then 10 a minute$/,
      );
    } finally {
      await rate.close();
    }
  });

  it("rotate over the namespace's rotation budget: the request waits (an Event says so), the plugin's timeout says why, and it is rotated at its slot", async () => {
    const rate = await TestEnv.create('krotrate');
    try {
      // One at once, then six a minute: the second request in a row waits about ten seconds.
      await rate.startOperator({ args: ['--rotation-request-burst', '1', '--rotation-requests-per-minute', '6'] });
      for (const name of ['first', 'second']) await rate.createUserGroup(name, { userGroupId: `rot-${name}`, name });
      for (const name of ['first', 'second']) await rate.waitForReady(name);
      const run = (...args: string[]): Running => withPlugin(['usergroup', ...args, '-n', rate.namespace, '--kubeconfig', rate.kubeconfigPath]);
      const first = await run('rotate', 'first').done;
      expect(first.code, first.stderr).toBe(0);
      const second = await run('rotate', 'second', '--timeout', '3s').done;
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(
        new RegExp(
          `^error: timed out after 3s waiting for usergroup/second to rotate its token .*; rotation requests wait their turn beyond a namespace's budget \\(see kubectl events -n ${escapeRegExp(rate.namespace)}\\)\\n$`,
        ),
      );
      expect(rate.sim.stats(rate.apiKey).rotationsByUserGroupId['rot-second'] ?? 0).toBe(0);
      const waiting = (await rate.eventsFor('second')).find((e) => e.reason === 'RotationRequestWaiting');
      expect(waiting?.note).toMatch(
        /^rotation request "\S+" waits \d+s for its turn: rotation requests in this namespace are limited to 1 at once, then 6 a minute$/,
      );
      // Never dropped: the request stays pending and is done at its slot.
      await eventually(
        'the second rotation at its slot',
        async () => (rate.sim.stats(rate.apiKey).rotationsByUserGroupId['rot-second'] === 1 ? true : undefined),
        30_000,
        250,
      );
    } finally {
      await rate.close();
    }
  });
});

interface CrdSchema {
  description?: string;
  properties?: Record<string, CrdSchema>;
}

interface CrdFile {
  spec: { versions: { schema: { openAPIV3Schema: CrdSchema } }[] };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

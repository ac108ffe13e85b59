import { API_KEY_SECRET_TYPE } from '../../src/controller/connections.js';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { RbacAuthorizationV1Api, type V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../devtools/controlplane/controlplane.js';
import { killAllControllers, msgIs, signalAndWait, spawnController, waitLog, type ControllerProcess, UNBUDGETED_ARGS } from '../support/controller-process.js';
import { httpGet } from '../../devtools/http-get.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { group, plural, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import {
  HYGIENE_ECHO_RATE,
  HYGIENE_FAILING_SHARE,
  HYGIENE_SIM_FAULTS,
  startCapturingProxy,
  SecretScanner,
  type CapturingProxy,
  type Finding,
  type Injector,
} from './support/hygiene.js';
import { mulberry32, scenarioSeed, type Rng } from './support/churn.js';
import { awaitInvariant, createUserGroups, RotationLedger, type InvariantResult } from './support/invariant.js';
import { rotationBudgetMs } from './support/budgets.js';
import { recordRow } from './support/report.js';
import { sized } from './support/scale.js';

/*
 * 7. Secret hygiene. A controller process (API key from a mounted-style key file, as the Helm chart
 * runs it) goes through syncs, rotations, service faults (5xx, hostile answers from the simulator,
 * answers that echo the API key and tokens back in their messages), a 401 for a UserGroupService whose
 * Secret holds a wrong key, and a SecretConflict. A proxy in front of the simulator sees every token the
 * service ever handed out; every token read from a Secret along the way is added too. Then none of them,
 * nor any API key, may appear (raw, or base64 at any alignment; any 16-character piece counts) in the
 * controller's output, Events (events.k8s.io and core/v1), UserGroup and UserGroupService objects,
 * Secret metadata, /metrics, or its /proc cmdline and environ; nor may the ServiceAccount tokens /metrics
 * is read with. Secrets the operator does not own are never modified.
 */

const GROUPS = sized(60, 12);
const NEW_DURING_FAULTS = sized(10, 3);
/** Rotation rounds made under the faults. */
const FAULT_ROUNDS = sized(4, 2);
const ECHO_RATE = HYGIENE_ECHO_RATE;
const SIM_FAULTS = HYGIENE_SIM_FAULTS;
const FAILING = HYGIENE_FAILING_SHARE;
/**
 * Each wait is for one round of rotations (or the syncs) under the faults: the budget in which every one of
 * them completes but with probability 1e-4, from the retry design (support/budgets.ts), plus 30 s for the
 * Secret and status writes of a round and the watch to show them.
 */
const CONVERGE_TIMEOUT_MS = rotationBudgetMs(FAILING, (GROUPS + NEW_DURING_FAULTS) * (FAULT_ROUNDS + 3), 2_000).budgetMs + 30_000;

const newKey = (): string => `key-${randomBytes(16).toString('hex')}`;

interface Snapshot {
  readonly resourceVersion: string | undefined;
  readonly data: string;
  readonly ownerReferences: number;
}
const snapshot = (s: V1Secret): Snapshot => ({
  resourceVersion: s.metadata?.resourceVersion,
  data: JSON.stringify(s.data ?? {}),
  ownerReferences: s.metadata?.ownerReferences?.length ?? 0,
});

/**
 * Tokens of two ServiceAccounts of the env's namespace (TokenRequest API): one bound to a ClusterRole allowing get on
 * /metrics (what the chart's <fullname>-metrics-reader holds), one without any binding.
 */
async function metricsScraperTokens(env: TestEnv): Promise<{ allowed: string; refused: string }> {
  const rbac = env.kc.makeApiClient(RbacAuthorizationV1Api);
  const name = `${env.namespace}-metrics-reader`;
  await rbac.createClusterRole({ body: { metadata: { name }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] } });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: env.namespace }],
    },
  });
  const token = async (serviceAccount: string): Promise<string> => {
    await env.core.createNamespacedServiceAccount({ namespace: env.namespace, body: { metadata: { name: serviceAccount } } });
    const request = await env.core.createNamespacedServiceAccountToken({
      namespace: env.namespace,
      name: serviceAccount,
      body: { spec: { expirationSeconds: 3600 } },
    });
    if (!request.status?.token) throw new Error('the TokenRequest returned no token');
    return request.status.token;
  };
  return { allowed: await token('scraper'), refused: await token('nobody') };
}

describe('7. secret hygiene', () => {
  let env: TestEnv;
  let side: string;
  let proxy: CapturingProxy;
  let seed: number;
  /** The proxy's draws of which answers echo secrets; the simulator draws its faults from a generator of its own. */
  let echoRng: Rng;

  beforeAll(async () => {
    seed = scenarioSeed();
    console.log(`[hygiene] seed ${seed} (replay the fault draws with RELIABILITY_SEED=${seed})`);
    echoRng = mulberry32(seed);
    env = await TestEnv.create('rel-hyg', { random: mulberry32(seed ^ 0x5bd1e995) });
    side = await createNamespace('rel-hyg-side', env.kc);
    proxy = await startCapturingProxy(env.sim.url);
  });

  afterAll(async () => {
    await killAllControllers();
    if (ifAssigned(env)) {
      const rbac = env.kc.makeApiClient(RbacAuthorizationV1Api);
      await rbac.deleteClusterRoleBinding({ name: `${env.namespace}-metrics-reader` }).catch(() => undefined);
      await rbac.deleteClusterRole({ name: `${env.namespace}-metrics-reader` }).catch(() => undefined);
    }
    await ifAssigned(proxy)?.stop();
    await ifAssigned(env)?.close();
    if (side) await deleteNamespace(side, env.kc).catch(() => undefined);
  });

  it(`no token or API key leaks anywhere, and foreign Secrets are never touched (${GROUPS} UserGroups)`, async () => {
    const wallStart = Date.now();
    const ledger = new RotationLedger();
    const wrongKey = newKey();
    const seenInSecrets = new Set<string>();
    const custom = env.custom;
    const core = env.core;

    // --- Objects the operator does not own ---------------------------------------------------------
    const foreign: { namespace: string; name: string }[] = [
      { namespace: env.namespace, name: 'unrelated' },
      { namespace: side, name: 'unrelated' },
      { namespace: side, name: 'conflict' }, // same name as the UserGroup "conflict" → SecretConflict
      { namespace: side, name: 'wrong-key-apikey' }, // read by the controller (UserGroupService), never written
    ];
    await core.createNamespacedSecret({
      namespace: env.namespace,
      body: {
        metadata: { name: 'unrelated', labels: { app: 'something-else' } },
        type: 'Opaque',
        stringData: { password: `unrelated-${randomBytes(8).toString('hex')}` },
      },
    });
    await core.createNamespacedSecret({
      namespace: side,
      body: { metadata: { name: 'unrelated' }, type: 'Opaque', stringData: { token: 'not-a-usergroup-token' } },
    });
    await core.createNamespacedSecret({
      namespace: side,
      body: { metadata: { name: 'conflict' }, type: 'Opaque', stringData: { token: 'someone-elses-token', other: 'x' } },
    });
    await core.createNamespacedSecret({
      namespace: side,
      body: { metadata: { name: 'wrong-key-apikey' }, type: API_KEY_SECRET_TYPE, stringData: { apiKey: wrongKey } },
    });
    await custom.createNamespacedCustomObject({
      group,
      version,
      namespace: side,
      plural: 'usergroupservices',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'UserGroupService',
        metadata: { name: 'wrong-key' },
        spec: { url: proxy.url, allowInsecure: true, apiKeySecretRef: { name: 'wrong-key-apikey', key: 'apiKey' } },
      },
    });
    const before = new Map<string, Snapshot>();
    for (const f of foreign) before.set(`${f.namespace}/${f.name}`, snapshot(await core.readNamespacedSecret(f)));

    // Failing on purpose, so in the side namespace (the invariant expects every group in env's namespace Ready).
    const createIn = (namespace: string, name: string, spec: Record<string, unknown>): Promise<unknown> =>
      custom.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        body: { apiVersion: `${group}/${version}`, kind: 'UserGroup', metadata: { name }, spec },
      });
    await createIn(side, 'conflict', { userGroupId: 'hyg-conflict', name: 'Conflict' });
    await createIn(side, 'unauthorized', { userGroupId: 'hyg-unauthorized', name: 'Unauthorized', serviceRef: { name: 'wrong-key' } });

    // --- The controller, as the chart runs it: the API key read from a Secret, never in args or environ ---
    const proxied = `${env.namespace}-proxy`;
    await env.putClusterService(proxied, { url: proxy.url, tenants: [{ namespaces: [env.namespace, side], userGroupIds: { prefix: '' }, adoption: 'Keep' }] });
    const [metricsPort] = await freePorts(1);
    if (metricsPort === undefined) throw new Error('no free port');
    const c: ControllerProcess = spawnController({
      kubeconfigPath: env.kubeconfigPath,
      namespace: `${env.namespace},${side}`,
      defaultService: proxied,
      args: ['--metrics-addr', `127.0.0.1:${metricsPort}`, '--service-timeout', '2s', '--service-qps', '100', '--service-burst', '100', ...UNBUDGETED_ARGS],
    });
    await waitLog(c, 'workers started', msgIs('workers started'));
    // /metrics as Prometheus reads it (--metrics-auth, the default): with the token of a ServiceAccount allowed to
    // get /metrics, and with one that is not (its refusal is logged). Both tokens are searched for like the others.
    const scraper = await metricsScraperTokens(env);
    const firstScrapes = [
      (await httpGet(metricsPort, '/metrics', { authorization: `Bearer ${scraper.allowed}` })).status,
      (await httpGet(metricsPort, '/metrics', { authorization: `Bearer ${scraper.refused}` })).status,
    ];

    const harvest = async (): Promise<void> => {
      const secrets = (await core.listNamespacedSecret({ namespace: env.namespace })).items;
      for (const s of secrets) {
        const data = s.data?.['token'];
        if (data !== undefined && s.metadata?.name !== 'unrelated') seenInSecrets.add(Buffer.from(data, 'base64').toString('utf8'));
      }
    };
    const readySide = async (name: string, reason: string): Promise<void> => {
      await eventually(
        `${side}/${name} Ready=False ${reason}`,
        async () => {
          const ug = (await custom.getNamespacedCustomObject({ group, version, namespace: side, plural, name })) as UserGroupObject;
          return ug.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'False' && x.reason === reason) ? true : undefined;
        },
        60_000,
        300,
      );
    };

    // --- 1. syncs ---------------------------------------------------------------------------------
    const groups = await createUserGroups(env, 'h', GROUPS, 20, (i) => ({ properties: { seats: i, region: 'eu' }, mapping: { sales: `db_${i}` } }));
    const synced = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    await harvest();
    await readySide('conflict', 'SecretConflict');
    await readySide('unauthorized', 'Unauthorized');

    // --- 2. a clean rotation round -----------------------------------------------------------------
    for (const g of groups) await ledger.request(env, g.name, g.userGroupId, 'round-1');
    const rotated = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    await harvest();

    // --- 3. faults: the simulator's, and answers echoing secrets back -------------------------------
    let echoed = 0;
    const echo: Injector = (req) => {
      if (req.apiKey === wrongKey && echoRng() < 0.5) {
        echoed++;
        return { status: 401, body: JSON.stringify({ success: 0, message: `invalid API key ${req.apiKey}` }) };
      }
      if (req.apiKey === wrongKey || echoRng() >= ECHO_RATE) return undefined;
      echoed++;
      const current = req.json?.['current_token'];
      if (req.method === 'POST' && typeof current === 'string') {
        // A rotation refused with the token (raw and base64) and the key in the message.
        return {
          status: 400,
          body: JSON.stringify({
            success: 0,
            message: `unknown token ${current} (${Buffer.from(current).toString('base64')}) for account ${req.apiKey ?? ''}`,
          }),
        };
      }
      const id = req.json?.['user_group_id'];
      const token = typeof id === 'string' ? proxy.lastTokenOf.get(id) : undefined;
      return {
        status: 503,
        body: JSON.stringify({
          error: {
            message: `backend for Token ${req.apiKey ?? ''} failed; group token was ${token ?? 'unknown'}; state ${Buffer.from(token ?? '').toString('base64')}`,
          },
        }),
      };
    };
    env.sim.setFaults(SIM_FAULTS);
    proxy.setInjector(echo);
    // Rotation rounds under the faults (each handled before the next is requested), with renames and
    // new groups in the first one; the Secrets are read after each.
    const underFaults: InvariantResult[] = [];
    for (let round = 2; round < 2 + FAULT_ROUNDS; round++) {
      for (const g of groups) await ledger.request(env, g.name, g.userGroupId, `round-${round}`);
      if (round === 2) {
        for (const g of groups.filter((_, i) => i % 2 === 0)) await env.patchUserGroup(g.name, { spec: { name: `Renamed ${g.name}` } });
        await createUserGroups(env, 'n', NEW_DURING_FAULTS, 20);
      }
      underFaults.push(await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS));
      await harvest();
    }
    env.sim.setFaults({});
    proxy.setInjector(undefined);
    const afterFaults = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    await harvest();

    // --- 4. one more clean rotation round after the faults ----------------------------------------
    for (const g of groups) await ledger.request(env, g.name, g.userGroupId, 'final-round');
    const final = await awaitInvariant(env, ledger, CONVERGE_TIMEOUT_MS);
    await harvest();
    // The deliberately failing ones are still failing (and kept making Events meanwhile).
    await readySide('conflict', 'SecretConflict');
    await readySide('unauthorized', 'Unauthorized');

    // --- The scan ----------------------------------------------------------------------------------
    const tokens = new Set([...proxy.tokens, ...seenInSecrets]);
    const keys = new Set([env.apiKey, wrongKey, ...proxy.apiKeys]);
    const secrets = new Map<string, string>();
    let t = 0;
    for (const token of tokens) secrets.set(`token #${++t}`, token);
    let k = 0;
    for (const key of keys) secrets.set(key === env.apiKey ? 'the default API key' : key === wrongKey ? 'the wrong API key' : `API key #${++k}`, key);
    secrets.set("the metrics scraper's token", scraper.allowed);
    secrets.set("a refused metrics scraper's token", scraper.refused);
    const scanner = new SecretScanner(secrets);
    const findings: Finding[] = [];
    // Control: the scanner does find a token inside base64 at an odd byte offset, a piece of one, and the key.
    const probe = [...tokens][0] ?? '';
    const scannerWorks =
      scanner.scan('probe', `x ${Buffer.from(`ab${probe}c`).toString('base64')} y`).length === 1 &&
      scanner.scan('probe', `"token":"${probe.slice(20, 40)}…"`).length === 1 &&
      scanner.scan('probe', `Authorization: Token ${env.apiKey}`).length === 1;

    // The running process: arguments and environment, then /metrics.
    const cmdline = fs.readFileSync(`/proc/${c.pid}/cmdline`, 'utf8').split('\0');
    const environ = fs.readFileSync(`/proc/${c.pid}/environ`, 'utf8').split('\0');
    const environMode = (fs.statSync(`/proc/${c.pid}/environ`).mode & 0o777).toString(8);
    findings.push(...scanner.scan('/proc/<pid>/cmdline', cmdline.join(' ')));
    findings.push(...scanner.scan('/proc/<pid>/environ', environ.join('\n')));
    const metrics = await httpGet(metricsPort, '/metrics', { authorization: `Bearer ${scraper.allowed}` });
    findings.push(...scanner.scan('/metrics', metrics.body));

    // API objects.
    const namespaces = [env.namespace, side];
    let eventCount = 0;
    let statusObjects = 0;
    let redactedInEvents = 0;
    const eventReasons = new Set<string>();
    for (const ns of namespaces) {
      const v1 = (await env.events.listNamespacedEvent({ namespace: ns })).items;
      const legacy = (await core.listNamespacedEvent({ namespace: ns })).items;
      eventCount += v1.length + legacy.length;
      for (const e of v1) {
        const text = JSON.stringify(e);
        if (text.includes('[redacted]')) redactedInEvents++;
        eventReasons.add(e.reason ?? '?');
        findings.push(...scanner.scan(`Event (events.k8s.io) ${ns}/${e.metadata?.name ?? '?'} ${e.reason ?? ''}`, text));
      }
      for (const e of legacy) findings.push(...scanner.scan(`Event (core/v1) ${ns}/${e.metadata.name ?? '?'} ${e.reason ?? ''}`, JSON.stringify(e)));
      for (const p of ['usergroups', 'usergroupservices']) {
        const items = ((await custom.listNamespacedCustomObject({ group, version, namespace: ns, plural: p })) as { items: UserGroupObject[] }).items;
        statusObjects += items.length;
        for (const o of items) findings.push(...scanner.scan(`${p} ${ns}/${o.metadata.name}`, JSON.stringify(o)));
      }
      // Secret metadata (labels, annotations: the token-sha256 and rotation bookkeeping); data is where tokens belong.
      for (const s of (await core.listNamespacedSecret({ namespace: ns })).items)
        findings.push(...scanner.scan(`Secret metadata ${ns}/${s.metadata?.name ?? '?'}`, JSON.stringify(s.metadata ?? {})));
    }

    // Foreign Secrets untouched.
    const touched: string[] = [];
    for (const f of foreign) {
      const now = snapshot(await core.readNamespacedSecret(f));
      const was = before.get(`${f.namespace}/${f.name}`);
      if (JSON.stringify(now) !== JSON.stringify(was))
        touched.push(`${f.namespace}/${f.name} (resourceVersion ${was?.resourceVersion} → ${now.resourceVersion})`);
    }

    // The controller's output, to the end (a clean shutdown's lines included).
    await signalAndWait(c, 'SIGTERM');
    const exit = await c.exit;
    const outputLines = c.output.length;
    const output = c.output.join('\n');
    findings.push(...scanner.scan('controller output', output));
    const redactedInLogs = output.split('[redacted]').length - 1;

    const stats = env.sim.stats();
    const byKind = new Map<string, number>();
    for (const op of [stats.operations.upsert, stats.operations.rotate]) {
      for (const [outcome, n] of Object.entries(op))
        if (outcome.startsWith('injected_') && n > 0) byKind.set(outcome.slice('injected_'.length), (byKind.get(outcome.slice('injected_'.length)) ?? 0) + n);
    }
    const simFaults = Object.entries(stats.operations.upsert)
      .concat(Object.entries(stats.operations.rotate))
      .filter(([outcome]) => outcome.startsWith('injected_'))
      .reduce((n, [, v]) => n + v, 0);
    const unauthorized = stats.operations.upsert.unauthorized + stats.operations.rotate.unauthorized;
    const tokensInSecretsNotSeenAtProxy = [...seenInSecrets].filter((x) => !proxy.tokens.has(x)).length;
    const phases = [synced, rotated, ...underFaults, afterFaults, final];
    const converged = phases.every((r) => r.converged);
    const found = findings.length;
    console.log(
      `[hygiene] ${tokens.size} tokens (${proxy.tokens.size} seen at the proxy, ${seenInSecrets.size} read from Secrets) + ${keys.size} API keys; ` +
        `${outputLines} output lines, ${eventCount} Events, ${statusObjects} UserGroup/UserGroupService objects, /metrics (${metrics.body.length} bytes), cmdline (${cmdline.length} args), environ (${environ.length} variables, mode ${environMode}); ` +
        `${found} found${
          found
            ? `: ${findings
                .slice(0, 20)
                .map((f) => `${f.secret} in ${f.where}`)
                .join('; ')}`
            : ''
        }; ` +
        `"[redacted]" appears ${redactedInLogs} times in the output and in ${redactedInEvents} Events; foreign Secrets touched: ${touched.length ? touched.join(', ') : 'none'}; ` +
        `Event reasons: ${[...eventReasons].sort().join(', ')}; ` +
        `faults: ${simFaults} injected by the simulator (${[...byKind].map(([kind, n]) => `${kind} ${n}`).join(', ')}), ${echoed} echoing answers from the proxy, ${unauthorized} 401s from the simulator; controller exit ${exit.code ?? exit.signal}`,
    );
    if (!converged)
      console.log(
        `[hygiene] not converged: ${phases
          .flatMap((r) => r.problems)
          .slice(0, 10)
          .join('; ')}`,
      );

    recordRow({
      scenario: '7. secret hygiene',
      objects: final.objects + 2,
      faults: `${simFaults} simulator faults (${[...byKind].map(([kind, n]) => `${kind} ${n}`).join(', ')}), ${echoed} answers echoing key/tokens, 401s for a wrong key (${unauthorized} at the simulator), a SecretConflict`,
      converged,
      tokensLost: final.tokensLost,
      duplicateRotations: final.duplicateRotations,
      wallMs: Date.now() - wallStart,
      notes:
        `${tokens.size} tokens + ${keys.size} API keys searched (raw and base64, any 16-char piece) in ${outputLines} log lines, ${eventCount} events, ${statusObjects} status objects, Secret metadata, metrics, args, environ: ${found} found` +
        `${found ? ` (${[...new Set(findings.map((f) => f.where.split(' ')[0]))].join(', ')})` : ''}; ` +
        `key read from a Secret through the apiserver like the chart (never in args or environ; environ mode ${environMode}); ` +
        `${foreign.length} foreign Secrets ${touched.length ? `TOUCHED: ${touched.length}` : 'untouched'}; ${ledger.total} rotations; "[redacted]" ${redactedInLogs}× in logs, in ${redactedInEvents} Events; seed ${seed}`,
    });

    expect(scannerWorks).toBe(true);
    expect(firstScrapes).toEqual([200, 403]);
    expect(metrics.status).toBe(200);
    expect(findings).toEqual([]);
    expect(touched).toEqual([]);
    expect(tokensInSecretsNotSeenAtProxy).toBe(0); // the proxy really saw every token the service gave out
    expect(proxy.tokens.size).toBeGreaterThanOrEqual(GROUPS * (3 + FAULT_ROUNDS)); // creation + every rotation round, at least
    expect(simFaults).toBeGreaterThan(0);
    expect(echoed).toBeGreaterThan(0);
    expect(exit.code).toBe(0);
    expect(synced.converged).toBe(true);
    expect(rotated.converged).toBe(true);
    for (const r of underFaults) expect(r.converged).toBe(true);
    expect(afterFaults.converged).toBe(true);
    expect(final.converged).toBe(true);
    expect(final.tokensLost).toBe(0);
    expect(final.duplicateRotations).toBe(0);
    expect(final.missingRotations).toBe(0);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY_SECRET_TYPE } from '../../src/controller/connections.js';
import { killAllControllers, msgIs, signalAndWait, spawnController, waitLog, type ControllerProcess } from '../support/controller-process.js';
import { createNamespace, deleteNamespace, eventually } from '../support/kube.js';
import { group, plural, TestEnv, version, type UserGroupObject } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';
import { tenantIdentity, type Tenant } from '../support/tenancy.js';
import { LISTENER_SECRET_TEXT, startListener, type Listener } from './support/listeners.js';
import { recordRow } from './support/report.js';

/*
 * 9c. Hostile tenant: egress. A tenant (a ServiceAccount under a namespace editor's Role) aims its own
 * UserGroupServices at a listener of its choosing: with a Secret that did not opt in as an API key (a
 * "database password" an admin put in its namespace), at a host the operator's policy does not list, and
 * over plain http where the policy forbids it. None of them may cause a connection, let alone send a
 * secret; each is refused at reconcile with a clear reason. A positive control (an opted-in Secret, an
 * allowed host) shows the listener does get what is allowed, and that its error text stays out of status.
 */

interface Case {
  readonly name: string;
  readonly url: string;
  readonly secret: string;
  readonly allowInsecure: boolean;
  readonly reason: string;
  readonly message: RegExp;
}

describe('9c. hostile tenant: egress', () => {
  let env: TestEnv;
  let ns: string;
  let tenant: Tenant;
  let listener: Listener;
  let c: ControllerProcess | undefined;

  beforeAll(async () => {
    env = await TestEnv.create('rel-egr');
    ns = await createNamespace('rel-egr-t', env.kc);
    tenant = await tenantIdentity(ns, env.kc);
    listener = await startListener();
  });
  afterAll(async () => {
    await killAllControllers();
    await ifAssigned(listener)?.stop();
    await ifAssigned(env)?.close();
    if (ns) await deleteNamespace(ns, env.kc).catch(() => undefined);
  });

  const start = async (args: string[]): Promise<ControllerProcess> => {
    // The policy under test comes after the harness's own egress flags: the last one wins.
    const p = spawnController({ kubeconfigPath: env.kubeconfigPath, namespace: `${env.namespace},${ns}`, defaultService: env.defaultService, args });
    await waitLog(p, 'workers started', msgIs('workers started'));
    return p;
  };

  const ready = async (name: string): Promise<{ status?: string; reason?: string; message?: string }> => {
    const ug = (await env.custom.getNamespacedCustomObject({ group, version, namespace: ns, plural, name })) as UserGroupObject;
    const r = ug.status?.conditions?.find((x) => x.type === 'Ready');
    return { status: r?.status, reason: r?.reason, message: r?.message };
  };

  const apply = async (k: Case, id: string): Promise<void> => {
    await tenant.custom.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: 'usergroupservices',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'UserGroupService',
        metadata: { name: k.name },
        spec: { url: k.url, allowInsecure: k.allowInsecure, apiKeySecretRef: { name: k.secret, key: 'value' } },
      },
    });
    await tenant.custom.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural,
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'UserGroup',
        metadata: { name: k.name },
        spec: { userGroupId: id, name: k.name, serviceRef: { name: k.name } },
      },
    });
  };

  it('a tenant cannot make the operator connect where the policy does not allow, nor send a Secret that did not opt in', async () => {
    const started = Date.now();
    // What an admin put in the tenant's namespace, and what the tenant made for itself.
    await env.core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'db-password' }, type: 'Opaque', stringData: { value: 'db-password-s3cr3t-value' } },
    });
    await tenant.core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'own-key' }, type: API_KEY_SECRET_TYPE, stringData: { value: 'tenant-own-api-key-value' } },
    });

    // Phase 1: the policy allows 127.0.0.1 and http.
    c = await start(['--allowed-service-hosts', '127.0.0.1', '--allow-http-services']);
    const phase1: Case[] = [
      {
        name: 'steal-db-password',
        url: listener.url(),
        secret: 'db-password',
        allowInsecure: true,
        reason: 'ConnectionInvalid',
        message: /is not an API-key Secret \(its type must be usergroup\.dev\/api-key/,
      },
      {
        name: 'unlisted-host',
        url: listener.url('localhost'),
        secret: 'own-key',
        allowInsecure: true,
        reason: 'ServiceNotAllowed',
        message: /host localhost \(port \d+\) is not among the hosts/,
      },
      {
        name: 'metadata-endpoint',
        url: 'http://169.254.169.254',
        secret: 'own-key',
        allowInsecure: true,
        reason: 'ServiceNotAllowed',
        message: /host 169\.254\.169\.254 \(port 80\) is not among the hosts/,
      },
      {
        name: 'http-without-opt-in',
        url: listener.url(),
        secret: 'own-key',
        allowInsecure: false,
        reason: 'ServiceNotAllowed',
        message: /plain http needs spec\.allowInsecure/,
      },
    ];
    let id = 0;
    for (const k of phase1) await apply(k, `egress-${++id}`);
    // The positive control: allowed host, opted-in Secret. The listener answers 500 with internal text.
    const control: Case = {
      name: 'control',
      url: listener.url(),
      secret: 'own-key',
      allowInsecure: true,
      reason: 'ServiceUnavailable',
      message: /no answer|service unavailable \(HTTP 500\)/,
    };
    await apply(control, 'egress-control');

    for (const k of [...phase1, control]) {
      await eventually(`${k.name} Ready=False ${k.reason}`, async () => ((await ready(k.name)).reason === k.reason ? true : undefined), 60_000, 300);
    }
    const phase1Connections = listener.connections();
    const controlRequests = listener.requests().length;
    const messages = await Promise.all([...phase1, control].map(async (k) => ({ k, r: await ready(k.name) })));

    // Phase 2: the same operator, restarted with plain http forbidden; the control now must not connect either.
    await signalAndWait(c, 'SIGTERM');
    const before2 = listener.connections();
    c = await start(['--allowed-service-hosts', '127.0.0.1', '--allow-http-services=false']);
    await eventually(
      'control Ready=False ServiceNotAllowed',
      async () => ((await ready('control')).reason === 'ServiceNotAllowed' ? true : undefined),
      60_000,
      300,
    );
    const httpMessage = (await ready('control')).message ?? '';
    await new Promise((r) => setTimeout(r, 3_000));
    const phase2Connections = listener.connections() - before2;

    const authorizations = listener.requests().map((r) => r.authorization ?? '');
    const leakedDbPassword = authorizations.filter((a) => a.includes('db-password-s3cr3t-value')).length;
    const statusWithRemoteText = messages.filter(({ r }) => (r.message ?? '').includes(LISTENER_SECRET_TEXT)).length;
    const events = (await env.events.listNamespacedEvent({ namespace: ns })).items;
    const eventsWithRemoteText = events.filter((e) => (e.note ?? '').includes(LISTENER_SECRET_TEXT)).length;

    recordRow({
      scenario: '9c. hostile tenant: egress',
      objects: phase1.length + 1,
      faults: `a tenant (ServiceAccount, namespace editor) aims ${phase1.length} UserGroupServices: at a listener with a Secret that did not opt in (an admin's "db-password"), at hosts the policy does not list (localhost, 169.254.169.254), over http without allowInsecure; then http forbidden by the operator`,
      converged:
        authorizations.every((a) => a === 'Token tenant-own-api-key-value') &&
        controlRequests > 0 &&
        leakedDbPassword === 0 &&
        phase2Connections === 0 &&
        statusWithRemoteText === 0 &&
        eventsWithRemoteText === 0,
      tokensLost: 0,
      duplicateRotations: 0,
      wallMs: Date.now() - started,
      notes:
        `refused at reconcile: ${messages.filter(({ k, r }) => k !== control && r.reason === k.reason).length}/${phase1.length} (${phase1.map((k) => `${k.name} → ${k.reason}`).join(', ')}); ` +
        `connections to the listener: ${phase1Connections} (${controlRequests} requests, all from the allowed control, each with the tenant's own opted-in key); "db-password" sent: ${leakedDbPassword}×; ` +
        `the listener's error text in status: ${statusWithRemoteText}, in Events: ${eventsWithRemoteText} (tenants see kind and HTTP status only); with http forbidden: ${phase2Connections} connections, reason ServiceNotAllowed`,
    });

    for (const { k, r } of messages) {
      expect(r, k.name).toMatchObject({ status: 'False', reason: k.reason });
      expect(r.message, k.name).toMatch(k.message);
    }
    // Every connection the listener saw came from the allowed control, with the opted-in key.
    expect(controlRequests).toBeGreaterThan(0);
    expect(authorizations.every((a) => a === 'Token tenant-own-api-key-value')).toBe(true);
    expect(leakedDbPassword).toBe(0);
    expect(statusWithRemoteText).toBe(0);
    expect(eventsWithRemoteText).toBe(0);
    expect(httpMessage).toContain('--allow-http-services');
    expect(phase2Connections).toBe(0);
  });
});

// The Lease primitive (src/kube/lease.ts) against a real apiserver whose answers reach it late: the deadline rule.
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, type KubeRequester, type KubeResponse, type RequestOptions } from '../../src/kube/http.js';
import { kubeAccessFromKubeConfig } from '../../src/kube/kubeconfig.js';
import { HeldLease, type LeaseContent } from '../../src/kube/lease.js';
import { eventually } from '../support/kube.js';
import { TestEnv } from '../support/operator.js';
import { ifAssigned } from '../support/teardown.js';

/*
 * Every request goes to the real apiserver at once and its real answer is handed over `delayMs` later, as a
 * congested network would: the apiserver has stored a renewal long before its holder learns so. The holder's
 * renew deadline must count from the send, so it stops acting renewDeadline after the send of its last accepted
 * write, not renewDeadline after that write's answer arrived.
 */

const RENEW_MS = 2_000;
const RETRY_MS = 300;
const DELAY_MS = 1_500;

interface Exchange {
  readonly method: string;
  readonly sentAt: number;
  answeredAt?: number;
  status?: number;
}

describe('HeldLease against a real apiserver (answers delivered late)', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await TestEnv.create('lease-rule');
  });
  afterAll(async () => ifAssigned(env)?.close());

  it('renewals answered 1.5 s late: fenced 2 s after the last accepted send, not 2 s after its answer', async () => {
    const real = await KubeClient.create(await kubeAccessFromKubeConfig(env.kc), 'lease-rule-test');
    const exchanges: Exchange[] = [];
    const state = { delayMs: 0 };
    const late: KubeRequester = {
      request: async (method: string, path: string, options?: RequestOptions): Promise<KubeResponse> => {
        const exchange: Exchange = { method, sentAt: Date.now() };
        exchanges.push(exchange);
        const delay = state.delayMs;
        const res = await real.request(method, path, options);
        await sleep(delay);
        exchange.answeredAt = Date.now();
        exchange.status = res.status;
        return res;
      },
    };
    const events: { kind: 'held' | 'lost'; at: number }[] = [];
    const content = (): LeaseContent => ({ annotations: {}, spec: { holderIdentity: 'rule-test', leaseDurationSeconds: 3 } });
    const lease = new HeldLease({
      client: late,
      namespace: env.namespace,
      name: 'deadline-rule',
      renewDeadlineMs: RENEW_MS,
      retryPeriodMs: RETRY_MS,
      log: pino({ level: 'silent' }),
      content: { renewal: content, over: content, creation: content },
      onHeld: () => events.push({ kind: 'held', at: Date.now() }),
      onLost: () => events.push({ kind: 'lost', at: Date.now() }),
      messages: { failed: 'failed', lost: 'lost' },
    });
    lease.start();
    try {
      await eventually('the Lease held', async () => (events.some((e) => e.kind === 'held') ? true : undefined), 15_000, 20);
      state.delayMs = DELAY_MS;
      const lost = await eventually('the fence', async () => events.find((e) => e.kind === 'lost'), 4 * (RENEW_MS + DELAY_MS), 10);
      // The write the fence came after: the last one accepted and answered before it.
      const accepted = exchanges.filter((e) => e.method !== 'GET' && e.status !== undefined && e.status < 300 && (e.answeredAt ?? Infinity) <= lost.at);
      const last = accepted.at(-1);
      if (!last?.answeredAt) throw new Error('no write was accepted before the fence');
      expect(last.answeredAt - last.sentAt).toBeGreaterThanOrEqual(DELAY_MS);
      expect(lost.at - last.sentAt).toBeGreaterThanOrEqual(RENEW_MS);
      // Counted from the answer it could come no earlier than answeredAt + RENEW_MS (1.5 s later).
      expect(lost.at).toBeLessThan(last.answeredAt + RENEW_MS - 1_000);
      // The apiserver stored that write: the holder's own clock ran out, not the Lease.
      const stored = await env.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: env.namespace, name: 'deadline-rule' });
      expect(stored.spec?.holderIdentity).toBe('rule-test');
    } finally {
      state.delayMs = 0;
      await lease.stop();
    }
  });
});

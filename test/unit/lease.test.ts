// The Lease primitive (src/kube/lease.ts) on fake timers over a one-Lease apiserver: the deadline rule, the fast path, the fence.
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { KubeRequester, KubeResponse, RequestOptions } from '../../src/kube/http.js';
import { HeldLease, type LeaseContent } from '../../src/kube/lease.js';

const RENEW_MS = 10_000;
const RETRY_MS = 2_000;

function status(code: number, reason: string): KubeResponse {
  return { status: code, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message: reason } };
}

/**
 * One Lease as the apiserver keeps it (resourceVersion checks: 409 on a stale PUT, 404 when absent, AlreadyExists on
 * a second create). Each request is stored at once and answered `delayMs` later (for Infinity: at answerHanging()).
 */
function oneLease() {
  let stored: { rv: number; body: Record<string, unknown> } | undefined;
  let rv = 0;
  const sent: { method: string; at: number }[] = [];
  const state = { delayMs: 0 };
  const hanging: (() => void)[] = [];
  const answer = (method: string, options: RequestOptions): KubeResponse => {
    const body = options.body as { metadata: Record<string, unknown> } | undefined;
    const wanted = body?.metadata['resourceVersion'];
    if (method === 'GET') return stored ? { status: 200, body: stored.body } : status(404, 'NotFound');
    if (method === 'POST' && stored) return status(409, 'AlreadyExists');
    if (method === 'PUT' && !stored) return status(404, 'NotFound');
    if (method === 'PUT' && wanted !== String(stored?.rv)) return status(409, 'Conflict');
    rv++;
    stored = { rv, body: { ...body, metadata: { ...body?.metadata, resourceVersion: String(rv) } } };
    return { status: method === 'POST' ? 201 : 200, body: stored.body };
  };
  const client: KubeRequester = {
    request: (method: string, _path: string, options: RequestOptions): Promise<KubeResponse> => {
      sent.push({ method, at: Date.now() });
      const res = answer(method, options);
      const delay = state.delayMs;
      return new Promise((resolve) => {
        if (delay === 0) resolve(res);
        else if (Number.isFinite(delay)) setTimeout(() => resolve(res), delay);
        else hanging.push(() => resolve(res));
      });
    },
  };
  /** Someone else writes the Lease (an admin's edit): a new resourceVersion. */
  const edit = (): void => {
    if (!stored) return;
    rv++;
    stored = { rv, body: { ...stored.body, metadata: { ...(stored.body['metadata'] as object), resourceVersion: String(rv) } } };
  };
  /** Answers the requests left hanging, at last. */
  const answerHanging = (): void => {
    for (const answer of hanging.splice(0)) answer();
  };
  return { client, sent, state, edit, answerHanging };
}

function held(api: ReturnType<typeof oneLease>) {
  const events: string[] = [];
  const content = (): LeaseContent => ({ annotations: {}, spec: { holderIdentity: 'me', leaseDurationSeconds: 15 } });
  const lease = new HeldLease({
    client: api.client,
    namespace: 'ugo',
    name: 'lock',
    renewDeadlineMs: RENEW_MS,
    retryPeriodMs: RETRY_MS,
    log: pino({ level: 'silent' }),
    content: { renewal: content, over: content, creation: content },
    onHeld: () => events.push('held'),
    onLost: () => events.push('lost'),
    messages: { failed: 'failed', lost: 'lost' },
  });
  return { lease, events };
}

describe('HeldLease', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('the renew deadline counts from when the accepted write was sent, not from its answer (3 s later)', async () => {
    const api = oneLease();
    const { lease, events } = held(api);
    api.state.delayMs = 3_000;
    lease.start();
    // GET (404) answered at +3 s, the POST sent then and answered at +6 s.
    await vi.advanceTimersByTimeAsync(6_000);
    expect(events).toEqual(['held']);
    const post = api.sent.find((s) => s.method === 'POST');
    expect(post?.at).toBe(1_003_000);
    // From here on nothing is answered: the fence must come renewDeadline after the POST's send.
    api.state.delayMs = Infinity;
    const sentAt = post?.at ?? 0;
    await vi.advanceTimersByTimeAsync(sentAt + RENEW_MS - 1 - Date.now());
    expect(events).toEqual(['held']);
    expect(lease.holds()).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    // The timer fenced it (holds() was not asked), at 10 s after the send: 3 s before 10 s after the answer.
    expect(events).toEqual(['held', 'lost']);
    expect(lease.holds()).toBe(false);
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(events).toEqual(['held', 'lost']);
    api.state.delayMs = 0;
    const stopping = lease.stop();
    api.answerHanging();
    await vi.advanceTimersByTimeAsync(0);
    await stopping;
  });

  it('a write answered only after the renew deadline never counts as held', async () => {
    const api = oneLease();
    const { lease, events } = held(api);
    api.state.delayMs = RENEW_MS / 2;
    lease.start();
    // GET at 0 answered at 5 s; POST sent at 5 s, answered at 10 s: 5 s after its send, within the deadline.
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(events).toEqual(['held']);
    api.state.delayMs = RENEW_MS;
    // The renewal sent next (at 12 s) is answered 10 s after its send; the deadline from the POST passed at 15 s.
    await vi.advanceTimersByTimeAsync(3 * RENEW_MS);
    expect(events).toEqual(['held', 'lost']);
    expect(lease.holds()).toBe(false);
    expect(api.sent.filter((s) => s.method === 'PUT').length).toBeGreaterThanOrEqual(1);
    api.state.delayMs = 0;
    const stopping = lease.stop();
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    await stopping;
  });

  it('while held a renewal is one PUT on the version it wrote; refused (written since) one GET and a PUT over it', async () => {
    const api = oneLease();
    const { lease, events } = held(api);
    lease.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(api.sent.map((s) => s.method)).toEqual(['GET', 'POST']);
    await vi.advanceTimersByTimeAsync(5 * RETRY_MS);
    expect(api.sent.slice(2).map((s) => s.method)).toEqual(['PUT', 'PUT', 'PUT', 'PUT', 'PUT']);
    api.edit();
    await vi.advanceTimersByTimeAsync(RETRY_MS);
    expect(api.sent.slice(7).map((s) => s.method)).toEqual(['PUT', 'GET', 'PUT']);
    await vi.advanceTimersByTimeAsync(RETRY_MS);
    expect(api.sent.slice(10).map((s) => s.method)).toEqual(['PUT']);
    expect(events).toEqual(['held']);
    // POST 1, five PUTs 2-6, the edit 7, the PUT over it 8, the last PUT 9.
    expect(lease.current()?.resourceVersion).toBe('9');
    const stopping = lease.stop();
    await vi.advanceTimersByTimeAsync(0);
    await stopping;
  });

  it('a process frozen past the deadline: holds() fences at once, before the timer or any renewal runs, and only once', async () => {
    const api = oneLease();
    const { lease, events } = held(api);
    lease.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(events).toEqual(['held']);
    const sentAt = api.sent.find((s) => s.method === 'POST')?.at ?? 0;
    // The clock jumps without any timer running (SIGSTOP then SIGCONT).
    vi.setSystemTime(sentAt + RENEW_MS);
    expect(lease.holds()).toBe(false);
    expect(events).toEqual(['held', 'lost']);
    expect(lease.holds()).toBe(false);
    // The loop renews next and holds the Lease again (nobody wrote it since): one more 'held', no second 'lost'.
    await vi.advanceTimersByTimeAsync(RETRY_MS);
    expect(events).toEqual(['held', 'lost', 'held']);
    const stopping = lease.stop();
    await vi.advanceTimersByTimeAsync(0);
    await stopping;
  });
});

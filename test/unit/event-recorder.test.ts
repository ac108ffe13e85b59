import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EventRecorder, MAX_SERIES, type EventRecorderOptions, type EventRegarding } from '../../src/kube/event-recorder.js';
import type { KubeClient, KubeResponse, RequestOptions } from '../../src/kube/http.js';

/** An apiserver stand-in that answers Event writes when told to, and records what it was sent. */
function fakeClient() {
  const sent: { method: string; path: string; body: Record<string, unknown> }[] = [];
  const waiting: (() => void)[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const client = {
    request: async (method: string, path: string, options: RequestOptions = {}): Promise<KubeResponse> => {
      sent.push({ method, path, body: options.body as Record<string, unknown> });
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      await new Promise<void>((resolve) => waiting.push(resolve));
      inFlight--;
      return { status: method === 'POST' ? 201 : 200, body: {} };
    },
  };
  return {
    client: client as unknown as KubeClient,
    sent,
    maxInFlight: () => maxInFlight,
    /** Answers every request in flight, then lets the recorder send its next. */
    answerAll: async () => {
      for (let i = 0; i < 10_000 && waiting.length > 0; i++) {
        waiting.shift()?.();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}

/** A recorder on the stand-in, silent, with the defaults unless `options` say otherwise. */
const recorderOn = (api: ReturnType<typeof fakeClient>, options: Partial<EventRecorderOptions> = {}): EventRecorder =>
  new EventRecorder(api.client, { controller: 'c', instance: 'i', log: pino({ level: 'silent' }), ...options });

/** A budget that never refills within a test (the rate must be positive). */
const NEVER = 1e-9;

const ug = (i: number): EventRegarding => ({ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', namespace: 'ns', name: `ug-${i}`, uid: `uid-${i}` });

describe('EventRecorder: a few writers from a bounded queue', () => {
  it('starts Event writes in the order they were emitted, at most `writers` (default 4) at a time', async () => {
    const api = fakeClient();
    const recorder = recorderOn(api);
    for (let i = 0; i < 20; i++) recorder.emit(ug(i), 'Normal', 'Synced', 'Sync', `synced ${i}`);
    expect(api.sent).toHaveLength(4);
    await api.answerAll();
    expect(api.sent.map((s) => (s.body['regarding'] as EventRegarding).name)).toEqual(Array.from({ length: 20 }, (_, i) => `ug-${i}`));
    expect(api.maxInFlight()).toBe(4);
    await recorder.flush(1_000);
  });

  it('writes one at a time with writers: 1, in the order they were emitted', async () => {
    const api = fakeClient();
    const recorder = recorderOn(api, {
      writers: 1,
    });
    for (let i = 0; i < 20; i++) recorder.emit(ug(i), 'Normal', 'Synced', 'Sync', `synced ${i}`);
    await api.answerAll();
    expect(api.sent.map((s) => (s.body['regarding'] as EventRegarding).name)).toEqual(Array.from({ length: 20 }, (_, i) => `ug-${i}`));
    expect(api.maxInFlight()).toBe(1);
  });

  it('drops Normal Events beyond the queue bound, keeps room for as many Warnings again, and counts the drops', async () => {
    const api = fakeClient();
    const dropped: string[] = [];
    const recorder = recorderOn(api, {
      maxQueued: 5,
      writers: 1,
      onDrop: (type, reason) => dropped.push(`${type}/${reason}`),
    });
    // The first write is in flight at once; 5 more fit in the queue.
    for (let i = 0; i < 8; i++) recorder.emit(ug(i), 'Normal', 'Synced', 'Sync', `synced ${i}`);
    for (let i = 0; i < 7; i++) recorder.emit(ug(i), 'Warning', 'ServiceUnavailable', 'Sync', `down ${i}`);
    expect(dropped).toEqual(['Normal/Synced', 'Normal/Synced', 'Warning/ServiceUnavailable', 'Warning/ServiceUnavailable']);
    await api.answerAll();
    expect(api.sent).toHaveLength(1 + 5 + 5);
    // A dropped Event leaves no series behind: the next occurrence is written afresh.
    recorder.emit(ug(7), 'Normal', 'Synced', 'Sync', 'synced 7');
    await api.answerAll();
    expect(api.sent.at(-1)?.method).toBe('POST');
    expect((api.sent.at(-1)?.body['regarding'] as EventRegarding).name).toBe('ug-7');
  });

  it('a namespace flooding the operator with failing objects spends its own Warning budget; another namespace and Normal Events keep theirs', async () => {
    const api = fakeClient();
    const dropped: string[] = [];
    const recorder = recorderOn(api, {
      warningsPerNamespace: { burst: 3, perSecond: NEVER },
      onDrop: (type, reason) => dropped.push(`${type}/${reason}`),
    });
    const inNamespace = (namespace: string, i: number): EventRegarding => ({ ...ug(i), namespace, uid: `${namespace}-${i}` });
    for (let i = 0; i < 10; i++) recorder.emit(inNamespace('flood', i), 'Warning', 'DuplicateUserGroupId', 'Sync', `dup ${i}`);
    for (let i = 0; i < 2; i++) recorder.emit(inNamespace('flood', 100 + i), 'Normal', 'Synced', 'Sync', `synced ${i}`);
    for (let i = 0; i < 3; i++) recorder.emit(inNamespace('quiet', i), 'Warning', 'ServiceUnavailable', 'Sync', `down ${i}`);
    await api.answerAll();
    const written = api.sent.map((s) => `${(s.body['regarding'] as EventRegarding).namespace}/${String(s.body['type'])}`);
    expect(written.filter((w) => w === 'flood/Warning')).toHaveLength(3);
    expect(written.filter((w) => w === 'flood/Normal')).toHaveLength(2);
    expect(written.filter((w) => w === 'quiet/Warning')).toHaveLength(3);
    expect(dropped).toEqual(Array.from({ length: 7 }, () => 'Warning/DuplicateUserGroupId'));
  });

  it('folds repeats into the series of one Event, patched after its create', async () => {
    const api = fakeClient();
    const recorder = recorderOn(api, {
      patchIntervalMs: 0,
    });
    recorder.emit(ug(1), 'Warning', 'RateLimited', 'Sync', 'slow down');
    recorder.emit(ug(1), 'Warning', 'RateLimited', 'Sync', 'slow down');
    await api.answerAll();
    expect(api.sent.map((s) => s.method)).toEqual(['POST', 'PATCH']);
    expect(api.sent[1]?.body['series']).toMatchObject({ count: 2 });
    expect(api.sent[1]?.path).toContain((api.sent[0]?.body['metadata'] as { name: string }).name);
  });

  it('with several writers, a series patch waits until its create was answered', async () => {
    const api = fakeClient();
    const recorder = recorderOn(api, {
      patchIntervalMs: 0,
    });
    recorder.emit(ug(1), 'Warning', 'RateLimited', 'Sync', 'slow down');
    recorder.emit(ug(1), 'Warning', 'RateLimited', 'Sync', 'slow down');
    // Two writers are free, but the patch holds back while the create is in flight.
    await new Promise((resolve) => setImmediate(resolve));
    expect(api.sent.map((s) => s.method)).toEqual(['POST']);
    await api.answerAll();
    expect(api.sent.map((s) => s.method)).toEqual(['POST', 'PATCH']);
  });

  it(`remembers at most ${MAX_SERIES} series, forgetting the least recently seen: its repeat is a new Event`, async () => {
    const api = fakeClient();
    const recorder = recorderOn(api, {
      patchIntervalMs: 0,
      maxQueued: 10_000,
      // One namespace's 4,097 objects: the Warning budget per namespace is not what this test is about.
      warningsPerNamespace: { burst: 10_000, perSecond: NEVER },
    });
    const emitAll = async (...ids: number[]): Promise<string[]> => {
      const from = api.sent.length;
      for (const i of ids) recorder.emit(ug(i), 'Warning', 'RateLimited', 'Sync', 'slow down');
      await api.answerAll();
      return api.sent.slice(from).map((s) => s.method);
    };
    await emitAll(...Array.from({ length: MAX_SERIES }, (_, i) => i));
    // Seen again: ug-0 becomes the most recent, so ug-1 is the least recent when one more series comes.
    expect(await emitAll(0)).toEqual(['PATCH']);
    expect(await emitAll(MAX_SERIES)).toEqual(['POST']);
    expect(await emitAll(1)).toEqual(['POST']);
    expect(await emitAll(0, MAX_SERIES)).toEqual(['PATCH', 'PATCH']);
  });

  it('flush waits for queued writes, but not past its timeout', async () => {
    const api = fakeClient();
    const recorder = recorderOn(api);
    recorder.emit(ug(1), 'Normal', 'Synced', 'Sync', 'synced');
    const started = Date.now();
    await recorder.flush(50);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    const flushed = recorder.flush(5_000);
    await api.answerAll();
    await flushed;
    expect(api.sent).toHaveLength(1);
  });
});

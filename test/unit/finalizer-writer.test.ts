import { describe, expect, it } from 'vitest';
import type { KubeClient, KubeResponse, RequestOptions } from '../../src/kube/http.js';
import { FinalizerWriter } from '../../src/kube/finalizer-writer.js';

/** FinalizerWriter over a scripted apiserver: one finalizer in or out, everyone else's kept, never on a newer object. */

const F = 'usergroup.dev/rotate-on-delete';
const PATH = '/apis/usergroup.dev/v1/namespaces/a/usergroups/acme';

function scripted(...answers: KubeResponse[]) {
  const sent: { method: string; options: RequestOptions }[] = [];
  const client = {
    request: (method: string, _path: string, options: RequestOptions = {}): Promise<KubeResponse> => {
      sent.push({ method, options });
      const next = answers.shift();
      if (!next) throw new Error('no answer scripted');
      return Promise.resolve(next);
    },
  };
  return { writer: new FinalizerWriter(client as unknown as KubeClient), sent };
}

const meta = (finalizers: string[] | undefined, extra: Record<string, unknown> = {}): KubeResponse => ({
  status: 200,
  body: { kind: 'PartialObjectMetadata', metadata: { name: 'acme', uid: 'uid-1', resourceVersion: '7', ...(finalizers ? { finalizers } : {}), ...extra } },
});
const conflict: KubeResponse = { status: 409, body: { kind: 'Status', code: 409, reason: 'Conflict', message: 'the object has been modified' } };

describe('FinalizerWriter', () => {
  it('adds ours after the others, naming the resourceVersion read; reads metadata only', async () => {
    const { writer, sent } = scripted(meta(['foregroundDeletion']), meta(['foregroundDeletion', F]));
    expect((await writer.setAt(PATH, 'uid-1', F, true)).kind).toBe('patched');
    expect(sent[0]?.options.accept).toContain('PartialObjectMetadata');
    expect(sent[1]?.method).toBe('PATCH');
    expect(sent[1]?.options.body).toEqual({ metadata: { resourceVersion: '7', finalizers: ['foregroundDeletion', F] } });
  });

  it('removes ours only', async () => {
    const { writer, sent } = scripted(meta(['a.example/x', F, 'b.example/y']), meta(['a.example/x', 'b.example/y']));
    await writer.setAt(PATH, 'uid-1', F, false);
    expect(sent[1]?.options.body).toEqual({ metadata: { resourceVersion: '7', finalizers: ['a.example/x', 'b.example/y'] } });
  });

  it('no write when the list already is as asked, for a newer object of the name, or to add to an object being deleted', async () => {
    for (const [answer, present] of [
      [meta([F]), true],
      [meta(undefined), false],
      [meta(undefined, { uid: 'uid-2' }), true],
      [meta(undefined, { deletionTimestamp: '2026-11-22T00:00:00Z' }), true],
    ] as const) {
      const { writer, sent } = scripted(answer);
      expect(['unchanged', 'gone']).toContain((await writer.setAt(PATH, 'uid-1', F, present)).kind);
      expect(sent.map((s) => s.method)).toEqual(['GET']);
    }
  });

  it('a conflict is read again, at most three times', async () => {
    const { writer, sent } = scripted(meta([F]), conflict, meta([F]), conflict, meta([F]), conflict);
    expect((await writer.setAt(PATH, 'uid-1', F, false)).kind).toBe('conflict');
    expect(sent.map((s) => s.method)).toEqual(['GET', 'PATCH', 'GET', 'PATCH', 'GET', 'PATCH']);
  });

  it('gone (404) is done', async () => {
    const { writer } = scripted({ status: 404, body: { kind: 'Status', code: 404, reason: 'NotFound', message: 'not found' } });
    expect((await writer.setAt(PATH, 'uid-1', F, false)).kind).toBe('gone');
  });
});

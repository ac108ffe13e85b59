import { isRecord } from '../api/meta.js';
import type { KubeClient } from './http.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';

export interface WatchEvent {
  readonly type: WatchEventType;
  readonly object: Record<string, unknown>;
}

/** How one watch connection ended; the reflector decides what comes next. */
export type WatchEnd =
  | { readonly kind: 'closed' } // the server ended it (timeoutSeconds) or we were stopped
  | { readonly kind: 'gone' } // 410: our resourceVersion is too old, re-list
  | { readonly kind: 'silent'; readonly ms: number } // no byte for too long: a dead connection that never closed
  | { readonly kind: 'failed'; readonly status: number | undefined; readonly message: string };

export interface WatchOptions {
  readonly resourceVersion: string;
  readonly labelSelector?: string;
  /** Accept header, e.g. for PartialObjectMetadata; JSON objects by default. */
  readonly accept?: string;
  readonly timeoutSeconds: number;
  readonly inactivityMs: number;
  readonly signal: AbortSignal;
  readonly onEvent: (event: WatchEvent) => void;
}

/** One watch request, streamed line by line, ended by the server, a 410, an error, silence or the signal. */
export async function watchOnce(client: KubeClient, path: string, options: WatchOptions): Promise<WatchEnd> {
  const query: Record<string, string> = {
    watch: 'true',
    allowWatchBookmarks: 'true',
    resourceVersion: options.resourceVersion,
    timeoutSeconds: String(options.timeoutSeconds),
  };
  if (options.labelSelector) query['labelSelector'] = options.labelSelector;
  if (options.signal.aborted) return { kind: 'closed' };

  let opened;
  try {
    opened = await client.openStream(path, query, options.accept);
  } catch (err) {
    return { kind: 'failed', status: undefined, message: describe(err) };
  }
  const { request, response } = opened;
  return new Promise<WatchEnd>((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (end: WatchEnd): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      request.destroy();
      resolve(end);
    };
    const onAbort = (): void => finish({ kind: 'closed' });
    options.signal.addEventListener('abort', onAbort, { once: true });
    const arm = (): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => finish({ kind: 'silent', ms: options.inactivityMs }), options.inactivityMs);
      timer.unref();
    };
    arm();
    request.on('error', (err) => finish({ kind: 'failed', status: undefined, message: describe(err) }));

    response.then(
      (res) => {
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => { if (text.length < 4096) text += chunk; });
          res.on('end', () => finish(status === 410 ? { kind: 'gone' } : { kind: 'failed', status, message: `HTTP ${status}: ${statusMessage(text)}` }));
          res.on('error', (err) => finish({ kind: 'failed', status, message: describe(err) }));
          return;
        }
        let buffered = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          arm();
          buffered += chunk;
          let newline = buffered.indexOf('\n');
          while (newline >= 0 && !settled) {
            const line = buffered.slice(0, newline).trim();
            buffered = buffered.slice(newline + 1);
            if (line) handleLine(line);
            newline = buffered.indexOf('\n');
          }
        });
        res.on('end', () => finish({ kind: 'closed' }));
        res.on('aborted', () => finish({ kind: 'failed', status: 200, message: 'connection aborted' }));
        res.on('error', (err) => finish({ kind: 'failed', status: 200, message: describe(err) }));
      },
      (err: unknown) => finish({ kind: 'failed', status: undefined, message: describe(err) }),
    );

    function handleLine(line: string): void {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line) as unknown;
      } catch {
        finish({ kind: 'failed', status: 200, message: 'watch stream carried a line that is not JSON' });
        return;
      }
      if (!isRecord(parsed) || typeof parsed['type'] !== 'string' || !isRecord(parsed['object'])) return;
      const type = parsed['type'];
      const object = parsed['object'];
      if (type === 'ERROR') {
        const code = object['code'];
        finish(code === 410 ? { kind: 'gone' } : { kind: 'failed', status: typeof code === 'number' ? code : undefined, message: `watch error: ${statusMessage(object)}` });
        return;
      }
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' || type === 'BOOKMARK') options.onEvent({ type, object });
    }
  });
}

function statusMessage(body: unknown): string {
  if (typeof body === 'string') {
    try {
      return statusMessage(JSON.parse(body) as unknown);
    } catch {
      return body.slice(0, 200);
    }
  }
  return isRecord(body) && typeof body['message'] === 'string' ? body['message'] : 'no message';
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

// One watch request, read line by line into events, and how it ended.
import { StringDecoder } from 'node:string_decoder';
import { isRecord } from '../platform/json-value.js';
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
  /**
   * A watch-list (WatchList protocol, see watch-list.ts): the state first, as ADDED events ended by a bookmark
   * annotated k8s.io/initial-events-end, then the watch goes on. `resourceVersion` "" asks for the latest
   * state (a consistent read); another one for a state at least as new (resourceVersionMatch=NotOlderThan).
   */
  readonly sendInitialEvents?: boolean;
  readonly timeoutSeconds: number;
  readonly inactivityMs: number;
  /**
   * The most bytes one event (one line) may take: a longer one ends the watch as failed before more of it is
   * held, so a stream that never sends a newline cannot grow a string without bound. Default
   * DEFAULT_MAX_WATCH_LINE_BYTES.
   */
  readonly maxLineBytes?: number;
  readonly signal: AbortSignal;
  readonly onEvent: (event: WatchEvent) => void;
}

/** A watch event's byte bound: one object (etcd stores at most 1.5 MiB) in its event envelope, with room. */
export const DEFAULT_MAX_WATCH_LINE_BYTES = 4 << 20;

/** One watch request, streamed line by line, ended by the server, a 410, an error, silence or the signal. */
export async function watchOnce(client: KubeClient, path: string, options: WatchOptions): Promise<WatchEnd> {
  const query: Record<string, string> = {
    watch: 'true',
    allowWatchBookmarks: 'true',
    resourceVersion: options.resourceVersion,
    timeoutSeconds: String(options.timeoutSeconds),
  };
  if (options.sendInitialEvents) {
    query['sendInitialEvents'] = 'true';
    query['resourceVersionMatch'] = 'NotOlderThan';
  }
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
          res.on('data', (chunk: string) => {
            if (text.length < 4096) text += chunk;
          });
          res.on('end', () => finish(status === 410 ? { kind: 'gone' } : { kind: 'failed', status, message: `HTTP ${status}: ${statusMessage(text)}` }));
          res.on('error', (err) => finish({ kind: 'failed', status, message: describe(err) }));
          return;
        }
        const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_WATCH_LINE_BYTES;
        const lines = new LineSplitter(maxLineBytes);
        res.on('data', (chunk: Buffer) => {
          if (settled) return;
          arm();
          const complete = lines.push(chunk);
          if (complete === undefined) {
            finish({ kind: 'failed', status: 200, message: `watch event larger than ${maxLineBytes} bytes` });
            return;
          }
          for (const line of complete) {
            // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a handler may have finished the watch
            if (settled) return;
            const trimmed = line.trim();
            if (trimmed) handleLine(trimmed);
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
        finish(
          code === 410
            ? { kind: 'gone' }
            : { kind: 'failed', status: typeof code === 'number' ? code : undefined, message: `watch error: ${statusMessage(object)}` },
        );
        return;
      }
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' || type === 'BOOKMARK') options.onEvent({ type, object });
    }
  });
}

/**
 * Splits a byte stream into newline-terminated UTF-8 lines, holding at most `maxLineBytes` of an unfinished
 * one. Counts bytes on the Buffers themselves (a newline byte never occurs inside a multi-byte character), and
 * keeps only decoded text, as small pieces joined once a line is complete.
 */
export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending: string[] = [];
  private pendingBytes = 0;

  constructor(private readonly maxLineBytes: number) {}

  /** The lines this chunk completed (without their newline), or undefined once a line is over the bound. */
  push(chunk: Buffer): string[] | undefined {
    let from = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, from)) {
      if (this.pendingBytes + nl - from > this.maxLineBytes) return undefined;
      this.pendingBytes = 0;
      from = nl + 1;
    }
    this.pendingBytes += chunk.length - from;
    if (this.pendingBytes > this.maxLineBytes) return undefined;
    const text = this.decoder.write(chunk);
    const out: string[] = [];
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      this.pending.push(text.slice(start, nl));
      out.push(this.pending.join(''));
      this.pending = [];
      start = nl + 1;
    }
    if (start < text.length) this.pending.push(text.slice(start));
    return out;
  }
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

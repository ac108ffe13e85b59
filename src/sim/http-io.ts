// The simulator's HTTP plumbing: bounded body reads and JSON answers.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { failed } from './responses.js';

export const MAX_BODY_BYTES = 1024 * 1024;

export type Body = { readonly ok: true; readonly text: string } | { readonly ok: false; readonly problem: 'too_large' | 'not_utf8' | 'aborted' };

/**
 * Reads a request body of at most `limit` bytes. A declared or actual size over the limit
 * stops buffering at once; the rest is read and dropped so the client can still read the 413.
 */
export function readBody(request: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Body> {
  return new Promise((resolve) => {
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      request.resume();
      resolve({ ok: false, problem: 'too_large' });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    request.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > limit) {
        tooLarge = true;
        chunks.length = 0;
        resolve({ ok: false, problem: 'too_large' });
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => {
      if (tooLarge) return;
      try {
        resolve({ ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)) });
      } catch {
        resolve({ ok: false, problem: 'not_utf8' });
      }
    });
    request.on('error', () => resolve({ ok: false, problem: 'aborted' }));
    request.on('close', () => {
      if (!request.complete) resolve({ ok: false, problem: 'aborted' });
    });
  });
}

const JSON_TYPE = 'application/json; charset=utf-8';

export function sendJson(response: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  sendRaw(response, status, JSON.stringify(body), headers);
}

/** Sends any text as a JSON answer, including the deliberately broken bodies of hostile faults. */
export function sendRaw(response: ServerResponse, status: number, text: string, headers: OutgoingHttpHeaders = {}): void {
  if (response.headersSent || response.destroyed) return;
  const payload = Buffer.from(text, 'utf8');
  response.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': payload.length, ...headers });
  response.end(payload);
}

/** Every error answer has the service's failure shape: {"success":0,"message":...}. */
export function sendFailure(response: ServerResponse, status: number, message: string, headers: OutgoingHttpHeaders = {}): void {
  sendJson(response, status, failed(message), headers);
}

export function jsonHeaders(length: number): OutgoingHttpHeaders {
  return { 'content-type': JSON_TYPE, 'content-length': length };
}

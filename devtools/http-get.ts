import http from 'node:http';

/** What a GET answered, its body read whole as UTF-8. */
export interface HttpAnswer {
  readonly status: number;
  readonly body: string;
  readonly contentType: string | undefined;
  readonly headers: http.IncomingHttpHeaders;
}

export interface HttpGetOptions {
  /** The Authorization header, sent as is (e.g. `Bearer <token>`); none when undefined. */
  readonly authorization?: string | undefined;
  /** Fails the request when the socket is idle this long. */
  readonly timeoutMs?: number;
}

/**
 * GET http://127.0.0.1:<port><urlPath> on a connection of its own (no keep-alive agent, so a server that was
 * stopped and started again is never reached through a stale socket). Free of vitest: the bench uses it too.
 */
export function httpGet(port: number, urlPath: string, options: HttpGetOptions = {}): Promise<HttpAnswer> {
  const { authorization, timeoutMs = 10_000 } = options;
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: '127.0.0.1', port, path: urlPath, timeout: timeoutMs, agent: false, headers: authorization === undefined ? {} : { authorization } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            contentType: res.headers['content-type'],
            headers: res.headers,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} timed out`)));
  });
}

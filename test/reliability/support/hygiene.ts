import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Helpers for the secret-hygiene scenario: a proxy in front of the service simulator that sees every
 * token the service hands out (and can answer with hostile messages that echo secrets back), and a
 * scanner that looks for secrets in text without ever printing one.
 */

/** What the proxy hands an injector: the request as the client sent it. */
export interface ProxiedRequest {
  readonly method: string;
  readonly path: string;
  /** From `Authorization: Token <key>`, if present. */
  readonly apiKey: string | undefined;
  /** The JSON body, if it parsed. */
  readonly json: Record<string, unknown> | undefined;
}

/** An answer the proxy gives instead of forwarding (the service never sees the call). */
export interface InjectedAnswer {
  readonly status: number;
  readonly body: string;
}

export type Injector = (request: ProxiedRequest) => InjectedAnswer | undefined;

export interface CapturingProxy {
  /** e.g. http://127.0.0.1:41234 */
  readonly url: string;
  /** Every non-empty token seen: `user_group.token` in answers, `current_token` in requests. */
  readonly tokens: Set<string>;
  /** Every API key presented in an Authorization header. */
  readonly apiKeys: Set<string>;
  /** The last token the service answered with, per user_group_id (from PUT answers) — for echoes. */
  readonly lastTokenOf: Map<string, string>;
  /** Calls forwarded to the service, and calls answered by the injector. */
  readonly counts: { forwarded: number; injected: number };
  setInjector(injector: Injector | undefined): void;
  stop(): Promise<void>;
}

/** Bodies above this are passed through but not parsed (the simulator's 5 MiB hostile body has no token). */
const PARSE_LIMIT = 256 * 1024;

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A transparent HTTP proxy to `target` that records every token and API key passing through. Answers
 * are streamed back as they arrive (a slow-drip answer stays slow, a hang stays a hang); when the
 * client gives up, the upstream call is abandoned too.
 */
export async function startCapturingProxy(target: string): Promise<CapturingProxy> {
  const upstream = new URL(target);
  const tokens = new Set<string>();
  const apiKeys = new Set<string>();
  const lastTokenOf = new Map<string, string>();
  const counts = { forwarded: 0, injected: 0 };
  let injector: Injector | undefined;

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => res.destroy());
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const auth = /^Token (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (auth) apiKeys.add(auth);
      const json = parseObject(body.toString('utf8'));
      const current = json?.['current_token'];
      if (typeof current === 'string' && current !== '') tokens.add(current);
      const userGroupId = typeof json?.['user_group_id'] === 'string' ? json['user_group_id'] : undefined;

      const injected = injector?.({ method: req.method ?? '', path: req.url ?? '/', apiKey: auth, json });
      if (injected) {
        counts.injected++;
        res.writeHead(injected.status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(injected.body)) });
        res.end(injected.body);
        return;
      }
      counts.forwarded++;
      const headers = { ...req.headers, host: upstream.host, 'content-length': String(body.length) };
      delete headers['transfer-encoding'];
      const forward = httpRequest(
        { protocol: upstream.protocol, hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
        (upstreamRes) => {
          res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
          res.flushHeaders();
          const seen: Buffer[] = [];
          let seenBytes = 0;
          upstreamRes.on('data', (chunk: Buffer) => {
            if (seenBytes <= PARSE_LIMIT) seen.push(chunk);
            seenBytes += chunk.length;
            res.write(chunk);
          });
          upstreamRes.on('end', () => {
            res.end();
            if (seenBytes > PARSE_LIMIT) return;
            const group = parseObject(Buffer.concat(seen).toString('utf8'))?.['user_group'];
            const token = typeof group === 'object' && group !== null ? (group as Record<string, unknown>)['token'] : undefined;
            if (typeof token === 'string' && token !== '') {
              tokens.add(token);
              if (userGroupId !== undefined) lastTokenOf.set(userGroupId, token);
            }
          });
          upstreamRes.on('error', () => res.destroy());
        },
      );
      forward.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ success: 0, message: 'capturing proxy: upstream unreachable' }));
      });
      // The client gave up (timeout): give up upstream as well, as a direct connection would.
      res.on('close', () => {
        if (!res.writableFinished) forward.destroy();
      });
      forward.end(body);
    });
  };

  const server: Server = createServer(handle);
  const address = await new Promise<AddressInfo>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address() as AddressInfo));
  });
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${address.port}`,
    tokens,
    apiKeys,
    lastTokenOf,
    counts,
    setInjector: (next) => {
      injector = next;
    },
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

/** Fragments shorter than this are not searched (random 16-character fragments never occur by chance). */
const FRAGMENT = 16;

/**
 * The forms in which a secret could leak: the value itself and its base64 (standard and url-safe) at each
 * of the three byte alignments it can have inside a longer base64 text. A leak is any FRAGMENT-character
 * piece of one of these.
 */
function leakForms(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const forms = [secret];
  for (let k = 0; k < 3; k++) {
    const whole = Math.floor((bytes.length - k) / 3) * 3;
    const aligned = bytes.subarray(k, k + whole);
    forms.push(aligned.toString('base64'), aligned.toString('base64url'));
  }
  return forms.filter((f) => f.length >= FRAGMENT);
}

export interface Finding {
  /** Where (e.g. "log line 12", "Event default/x"). */
  readonly where: string;
  /** Which secret, by label (never the value). */
  readonly secret: string;
}

/**
 * Looks for any FRAGMENT-character piece of any leak form of any secret in the texts. Returns where
 * and which, never the secret itself.
 */
export class SecretScanner {
  private readonly fragments = new Map<string, string>();
  readonly secrets: number;

  constructor(secrets: ReadonlyMap<string, string>) {
    for (const [label, value] of secrets) {
      for (const form of leakForms(value)) {
        for (let i = 0; i + FRAGMENT <= form.length; i++) this.fragments.set(form.slice(i, i + FRAGMENT), label);
      }
    }
    this.secrets = secrets.size;
  }

  scan(where: string, text: string): Finding[] {
    const found = new Map<string, Finding>();
    for (let i = 0; i + FRAGMENT <= text.length; i++) {
      const label = this.fragments.get(text.slice(i, i + FRAGMENT));
      if (label !== undefined && !found.has(label)) found.set(label, { where, secret: label });
    }
    return [...found.values()];
  }
}

/** The secret-hygiene scenario's fault mix at the simulator (scenario 10 measures retries under the same). */
export const HYGIENE_SIM_FAULTS = {
  errorRate: 0.2,
  malformedJsonRate: 0.04,
  successZeroRate: 0.04,
  missingTokenRate: 0.04,
  emptyTokenRate: 0.04,
  hugeBodyRate: 0.02,
  slowDripRate: 0.02,
} as const;
/** Probability that the proxy answers a call itself (echoing secrets, or a plain refusal). */
export const HYGIENE_ECHO_RATE = 0.12;
/** Share of calls that fail: a call is good when neither the proxy nor the simulator injects a fault. */
export const HYGIENE_FAILING_SHARE = 1 - (1 - HYGIENE_ECHO_RATE) * (1 - Object.values(HYGIENE_SIM_FAULTS).reduce((a, b) => a + b, 0));

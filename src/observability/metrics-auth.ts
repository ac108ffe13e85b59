// Authorizes /metrics scrapes with TokenReview and SubjectAccessReview, cached and rate-bounded.
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { isRecord } from '../platform/json-value.js';
import { call, type ApiResult, type KubeResponse, type RequestOptions } from '../kube/http.js';
import { TokenBucket } from '../platform/token-bucket.js';
import type { Handler, RouteResponse } from './http-server.js';

export const TOKEN_REVIEWS_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
export const SUBJECT_ACCESS_REVIEWS_PATH = '/apis/authorization.k8s.io/v1/subjectaccessreviews';

/** The one KubeClient method the reviewer needs; KubeClient satisfies it. */
export interface ReviewClient {
  request(method: string, path: string, options?: RequestOptions): Promise<KubeResponse>;
}

/** How a /metrics request ended: the first three are decisions (and cached), the last two are not. */
export type MetricsAuthResult = 'allowed' | 'unauthenticated' | 'denied' | 'throttled' | 'error';
/** What answered a request: a cached decision, a review (made for it, or shared with a concurrent request), or neither. */
export type MetricsAuthSource = 'cache' | 'review' | 'none';
export type ReviewKind = 'TokenReview' | 'SubjectAccessReview';
/** What one review call to the apiserver said; `error` when it gave no usable answer. */
export type ReviewResult = 'authenticated' | 'unauthenticated' | 'allowed' | 'denied' | 'error';

export interface MetricsAuthOptions {
  readonly client: ReviewClient;
  readonly log: Logger;
  /** The non-resource URL the SubjectAccessReview asks `get` for (controller-runtime asks for the request path). */
  readonly path?: string;
  /** How long a decision (allowed, denied, unauthenticated) is reused for the same token. Default 10 s. */
  readonly ttlMs?: number;
  /** Decisions kept at most; the oldest go first. Default 1024. */
  readonly maxEntries?: number;
  /** Distinct tokens under review at once; more are answered 429 at once. Default 4. */
  readonly maxConcurrent?: number;
  /** Review calls (TokenReview and SubjectAccessReview each count) per second, sustained. Default 2. */
  readonly reviewsPerSecond?: number;
  /** Review calls allowed in a burst (a few scrapers' first scrapes, at 2 calls each, fit). Default 20. */
  readonly reviewBurst?: number;
  /** Milliseconds, monotonic; tests pass a fake clock. */
  readonly now?: () => number;
  readonly observeRequest?: (result: MetricsAuthResult, source: MetricsAuthSource) => void;
  readonly observeReview?: (kind: ReviewKind, result: ReviewResult) => void;
}

/** The identity a TokenReview vouches for, as the SubjectAccessReview must repeat it. */
export interface ReviewedUser {
  readonly username: string;
  readonly uid: string | undefined;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

export type TokenReviewOutcome =
  { readonly authenticated: true; readonly user: ReviewedUser } | { readonly authenticated: false; readonly error: string | undefined };
export interface AccessReviewOutcome {
  readonly allowed: boolean;
  readonly reason: string | undefined;
}

/** The status of a TokenReview answer; undefined when the answer is not one. */
export function parseTokenReview(body: unknown): TokenReviewOutcome | undefined {
  if (!isRecord(body) || !isRecord(body['status'])) return undefined;
  const status = body['status'];
  const error = typeof status['error'] === 'string' ? status['error'] : undefined;
  if (status['authenticated'] !== true) return { authenticated: false, error };
  const user = status['user'];
  if (!isRecord(user) || typeof user['username'] !== 'string' || user['username'] === '') return undefined;
  const groups = Array.isArray(user['groups']) ? user['groups'].filter((g): g is string => typeof g === 'string') : [];
  const extra: Record<string, readonly string[]> = {};
  if (isRecord(user['extra'])) {
    for (const [k, v] of Object.entries(user['extra'])) if (Array.isArray(v)) extra[k] = v.filter((x): x is string => typeof x === 'string');
  }
  return { authenticated: true, user: { username: user['username'], uid: typeof user['uid'] === 'string' ? user['uid'] : undefined, groups, extra } };
}

/** The status of a SubjectAccessReview answer; undefined when the answer is not one. */
export function parseAccessReview(body: unknown): AccessReviewOutcome | undefined {
  if (!isRecord(body) || !isRecord(body['status']) || typeof body['status']['allowed'] !== 'boolean') return undefined;
  const status = body['status'];
  // "denied" only short-circuits other authorizers; for us, not allowed is not allowed.
  return { allowed: status['allowed'] === true && status['denied'] !== true, reason: typeof status['reason'] === 'string' ? status['reason'] : undefined };
}

/** The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, RFC 6750), if that is what it is. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^bearer +(\S+) *$/i.exec(header);
  return match?.[1];
}

/** Longer "tokens" are refused without a review: no real one comes close, and we never send the apiserver junk of any size. */
const MAX_TOKEN_LENGTH = 8192;
/** Timeout of one TokenReview or SubjectAccessReview call. */
const REVIEW_TIMEOUT_MS = 5_000;

interface Decision {
  readonly result: 'allowed' | 'denied' | 'unauthenticated';
  readonly user: string | undefined;
  readonly expires: number;
}

/** The outcome of check(); `user` once a TokenReview named one. */
export interface Verdict {
  readonly result: MetricsAuthResult;
  readonly user: string | undefined;
}

/**
 * Authentication and authorization of /metrics, as controller-runtime's filters.WithAuthenticationAndAuthorization
 * does it: the request's bearer token goes to a TokenReview, the identity it yields to a SubjectAccessReview for
 * `get` on the non-resource URL /metrics. No or a bad token is 401, an identity not allowed 403.
 *
 * Anyone who can reach the port can make it call the apiserver, so the calls are bounded three ways: decisions
 * are reused for the same token for `ttlMs` (a scraper every 15 s costs at most its two reviews per scrape, and
 * concurrent scrapes with one token share one review); at most `maxConcurrent` tokens are under review at once;
 * and review calls draw on a token bucket. What does not fit is answered 429 without a call, so a flood of
 * made-up tokens costs the apiserver at most `reviewBurst` + `reviewsPerSecond`/s calls while scrapers whose
 * decision is cached carry on. Failed reviews are answered 503 and never cached.
 *
 * Tokens are kept only as SHA-256 digests and never logged; neither is the TokenReview answer, which echoes the token.
 */
export class MetricsAuthorizer {
  readonly #client: ReviewClient;
  readonly #log: Logger;
  readonly #path: string;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #maxConcurrent: number;
  readonly #now: () => number;
  readonly #bucket: TokenBucket;
  readonly #options: MetricsAuthOptions;
  /**
   * Token digest → decision, in insertion order (= expiry order, one TTL for all), so the first is the oldest.
   * Expired entries stay until replaced or pushed out: the map never holds more than maxEntries.
   */
  readonly #decisions = new Map<string, Decision>();
  readonly #inFlight = new Map<string, Promise<Verdict>>();
  #lastWarnAt = -Infinity;
  #warningsSuppressed = 0;

  constructor(options: MetricsAuthOptions) {
    this.#options = options;
    this.#client = options.client;
    this.#log = options.log;
    this.#path = options.path ?? '/metrics';
    this.#ttlMs = options.ttlMs ?? 10_000;
    this.#maxEntries = options.maxEntries ?? 1024;
    this.#maxConcurrent = options.maxConcurrent ?? 4;
    this.#now = options.now ?? (() => performance.now());
    this.#bucket = new TokenBucket(options.reviewsPerSecond ?? 2, options.reviewBurst ?? 20, this.#now);
  }

  /** Decisions currently cached (tests). */
  get cachedDecisions(): number {
    return this.#decisions.size;
  }

  /** `handler`, answered only for requests whose token may `get` the path. */
  guard(handler: Handler): Handler {
    return async (req: IncomingMessage): Promise<RouteResponse> => {
      const verdict = await this.check(req.headers.authorization);
      return verdict.result === 'allowed' ? handler(req) : refusal(verdict, this.#path);
    };
  }

  /** Decides on one Authorization header value. */
  async check(authorization: string | undefined): Promise<Verdict> {
    const token = bearerToken(authorization);
    if (token === undefined || token.length > MAX_TOKEN_LENGTH) return this.#observed({ result: 'unauthenticated', user: undefined }, 'none');
    const key = createHash('sha256').update(token).digest('base64');
    const now = this.#now();
    const cached = this.#decisions.get(key);
    if (cached && cached.expires > now) return this.#observed({ result: cached.result, user: cached.user }, 'cache');
    // Scrapes with one token at the same moment (replicas of an HA Prometheus share a ServiceAccount, not a
    // token, but retries do) wait for the same review.
    const pending = this.#inFlight.get(key);
    if (pending) return this.#observed(await pending, 'review');
    if (this.#inFlight.size >= this.#maxConcurrent) return this.#observed({ result: 'throttled', user: undefined }, 'none');
    const review = this.#review(token)
      .then((verdict) => {
        if (verdict.result === 'allowed' || verdict.result === 'denied' || verdict.result === 'unauthenticated')
          this.#remember(key, verdict.result, verdict.user);
        return verdict;
      })
      .finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, review);
    const verdict = await review;
    // Throttled before its TokenReview (so no user is known): no call was made for it.
    return this.#observed(verdict, verdict.result === 'throttled' && verdict.user === undefined ? 'none' : 'review');
  }

  #observed(verdict: Verdict, source: MetricsAuthSource): Verdict {
    this.#options.observeRequest?.(verdict.result, source);
    return verdict;
  }

  #remember(key: string, result: Decision['result'], user: string | undefined): void {
    this.#decisions.delete(key);
    while (this.#decisions.size >= this.#maxEntries) {
      const oldest = this.#decisions.keys().next();
      if (oldest.done === true) break;
      this.#decisions.delete(oldest.value);
    }
    this.#decisions.set(key, { result, user, expires: this.#now() + this.#ttlMs });
  }

  async #review(token: string): Promise<Verdict> {
    if (!this.#bucket.tryTake()) return { result: 'throttled', user: undefined };
    const authn = await this.#call(
      'TokenReview',
      TOKEN_REVIEWS_PATH,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token },
      },
      parseTokenReview,
    );
    if (authn === undefined) {
      this.#options.observeReview?.('TokenReview', 'error');
      return { result: 'error', user: undefined };
    }
    if (!authn.authenticated) {
      this.#options.observeReview?.('TokenReview', 'unauthenticated');
      this.#log.debug({ reason: authn.error?.slice(0, 200) }, 'metrics request refused: token not authenticated');
      return { result: 'unauthenticated', user: undefined };
    }
    this.#options.observeReview?.('TokenReview', 'authenticated');
    const user = authn.user;
    if (!this.#bucket.tryTake()) return { result: 'throttled', user: user.username };
    const authz = await this.#call(
      'SubjectAccessReview',
      SUBJECT_ACCESS_REVIEWS_PATH,
      {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: user.username,
          groups: user.groups,
          extra: user.extra,
          ...(user.uid !== undefined ? { uid: user.uid } : {}),
          nonResourceAttributes: { path: this.#path, verb: 'get' },
        },
      },
      parseAccessReview,
    );
    if (authz === undefined) {
      this.#options.observeReview?.('SubjectAccessReview', 'error');
      return { result: 'error', user: user.username };
    }
    this.#options.observeReview?.('SubjectAccessReview', authz.allowed ? 'allowed' : 'denied');
    if (!authz.allowed) this.#log.debug({ user: user.username, reason: authz.reason?.slice(0, 200) }, 'metrics request refused: not allowed to get /metrics');
    return { result: authz.allowed ? 'allowed' : 'denied', user: user.username };
  }

  /** One review POST; the parsed status, or undefined (logged) when the call failed or the answer is not a review. */
  async #call<T>(kind: ReviewKind, path: string, body: unknown, parse: (body: unknown) => T | undefined): Promise<T | undefined> {
    let res: ApiResult;
    try {
      res = await call(this.#client, 'POST', path, { body, timeoutMs: REVIEW_TIMEOUT_MS });
    } catch (err) {
      this.#warn(kind, err instanceof Error ? err.message : String(err));
      return undefined;
    }
    if (!res.ok) {
      // The error holds only a Status's reason and message: a review answer's spec would echo the token.
      this.#warn(kind, res.error.message);
      return undefined;
    }
    const parsed = parse(res.body);
    if (parsed === undefined) this.#warn(kind, `HTTP ${res.status} but no ${kind} status in the answer`);
    return parsed;
  }

  /** At most one warning per 10 s: a flood against a broken apiserver must not become a flood of logs. */
  #warn(kind: ReviewKind, message: string): void {
    const now = this.#now();
    if (now - this.#lastWarnAt < 10_000) {
      this.#warningsSuppressed++;
      return;
    }
    this.#log.warn(
      { review: kind, err: message, suppressed: this.#warningsSuppressed },
      'metrics request not authorized: the review call failed (the operator needs create on tokenreviews and subjectaccessreviews)',
    );
    this.#lastWarnAt = now;
    this.#warningsSuppressed = 0;
  }
}

function refusal(verdict: Verdict, path: string): RouteResponse {
  const contentType = 'text/plain; charset=utf-8';
  switch (verdict.result) {
    case 'unauthenticated':
      return {
        status: 401,
        contentType,
        body: 'Unauthorized: send a valid bearer token (Authorization: Bearer <token>)\n',
        headers: { 'www-authenticate': 'Bearer realm="usergroup-operator"' },
      };
    case 'denied':
      return { status: 403, contentType, body: `Forbidden: user ${JSON.stringify(verdict.user ?? '')} may not get ${path}\n` };
    case 'throttled':
      return { status: 429, contentType, body: 'Too many token reviews at once; retry later\n', headers: { 'retry-after': '1' } };
    default:
      return { status: 503, contentType, body: 'Could not review the token with the Kubernetes API; retry later\n', headers: { 'retry-after': '5' } };
  }
}

// The endpoints of the service, one per URL and API key (its client and its call gates), and the sweep of idle ones.
import { createHash } from 'node:crypto';
import { CallGates, type CallGateOptions } from './call-gates.js';
import { ServiceClient, type ServiceClientOptions } from './client.js';
import type { SecretValue } from './secret-value.js';

/** One URL and API key: whichever objects name them share its client and its gates (one account, one rate). */
export interface Endpoint {
  /** Same URL and API key → same id. Not reversible to the key. */
  readonly id: string;
  readonly client: ServiceClient;
  readonly gates: CallGates;
}

export interface EndpointPoolOptions {
  readonly clientOptions: ServiceClientOptions;
  readonly gates: CallGateOptions;
}

const ENDPOINT_IDLE_MS = 15 * 60_000;
const SWEEP_EVERY_MS = 60_000;

/**
 * The endpoints in use. Tenants choose URLs and keys, so idle endpoints are dropped (with the reservations their
 * keys never came back for) and the pool cannot grow without bound.
 */
export class EndpointPool {
  readonly #endpoints = new Map<string, Endpoint>();
  #lastSweep = performance.now();

  constructor(private readonly options: EndpointPoolOptions) {}

  /** The endpoint of a validated, normalised URL and an API key; made at first use, swept when idle. */
  endpoint(url: string, apiKey: SecretValue): Endpoint {
    const id = createHash('sha256').update(`${url}\n${apiKey.reveal()}`).digest('hex').slice(0, 32);
    const now = performance.now();
    this.#sweep(now);
    let endpoint = this.#endpoints.get(id);
    if (!endpoint) {
      endpoint = {
        id,
        client: new ServiceClient({ url, apiKey }, this.options.clientOptions),
        gates: new CallGates(this.options.gates, now),
      };
      this.#endpoints.set(id, endpoint);
    }
    endpoint.gates.touch(now);
    return endpoint;
  }

  /** Drops idle endpoints and forgotten reservations, at most once a minute. */
  #sweep(now: number): void {
    if (now - this.#lastSweep < SWEEP_EVERY_MS) return;
    this.#lastSweep = now;
    for (const [id, endpoint] of this.#endpoints) {
      endpoint.gates.forgetAbandoned(now);
      if (endpoint.gates.isIdle(now, ENDPOINT_IDLE_MS)) {
        endpoint.gates.dispose();
        this.#endpoints.delete(id);
      }
    }
  }
}

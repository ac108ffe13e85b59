// The simulator's fault knobs, parsed, and the plan of what one call will suffer.
import { describeJson, isJsonObject, parsed, rejected, type Parsed } from './json.js';
import type { RandomSource } from './random.js';

/**
 * The fault knobs. Rates are fractions of API calls from 0 to 1; times are whole
 * milliseconds (seconds for retryAfterSeconds). Admin calls under /_sim/ are never faulted.
 */
export interface Faults {
  /** Added to every API call. */
  readonly latencyMs: number;
  /** A further delay drawn uniformly from 0..latencyJitterMs per call. */
  readonly latencyJitterMs: number;
  /** Calls delayed by another spikeMs, then processed normally. Drawn independently of the faults below. */
  readonly spikeRate: number;
  readonly spikeMs: number;
  /** 503, operation not applied. */
  readonly errorRate: number;
  /** 429 with Retry-After: retryAfterSeconds, operation not applied. */
  readonly rateLimitRate: number;
  readonly retryAfterSeconds: number;
  /** No answer at all until the client goes away, operation not applied. */
  readonly hangRate: number;
  /** 200 with a body that is not JSON. */
  readonly malformedJsonRate: number;
  /** 200 with {"success":0,"message":...}. */
  readonly successZeroRate: number;
  /** 200 with success 1 and a user_group that has no token. */
  readonly missingTokenRate: number;
  /** 200 with success 1 and token "". */
  readonly emptyTokenRate: number;
  /** 200 with a ~5 MiB JSON body that has no success field. */
  readonly hugeBodyRate: number;
  /** 200 headers, then the body one byte every 500 ms. */
  readonly slowDripRate: number;
  /**
   * Not a fault: the account's rate limit, calls per team in any 60 s (0: none). Beyond it a 429 with the
   * Retry-After that frees the next call, not applied.
   */
  readonly accountRequestsPerMinute: number;
}

export const NO_FAULTS: Faults = Object.freeze({
  latencyMs: 0,
  latencyJitterMs: 0,
  spikeRate: 0,
  spikeMs: 0,
  errorRate: 0,
  rateLimitRate: 0,
  retryAfterSeconds: 1,
  hangRate: 0,
  malformedJsonRate: 0,
  successZeroRate: 0,
  missingTokenRate: 0,
  emptyTokenRate: 0,
  hugeBodyRate: 0,
  slowDripRate: 0,
  accountRequestsPerMinute: 0,
});

/**
 * Faults that replace the answer, each named as the stats outcome it produces. A call gets
 * at most one; one uniform draw is split into consecutive intervals in this order, so each
 * rate is exactly the fraction of calls that get that fault.
 */
export const INJECTED_FAULTS = [
  'injected_5xx',
  'injected_429',
  'injected_hang',
  'injected_malformed_json',
  'injected_success_zero',
  'injected_missing_token',
  'injected_empty_token',
  'injected_huge_body',
  'injected_slow_drip',
] as const;
export type InjectedFault = (typeof INJECTED_FAULTS)[number];

const RATE_OF: Readonly<Record<InjectedFault, keyof Faults>> = {
  injected_5xx: 'errorRate',
  injected_429: 'rateLimitRate',
  injected_hang: 'hangRate',
  injected_malformed_json: 'malformedJsonRate',
  injected_success_zero: 'successZeroRate',
  injected_missing_token: 'missingTokenRate',
  injected_empty_token: 'emptyTokenRate',
  injected_huge_body: 'hugeBodyRate',
  injected_slow_drip: 'slowDripRate',
};

type Knob = { readonly kind: 'rate' } | { readonly kind: 'whole'; readonly max: number; readonly unit: string };

const MAX_DELAY_MS = 600_000;
const KNOBS: Readonly<Record<keyof Faults, Knob>> = {
  latencyMs: { kind: 'whole', max: MAX_DELAY_MS, unit: 'milliseconds' },
  latencyJitterMs: { kind: 'whole', max: MAX_DELAY_MS, unit: 'milliseconds' },
  spikeRate: { kind: 'rate' },
  spikeMs: { kind: 'whole', max: MAX_DELAY_MS, unit: 'milliseconds' },
  errorRate: { kind: 'rate' },
  rateLimitRate: { kind: 'rate' },
  retryAfterSeconds: { kind: 'whole', max: 86_400, unit: 'seconds' },
  hangRate: { kind: 'rate' },
  malformedJsonRate: { kind: 'rate' },
  successZeroRate: { kind: 'rate' },
  missingTokenRate: { kind: 'rate' },
  emptyTokenRate: { kind: 'rate' },
  hugeBodyRate: { kind: 'rate' },
  slowDripRate: { kind: 'rate' },
  accountRequestsPerMinute: { kind: 'whole', max: 1_000_000, unit: 'calls a minute' },
};
const FAULT_KNOBS = Object.keys(KNOBS) as readonly (keyof Faults)[];

function isKnob(name: string): name is keyof Faults {
  return Object.hasOwn(KNOBS, name);
}

/** Checks one knob's value; returns what is wrong, or undefined. */
function knobProblem(name: keyof Faults, value: number): string | undefined {
  const knob = KNOBS[name];
  if (knob.kind === 'rate') {
    return value >= 0 && value <= 1 ? undefined : `${name} must be a fraction from 0 to 1, got ${value}`;
  }
  return Number.isInteger(value) && value >= 0 && value <= knob.max
    ? undefined
    : `${name} must be a whole number of ${knob.unit} from 0 to ${knob.max}, got ${value}`;
}

/**
 * Builds a complete set of knobs from a partial one: omitted knobs take their default
 * (no fault), so setting faults always replaces all of them.
 */
export function parseFaults(input: unknown): Parsed<Faults> {
  if (!isJsonObject(input)) {
    return rejected(`faults must be a JSON object, got ${describeJson(input)}`);
  }
  const faults: Record<keyof Faults, number> = { ...NO_FAULTS };
  // Typed as what an in-process caller may really pass (undefined too), not only what JSON can hold.
  for (const [name, value] of Object.entries(input as Record<string, unknown>)) {
    if (!isKnob(name)) {
      return rejected(`unknown fault knob "${name}"; known knobs: ${FAULT_KNOBS.join(', ')}`);
    }
    // An in-process caller may spread an object with undefined knobs: same as omitting them.
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      return rejected(`${name} must be a number, got ${describeJson(value)}`);
    }
    const problem = knobProblem(name, value);
    if (problem !== undefined) return rejected(problem);
    faults[name] = value;
  }
  const total = INJECTED_FAULTS.reduce((sum, fault) => sum + faults[RATE_OF[fault]], 0);
  // A little slack so that rates such as 0.1 + 0.2 + 0.7 pass despite float rounding.
  if (total > 1 + 1e-9) {
    const names = INJECTED_FAULTS.map((fault) => RATE_OF[fault]).join(', ');
    return rejected(`the rates of faults that replace the answer (${names}) add up to ${total}; at most 1 is possible`);
  }
  return parsed(Object.freeze(faults));
}

/** What the simulator does to one API call. */
export interface CallPlan {
  readonly delayMs: number;
  readonly spiked: boolean;
  readonly fault: InjectedFault | undefined;
}

/**
 * Decides one call's fate. Always takes exactly three draws (jitter, spike, fault), so a
 * seeded source gives the same sequence of decisions whatever the knobs are.
 */
export function planCall(faults: Faults, random: RandomSource): CallPlan {
  const jitterDraw = random();
  const spikeDraw = random();
  const faultDraw = random();
  const spiked = spikeDraw < faults.spikeRate;
  const delayMs = faults.latencyMs + Math.floor(jitterDraw * (faults.latencyJitterMs + 1)) + (spiked ? faults.spikeMs : 0);
  let upper = 0;
  let fault: InjectedFault | undefined;
  for (const candidate of INJECTED_FAULTS) {
    upper += faults[RATE_OF[candidate]];
    if (faultDraw < upper) {
      fault = candidate;
      break;
    }
  }
  return { delayMs, spiked, fault };
}

// The service calls of one reconcile: the first may be deferred, follow-ups of work begun always go out.
import type { SecretValue } from '../../service/secret-value.js';
import type { CallResult, Deferral, UpsertRequest } from '../../service/types.js';
import type { CallContext } from '../../service/call-gates.js';
import type { Connection } from '../connections.js';

/**
 * The service calls of one reconcile. The first may be deferred (the account's rate limit, a failing connection);
 * later ones are follow-ups of work begun and always go out: deferring one would strand the first.
 */
export class ServiceCalls {
  private made = 0;
  /** A rotation intent is stored: its POST finishes work begun, like a follow-up (deferring it costs a recovery PUT). */
  private intentStored = false;

  constructor(
    private readonly key: string,
    private readonly signal: AbortSignal | undefined,
    /** Queues the key again: a connection that deferred a call runs it when the call may go out. */
    private readonly wake: () => void,
  ) {}

  async upsert(connection: Connection, request: UpsertRequest): Promise<CallResult> {
    return this.count(await connection.upsert(request, this.context()));
  }

  async rotate(connection: Connection, token: SecretValue): Promise<CallResult> {
    return this.count(await connection.rotate(token, this.context()));
  }

  /** The same calls, cut off after `ms` (a deletion's rotation may not outlast its limit); the cut throws a TimeoutError. */
  within(ms: number): ServiceCalls {
    const deadline = AbortSignal.timeout(Math.max(1, Math.ceil(ms)));
    const within = new ServiceCalls(this.key, this.signal ? AbortSignal.any([this.signal, deadline]) : deadline, this.wake);
    within.made = this.made;
    within.intentStored = this.intentStored;
    return within;
  }

  /** Why no call could go out now, if so (asked before work that only makes sense with a call after it). */
  unavailable(connection: Connection): Deferral | undefined {
    return connection.unavailable(this.context());
  }

  /** The intent of a rotation is on the Secret: its POST is a follow-up. */
  intentRecorded(): void {
    this.intentStored = true;
  }

  private context(): CallContext {
    return { key: this.key, followUp: this.made > 0 || this.intentStored, signal: this.signal, wake: this.wake };
  }

  /** Passes the result on as it came; a deferred call did not go out, so the next one is still the first. */
  private count(result: CallResult): CallResult {
    if (!('deferred' in result)) this.made += 1;
    return result;
  }
}

// SecretValue: a credential that prints as "[redacted]" however it is turned into text.
import { inspect } from 'node:util';

const REDACTED = '[redacted]';

/**
 * A credential (a user-group token or an API key). Its value is only reachable
 * through reveal(): string conversion, JSON, util.inspect and template literals
 * all print "[redacted]", so a credential that reaches a log line, an Event or a
 * status field by accident shows nothing.
 */
export class SecretValue {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  equals(other: SecretValue | undefined): boolean {
    return other !== undefined && other.#value === this.#value;
  }

  get length(): number {
    return this.#value.length;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}

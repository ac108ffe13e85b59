// Scrubs service-supplied text before it reaches logs, Events or status: credential-like runs, control characters.
import type { SecretValue } from './secret-value.js';

const REDACTED = '[redacted]';

/**
 * Runs that look like a credential: tokens and API keys are long strings of letters, digits and the
 * base64/base64url punctuation. We do not know the service's token format, so anything of that shape
 * long enough to be a credential is hidden, at the price of also hiding the odd request id.
 */
const CREDENTIAL_LIKE = /[A-Za-z0-9+/=_-]{32,}/g;

// Control characters would let a service-supplied message forge extra lines in our logs and Events.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]+/g;

/** Replaces every occurrence of each known secret with "[redacted]". */
export function redactSecrets(text: string, secrets: readonly (SecretValue | undefined)[]): string {
  let out = text;
  for (const secret of secrets) {
    const value = secret?.reveal();
    if (value !== undefined && value !== '') {
      out = out.split(value).join(REDACTED);
    }
  }
  return out;
}

/**
 * Makes text that came from outside (the service, the network stack) safe to put in a message: known
 * secrets and credential-shaped runs are hidden, control characters flattened, and the result bounded.
 * Redaction runs before truncation so a cut can never leave a fragment of a secret behind.
 */
export function sanitizeText(text: string, maxChars: number, secrets: readonly (SecretValue | undefined)[] = []): string {
  const cleaned = redactSecrets(text, secrets).replace(CREDENTIAL_LIKE, REDACTED).replace(CONTROL, ' ').trim();
  return cleaned.length > maxChars ? `${cleaned.slice(0, maxChars)}…` : cleaned;
}

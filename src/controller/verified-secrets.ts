// Which token Secret versions this process wrote or checked, so the metadata-only cache can be trusted.
import { objectKey } from '../api/meta.js';
import type { VerifiedRecord } from '../kube/finalizer-writer.js';
import type { SecretWriteThrough } from '../kube/secret-writer.js';
import { SecretValue } from '../service/secret-value.js';

/**
 * Token Secret key → the resourceVersion whose data this process wrote or checked, and the token itself when it
 * knows it (a rotation then needs no read). The token-Secret cache holds metadata only: a resourceVersion not in
 * here is someone else's change, and the Secret's data is read and checked against its sealed digest before the
 * metadata is believed. Only tokens from the service, one per UserGroup.
 */
export class VerifiedSecrets implements VerifiedRecord, Pick<SecretWriteThrough, 'wrote'> {
  // The resourceVersion alone when the token is not known (every Secret after a restart): no object per entry.
  private readonly byKey = new Map<string, string | { readonly rv: string; readonly token: SecretValue }>();

  known(key: string, resourceVersion: string): { readonly verified: boolean; readonly token: SecretValue | undefined } {
    const entry = this.byKey.get(key);
    const rv = typeof entry === 'string' ? entry : entry?.rv;
    return rv === resourceVersion ? { verified: true, token: typeof entry === 'object' ? entry.token : undefined } : { verified: false, token: undefined };
  }

  remember(key: string, resourceVersion: string, token: SecretValue | undefined): void {
    this.byKey.set(key, token === undefined ? resourceVersion : { rv: resourceVersion, token });
  }

  /** This process wrote `data` at this version (SecretWriter.apply): its data is ours, and so is the token it holds. */
  wrote(key: string, resourceVersion: string, data: Readonly<Record<string, string>> | undefined): void {
    this.remember(key, resourceVersion, tokenOf(data));
  }

  /** Only metadata changed from `from` to `to` (a finalizer patch): what is known of the data at `from` holds at `to`. */
  carry(key: string, from: string, to: string): void {
    const known = this.known(key, from);
    if (known.verified) this.remember(key, to, known.token);
  }

  forget(key: string): void {
    this.byKey.delete(key);
  }

  /**
   * What is there when work starts (a restart, a takeover) is taken as the operator's own writing: reading 10,000
   * Secrets first would cost more than it protects. From then on, a resourceVersion this process did not write or
   * check is someone else's change.
   */
  trustAsFound(secrets: Iterable<{ readonly metadata: { readonly namespace: string; readonly name: string; readonly resourceVersion: string } }>): void {
    this.byKey.clear();
    for (const secret of secrets) this.byKey.set(objectKey(secret.metadata), secret.metadata.resourceVersion);
  }
}

/** The token a Secret we just wrote holds: the one data value the desired Secret carried. */
function tokenOf(data: Readonly<Record<string, string>> | undefined): SecretValue | undefined {
  const [encoded, ...more] = Object.values(data ?? {});
  return encoded === undefined || more.length > 0 ? undefined : new SecretValue(Buffer.from(encoded, 'base64').toString('utf8'));
}

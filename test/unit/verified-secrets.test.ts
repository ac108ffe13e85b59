import { describe, expect, it } from 'vitest';
import { VerifiedSecrets } from '../../src/controller/verified-secrets.js';
import { SecretValue } from '../../src/service/secret-value.js';

const meta = (name: string, resourceVersion: string) => ({ metadata: { namespace: 'ns', name, resourceVersion } });

describe('VerifiedSecrets', () => {
  it('knows a Secret at the resourceVersion it remembered, with the token when it was given one', () => {
    const verified = new VerifiedSecrets();
    const token = new SecretValue('tok-1');
    verified.remember('ns/a', '10', token);
    verified.remember('ns/b', '11', undefined);
    expect(verified.known('ns/a', '10')).toEqual({ verified: true, token });
    expect(verified.known('ns/b', '11')).toEqual({ verified: true, token: undefined });
  });

  it('does not know another resourceVersion (someone else wrote the Secret), nor a forgotten or unknown key', () => {
    const verified = new VerifiedSecrets();
    verified.remember('ns/a', '10', new SecretValue('tok-1'));
    verified.remember('ns/b', '11', undefined);
    expect(verified.known('ns/a', '12')).toEqual({ verified: false, token: undefined });
    expect(verified.known('ns/b', '12')).toEqual({ verified: false, token: undefined });
    verified.forget('ns/a');
    expect(verified.known('ns/a', '10')).toEqual({ verified: false, token: undefined });
    expect(verified.known('ns/c', '10')).toEqual({ verified: false, token: undefined });
  });

  it('a later remember replaces the entry, token or not', () => {
    const verified = new VerifiedSecrets();
    verified.remember('ns/a', '10', new SecretValue('tok-1'));
    verified.remember('ns/a', '13', undefined);
    expect(verified.known('ns/a', '10').verified).toBe(false);
    expect(verified.known('ns/a', '13')).toEqual({ verified: true, token: undefined });
    const rotated = new SecretValue('tok-2');
    verified.remember('ns/a', '14', rotated);
    expect(verified.known('ns/a', '14').token?.equals(rotated)).toBe(true);
  });

  it('trustAsFound takes what is there as verified, without tokens, and forgets everything else', () => {
    const verified = new VerifiedSecrets();
    verified.remember('ns/old', '1', new SecretValue('tok-old'));
    verified.trustAsFound([meta('a', '20'), meta('b', '21')]);
    expect(verified.known('ns/a', '20')).toEqual({ verified: true, token: undefined });
    expect(verified.known('ns/b', '21')).toEqual({ verified: true, token: undefined });
    expect(verified.known('ns/b', '22').verified).toBe(false);
    expect(verified.known('ns/old', '1').verified).toBe(false);
  });
});

import { describe, expect, it } from 'vitest';
import { checkEgress, parseEgressPolicy, parseHostPattern } from '../../src/service/egress-policy.js';

const policy = (hosts: string[], allowHttp = false) => {
  const parsed = parseEgressPolicy(hosts, allowHttp);
  if (!parsed.ok) throw new Error(parsed.messages.join('; '));
  return parsed.policy;
};

describe('egress policy for namespaced UserGroupServices', () => {
  it.each([
    ['analytics.example.com', 'https://analytics.example.com', true],
    ['analytics.example.com', 'https://ANALYTICS.example.com/base', true],
    ['analytics.example.com', 'https://evil.analytics.example.com', false],
    ['*.example.com', 'https://eu.example.com', true],
    ['*.example.com', 'https://a.b.example.com', true],
    ['*.example.com', 'https://example.com', false],
    ['*.example.com', 'https://example.com.evil.io', false],
    ['*.example.com', 'https://evilexample.com', false],
    ['analytics.example.com:8443', 'https://analytics.example.com:8443', true],
    ['analytics.example.com:8443', 'https://analytics.example.com', false],
    ['analytics.example.com:443', 'https://analytics.example.com', true],
    ['10.0.0.7', 'https://10.0.0.7', true],
    ['10.0.0.7', 'https://169.254.169.254', false],
  ])('%s admits %s: %s', (pattern, url, allowed) => {
    expect(checkEgress(url, false, policy([pattern])).ok).toBe(allowed);
  });

  it('allows no host at all by default', () => {
    const result = checkEgress('https://analytics.example.com', false, policy([]));
    expect(result).toMatchObject({ ok: false, message: expect.stringContaining('allows no host') as unknown });
  });

  it('gives loopback no exemption: the operator pod is not a safe place for a tenant to point at', () => {
    expect(checkEgress('http://127.0.0.1:8080', true, policy(['analytics.example.com'], true)).ok).toBe(false);
  });

  it('needs both the operator policy and the tenant opt-in for plain http', () => {
    expect(checkEgress('http://analytics.example.com', true, policy(['analytics.example.com'], false))).toMatchObject({
      ok: false,
      message: expect.stringContaining('--allow-http-services') as unknown,
    });
    expect(checkEgress('http://analytics.example.com', false, policy(['analytics.example.com'], true))).toMatchObject({
      ok: false,
      message: expect.stringContaining('allowInsecure') as unknown,
    });
    expect(checkEgress('http://analytics.example.com', true, policy(['analytics.example.com'], true)).ok).toBe(true);
  });

  it.each(['', '*', '*.', 'https://x.example.com', 'x.example.com/path', '*.10.0.0.1', 'a*.example.com', 'user@x.example.com'])(
    'refuses the pattern %j',
    (raw) => {
      expect(parseHostPattern(raw).ok).toBe(false);
    },
  );
});

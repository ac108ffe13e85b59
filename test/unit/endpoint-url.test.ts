import { describe, expect, it } from 'vitest';
import { validateServiceUrl } from '../../src/service/endpoint-url.js';

describe('validateServiceUrl', () => {
  it.each<[string, boolean, string]>([
    ['https://analytics.example.com', false, 'https://analytics.example.com'],
    ['https://analytics.example.com/', false, 'https://analytics.example.com'],
    ['https://analytics.example.com/prefix', false, 'https://analytics.example.com/prefix'],
    ['https://analytics.example.com/prefix/', false, 'https://analytics.example.com/prefix'],
    ['https://analytics.example.com/prefix//', false, 'https://analytics.example.com/prefix'],
    ['https://Analytics.Example.com:443/', false, 'https://analytics.example.com'],
    ['https://analytics.example.com:8443/x', false, 'https://analytics.example.com:8443/x'],
    ['http://127.0.0.1:8080', false, 'http://127.0.0.1:8080'],
    ['http://127.10.20.30/', false, 'http://127.10.20.30'],
    ['http://localhost:3000/', false, 'http://localhost:3000'],
    ['http://[::1]:3000', false, 'http://[::1]:3000'],
    ['http://[::ffff:127.0.0.1]/', false, 'http://[::ffff:7f00:1]'],
    ['http://127.1/', false, 'http://127.0.0.1'],
    ['http://analytics.internal:8080/', true, 'http://analytics.internal:8080'],
  ])('accepts %s (allowInsecure %s)', (url, allowInsecure, normalised) => {
    expect(validateServiceUrl(url, allowInsecure)).toEqual({ ok: true, url: normalised });
  });

  it.each<[string, boolean, string]>([
    ['', false, 'absolute'],
    ['analytics.example.com', false, 'absolute'],
    ['/api', false, 'absolute'],
    ['ftp://analytics.example.com', false, 'https'],
    ['file:///etc/passwd', false, 'https'],
    ['https://user:pass@analytics.example.com', false, 'credentials'],
    ['https://user@analytics.example.com', false, 'credentials'],
    ['https://analytics.example.com/?x=1', false, 'query'],
    ['https://analytics.example.com/?', false, 'query'],
    ['https://analytics.example.com/#frag', false, 'fragment'],
    ['https://analytics.example.com/#', false, 'fragment'],
    ['http://analytics.example.com', false, 'https'],
    ['http://128.0.0.1', false, 'https'],
    ['http://localhost.example.com', false, 'https'],
    ['http://[::2]', false, 'https'],
  ])('rejects %j (allowInsecure %s)', (url, allowInsecure, reason) => {
    const result = validateServiceUrl(url, allowInsecure);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toContain(reason);
    }
  });

  it('never repeats credentials from a rejected URL', () => {
    const result = validateServiceUrl('https://admin:s3cr3t-password@analytics.example.com', false);
    expect(JSON.stringify(result)).not.toContain('s3cr3t');
  });

  it('still rejects credentials, queries and fragments when insecure is allowed', () => {
    expect(validateServiceUrl('http://u:p@h', true).ok).toBe(false);
    expect(validateServiceUrl('http://h/?a', true).ok).toBe(false);
    expect(validateServiceUrl('http://h/#a', true).ok).toBe(false);
  });
});

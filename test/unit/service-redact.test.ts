import { describe, expect, it } from 'vitest';
import { redactSecrets, sanitizeText } from '../../src/service/redact.js';
import { SecretValue } from '../../src/service/secret-value.js';
import { describeTransportError } from '../../src/service/transport-error.js';

const KEY = new SecretValue('short-key-9');

describe('sanitizeText', () => {
  it.each<[string, string]>([
    ['plain message', 'plain message'],
    [`run ${'a1'.repeat(16)} end`, 'run [redacted] end'],
    [`b64 ${'Ab+/'.repeat(10)}==`, 'b64 [redacted]'],
    ['two\nlines\r\nhere', 'two lines here'],
    ['uses short-key-9 here', 'uses [redacted] here'],
  ])('%j → %j', (input, expected) => {
    expect(sanitizeText(input, 500, [KEY])).toBe(expected);
  });

  it('redacts before truncating so no fragment of a secret survives', () => {
    const secret = 'q'.repeat(40);
    const out = sanitizeText(`abc ${secret}`, 10);
    expect(out).toBe('abc [redac…');
    expect(out).not.toContain('qqqq');
  });

  it('ignores empty and missing secrets', () => {
    expect(redactSecrets('text', [undefined, new SecretValue('')])).toBe('text');
  });
});

describe('describeTransportError', () => {
  const context = { timeoutMs: 1000, secrets: [KEY] };

  it('reads only code and message, never the rest of the error object', () => {
    const gotLike = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), {
      code: 'ECONNREFUSED',
      options: { headers: { authorization: `Token ${KEY.reveal()}` } },
    });
    const message = describeTransportError(gotLike, context);
    expect(message).toBe('connection refused (ECONNREFUSED): connect ECONNREFUSED 10.0.0.1:443');
    expect(message).not.toContain(KEY.reveal());
  });

  it('redacts a secret inside the error text', () => {
    expect(describeTransportError(new Error(`bad header Token ${KEY.reveal()}`), context)).toBe('request failed: bad header Token [redacted]');
  });

  it('drops a code that is not an identifier', () => {
    expect(describeTransportError({ code: 'weird code!', message: 'x' }, context)).toBe('request failed: x');
  });

  it.each([undefined, null, 'string error', 42])('copes with %j', (value) => {
    expect(describeTransportError(value, context)).toBe('request failed');
  });
});

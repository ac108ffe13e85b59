// canonicalJson: the stable JSON the sync hash and the token records are computed over.
import { describe, expect, it } from 'vitest';
import { canonicalJson, sameCanonicalJson, sha256Hex } from '../../src/controller/hash.js';

describe('canonicalJson', () => {
  it('is independent of key order at every level', () => {
    const a = { b: 1, a: { d: [1, { z: 1, y: 2 }], c: 'x' } };
    const b = { a: { c: 'x', d: [1, { y: 2, z: 1 }] }, b: 1 };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe('{"a":{"c":"x","d":[1,{"y":2,"z":1}]},"b":1}');
  });

  it('keeps array order', () => {
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  it('drops undefined properties, as JSON does', () => {
    expect(canonicalJson({ a: 1, b: undefined })).toBe('{"a":1}');
    expect(canonicalJson({ a: 1, b: undefined })).toBe(canonicalJson({ a: 1 }));
    expect(canonicalJson([undefined, 1])).toBe('[null,1]');
  });

  it('round-trips as JSON equal to the input', () => {
    const v = { s: 'q"\\\n', n: -1.5, t: true, f: false, z: null, arr: [], obj: {}, 'weird key"': 1 };
    expect(JSON.parse(canonicalJson(v))).toEqual(v);
  });

  it('handles scalars', () => {
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson('x')).toBe('"x"');
    expect(canonicalJson(3)).toBe('3');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('sha256Hex is the hex digest', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });
});

describe('sameCanonicalJson', () => {
  // Pairs whose canonical JSON is equal or not, both ways round: the comparison must agree with the strings.
  const values: unknown[] = [
    null,
    undefined,
    0,
    -0,
    1,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    '',
    '0',
    'null',
    true,
    false,
    [],
    [undefined],
    [null],
    [1, 2],
    [2, 1],
    {},
    { a: undefined },
    { a: 1 },
    { a: 1, b: undefined },
    { b: undefined, a: 1 },
    { a: '1' },
    { a: [1, { y: 2, z: 1 }] },
    { a: [1, { z: 1, y: 2 }] },
    { a: [1, { z: 1, y: 3 }] },
    { a: { b: { c: null } } },
    { a: { b: { c: undefined } } },
    { a: { b: {} } },
    { conditions: [{ type: 'Ready', status: 'True', reason: 'Synced', message: 'm', lastTransitionTime: 't', observedGeneration: 2 }] },
    { conditions: [{ status: 'True', type: 'Ready', message: 'm', reason: 'Synced', observedGeneration: 2, lastTransitionTime: 't' }] },
    { conditions: [{ type: 'Ready', status: 'True', reason: 'Synced', message: 'm', lastTransitionTime: 't', observedGeneration: 3 }] },
  ];

  it('agrees with comparing the canonical JSON strings, for every pair', () => {
    let equalPairs = 0;
    for (const a of values) {
      for (const b of values) {
        const expected = canonicalJson(a) === canonicalJson(b);
        if (expected) equalPairs++;
        expect({ a, b, same: sameCanonicalJson(a, b) }).toEqual({ a, b, same: expected });
      }
    }
    // Not only the diagonal: the list holds pairs that differ in form but not in JSON (key order, undefined, -0).
    expect(equalPairs).toBeGreaterThan(values.length);
  });

  it('looks only at own enumerable keys, as the JSON does', () => {
    const hidden = Object.defineProperty({ j: 2 }, 'k', { value: 1, enumerable: false });
    expect(canonicalJson(hidden)).toBe('{"j":2}');
    expect(sameCanonicalJson({ k: 1 }, hidden)).toBe(false);
    expect(sameCanonicalJson({ j: 2 }, hidden)).toBe(true);
  });
});

// canonicalJson: the stable JSON the sync hash and the token records are computed over.
import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex } from '../../src/controller/hash.js';

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

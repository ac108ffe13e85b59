// The simulator's user-group tokens: fresh ones from the CSPRNG, their shape and digest.
import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const TOKEN_LENGTH = 64;
// The largest multiple of the alphabet size that fits a byte: bytes at or above it are
// dropped so that every character is equally likely.
const UNBIASED_LIMIT = 256 - (256 % ALPHABET.length);

/** A fresh user-group token: 64 characters of [A-Za-z0-9] from the system CSPRNG. */
export function newToken(): string {
  let token = '';
  while (token.length < TOKEN_LENGTH) {
    for (const byte of randomBytes(TOKEN_LENGTH)) {
      if (byte < UNBIASED_LIMIT && token.length < TOKEN_LENGTH) {
        token += ALPHABET.charAt(byte % ALPHABET.length);
      }
    }
  }
  return token;
}

export function isTokenShaped(value: string): boolean {
  return /^[A-Za-z0-9]{64}$/.test(value);
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

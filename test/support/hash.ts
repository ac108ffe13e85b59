import { createHash } from 'node:crypto';

/** Hex SHA-256 of a UTF-8 string: tests compare tokens by hash (as the simulator keeps them), so a failing assertion never prints one. */
export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

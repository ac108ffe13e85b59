import { createHmac } from 'node:crypto';
import type { ObjectMeta } from '../../src/api/meta.js';
import type { UserGroupSpec } from '../../src/api/usergroup.js';

/** Metadata of a UserGroup "team-a/acme", for tests of pure logic. */
export const OWNER: ObjectMeta = {
  name: 'acme',
  namespace: 'team-a',
  uid: 'uid-acme',
  resourceVersion: '10',
  generation: 1,
  creationTimestamp: '2025-01-01T00:00:00Z',
  deletionTimestamp: undefined,
  labels: {},
  annotations: {},
  ownerReferences: [],
};

/** A parsed minimal spec (userGroupId acme-1, Secret "acme"), with overrides. */
export function userGroupSpec(over: Partial<UserGroupSpec> = {}): UserGroupSpec {
  return {
    userGroupId: 'acme-1',
    name: 'Acme',
    mapping: undefined,
    properties: undefined,
    tokenSecret: { name: 'acme', key: 'token', labels: {}, annotations: {} },
    serviceRef: undefined,
    suspend: false,
    ...over,
  };
}

/** A connection's record seal (Connection.seal), keyed as if by one account's API key. */
export const SEAL = (message: string): string => createHmac('sha256', 'account-a').update(message).digest('hex');
/** The seal of another account: records it made are worthless to SEAL. */
export const OTHER_SEAL = (message: string): string => createHmac('sha256', 'account-b').update(message).digest('hex');

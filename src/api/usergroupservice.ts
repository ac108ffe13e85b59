// The UserGroupService kind: a namespace's own connection to the service (URL and API key Secret), parsed.
import { parseMeta, type ObjectMeta, type Parsed } from './meta.js';
import { isRecord } from '../platform/json-value.js';

/** A namespaced connection to the service for teams with their own account. */
export interface UserGroupService {
  readonly metadata: ObjectMeta;
  readonly spec: Parsed<UserGroupServiceSpec>;
}

export interface UserGroupServiceSpec {
  readonly url: string;
  /** A Secret in the UserGroupService's own namespace: there is deliberately no namespace field. */
  readonly apiKeySecretRef: { readonly name: string; readonly key: string };
  readonly allowInsecure: boolean;
}

export function parseUserGroupService(raw: unknown): Parsed<UserGroupService> {
  if (!isRecord(raw)) return { ok: false, error: 'UserGroupService is not an object' };
  const meta = parseMeta(raw['metadata']);
  if (!meta.ok) return meta;
  return { ok: true, value: { metadata: meta.value, spec: parseSpec(raw['spec']) } };
}

function parseSpec(raw: unknown): Parsed<UserGroupServiceSpec> {
  if (!isRecord(raw)) return { ok: false, error: 'spec is missing' };
  const { url, apiKeySecretRef, allowInsecure } = raw;
  if (typeof url !== 'string' || url === '') return { ok: false, error: 'spec.url must be a non-empty string' };
  if (!isRecord(apiKeySecretRef) || typeof apiKeySecretRef['name'] !== 'string' || apiKeySecretRef['name'] === '') {
    return { ok: false, error: 'spec.apiKeySecretRef.name must be a non-empty string' };
  }
  const key = apiKeySecretRef['key'] ?? 'apiKey';
  if (typeof key !== 'string' || key === '') return { ok: false, error: 'spec.apiKeySecretRef.key must be a non-empty string' };
  if (allowInsecure !== undefined && typeof allowInsecure !== 'boolean') return { ok: false, error: 'spec.allowInsecure must be a boolean' };
  return { ok: true, value: { url, apiKeySecretRef: { name: apiKeySecretRef['name'], key }, allowInsecure: allowInsecure === true } };
}

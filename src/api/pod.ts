// The Pods a UserGroup's new token prompts: parsed from a PartialObjectMetadataList (names and one annotation only).
import { REFRESH_CONSENT_PREFIX, REFRESHED_FOR_PREFIX } from './constants.js';
import type { Parsed } from './meta.js';
import { isRecord } from '../platform/json-value.js';

/** A Pod whose owner consented to prompts for one UserGroup: its name and the token it was last prompted for. */
export interface ConsentingPod {
  readonly name: string;
  /** REFRESHED_FOR_PREFIX + the UserGroup's name, or undefined when never prompted. */
  readonly promptedFor: string | undefined;
}

/** The Pod label that consents to prompts for one UserGroup (a UserGroup name is at most 63 characters: a valid key name). */
export function refreshConsentKey(userGroupName: string): string {
  return `${REFRESH_CONSENT_PREFIX}${userGroupName}`;
}

/** The Pod annotation a prompt for one UserGroup writes. */
export function refreshedForKey(userGroupName: string): string {
  return `${REFRESHED_FOR_PREFIX}${userGroupName}`;
}

/** The consenting Pods of a list, without those being deleted (their kubelet no longer mounts anything new). */
export function parseConsentingPods(raw: unknown, userGroupName: string): Parsed<ConsentingPod[]> {
  if (!isRecord(raw)) return { ok: false, error: 'the Pod list is not an object' };
  // An empty PartialObjectMetadataList comes without items.
  const items: unknown = raw['items'] ?? [];
  if (!Array.isArray(items)) return { ok: false, error: 'the Pod list has no items' };
  const key = refreshedForKey(userGroupName);
  const pods: ConsentingPod[] = [];
  for (const item of items as unknown[]) {
    const meta = isRecord(item) ? item['metadata'] : undefined;
    if (!isRecord(meta) || typeof meta['name'] !== 'string') return { ok: false, error: 'a Pod in the list has no name' };
    if (meta['deletionTimestamp'] !== undefined) continue;
    const annotations = isRecord(meta['annotations']) ? meta['annotations'] : {};
    const prompted = annotations[key];
    pods.push({ name: meta['name'], promptedFor: typeof prompted === 'string' ? prompted : undefined });
  }
  return { ok: true, value: pods };
}

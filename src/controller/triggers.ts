// Maps each cache event to the UserGroup keys it concerns, and whether a change needs work (pure).
import { ROTATE_ANNOTATION, SYNC_ANNOTATION } from '../api/constants.js';
import type { UserGroupClaim } from '../api/claim.js';
import type { ClusterUserGroupService } from '../api/clusterusergroupservice.js';
import { hasRotateFinalizer, objectKey, sameStringMap } from '../api/meta.js';
import type { ObservedSecret } from '../api/secret.js';
import type { ServiceRef, UserGroup } from '../api/usergroup.js';
import type { UserGroupService } from '../api/usergroupservice.js';
import type { InformerEventType } from '../kube/informer.js';
import type { NamespaceLabels } from './caches.js';
import { tokenSecretOwner } from './caches.js';

/**
 * From a cache event to the UserGroup keys it concerns (kube-rs's trigger_owners, controller-runtime's
 * EnqueueRequestsFromMapFunc): pure functions of the event and what the caches hold, tested on their own.
 */

/** A key to queue; `urgent` ones (someone waits on them) go ahead of background work. */
export interface Trigger {
  readonly key: string;
  readonly urgent: boolean;
}

/** What the mappers look up in the caches. */
export interface TriggerView {
  /** Keys of the UserGroups declaring this userGroupId. */
  keysWithId(userGroupId: string): readonly string[];
  /** Whether the UserGroup of this uid holds any UserGroupClaim. */
  holdsClaim(uid: string): boolean;
  userGroups(): Iterable<UserGroup>;
  /** The ClusterUserGroupService of UserGroups without spec.serviceRef (--default-service). */
  readonly defaultService: string | undefined;
}

const key = (k: string, urgent = false): Trigger => ({ key: k, urgent });

/**
 * Whether a UserGroup changed in a way that can need work: its spec (generation), a request annotation (rotation, sync), deletion,
 * or it is another object of the same name. Our own status writes are not.
 */
export function relevantChange(old: UserGroup, ug: UserGroup): boolean {
  return (
    old.metadata.generation !== ug.metadata.generation ||
    newRequest(old, ug) ||
    old.metadata.deletionTimestamp !== ug.metadata.deletionTimestamp ||
    // The rotate-on-delete finalizer, removed by someone else, is put back (or its deletion goes on).
    hasRotateFinalizer(old.metadata) !== hasRotateFinalizer(ug.metadata) ||
    old.metadata.uid !== ug.metadata.uid
  );
}

/** A request annotation changed (rotation or sync): metadata changes do not move the generation. */
function newRequest(old: UserGroup, ug: UserGroup): boolean {
  return (
    old.metadata.annotations[ROTATE_ANNOTATION] !== ug.metadata.annotations[ROTATE_ANNOTATION] ||
    old.metadata.annotations[SYNC_ANNOTATION] !== ug.metadata.annotations[SYNC_ANNOTATION]
  );
}

/**
 * A UserGroup: its own key, for a change that can need work; a new rotation or sync request is urgent (kubectl usergroup
 * rotate waits on it). A claim's holder that went (or whose id moved) lets a waiting UserGroup of its namespace take
 * the id over: the others with that id. Only a holder going frees the id (a claim, or a synced UserGroup: from before
 * claims, or holding an id the rules bind to its namespace): a duplicate going changes nothing for the others, and 2,000 of them deleted must not cost 2,000²
 * reconciles.
 */
export function userGroupTriggers(type: InformerEventType, ug: UserGroup, old: UserGroup | undefined, view: TriggerView): Trigger[] {
  if (type === 'updated' && old && !relevantChange(old, ug)) return [];
  const own = objectKey(ug.metadata);
  const urgent = type === 'updated' && old !== undefined && newRequest(old, ug);
  const triggers = [key(own, urgent)];
  const id = ug.spec.ok ? ug.spec.value.userGroupId : undefined;
  const oldId = old?.spec.ok ? old.spec.value.userGroupId : undefined;
  if (oldId !== undefined && oldId !== id) triggers.push(...othersWithId(oldId, own, view));
  const gone = type === 'deleted' || ug.metadata.deletionTimestamp !== undefined;
  if (gone && id !== undefined && (view.holdsClaim(ug.metadata.uid) || ug.status.syncedHash !== undefined)) triggers.push(...othersWithId(id, own, view));
  return triggers;
}

/** A token Secret: the UserGroup that controls it. */
export function tokenSecretTriggers(secret: ObservedSecret): Trigger[] {
  const owner = tokenSecretOwner(secret);
  return owner ? [key(objectKey({ namespace: secret.metadata.namespace, name: owner.name }))] : [];
}

/** A UserGroupService: the UserGroups of its namespace that name it. */
export function serviceTriggers(service: UserGroupService, view: TriggerView): Trigger[] {
  const { namespace, name } = service.metadata;
  return where(view, (ug, ref) => ug.metadata.namespace === namespace && ref?.kind === 'UserGroupService' && ref.name === name);
}

/** A ClusterUserGroupService: the UserGroups that name it, or use it as the default. */
export function clusterServiceTriggers(service: ClusterUserGroupService, view: TriggerView): Trigger[] {
  const { name } = service.metadata;
  return where(view, (_ug, ref) => (ref ? ref.kind === 'ClusterUserGroupService' && ref.name === name : view.defaultService === name));
}

/**
 * A UserGroupClaim: the holder already knows what it just wrote; the others with that id (waiting, or refused)
 * decide again. A released claim concerns all of them, the holder included (it claims again).
 */
export function claimTriggers(type: InformerEventType, claim: UserGroupClaim, view: TriggerView): Trigger[] {
  const holder = objectKey({ namespace: claim.spec.namespace, name: claim.spec.userGroup.name });
  return othersWithId(claim.spec.userGroupId, type === 'deleted' ? undefined : holder, view);
}

/** A namespace whose labels changed (the tenant rules' namespaceSelector): every UserGroup in it. */
export function namespaceTriggers(type: InformerEventType, ns: NamespaceLabels, old: NamespaceLabels | undefined, view: TriggerView): Trigger[] {
  if (type === 'updated' && old && sameStringMap(old.metadata.labels, ns.metadata.labels)) return [];
  return where(view, (ug) => ug.metadata.namespace === ns.metadata.name);
}

function othersWithId(userGroupId: string, except: string | undefined, view: TriggerView): Trigger[] {
  return view.keysWithId(userGroupId).flatMap((k) => (k === except ? [] : [key(k)]));
}

function where(view: TriggerView, match: (ug: UserGroup, ref: ServiceRef | undefined) => boolean): Trigger[] {
  const found: Trigger[] = [];
  for (const ug of view.userGroups()) if (match(ug, ug.spec.ok ? ug.spec.value.serviceRef : undefined)) found.push(key(objectKey(ug.metadata)));
  return found;
}

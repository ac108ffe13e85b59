// The API's names: group, versions, kinds and plurals, and every annotation, label and finalizer the operator uses.
export const GROUP = 'usergroup.dev';
/** The user-facing kinds' version (UserGroup, UserGroupService, ClusterUserGroupService); v1alpha1 is still served, deprecated. */
export const VERSION = 'v1';
export const API_VERSION = `${GROUP}/${VERSION}`;
/** The claim kind is the operator's own bookkeeping, not an API for users: it stays at v1alpha1. */
export const CLAIM_VERSION = 'v1alpha1';
export const CLAIM_API_VERSION = `${GROUP}/${CLAIM_VERSION}`;
export const USERGROUP_KIND = 'UserGroup';
export const USERGROUP_PLURAL = 'usergroups';
export const USERGROUPSERVICE_PLURAL = 'usergroupservices';
export const CLUSTERUSERGROUPSERVICE_PLURAL = 'clusterusergroupservices';
export const CLAIM_KIND = 'UserGroupClaim';
export const CLAIM_PLURAL = 'usergroupclaims';
/** On a UserGroupClaim: the namespace that holds it (to list one namespace's claims). */
export const CLAIM_NAMESPACE_LABEL = 'usergroup.dev/namespace';

/** Set by people (or the kubectl plugin, or Argo CD) to ask for a token rotation; any new value rotates once. */
export const ROTATE_ANNOTATION = 'usergroup.dev/rotate-requested-at';
/**
 * Set by people (or `kubectl usergroup sync`) to ask for one PUT of the group now, even when nothing changed (the
 * service has no read, so drift there is otherwise repaired only at the periodic resync); any new value syncs once.
 */
export const SYNC_ANNOTATION = 'usergroup.dev/sync-requested-at';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'usergroup-operator';
/** Names the UserGroup a token Secret belongs to. */
export const USERGROUP_LABEL = 'usergroup.dev/usergroup';
/**
 * On the token Secret: the uid of the UserGroup it belongs to. Its owner reference names the same, but the garbage
 * collector removes that reference when a Retain UserGroup is deleted and the Secret is kept: this is how a
 * UserGroup applied again checks the kept Secret's sealed record (which binds that uid) before taking it back.
 */
export const USERGROUP_UID_ANNOTATION = 'usergroup.dev/usergroup-uid';

/** On the token Secret: sha256 of the stored token, for people and tools (a changed value means a new token). */
export const TOKEN_SHA256_ANNOTATION = 'usergroup.dev/token-sha256';
/**
 * On the token Secret: a MAC, under a key derived from the connection's API key, over what the operator
 * recorded there (token, rotation bookkeeping, the UserGroup it belongs to). Tenants can edit their Secrets,
 * so nothing in one is believed without it.
 */
export const TOKEN_RECORD_ANNOTATION = 'usergroup.dev/token-record';
/** On the token Secret, written with the rotated token in one update: the rotation request value it satisfies. */
export const ROTATION_HANDLED_ANNOTATION = 'usergroup.dev/rotation-handled';
/** On the token Secret, written just before the rotation call: a rotation for this value may be in flight. */
export const ROTATION_PENDING_ANNOTATION = 'usergroup.dev/rotation-pending';
/** On the token Secret, sealed with it: when the operator obtained the stored token (its age counts from here). */
export const TOKEN_ISSUED_AT_ANNOTATION = 'usergroup.dev/token-issued-at';

/**
 * On a UserGroup with spec.deletionPolicy Rotate that holds a token, and on its token Secret: the operator rotates the
 * token once before either goes (controller/usergroup/finalize.ts). The Secret's copy keeps the token at hand when a
 * namespace deletion removes both at once.
 */
export const ROTATE_ON_DELETE_FINALIZER = 'usergroup.dev/rotate-on-delete';
/**
 * On the controller's Lease (the leader's, or each shard member's): `active` (it keeps the rotate-on-delete finalizer),
 * `releasing` (--rotate-on-delete=false, some left in its caches) or `released` (none left). The chart's rollback guard
 * lets an older chart's objects in only once it says `released` (docs/operations.md, "Rolling back").
 */
export const ROTATE_ON_DELETE_STATE_ANNOTATION = 'usergroup.dev/rotate-on-delete';

export const DEFAULT_TOKEN_KEY = 'token';
export const FIELD_MANAGER = 'usergroup-operator';

/**
 * On a Deployment, StatefulSet or DaemonSet: the UserGroups (comma-separated names, same namespace) whose token
 * changes may restart it. Whoever owns the workload writes it; a UserGroup naming the workload is not enough.
 */
export const RESTART_CONSENT_ANNOTATION = 'usergroup.dev/restart-on-token-change';
/** Pod-template annotation prefix: `restart.usergroup.dev/<UserGroup name>` = the issue time of the token it restarted for. */
export const RESTARTED_FOR_PREFIX = 'restart.usergroup.dev/';
/**
 * Pod label prefix: `refresh.usergroup.dev/<UserGroup name>` on a Pod (from its template) is its owner's consent to
 * be prompted when that UserGroup's token changes, so that the kubelet rewrites the mounted token at once.
 */
export const REFRESH_CONSENT_PREFIX = 'refresh.usergroup.dev/';
/** Pod annotation prefix: `refreshed.usergroup.dev/<UserGroup name>` = the issue time of the token it was prompted for. */
export const REFRESHED_FOR_PREFIX = 'refreshed.usergroup.dev/';

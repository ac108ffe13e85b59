import { describe, expect, it } from 'vitest';
import { ROTATE_ANNOTATION } from '../../src/api/constants.js';
import { objectKey } from '../../src/api/meta.js';
import { parseClusterUserGroupService } from '../../src/api/clusterusergroupservice.js';
import { parseSecret } from '../../src/api/secret.js';
import type { UserGroup } from '../../src/api/usergroup.js';
import { parseUserGroupService } from '../../src/api/usergroupservice.js';
import {
  claimTriggers,
  clusterServiceTriggers,
  namespaceTriggers,
  serviceTriggers,
  tokenSecretTriggers,
  userGroupTriggers,
  type Trigger,
  type TriggerView,
} from '../../src/controller/triggers.js';
import { claim, userGroup } from '../support/reconciler-harness.js';

/**
 * From a cache event to the UserGroup keys it concerns, without a cluster (the integration tests show the same end
 * to end): what each event queues, what it must not (our own status writes, a duplicate going), and what is urgent.
 */

function view(userGroups: UserGroup[], options: { claimHolders?: string[]; defaultService?: string } = {}): TriggerView {
  return {
    keysWithId: (id) => userGroups.filter((u) => u.spec.ok && u.spec.value.userGroupId === id).map((u) => objectKey(u.metadata)),
    holdsClaim: (uid) => options.claimHolders?.includes(uid) ?? false,
    userGroups: () => userGroups,
    defaultService: options.defaultService,
  };
}

const keys = (triggers: Trigger[]): string[] => triggers.map((t) => t.key).sort();
const meta = (name: string, namespace = '') => ({ name, namespace, uid: `uid-${name}`, resourceVersion: '1', creationTimestamp: '2026-11-22T00:00:00Z' });

describe('UserGroup events', () => {
  const acme = userGroup();

  it('added: its own key, not urgent', () => {
    expect(userGroupTriggers('added', acme, undefined, view([acme]))).toEqual([{ key: 'ns/acme', urgent: false }]);
  });

  it('our own status write (same generation, same annotation): nothing', () => {
    const written = userGroup({ status: { syncedHash: 'sha256:x', lastSyncTime: '2026-11-22T01:00:00Z' } });
    expect(userGroupTriggers('updated', written, acme, view([written]))).toEqual([]);
  });

  it('a spec change (generation): its own key; a new rotation request: urgent', () => {
    expect(userGroupTriggers('updated', userGroup({ generation: 2 }), acme, view([acme]))).toEqual([{ key: 'ns/acme', urgent: false }]);
    const asked = userGroup({ annotations: { [ROTATE_ANNOTATION]: 'r1' } });
    expect(userGroupTriggers('updated', asked, acme, view([asked]))).toEqual([{ key: 'ns/acme', urgent: true }]);
  });

  it('a claim holder deleted: the others with its id may take it over (never itself again)', () => {
    const waiting = userGroup({ name: 'acme-2', uid: 'uid-2' });
    const elsewhere = userGroup({ name: 'other', uid: 'uid-3', userGroupId: 'other-1' });
    const all = view([acme, waiting, elsewhere], { claimHolders: ['uid-acme'] });
    expect(keys(userGroupTriggers('deleted', acme, undefined, all))).toEqual(['ns/acme', 'ns/acme-2']);
    // Being deleted (a finalizer elsewhere) frees it as well.
    const going = userGroup({ deletionTimestamp: '2026-11-22T02:00:00Z' });
    expect(keys(userGroupTriggers('updated', going, acme, all))).toEqual(['ns/acme', 'ns/acme-2']);
  });

  it('a synced UserGroup from before claims deleted frees its id too; a duplicate going frees nothing', () => {
    const waiting = userGroup({ name: 'acme-2', uid: 'uid-2' });
    const synced = userGroup({ status: { syncedHash: 'sha256:x' } });
    expect(keys(userGroupTriggers('deleted', synced, undefined, view([synced, waiting])))).toEqual(['ns/acme', 'ns/acme-2']);
    expect(keys(userGroupTriggers('deleted', waiting, undefined, view([acme, waiting], { claimHolders: ['uid-acme'] })))).toEqual(['ns/acme-2']);
  });

  it('its id moved: the UserGroups of the old id decide again', () => {
    const moved = userGroup({ userGroupId: 'acme-9', generation: 2 });
    const sameOldId = userGroup({ name: 'acme-2', uid: 'uid-2' });
    expect(keys(userGroupTriggers('updated', moved, acme, view([moved, sameOldId])))).toEqual(['ns/acme', 'ns/acme-2']);
  });
});

describe('other resources', () => {
  it('a token Secret: the UserGroup that controls it; a Secret nobody controls: nothing', () => {
    const owned = parseSecret({
      metadata: {
        ...meta('acme-token', 'ns'),
        ownerReferences: [{ apiVersion: 'usergroup.dev/v1', kind: 'UserGroup', name: 'acme', uid: 'uid-acme', controller: true }],
      },
    });
    const stray = parseSecret({ metadata: meta('stray', 'ns') });
    if (!owned.ok || !stray.ok) throw new Error('bad fixture');
    expect(tokenSecretTriggers(owned.value)).toEqual([{ key: 'ns/acme', urgent: false }]);
    expect(tokenSecretTriggers(stray.value)).toEqual([]);
  });

  it('a UserGroupService: the UserGroups of its namespace that name it', () => {
    const service = parseUserGroupService({ metadata: meta('own', 'ns'), spec: { url: 'https://svc.example', apiKeySecretRef: { name: 'key' } } });
    if (!service.ok) throw new Error(service.error);
    const uses = userGroup({ serviceRef: { kind: 'UserGroupService', name: 'own' } });
    const sameNameElsewhere = userGroup({ namespace: 'other', uid: 'uid-o', serviceRef: { kind: 'UserGroupService', name: 'own' } });
    const shared = userGroup({ name: 'b', uid: 'uid-b', serviceRef: { kind: 'ClusterUserGroupService', name: 'own' } });
    expect(keys(serviceTriggers(service.value, view([uses, sameNameElsewhere, shared])))).toEqual(['ns/acme']);
  });

  it('a ClusterUserGroupService: the UserGroups that name it, and those without a serviceRef when it is the default', () => {
    const service = parseClusterUserGroupService({
      metadata: meta('shared'),
      spec: { url: 'https://svc.example', apiKeySecretRef: { namespace: 'ops', name: 'key' }, tenants: [] },
    });
    if (!service.ok) throw new Error(service.error);
    const named = userGroup({ serviceRef: { kind: 'ClusterUserGroupService', name: 'shared' } });
    const byDefault = userGroup({ name: 'b', uid: 'uid-b' });
    const other = userGroup({ name: 'c', uid: 'uid-c', serviceRef: { kind: 'ClusterUserGroupService', name: 'other' } });
    expect(keys(clusterServiceTriggers(service.value, view([named, byDefault, other], { defaultService: 'shared' })))).toEqual(['ns/acme', 'ns/b']);
    expect(keys(clusterServiceTriggers(service.value, view([named, byDefault, other])))).toEqual(['ns/acme']);
  });

  it('a claim written: the others with its id (the holder knows); released: all of them, the holder included', () => {
    const holder = userGroup();
    const waiting = userGroup({ name: 'acme-2', uid: 'uid-2' });
    const all = view([holder, waiting]);
    expect(keys(claimTriggers('added', claim({ holder }), all))).toEqual(['ns/acme-2']);
    expect(keys(claimTriggers('deleted', claim({ holder }), all))).toEqual(['ns/acme', 'ns/acme-2']);
  });

  it('a namespace: its UserGroups when its labels changed, nothing when only something else did', () => {
    const ns = (labels: Record<string, string>) => ({
      metadata: { ...meta('ns'), generation: 1, deletionTimestamp: undefined, labels, annotations: {}, ownerReferences: [] },
    });
    const inIt = userGroup();
    const elsewhere = userGroup({ namespace: 'other', uid: 'uid-o' });
    const all = view([inIt, elsewhere]);
    expect(keys(namespaceTriggers('updated', ns({ tier: 'gold' }), ns({ tier: 'silver' }), all))).toEqual(['ns/acme']);
    expect(namespaceTriggers('updated', ns({ tier: 'gold' }), ns({ tier: 'gold' }), all)).toEqual([]);
    expect(keys(namespaceTriggers('added', ns({}), undefined, all))).toEqual(['ns/acme']);
  });
});

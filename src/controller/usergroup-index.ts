// The index from userGroupId to the UserGroups that declare it, kept from informer events.
import { objectKey } from '../api/meta.js';
import type { UserGroup } from '../api/usergroup.js';
import type { InformerEventType } from '../kube/informer.js';
import { KeyMultimap } from './key-multimap.js';

/** userGroupId → keys of the UserGroups declaring it, kept current from informer events. */
export class UserGroupIdIndex {
  private readonly byId = new KeyMultimap();
  private readonly idOf = new Map<string, string>();

  update(type: InformerEventType, ug: UserGroup): void {
    const key = objectKey(ug.metadata);
    const previous = this.idOf.get(key);
    if (previous !== undefined) {
      this.byId.delete(previous, key);
      this.idOf.delete(key);
    }
    if (type === 'deleted' || !ug.spec.ok) return;
    const id = ug.spec.value.userGroupId;
    this.idOf.set(key, id);
    this.byId.add(id, key);
  }

  keys(userGroupId: string): string[] {
    return this.byId.get(userGroupId);
  }

  idFor(key: string): string | undefined {
    return this.idOf.get(key);
  }
}

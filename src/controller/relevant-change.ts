import { ROTATE_ANNOTATION } from '../api/constants.js';
import type { UserGroup } from '../api/usergroup.js';

/**
 * Whether a UserGroup changed in a way that can need work: its spec (generation), the rotation annotation,
 * deletion, or it is another object of the same name. Our own status writes are not.
 */
export function relevantChange(old: UserGroup, ug: UserGroup): boolean {
  return (
    old.metadata.generation !== ug.metadata.generation ||
    old.metadata.annotations[ROTATE_ANNOTATION] !== ug.metadata.annotations[ROTATE_ANNOTATION] ||
    old.metadata.deletionTimestamp !== ug.metadata.deletionTimestamp ||
    old.metadata.uid !== ug.metadata.uid
  );
}

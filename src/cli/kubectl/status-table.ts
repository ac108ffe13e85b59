// The `kubectl usergroup status` table: the columns of each UserGroup, rendered as a pure function.
import { ROTATE_ANNOTATION, SYNC_ANNOTATION } from '../../api/constants.js';
import { findReadyCondition, type UserGroup } from '../../api/usergroup.js';
import { ageOf, humanDuration } from './duration.js';
import { formatTable } from './table.js';

export interface StatusTableOptions {
  /** Adds the NAMESPACE column, as kubectl does with -A. */
  readonly allNamespaces: boolean;
  /** Adds the Ready condition's MESSAGE column (-o wide). */
  readonly wide: boolean;
  /** For the ages; the caller's clock, so the rendering stays a pure function. */
  readonly now: number;
}

/** What a cell shows when there is nothing to show (kubectl prints <none> in custom columns; "-" stays short). */
const NONE = '-';

/** One table row per UserGroup, in namespace/name order. */
export function renderStatusTable(groups: readonly UserGroup[], options: StatusTableOptions): string {
  const header = ['NAME', 'USERGROUPID', 'READY', 'REASON', 'SECRET', 'LAST ROTATION', 'TOKEN AGE', 'NEXT ROTATION', 'AGE'];
  if (options.allNamespaces) header.unshift('NAMESPACE');
  if (options.wide) header.push('MESSAGE');
  const sorted = [...groups].sort((a, b) => compare(a.metadata.namespace, b.metadata.namespace) || compare(a.metadata.name, b.metadata.name));
  const rows = sorted.map((ug) => {
    const row = statusCells(ug, options.now);
    const cells = [row.name, row.userGroupId, row.ready, row.reason, row.secret, row.lastRotation, row.tokenAge, row.nextRotation, row.age];
    if (options.allNamespaces) cells.unshift(row.namespace);
    if (options.wide) cells.push(row.message);
    return cells;
  });
  return formatTable(header, rows);
}

export interface StatusCells {
  readonly namespace: string;
  readonly name: string;
  readonly userGroupId: string;
  readonly ready: string;
  readonly reason: string;
  readonly secret: string;
  readonly lastRotation: string;
  /** Since the controller obtained the stored token, when it records that (scheduled rotation, or a token changed since). */
  readonly tokenAge: string;
  /** With spec.rotation.maxTokenAge: "in 5d", or "overdue 3m" once past due. */
  readonly nextRotation: string;
  readonly age: string;
  readonly message: string;
}

/** The cells of one UserGroup's row. */
export function statusCells(ug: UserGroup, now: number): StatusCells {
  const ready = findReadyCondition(ug.status);
  const observed = ready?.observedGeneration ?? ug.status.observedGeneration;
  // Until the controller reports on the latest spec, its verdict is about an older one: say so.
  const stale = ready !== undefined && observed !== undefined && observed < ug.metadata.generation;
  const requested = ug.metadata.annotations[ROTATE_ANNOTATION];
  const pending = requested !== undefined && requested !== ug.status.rotation?.lastHandledRequest;
  const lastRotation = ageOf(ug.status.rotation?.lastRotationTime, now) ?? 'never';
  const syncRequested = ug.metadata.annotations[SYNC_ANNOTATION];
  const syncPending = syncRequested !== undefined && syncRequested !== ug.status.lastHandledSyncRequest ? ' (sync pending)' : '';
  return {
    namespace: ug.metadata.namespace,
    name: ug.metadata.name,
    userGroupId: ug.spec.ok ? ug.spec.value.userGroupId : NONE,
    // No Ready condition yet (the controller has not seen it): Unknown, as the API conventions have it.
    ready: ready?.status ?? 'Unknown',
    reason: `${ready?.reason ? `${ready.reason}${stale ? ' (stale)' : ''}` : NONE}${syncPending}`,
    secret: ug.status.tokenSecretName ?? NONE,
    lastRotation: pending ? `${lastRotation} (pending)` : lastRotation,
    tokenAge: ageOf(ug.status.rotation?.tokenIssuedTime, now) ?? NONE,
    nextRotation: nextRotationCell(ug, now),
    age: ageOf(ug.metadata.creationTimestamp, now) ?? NONE,
    // One line per row: a multi-line message would break the table.
    message: ready?.message ? ready.message.replace(/\s+/g, ' ').trim() : NONE,
  };
}

function nextRotationCell(ug: UserGroup, now: number): string {
  const scheduled = ug.spec.ok && ug.spec.value.maxTokenAgeMs !== undefined && !ug.spec.value.suspend;
  const due = Date.parse(ug.status.rotation?.nextRotationTime ?? '');
  if (!scheduled || Number.isNaN(due)) return NONE;
  return due > now ? `in ${humanDuration(due - now)}` : `overdue ${humanDuration(now - due)}`;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

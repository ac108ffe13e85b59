/**
 * A sync request: a new value of the usergroup.dev/sync-requested-at annotation asks for one PUT of the group now,
 * even when status.syncedHash says nothing changed (someone changed the group at the service; the service has no
 * read, so only a PUT repairs it before the periodic resync). Like a rotation request (Flux's
 * reconcile.fluxcd.io/requestedAt), a value is handled once: status.lastHandledSyncRequest records it.
 */
export type SyncRequestDecision =
  /** No request, or the status records it handled. */
  | { readonly kind: 'none' }
  /** A PUT this reconcile makes anyway (spec changed, Secret missing, resync due, a rotation to settle) answers it. */
  | { readonly kind: 'ride'; readonly value: string }
  /** Only the request asks for a PUT: it costs a slot of the namespace's sync-request budget. */
  | { readonly kind: 'put'; readonly value: string };

/**
 * `requested`: the annotation's value; `handled`: status.lastHandledSyncRequest; `putPlanned`: the plan already
 * PUTs for another reason. No annotation: nothing, whatever else is planned (no extra work per group).
 */
export function decideSyncRequest(requested: string | undefined, handled: string | undefined, putPlanned: boolean): SyncRequestDecision {
  if (requested === undefined || requested === handled) return { kind: 'none' };
  return putPlanned ? { kind: 'ride', value: requested } : { kind: 'put', value: requested };
}

/** The value to record as handled after a reconcile that ends synced: the request, once a PUT answered it. */
export function handledSyncRequest(decision: SyncRequestDecision, putMade: boolean, previous: string | undefined): string | undefined {
  return decision.kind !== 'none' && putMade ? decision.value : previous;
}

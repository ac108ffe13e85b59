// Once per token: whether a new token owes consumers something (a restart, a prompt), or only a note of the token.

/**
 * The unit is the token, named by its issue time: status records the one the consumers were last served for, so a
 * spec-only sync (same token) does nothing, a new token does it once, and a run that dies half-way does the rest.
 */
export type PerToken =
  /** Not wanted, or done for this token already. */
  | { readonly kind: 'none' }
  /** Wanted for the first time: the consumers already run with this token; remember it, do nothing. */
  | { readonly kind: 'record'; readonly issuedAt: string }
  /** The token changed since the consumers were last served. */
  | { readonly kind: 'do'; readonly issuedAt: string };

export function oncePerToken(input: {
  readonly wanted: boolean;
  /** The token status says the consumers were served for. */
  readonly doneFor: string | undefined;
  /** The issue time of the token this reconcile found stored (before any change it made). */
  readonly foundIssuedAt: string | undefined;
  /** The issue time of the token stored now. */
  readonly issuedAt: string;
}): PerToken {
  const { wanted, doneFor, foundIssuedAt, issuedAt } = input;
  if (!wanted || doneFor === issuedAt) return { kind: 'none' };
  // First wanted: what counts is whether the token changed in this very reconcile. No token before (a first
  // sync) is no change: the Pods waiting for the Secret start with this token.
  const since = doneFor ?? foundIssuedAt ?? issuedAt;
  return since === issuedAt ? { kind: 'record', issuedAt } : { kind: 'do', issuedAt };
}

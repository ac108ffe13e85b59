/*
 * The arithmetic of the scheduled-rotation phase, pure (unit-tested in test/unit/bench-scheduled.test.ts): the
 * maxTokenAge that makes one group fall due at a chosen instant, how long to wait before that instant, and the
 * summary of due→done times against what the global cap allows.
 */
import { scheduledRotation } from '../../src/controller/policies/rotation.js';
import { percentile } from './stats.js';

/**
 * The spec.rotation.maxTokenAge (ms) under which a token issued at `issuedAt` falls due exactly at `dueAt`.
 * The controller's own formula (issued + maxAge − a uid-fixed jitter of up to 10 % of maxAge) is used, not a
 * copy, so the bench and the controller cannot disagree about the due time. The due time as a function of
 * maxAge rises by 0 or 1 ms per ms, so every instant after `issuedAt` is reached by some maxAge.
 */
export function maxAgeForDue(issuedAt: string, uid: string, dueAt: number): number | undefined {
  const issued = Date.parse(issuedAt);
  if (Number.isNaN(issued) || dueAt <= issued) return undefined;
  const due = (maxAgeMs: number): number => scheduledRotation(issuedAt, maxAgeMs, uid)?.dueAt ?? Number.NaN;
  // The group's jitter share, read off the formula at a huge age (exact to 1e-12), gives the answer to within a
  // few ms; a short walk makes it exact. (Walking from the 10 % bound instead costs minutes at 10,000 old tokens,
  // with the event loop blocked all along.)
  const probe = 1e12;
  const share = (issued + probe - due(probe)) / probe;
  let maxAgeMs = Math.round((dueAt - issued) / (1 - share));
  while (due(maxAgeMs) > dueAt) maxAgeMs--;
  while (due(maxAgeMs) < dueAt) maxAgeMs++;
  return due(maxAgeMs) === dueAt ? maxAgeMs : undefined;
}

/** Evenly spaced slots under the cap: the k-th rotation (1-based) may start (k − 1) intervals after the due time. */
export function capSlotMs(k: number, capPerMinute: number): number {
  return (Math.max(1, k) - 1) * (60_000 / capPerMinute);
}

/**
 * How long before the common due time the maxTokenAge patches go out. Two needs: the N spec changes must be
 * patched and reconciled first (so the wave measures rotations only; about 10 ms per group on the bench's 2 cores
 * is generous), and a token rotated in the wave should not fall due again before the wave ends — its next due
 * time is at least 0.9 × its maxAge after its rotation, and the smallest maxAge is about this lead (the newest
 * token) — so the lead covers a wave twice as long as the cap's. A slower wave is still measured exactly: the
 * phase counts the groups due again and allows them their second rotation.
 */
export function defaultLeadMs(n: number, capPerMinute: number): number {
  const waveMs = capSlotMs(n, capPerMinute);
  return Math.ceil(Math.max(30_000, n * 10, (2 * waveMs) / 0.9) / 1000) * 1000;
}

export interface DueToDoneSummary {
  readonly completed: number;
  /** From the due time to the last rotation done. */
  readonly wallMs: number | undefined;
  /** Rotations completed per minute of that wall time. */
  readonly ratePerMinute: number | undefined;
  readonly p50Ms: number | undefined;
  readonly p99Ms: number | undefined;
  readonly maxMs: number | undefined;
  /** What the cap alone implies for N groups due at once: the p99 and the last group's slot. */
  readonly capP99Ms: number;
  readonly capMaxMs: number;
}

/** Due→done times of the groups done (ms since the epoch; a group done before its due time counts as 0). */
export function summarizeDueToDone(dueAt: number, doneAt: readonly number[], n: number, capPerMinute: number): DueToDoneSummary {
  const waits = doneAt.map((t) => Math.max(0, t - dueAt));
  const wallMs = waits.length > 0 ? waits.reduce((a, b) => Math.max(a, b)) : undefined;
  return {
    completed: waits.length,
    wallMs,
    ratePerMinute: wallMs !== undefined && wallMs > 0 ? waits.length / (wallMs / 60_000) : undefined,
    p50Ms: percentile(waits, 50),
    p99Ms: percentile(waits, 99),
    maxMs: wallMs,
    capP99Ms: capSlotMs(Math.ceil(0.99 * n), capPerMinute),
    capMaxMs: capSlotMs(n, capPerMinute),
  };
}

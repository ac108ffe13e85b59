// Pod prompt policy: which consenting Pods a new token prompts (pure; the step is usergroup/consumers.ts).
import type { ConsentingPod } from '../../api/pod.js';

/** The consenting Pods not yet prompted for this token (a run that died half-way prompted the others). */
export function podsToPrompt(pods: readonly ConsentingPod[], issuedAt: string): ConsentingPod[] {
  return pods.filter((p) => p.promptedFor !== issuedAt);
}

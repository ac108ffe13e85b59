import { sha256 } from './hash.js';
import { eventually } from './kube.js';
import type { TestEnv, UserGroupObject } from './operator.js';

/** Synced, observedGeneration current, and the Secret holds exactly the service's token for the group. */
export async function waitInSync(env: TestEnv, name: string, userGroupId: string, timeoutMs = 60_000): Promise<{ ug: UserGroupObject; token: string }> {
  return eventually(
    `${env.namespace}/${name} synced with the service's token`,
    async () => {
      const ug = await env.getUserGroup(name);
      const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
      if (ready?.status !== 'True' || ready.reason !== 'Synced' || ug.status?.observedGeneration !== ug.metadata.generation) return undefined;
      const token = await env.secretToken(name);
      const sim = env.simGroup(userGroupId);
      return token && sha256(token) === sim?.tokenSha256 ? { ug, token } : undefined;
    },
    timeoutMs,
    250,
  );
}

/** The rotation request `value` is recorded as handled, Ready is Synced, and the Secret holds the service's (new) token, which it returns. */
export async function waitRotationHandled(env: TestEnv, name: string, userGroupId: string, value: string, timeoutMs = 60_000): Promise<string> {
  return eventually(
    `rotation "${value}" of ${name} handled`,
    async () => {
      const ug = await env.getUserGroup(name);
      const ready = ug.status?.conditions?.find((c) => c.type === 'Ready');
      if (ug.status?.rotation?.lastHandledRequest !== value || ready?.status !== 'True' || ready.reason !== 'Synced') return undefined;
      const token = await env.secretToken(name);
      const sim = env.simGroup(userGroupId);
      return token && sha256(token) === sim?.tokenSha256 ? token : undefined;
    },
    timeoutMs,
    250,
  );
}

/** Every call of one operation the simulator saw for the env's API key, whatever its outcome. */
export const totalCalls = (env: TestEnv, operation: 'upsert' | 'rotate'): number => Object.values(env.calls()[operation]).reduce((a, b) => a + b, 0);

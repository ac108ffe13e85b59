// deploy/examples/consumer.yaml stays what its comment says: a consumer of acme's token Secret (usergroups.yaml) that
// mounts it as a file the kubelet keeps current, and consents to the operator's prompts for acme.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { refreshConsentKey } from '../../src/api/pod.js';
import { repoRoot } from '../support/repo-root.js';

interface Manifest {
  kind: string;
  metadata: { name: string; namespace: string };
  spec: Record<string, unknown>;
}
const read = (file: string): Manifest[] =>
  parseAllDocuments(fs.readFileSync(path.join(repoRoot, 'deploy/examples', file), 'utf8')).map((d) => d.toJSON() as Manifest);

describe('the example consumer (deploy/examples/consumer.yaml)', () => {
  const [deployment] = read('consumer.yaml');
  const template = (deployment?.spec['template'] ?? {}) as {
    metadata: { labels: Record<string, string> };
    spec: {
      containers: { volumeMounts?: { name: string; readOnly?: boolean; subPath?: string }[]; env?: unknown[]; envFrom?: unknown[] }[];
      volumes: { name: string; secret?: { secretName: string } }[];
    };
  };
  const acme = read('usergroups.yaml').find((m) => m.kind === 'UserGroup' && m.metadata.name === 'acme');

  it("mounts the token Secret of the example's acme (same namespace), read-only, without subPath, and never as an environment variable", () => {
    expect(acme).toBeDefined();
    expect(deployment?.metadata.namespace).toBe(acme?.metadata.namespace);
    const secretName = (acme?.spec['tokenSecret'] as { name?: string } | undefined)?.name ?? acme?.metadata.name;
    const volume = template.spec.volumes.find((v) => v.secret?.secretName === secretName);
    expect(volume).toBeDefined();
    const mounts = template.spec.containers.flatMap((c) => c.volumeMounts ?? []).filter((m) => m.name === volume?.name);
    expect(mounts.length).toBeGreaterThan(0);
    for (const m of mounts) {
      expect(m.readOnly).toBe(true);
      expect(m.subPath).toBeUndefined();
    }
    expect(template.spec.containers.flatMap((c) => [...(c.env ?? []), ...(c.envFrom ?? [])])).toEqual([]);
  });

  it('consents to prompts for acme on its Pod template (the label the operator selects Pods by)', () => {
    expect(template.metadata.labels[refreshConsentKey('acme')]).toBe('true');
  });
});

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sha256sums } from '../../src/devtools/release/checksums.js';

describe('SHA256SUMS of a release directory', () => {
  it('is what sha256sum -c checks, sorted, with subdirectories by relative path; a changed file fails the check', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugo-sums-'));
    try {
      fs.mkdirSync(path.join(dir, 'sbom'));
      fs.writeFileSync(path.join(dir, 'b.tgz'), 'chart');
      fs.writeFileSync(path.join(dir, 'sbom/a.cdx.json'), '{}');
      const sums = sha256sums(dir, ['sbom/a.cdx.json', 'b.tgz']);
      expect(sums.split('\n').map((l) => l.split('  ')[1])).toEqual(['b.tgz', 'sbom/a.cdx.json', undefined]);
      fs.writeFileSync(path.join(dir, 'SHA256SUMS'), sums);
      expect(execFileSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: dir, encoding: 'utf8' })).toBe('b.tgz: OK\nsbom/a.cdx.json: OK\n');
      fs.writeFileSync(path.join(dir, 'b.tgz'), 'tampered');
      expect(() => execFileSync('sha256sum', ['-c', 'SHA256SUMS'], { cwd: dir, stdio: 'pipe' })).toThrow();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

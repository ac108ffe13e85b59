import type { TestProject } from 'vitest/node';
import { buildGoTool } from '../../devtools/go-tool.js';

export { buildGoTool };

/** A vitest globalSetup that builds the tool once per run and provides its path under `key`. */
export function provideGoTool(key: 'argocdLua' | 'promtool' | 'krew', name: string, build: () => string): (project: TestProject) => void {
  return (project) => {
    const started = Date.now();
    project.provide(key, build());
    const seconds = (Date.now() - started) / 1000;
    if (seconds > 5) process.stderr.write(`[${name}] ready in ${seconds.toFixed(1)} s\n`);
  };
}

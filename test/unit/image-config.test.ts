import { describe, expect, it } from 'vitest';
import { parseDockerfile } from '../../devtools/image/dockerfile.js';
import { DISTROLESS_NODEJS_NONROOT, envPairs, stagesOf, type RunConfig } from '../../devtools/image/image-config.js';

const base: RunConfig = { entrypoint: ['/base'], cmd: ['base-cmd'], user: 'root', workingDir: '/', env: ['PATH=/bin', 'A=1'] };

describe('stagesOf: a Dockerfile as the image builder carries it out', () => {
  it("follows Docker's rules for the config: ENV replaces or appends, WORKDIR resolves, ENTRYPOINT resets the inherited CMD", () => {
    const [stage] = stagesOf(
      parseDockerfile(['FROM x AS one', 'WORKDIR /src', 'WORKDIR sub', 'ENV A=2 B="two words"', 'USER 65532:65532', 'ENTRYPOINT ["/e", "f"]'].join('\n')),
      () => base,
    );
    expect(stage?.name).toBe('one');
    expect(stage?.config).toEqual({ entrypoint: ['/e', 'f'], cmd: [], user: '65532:65532', workingDir: '/src/sub', env: ['PATH=/bin', 'A=2', 'B=two words'] });
    expect(stage?.steps).toEqual([
      { kind: 'workdir', path: '/src' },
      { kind: 'workdir', path: '/src/sub' },
    ]);
  });

  it('keeps COPY and RUN in order, each stage on its own base', () => {
    const stages = stagesOf(parseDockerfile('FROM a AS build\nCOPY x ./\nRUN make\nFROM b\nCOPY --from=build /out ./out\nCMD ["run"]'), (image) =>
      image === 'b' ? DISTROLESS_NODEJS_NONROOT : base,
    );
    expect(stages.map((s) => s.steps.map((x) => x.kind))).toEqual([['copy', 'run'], ['copy']]);
    expect(stages[1]?.config.entrypoint).toEqual(['/nodejs/bin/node']);
    expect(stages[1]?.config.cmd).toEqual(['run']);
  });

  it('refuses what it would otherwise leave out of the image: unknown instructions, shell-form ENTRYPOINT, ENV without =', () => {
    expect(() => stagesOf(parseDockerfile('FROM a\nEXPOSE 8080'), () => base)).toThrow(/EXPOSE is not handled/);
    expect(() => stagesOf(parseDockerfile('FROM a\nENTRYPOINT node main.js'), () => base)).toThrow();
    expect(() => envPairs('A 1')).toThrow(/K=V/);
  });
});

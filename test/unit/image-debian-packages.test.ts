import { describe, expect, it } from 'vitest';
import { absentPackages, aptOptions, debianArchOf, parseControlFields, parsePrintUris } from '../../devtools/image/debian-packages.js';

describe('Debian packages for an image platform', () => {
  it("names the platform's architecture as Debian does, Linux only", () => {
    expect(debianArchOf({ os: 'linux', arch: 'amd64' })).toBe('amd64');
    expect(debianArchOf({ os: 'linux', arch: 'arm64' })).toBe('arm64');
    expect(() => debianArchOf({ os: 'darwin', arch: 'arm64' })).toThrow(/no Debian packages for darwin/);
  });

  it("uses the host's apt as it is for the host's architecture", () => {
    expect(aptOptions('amd64', 'amd64', '/cache/amd64')).toEqual([]);
  });

  it('gives another architecture an apt of its own: its state, lists and cache, that architecture only', () => {
    const options = aptOptions('arm64', 'amd64', '/cache/arm64');
    const set = options.filter((_, i) => options[i - 1] === '-o');
    expect(options.filter((o) => o === '-o')).toHaveLength(set.length);
    expect(set).toEqual(
      expect.arrayContaining([
        'APT::Architecture=arm64',
        'APT::Architectures::=arm64',
        'Dir::State=/cache/arm64/state',
        'Dir::State::status=/cache/arm64/state/status',
        'Dir::Cache=/cache/arm64/cache',
      ]),
    );
    // The host's sources and keyrings are read as they are: nothing moves Dir::Etc.
    expect(set.some((o) => o.startsWith('Dir::Etc') || o.startsWith('Dir='))).toBe(false);
  });

  it('reads `apt-get --print-uris download`: URI, file name, size, SHA-256', () => {
    const out = [
      "'http://deb.debian.org/debian/pool/main/g/gcc-12/libstdc%2b%2b6_12.2.0-14%2bdeb12u1_arm64.deb' libstdc++6_12.2.0-14+deb12u1_arm64.deb 556608 SHA256:26e138c677a985775331373828a6c286c551ff397cb735d00e2383cb273d1cb2",
      "'http://deb.debian.org/debian-security/pool/updates/main/t/tzdata/tzdata_2026f-0%2bdeb12u1_all.deb' tzdata_2026f-0+deb12u1_all.deb 307832 SHA256:3254eb870c8a949518214805aee5e4276af7699988ea8b9a3a583cd0f1eab31c",
      '',
    ].join('\n');
    expect(parsePrintUris(out)).toEqual([
      {
        uri: 'http://deb.debian.org/debian/pool/main/g/gcc-12/libstdc%2b%2b6_12.2.0-14%2bdeb12u1_arm64.deb',
        filename: 'libstdc++6_12.2.0-14+deb12u1_arm64.deb',
        size: 556608,
        sha256: '26e138c677a985775331373828a6c286c551ff397cb735d00e2383cb273d1cb2',
      },
      {
        uri: 'http://deb.debian.org/debian-security/pool/updates/main/t/tzdata/tzdata_2026f-0%2bdeb12u1_all.deb',
        filename: 'tzdata_2026f-0+deb12u1_all.deb',
        size: 307832,
        sha256: '3254eb870c8a949518214805aee5e4276af7699988ea8b9a3a583cd0f1eab31c',
      },
    ]);
  });

  it('refuses a line it does not understand rather than skip a package', () => {
    expect(() => parsePrintUris("'http://x/a.deb' a.deb 12 MD5Sum:0123")).toThrow(/unexpected line/);
  });

  it('reads `dpkg-deb -f DEB Package Version Architecture`', () => {
    expect(parseControlFields('Package: libc6\nVersion: 2.36-9+deb12u14\nArchitecture: arm64\n')).toEqual({
      name: 'libc6',
      version: '2.36-9+deb12u14',
      arch: 'arm64',
    });
    expect(() => parseControlFields('Package: libc6\nArchitecture: arm64\n')).toThrow(/no Version/);
  });
});

describe('absentPackages: every package asked for must be there', () => {
  it('names those apt did not list', () => {
    const got = [{ name: 'libc6', version: '2.36', arch: 'arm64' }];
    expect(absentPackages(['libc6', 'tzdata'], got)).toEqual(['tzdata']);
    expect(absentPackages(['libc6'], got)).toEqual([]);
  });
});

import { readFileSync } from 'node:fs';

interface PackageInfo {
  readonly version: string;
}

const usage = `usage: usergroup-operator <command> [flags]

commands:
  version   print the version
  help      show this help
`;

export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as PackageInfo).version;
}

/** Runs one command line and returns the exit code. */
export function runCommand(argv: readonly string[], io: Output): number {
  const [command] = argv;
  switch (command) {
    case 'version':
    case '--version':
      io.out(`usergroup-operator ${packageVersion()}\n`);
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      io.out(usage);
      return 0;
    default:
      io.err(`usergroup-operator: unknown command "${command}"\n\n${usage}`);
      return 2;
  }
}

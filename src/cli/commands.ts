import { runCommand as runController, type Io } from './run.js';
import { packageVersion } from './version.js';

const usage = `usage: usergroup-operator <command> [flags]

commands:
  run       run the controller against a cluster (kubeconfig or in-cluster) and the service
  sim       run the service simulator (usergroup-operator sim --port <p> --api-key <k>)
  dev       local control plane + simulator + controller + examples, with a live view
  version   print the version
  help      show this help

"usergroup-operator <command> --help" describes a command's flags.
`;

export type Output = Io;

/** Runs one command line and resolves with the exit code. */
export async function runCommand(argv: readonly string[], io: Output): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'run':
      return runController(rest, io);
    // Developer tooling (src/devtools/), loaded on demand: the controller's process should not carry the
    // simulator or the local control plane (test/unit/import-graph.test.ts checks that `run` never loads them).
    case 'sim':
      return (await import('../devtools/sim/command.js')).simCommand(rest, { out: io.out, err: io.err });
    case 'dev':
      return (await import('../devtools/dev.js')).devCommand(rest, io);
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

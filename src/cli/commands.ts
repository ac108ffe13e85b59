// The usergroup-operator command line: picks the subcommand (run, sim, version, help) and prints the usage.
import { runCommand as runController, type Io } from './run.js';
import { packageVersion } from './version.js';

const usage = `usage: usergroup-operator <command> [flags]

commands:
  run       run the controller against a cluster (kubeconfig or in-cluster) and the service
  sim       run the service simulator (usergroup-operator sim --port <p> --api-key <k>)
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
    // Loaded on demand: the controller's process should not carry the simulator (test/unit/import-graph.test.ts
    // checks that `run` never loads it).
    case 'sim':
      return (await import('../sim/command.js')).simCommand(rest, { out: io.out, err: io.err });
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

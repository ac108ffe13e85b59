#!/usr/bin/env node
// The usergroup-operator executable: runs the command line with this process's arguments and streams.
import { runCommand } from './commands.js';

process.exitCode = await runCommand(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});

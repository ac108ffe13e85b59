// `npm start [-- --dir <path>] [--examples <path>]`: runs devCommand (dev.ts) and exits with its code.
import { devCommand } from './dev.js';

process.exitCode = await devCommand(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});

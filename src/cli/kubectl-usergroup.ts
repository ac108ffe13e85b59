#!/usr/bin/env node
// kubectl finds `kubectl-usergroup` on PATH and execs it for `kubectl usergroup …`.
import { runPlugin } from './kubectl/plugin.js';

process.exitCode = await runPlugin(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});

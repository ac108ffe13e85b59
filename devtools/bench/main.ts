/*
 * npm run bench: how close the operator gets to the limit. Starts a private control plane and the
 * service simulator in this process, runs the controller as a child process, runs the selected phases, and
 * writes bench/results/latest.json and latest.md (and scale.json and scale.md for the scale phase, alone when it
 * ran alone). See devtools/bench/options.ts (npm run bench -- --help).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../repo-root.js';
import { BenchCluster } from './cluster.js';
import { controllerFlags, spawnedControllers, type BenchController } from './controller.js';
import { DEFAULTS, etcdQuotaBytes, parseBenchOptions, scaleNamespaceCount, scaleTimeoutMs, USAGE, type BenchOptions } from './options.js';
import { coldFailed, heapOf, runCold, type ControllerSettings } from './phases/cold.js';
import { runLimit } from './phases/limit.js';
import { runPeer } from './phases/peer.js';
import { restartFailed, runRestart } from './phases/restart.js';
import { rotationFailed, runRotation } from './phases/rotation.js';
import { runScale } from './phases/scale.js';
import { runShardedScale, SHARD_GROUP } from './phases/scale-sharded.js';
import { runScheduled, scheduledFailed } from './phases/scheduled.js';
import { runSteady } from './phases/steady.js';
import { spawnedPeers } from './peer-operator.js';
import { peerCharts, peerSummary, type PeerResult, type PeerSeries } from './peer-report.js';
import { say, startProgress } from './progress.js';
import { renderScaleMarkdown, scaleCommand, type ScaleReport, type ScaleResult } from './scale-report.js';
import { imageEnv, imageNodeFlags } from '../image/dockerfile.js';
import {
  renderMarkdown,
  type BenchResults,
  type ColdResult,
  type LimitResult,
  type MemoryFigure,
  type RestartResult,
  type RotationResult,
  type ScheduledResult,
  type SteadyResult,
} from './report.js';

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** <name>.json and <name>.md in the output directory, the markdown also printed. */
function writeReport(outDir: string, name: string, report: unknown, markdown: string, logDir: string): void {
  const json = path.join(outDir, `${name}.json`);
  const md = path.join(outDir, `${name}.md`);
  fs.writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  fs.writeFileSync(md, markdown);
  say(`\n${markdown}`);
  say(`written: ${json}, ${md}; controller logs in ${logDir}`);
}

async function main(): Promise<number> {
  const parsed = parseBenchOptions(process.argv.slice(2));
  if (parsed.ok === 'help') {
    say(USAGE);
    return 0;
  }
  if (!parsed.ok) {
    process.stderr.write(`npm run bench: ${parsed.error}\n\n${USAGE}`);
    return 2;
  }
  const o = parsed.options;
  const startedAt = new Date().toISOString();
  const loadAverageStart = os.loadavg();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'usergroup-bench-'));
  const nodeOptions = [o.controllerNodeOptions, o.heapSnapshots ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${logDir}` : undefined]
    .filter(Boolean)
    .join(' ');
  const nodeFlags = o.controllerNodeFlags ?? imageNodeFlags(repoRoot);
  const env = imageEnv(repoRoot);
  const settings: ControllerSettings = {
    concurrency: o.concurrency,
    serviceQps: o.serviceQps,
    logLevel: o.controllerLogLevel,
    scheduledRotationsPerMinute: o.scheduledCap,
    nodeOptions: nodeOptions || undefined,
    nodeFlags,
    imageEnv: env,
    logDir,
  };
  /** A heap snapshot of the controller (after its figures are read: writing one costs memory). */
  const snapshot = async (c: BenchController, label: string): Promise<void> => {
    try {
      say(`[heap] ${label}: ${await c.heapSnapshot(logDir)}`);
    } catch (err) {
      say(`[heap] ${label}: no snapshot: ${message(err)}`);
    }
  };
  const timeoutMs = o.phaseTimeoutS * 1000;
  const has = (phase: BenchOptions['phases'][number]): boolean => o.phases.includes(phase);
  const needWorld = has('restart') || has('steady') || has('rotation') || has('scheduled');
  const limitSizes = has('limit') ? o.sizes : [];
  const coldSizes = [...new Set([...(has('cold') || has('memory') || has('scaling') ? o.sizes : []), ...(needWorld ? [o.worldSize] : [])])];
  const sizes = [...new Set([...limitSizes, ...coldSizes])].sort((a, b) => a - b);
  const scaleOnly = o.phases.every((p) => p === 'scale');
  const etcdQuota = etcdQuotaBytes(o);
  say(
    `usergroup-operator bench: sizes ${sizes.join(', ') || '–'}, world ${needWorld ? o.worldSize : '–'}, ` +
      `${has('scale') ? `scale ${o.scaleN} (${o.scaleShards} replica${o.scaleShards > 1 ? 's' : ''}, ${scaleNamespaceCount(o)} namespace${scaleNamespaceCount(o) > 1 ? 's' : ''}, steady ${o.scaleSteadyMinutes} min), ` : ''}phases ${o.phases.join(',')}, latency ${o.latencyMs} ms, ` +
      `concurrency ${o.concurrency}, steady ${o.steadyMinutes} min; controller logs in ${logDir}`,
  );

  const limit: LimitResult[] = [];
  const cold: ColdResult[] = [];
  const memory: MemoryFigure[] = [];
  let restart: RestartResult | undefined;
  let steady: SteadyResult | undefined;
  let rotation: RotationResult | undefined;
  let scheduled: ScheduledResult | undefined;
  let peer: PeerResult | undefined;
  let peerSeries: PeerSeries[] = [];
  let scale: ScaleResult | undefined;
  let fatal: string | undefined;
  let cluster: BenchCluster | undefined;
  let world: { namespace: string; n: number; controller: BenchController; process: string } | undefined;
  let kubernetes = '?';
  let etcdVersion = '?';

  try {
    const cpStart = performance.now();
    cluster = await BenchCluster.start(o.latencyMs, (line) => say(`[control plane] ${line}`), {
      ...(etcdQuota !== undefined ? { etcdQuotaBackendBytes: etcdQuota } : {}),
    });
    kubernetes = cluster.cp.binaries.versions.kubernetes;
    etcdVersion = cluster.cp.binaries.versions.etcd;
    say(`[control plane] ready in ${((performance.now() - cpStart) / 1000).toFixed(1)} s; simulator at ${cluster.sim.url} (${o.latencyMs} ms per call)`);

    for (const n of sizes) {
      if (limitSizes.includes(n)) {
        for (const mode of o.limitModes) {
          try {
            const result = await runLimit(cluster, n, o.concurrency, o.applyParallelism, mode);
            limit.push(result);
            await cleanUp(cluster, result.namespace);
          } catch (err) {
            say(`[limit N=${n}] FAILED: ${message(err)}`);
            limit.push({ n, mode, namespace: '', ok: false, error: message(err), wallMs: 0, concurrency: o.concurrency });
          }
        }
      }
      if (coldSizes.includes(n)) {
        try {
          const run = await runCold(cluster, n, settings, o.applyParallelism, timeoutMs);
          cold.push(run.result);
          const c = run.result.controller;
          if (c.peakRssBytes !== undefined)
            memory.push({
              n,
              process: 'cold convergence',
              peakRssBytes: c.peakRssBytes,
              ...(c.rssBytes !== undefined ? { endRssBytes: c.rssBytes } : {}),
              ...(c.heap ? { heap: c.heap } : {}),
            });
          if (o.heapSnapshots) await snapshot(run.controller, `cold-${n}`);
          if (needWorld && n === o.worldSize && run.result.ok)
            world = { namespace: run.result.namespace, n, controller: run.controller, process: 'cold convergence, then steady/rotation' };
          else {
            await run.controller.stop();
            await cleanUp(cluster, run.result.namespace);
          }
        } catch (err) {
          say(`[cold N=${n}] FAILED: ${message(err)}`);
          cold.push(coldFailed(n, message(err)));
        }
      }
    }

    if (needWorld && !world) say(`restart, steady, rotation and scheduled need ${o.worldSize} synced UserGroups, and their cold convergence failed: skipped`);
    if (world && has('restart')) {
      try {
        const r = await runRestart(cluster, world.namespace, world.n, world.controller, settings, timeoutMs);
        restart = r.result;
        world = { ...world, controller: r.controller, process: 'restarted, then steady/rotation' };
      } catch (err) {
        say(`[restart] FAILED: ${message(err)}`);
        restart = restartFailed(world.n, message(err));
      }
    }
    if (world && has('steady') && o.steadyMinutes > 0 && !world.controller.exited()) {
      try {
        steady = await runSteady(cluster, world.n, world.controller, o.steadyMinutes);
      } catch (err) {
        say(`[steady] FAILED: ${message(err)}`);
      }
    }
    if (world && has('rotation') && !world.controller.exited()) {
      try {
        rotation = await runRotation(cluster, world.namespace, world.n, world.controller, o.rotations, Math.min(timeoutMs, 300_000));
      } catch (err) {
        say(`[rotation] FAILED: ${message(err)}`);
        rotation = rotationFailed(world.n, o.rotations, message(err));
      }
    }
    /** The world controller's memory as the memory target reads it: peak so far, RSS and heap now. */
    const worldMemory = async (c: BenchController): Promise<{ peak: number | undefined; endRss: number | undefined; heap: MemoryFigure['heap'] }> => {
      const end = c.sample();
      return { peak: end?.peakRssBytes, endRss: end?.rssBytes, heap: await c.metrics().then(heapOf, () => undefined) };
    };
    // The memory target covers the phases before this one (cold, restart, steady, rotation), read before the wave so
    // that it compares across runs with and without it: the wave's own peak is in its table.
    let beforeScheduled: Awaited<ReturnType<typeof worldMemory>> | undefined;
    // Last of the world phases: it leaves every group with a maxTokenAge, which the others do not expect.
    if (world && has('scheduled') && !world.controller.exited()) {
      beforeScheduled = await worldMemory(world.controller);
      try {
        scheduled = await runScheduled(cluster, world.namespace, world.n, world.controller, {
          capPerMinute: o.scheduledCap,
          leadMs: o.scheduledLeadS > 0 ? o.scheduledLeadS * 1000 : undefined,
          parallelism: o.applyParallelism,
          timeoutMs,
        });
      } catch (err) {
        say(`[scheduled] FAILED: ${message(err)}`);
        scheduled = scheduledFailed(world.n, o.scheduledCap, message(err));
      }
    }
    if (world) {
      const atEnd = beforeScheduled ?? (await worldMemory(world.controller));
      if (o.heapSnapshots) await snapshot(world.controller, 'world-end');
      await world.controller.stop();
      const peak = beforeScheduled ? beforeScheduled.peak : world.controller.proc.latest?.peakRssBytes;
      const figure = (p: number): MemoryFigure => ({
        n: world?.n ?? 0,
        process: world?.process ?? '',
        peakRssBytes: p,
        ...(atEnd.endRss !== undefined ? { endRssBytes: atEnd.endRss } : {}),
        ...(atEnd.heap ? { heap: atEnd.heap } : {}),
      });
      if (peak !== undefined && world.process.startsWith('restarted')) memory.push(figure(peak));
      else if (peak !== undefined) {
        const i = memory.findIndex((m) => m.n === world?.n && m.process === 'cold convergence');
        if (i >= 0) memory[i] = figure(peak);
      }
      // The peer and scale phases get a cluster of the same size: without the world's groups.
      if (has('peer') || has('scale')) await cleanUp(cluster, world.namespace);
    }
    // Last: it needs no world, and its own runs clean up after themselves.
    if (has('peer')) {
      const c = cluster;
      const ran = await runPeer(c, {
        n: Math.max(...o.sizes),
        concurrency: o.concurrency,
        applyParallelism: o.applyParallelism,
        peerDir: path.resolve(repoRoot, o.peerDir),
        peerQps: o.peerQps,
        peerBurst: o.peerBurst,
        restartWindowS: o.peerRestartS,
        timeoutMs,
        settings,
        cleanUp: (namespace) => cleanUp(c, namespace),
      });
      peer = ran.result;
      peerSeries = ran.series;
      say(peerSummary(peer));
    }
    // Last of all: it leaves its namespace (300,000 objects at 100,000 groups) to the control plane's stop.
    if (has('scale')) {
      const scaleOptions = {
        n: o.scaleN,
        applyParallelism: o.applyParallelism,
        steadyMinutes: o.scaleSteadyMinutes,
        rotations: o.rotations,
        timeoutMs: scaleTimeoutMs(o),
        etcdQuotaBytes: etcdQuota,
        settings,
        ...(o.heapSnapshots ? { snapshot } : {}),
      };
      // Several replicas or namespaces: the same steps with each replica's figures (scale-sharded.ts).
      const namespaces = scaleNamespaceCount(o);
      scale =
        o.scaleShards > 1 || namespaces > 1
          ? await runShardedScale(cluster, { ...scaleOptions, shards: o.scaleShards, namespaces })
          : await runScale(cluster, scaleOptions);
    }
  } catch (err) {
    fatal = message(err);
    say(`bench stopped: ${fatal}`);
  } finally {
    for (const c of spawnedControllers) await c.stop(5_000).catch(() => undefined);
    for (const p of spawnedPeers) await p.stop(5_000).catch(() => undefined);
    await cluster?.stop().catch((err: unknown) => say(`stopping the control plane failed: ${message(err)}`));
  }

  const outDir = path.resolve(repoRoot, o.outDir);
  fs.mkdirSync(outDir, { recursive: true });
  const environment = { node: process.version, cpus: os.cpus().length, kubernetes, loadAverageStart, loadAverageEnd: os.loadavg() };
  const flagOptions = {
    concurrency: o.concurrency,
    serviceQps: o.serviceQps,
    logLevel: o.controllerLogLevel,
    scheduledRotationsPerMinute: o.scheduledCap,
  };
  const flags = controllerFlags(flagOptions);
  if (has('scale')) {
    const sharded = o.scaleShards > 1 || scaleNamespaceCount(o) > 1;
    // The replicas' flags name the Lease namespace the phase created (a placeholder when it did not get that far).
    const leaseNamespace = scale?.sharding?.leaseNamespace ?? '<bench-scale-control namespace>';
    const scaleFlags = o.scaleShards > 1 ? controllerFlags({ ...flagOptions, shard: { leaseNamespace, group: SHARD_GROUP } }) : flags;
    const report: ScaleReport = {
      startedAt,
      finishedAt: new Date().toISOString(),
      environment: { ...environment, memoryBytes: os.totalmem(), etcd: etcdVersion },
      options: {
        latencyMs: o.latencyMs,
        concurrency: o.concurrency,
        serviceQps: o.serviceQps,
        applyParallelism: o.applyParallelism,
        rotations: o.rotations,
        ...(sharded ? { scaleShards: o.scaleShards, scaleNamespaces: scaleNamespaceCount(o) } : {}),
      },
      controllerFlags: scaleFlags,
      controllerNodeFlags: nodeFlags,
      controllerEnv: env,
      command: scaleCommand(o, DEFAULTS),
      scale: scale ?? {
        n: o.scaleN,
        ok: false,
        error: fatal ?? 'not run',
        steadyMinutes: o.scaleSteadyMinutes,
        timeoutMs: scaleTimeoutMs(o),
        etcdQuotaBytes: etcdQuota,
        controllers: [],
        processes: [],
      },
      ...(fatal ? { error: fatal } : {}),
    };
    writeReport(outDir, 'scale', report, renderScaleMarkdown(report), logDir);
    // Alone, it leaves latest.* as they are: a report of phases not run would replace the last full run's.
    if (scaleOnly) return fatal !== undefined || !report.scale.ok ? 1 : 0;
  }
  const results: BenchResults = {
    startedAt,
    finishedAt: new Date().toISOString(),
    options: {
      sizes: o.sizes,
      worldSize: o.worldSize,
      phases: o.phases,
      latencyMs: o.latencyMs,
      concurrency: o.concurrency,
      serviceQps: o.serviceQps,
      applyParallelism: o.applyParallelism,
      steadyMinutes: o.steadyMinutes,
      rotations: o.rotations,
      scheduledCap: o.scheduledCap,
      scheduledLeadS: o.scheduledLeadS,
      limitModes: o.limitModes,
      ...(o.phases.includes('peer') ? { peerDir: o.peerDir, peerRestartS: o.peerRestartS, peerQps: o.peerQps, peerBurst: o.peerBurst } : {}),
    },
    environment,
    controllerFlags: flags,
    controllerNodeFlags: nodeFlags,
    controllerEnv: env,
    leaderElection: false,
    limit,
    cold,
    restart,
    steady,
    rotation,
    scheduled,
    ...(peer ? { peer: { ...peer, charts: await writePeerCharts(outDir, peer.n, peerSeries) } } : {}),
    memory,
    ...(fatal ? { error: fatal } : {}),
  };
  writeReport(outDir, 'latest', results, renderMarkdown(results), logDir);
  const failed =
    fatal !== undefined ||
    [
      ...limit,
      ...cold,
      ...(restart ? [restart] : []),
      ...(steady ? [steady] : []),
      ...(rotation ? [rotation] : []),
      ...(scheduled ? [scheduled] : []),
      ...(peer ? [peer] : []),
      ...(scale ? [scale] : []),
    ].some((p) => !p.ok);
  return failed ? 1 : 0;
}

let interrupted = false;
process.on('SIGINT', () => {
  if (interrupted) process.exit(130);
  interrupted = true;
  say('interrupted: stopping the controllers and the control plane (Ctrl-C again to leave them)');
  void Promise.allSettled([...spawnedControllers, ...spawnedPeers].map((c) => c.stop(2_000))).then(() => process.exit(130));
});

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);

/** Removes a finished phase's namespace before the next phase starts: every phase gets a cluster of the same size. */
async function cleanUp(cluster: BenchCluster, namespace: string): Promise<void> {
  if (!namespace) return;
  const progress = startProgress('cleanup', () => `deleting namespace ${namespace}`);
  try {
    const ms = await cluster.deleteNamespace(namespace);
    // The deleted objects' history would otherwise stay in etcd until the apiserver's next compaction.
    await cluster.cp.compactEtcd();
    await cluster.cp.defragmentEtcd();
    progress.stop(`namespace ${namespace} deleted in ${(ms / 1000).toFixed(1)} s; etcd compacted and defragmented`);
  } catch (err) {
    progress.stop(`namespace ${namespace} not deleted: ${message(err)}`);
  }
}

/**
 * The peer phase's charts (SVG, linked from latest.md and docs/benchmark.md) and their data (peer-series.json: the
 * samples, kept out of latest.json, which stays readable). Resolves with the chart files written.
 */
async function writePeerCharts(outDir: string, n: number, series: readonly PeerSeries[]): Promise<string[]> {
  if (series.length === 0) return [];
  await fs.promises.writeFile(path.join(outDir, 'peer-series.json'), `${JSON.stringify({ n, series })}\n`);
  const charts = peerCharts(n, series);
  for (const chart of charts) await fs.promises.writeFile(path.join(outDir, chart.file), chart.svg);
  return charts.map((c) => c.file);
}

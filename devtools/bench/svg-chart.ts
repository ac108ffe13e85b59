/*
 * A line chart as SVG text: a pure function from series to markup, so the bench can draw its curves without a
 * plotting dependency (unit-tested in test/unit/bench-svg-chart.test.ts). Axes with round ticks, axis labels,
 * a title and a legend; one polyline per series.
 */

export interface ChartSeries {
  readonly label: string;
  /** [x, y] in data units, in x order. */
  readonly points: readonly (readonly [number, number])[];
  /** Any SVG colour. */
  readonly color: string;
  readonly dashed?: boolean;
}

export interface LineChart {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly ChartSeries[];
  readonly width?: number;
  readonly height?: number;
  /** Tick labels; default: the number as it is, up to 3 decimals. */
  readonly formatX?: (v: number) => string;
  readonly formatY?: (v: number) => string;
}

/** Text safe inside an SVG element or attribute. */
export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/**
 * Round tick values covering [0, max] (charts here start at 0: counts, bytes and seconds are never negative, and
 * a zero baseline keeps two curves' heights comparable at a glance). Steps of 1, 2 or 5 × 10^k, about `target` ticks.
 */
export function niceTicks(max: number, target = 5): number[] {
  if (!Number.isFinite(max) || max <= 0) return [0, 1];
  const raw = max / target;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const ticks: number[] = [];
  // Rounded so that 0.1 + 0.2 style sums do not print as 0.30000000000000004.
  for (let i = 0; i * step < max + step * 1e-9; i++) ticks.push(Number((i * step).toPrecision(12)));
  if ((ticks.at(-1) ?? 0) < max) ticks.push(Number((ticks.length * step).toPrecision(12)));
  return ticks;
}

const plain = (v: number): string => String(Number(v.toFixed(3)));
const fixed = (v: number): string => Number(v.toFixed(1)).toString();

export function renderLineChart(chart: LineChart): string {
  const width = chart.width ?? 760;
  const height = chart.height ?? 420;
  const formatX = chart.formatX ?? plain;
  const formatY = chart.formatY ?? plain;
  // Room for the tick labels left and below, the title above, the legend to the right of the plot.
  const legendWidth = 200;
  const margin = { left: 70, right: legendWidth + 20, top: 40, bottom: 55 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const all = chart.series.flatMap((s) => s.points);
  const xTicks = niceTicks(Math.max(0, ...all.map((p) => p[0])));
  const yTicks = niceTicks(Math.max(0, ...all.map((p) => p[1])));
  const xMax = xTicks.at(-1) ?? 1;
  const yMax = yTicks.at(-1) ?? 1;
  const px = (x: number): number => margin.left + (x / xMax) * plotW;
  const py = (y: number): number => margin.top + plotH - (y / yMax) * plotH;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(chart.title)}</text>`,
  );
  // Grid and tick labels.
  for (const t of yTicks) {
    const y = fixed(py(t));
    out.push(
      `<line x1="${margin.left}" y1="${y}" x2="${margin.left + plotW}" y2="${y}" stroke="#e5e5e5"/>`,
      `<text x="${margin.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${escapeXml(formatY(t))}</text>`,
    );
  }
  for (const t of xTicks) {
    const x = fixed(px(t));
    out.push(
      `<line x1="${x}" y1="${margin.top}" x2="${x}" y2="${margin.top + plotH}" stroke="#e5e5e5"/>`,
      `<text x="${x}" y="${margin.top + plotH + 16}" text-anchor="middle">${escapeXml(formatX(t))}</text>`,
    );
  }
  // Axes and their labels.
  out.push(
    `<line x1="${margin.left}" y1="${margin.top + plotH}" x2="${margin.left + plotW}" y2="${margin.top + plotH}" stroke="black"/>`,
    `<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${margin.top + plotH}" stroke="black"/>`,
    `<text x="${margin.left + plotW / 2}" y="${height - 12}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`,
    `<text x="16" y="${margin.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${margin.top + plotH / 2})">${escapeXml(chart.yLabel)}</text>`,
  );
  // One polyline per series, then the legend.
  for (const s of chart.series) {
    if (s.points.length === 0) continue;
    const points = s.points.map(([x, y]) => `${fixed(px(x))},${fixed(py(y))}`).join(' ');
    out.push(
      `<polyline fill="none" stroke="${escapeXml(s.color)}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''} points="${points}"><title>${escapeXml(s.label)}</title></polyline>`,
    );
  }
  const legendX = margin.left + plotW + 20;
  chart.series.forEach((s, i) => {
    const y = margin.top + 10 + i * 20;
    out.push(
      `<line x1="${legendX}" y1="${y}" x2="${legendX + 28}" y2="${y}" stroke="${escapeXml(s.color)}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
      `<text x="${legendX + 34}" y="${y}" dominant-baseline="middle">${escapeXml(s.label)}</text>`,
    );
  });
  out.push('</svg>', '');
  return out.join('\n');
}

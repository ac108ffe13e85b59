import { describe, expect, it } from 'vitest';
import { escapeXml, niceTicks, renderLineChart, type LineChart } from '../../devtools/bench/svg-chart.js';

const chart = (over: Partial<LineChart> = {}): LineChart => ({
  title: 'Ready over time',
  xLabel: 'seconds',
  yLabel: 'UserGroups Ready',
  series: [
    {
      label: 'TypeScript, ts-first',
      color: '#1f6feb',
      points: [
        [0, 0],
        [1, 50],
        [2, 100],
      ],
    },
    {
      label: 'Go peer, go-first',
      color: '#d9480f',
      dashed: true,
      points: [
        [0, 0],
        [1.5, 100],
      ],
    },
  ],
  ...over,
});

describe('niceTicks', () => {
  it('steps of 1, 2 or 5 × 10^k from 0 to at least the maximum', () => {
    expect(niceTicks(100)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(niceTicks(6.05)).toEqual([0, 2, 4, 6, 8]);
    expect(niceTicks(10_000)).toEqual([0, 2000, 4000, 6000, 8000, 10000]);
    expect(niceTicks(0.7)).toEqual([0, 0.2, 0.4, 0.6, 0.8]);
  });

  it('a usable axis for no data', () => {
    expect(niceTicks(0)).toEqual([0, 1]);
    expect(niceTicks(Number.NaN)).toEqual([0, 1]);
  });
});

describe('renderLineChart', () => {
  it('one polyline per series, axes, labels and a legend entry each', () => {
    const svg = renderLineChart(chart());
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(svg).toContain('>Ready over time</text>');
    expect(svg).toContain('>seconds</text>');
    expect(svg).toContain('>UserGroups Ready</text>');
    expect(svg).toContain('>TypeScript, ts-first</text>');
    expect(svg).toContain('>Go peer, go-first</text>');
    // The dashed series is dashed in the plot and in the legend.
    expect(svg.match(/stroke-dasharray/g)).toHaveLength(2);
  });

  it('maps data to the plot area: the origin bottom left, the largest tick top right', () => {
    const svg = renderLineChart(chart({ width: 760, height: 420 }));
    // Plot area: x 70..540 (the legend takes the right), y 40..365; x ticks 0..2, y ticks 0..100.
    expect(svg).toContain('points="70,365 305,202.5 540,40"');
  });

  it('tick labels through the formatters', () => {
    const svg = renderLineChart(chart({ formatX: (v) => `${v} s`, formatY: (v) => `${v} MiB` }));
    expect(svg).toContain('>2 s</text>');
    expect(svg).toContain('>100 MiB</text>');
  });

  it('escapes text, and draws no line for an empty series', () => {
    const svg = renderLineChart(chart({ title: 'a < b & "c"', series: [{ label: '<none>', color: 'red', points: [] }] }));
    expect(svg).toContain('a &lt; b &amp; &quot;c&quot;');
    expect(svg).toContain('&lt;none&gt;');
    expect(svg).not.toContain('<polyline');
    expect(escapeXml('<&>"')).toBe('&lt;&amp;&gt;&quot;');
  });
});

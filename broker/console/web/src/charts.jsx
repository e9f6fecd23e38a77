// Live time-series charts of a topic's recent history, as the broker keeps it.
// uPlot draws on a canvas; the chart is built once and given new data on
// every poll, so it does not flicker.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

const HEIGHT = 220;
const colors = ['#2563eb', '#16a34a', '#d97706'];

// TimeChart: lines [{label, value: sample => number, format}].
export function TimeChart({ testid, title, samples, lines }) {
  const box = useRef(null);
  const plot = useRef(null);
  const data = [samples.map((s) => s.t / 1000), ...lines.map((l) => samples.map(l.value))];

  useEffect(() => {
    const opts = {
      width: box.current.clientWidth || 480,
      height: HEIGHT,
      series: [{}, ...lines.map((l, i) => ({ label: l.label, stroke: colors[i], width: 2, value: (_, v) => fmt(l, v) }))],
      // Ticks are bare numbers: the title says the unit.
      axes: [{}, { size: 56, values: (_, ticks) => ticks.map(tick) }],
      scales: { y: { range: (_, min, max) => [0, Math.max(max, 1)] } },
      legend: { live: true },
    };
    plot.current = new uPlot(opts, data, box.current);
    // The window's size, not a ResizeObserver: resizing the canvas from
    // an observer can loop, which the browser reports as an error.
    const resize = () => plot.current.setSize({ width: box.current.clientWidth, height: HEIGHT });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      plot.current.destroy();
    };
  }, []);

  useEffect(() => {
    plot.current.setData(data);
  }, [samples]);

  return (
    <div class="chart">
      <h3>{title}</h3>
      <div ref={box} data-testid={testid} data-points={samples.length} />
    </div>
  );
}

function tick(v) {
  if (Math.abs(v) >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (Math.abs(v) >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(+v.toFixed(2));
}

function fmt(line, v) {
  return v === null || v === undefined ? '—' : line.format(v);
}

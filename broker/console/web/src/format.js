// Numbers as people read them. The raw values stay in data-value
// attributes (see ui.jsx) for anything that needs them exact.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function formatBytes(n) {
  let value = Number(n) || 0;
  if (Math.abs(value) < 1024) return `${Math.round(value)} B`;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${UNITS[unit]}`;
}

export const formatThroughput = (n) => `${formatBytes(n)}/s`;

const oneDecimal = { minimumFractionDigits: 1, maximumFractionDigits: 1 };

export const formatRate = (n) => `${(Number(n) || 0).toLocaleString('en-US', oneDecimal)} msg/s`;

export const formatCount = (n) => (Number(n) || 0).toLocaleString('en-US');

export const formatPercent = (n) => `${(Number(n) || 0).toFixed(1)}%`;

export function formatSeconds(s) {
  const n = Number(s) || 0;
  if (n < 120) return `${n} s`;
  if (n < 7200) return `${(n / 60).toFixed(1)} min`;
  return `${(n / 3600).toFixed(1)} h`;
}

// formatTime shows a Unix-ms time in UTC, the broker's own clock; 0 is "never".
export function formatTime(ms) {
  if (!ms) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

// usePoll keeps the visible page fresh: it runs load now and every
// POLL_MS after the previous run ends (never two at once), while the tab
// is visible. A failure keeps the last data on screen and is reported;
// the next success clears it, which is how the page recovers by itself
// when a broker restarts.
import { useEffect, useRef, useState } from 'preact/hooks';
import { clearError, reportError } from './state.js';

export const POLL_MS = 2000;

export function usePoll(load, deps) {
  const key = JSON.stringify(deps);
  const [result, setResult] = useState({ key: null, data: undefined });
  const [round, setRound] = useState(0);
  const source = useRef({}).current; // this poll's banner messages

  useEffect(() => {
    let stopped = false;
    let timer;
    const run = async () => {
      if (!document.hidden) {
        try {
          const data = await load();
          if (stopped) return;
          setResult({ key, data });
          clearError(source);
        } catch (err) {
          if (stopped) return;
          reportError(err, source);
        }
      }
      if (!stopped) timer = setTimeout(run, POLL_MS);
    };
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [key, round]);

  return {
    // Data of other deps (the previous topic, say) is never shown.
    data: result.key === key ? result.data : undefined,
    reload: () => setRound((r) => r + 1),
  };
}

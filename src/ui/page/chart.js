// The traffic chart (uPlot, bundled): bytes per second each way and new streams and refusals per
// second, summed over the proxies, for the samples they keep (five minutes).
'use strict';

(() => {
  const holder = document.getElementById('chart');
  let plot;
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  function options(width) {
    const fg = css('--fg');
    const grid = css('--line');
    const axis = (scale, side, values) => ({ scale, side, stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, values, size: 70 });
    const rate = (_, ticks) => ticks.map((t) => `${humanBytes(t)}/s`);
    return {
      width,
      height: 240,
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, bytes: { auto: true, range: (_, min, max) => [0, Math.max(1024, max)] }, count: { auto: true, range: (_, min, max) => [0, Math.max(5, max)] } },
      axes: [{ stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } }, axis('bytes', 3, rate), axis('count', 1)],
      series: [
        {},
        { label: 'sent ↑', scale: 'bytes', stroke: css('--chart-out'), width: 2, value: (_, v) => (v == null ? '' : `${humanBytes(v)}/s`) },
        { label: 'received ↓', scale: 'bytes', stroke: css('--chart-in'), width: 2, value: (_, v) => (v == null ? '' : `${humanBytes(v)}/s`) },
        { label: 'new streams/s', scale: 'count', stroke: css('--chart-new'), width: 2, dash: [6, 3] },
        { label: 'refused/s', scale: 'count', stroke: css('--chart-refused'), width: 2, dash: [2, 3] },
      ],
    };
  }

  function humanBytes(n) {
    if (n < 1024) return `${Math.round(n)} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  function data(proxies) {
    const now = Math.floor(Date.now() / 1000);
    const start = now - 300;
    const xs = [];
    const cols = [[], [], [], []];
    for (let t = start; t <= now; t++) {
      xs.push(t);
      for (const c of cols) c.push(null);
    }
    for (const p of proxies.values()) {
      for (const s of p.samples) {
        const i = Math.floor(s.t / 1000) - start;
        if (i < 0 || i >= xs.length) continue;
        const add = (c, v) => (cols[c][i] = (cols[c][i] || 0) + v);
        add(0, s.bytesFromClients);
        add(1, s.bytesToClients);
        add(2, s.newStreams);
        add(3, s.refused);
      }
    }
    return [xs, ...cols];
  }

  function update(proxies) {
    if (typeof uPlot === 'undefined') return;
    const d = data(proxies);
    if (!plot) {
      plot = new uPlot(options(holder.clientWidth || 800), d, holder);
      window.addEventListener('resize', () => plot.setSize({ width: holder.clientWidth, height: 240 }));
      matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
        plot.destroy();
        plot = undefined;
        update(proxies);
      });
    } else plot.setData(d);
  }

  window.proxyoutChart = { update };
})();

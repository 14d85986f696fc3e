// Overview: every queue's counts and throughput, and the live workers.
// Queues with work but no worker serving them are highlighted.
import {throttle} from './live.js';
import {ago, el, errorBox, getJson, replace, svg, table, emptyRow,
        formatDuration, formatTime, toDate} from './util.js';

const REFRESH_MS = 5000;  // counts change without events (workers, delays)

export function overviewPage(main, params, app) {
  const body = el('div', {id: 'overview'});
  replace(main, el('h1', null, 'Overview'), body);
  let disposed = false;

  async function load() {
    try {
      const data = await getJson('/api/overview');
      if (!disposed) draw(body, data);
    } catch (error) {
      if (!disposed) replace(body, errorBox(error));
    }
  }
  const refresh = throttle(load, 1000);
  const timer = setInterval(refresh, REFRESH_MS);
  load();
  return {
    onEvent: refresh,
    refresh,
    dispose() {
      disposed = true;
      clearInterval(timer);
    },
  };
}

function draw(body, data) {
  const queues = data.queues || [];
  const workers = data.workers || [];
  const unserved = queues.filter((q) => q.unserved);
  replace(body,
          unserved.length ? el('p', {class: 'notice warning', role: 'status'},
                               `No worker serves ${unserved.length === 1 ?
                                   'queue' : 'queues'} `,
                               unserved.map((q) => q.queue).join(', '),
                               ': their tasks wait until one starts.')
                          : null,
          el('section', {class: 'panel'},
             el('h2', null, 'Throughput, all queues'),
             throughputChart(totalThroughput(queues), 720, 140, true)),
          el('section', {class: 'panel'},
             el('h2', null, 'Queues'), queuesTable(queues, data.now)),
          el('section', {class: 'panel'},
             el('h2', null, 'Workers'), workersTable(workers, data.now)));
}

function queuesTable(queues, now) {
  const rows = queues.map((q) => el(
      'tr', {class: q.unserved ? 'unserved' : null, 'data-queue': q.queue},
      el('td', null, q.queue,
         q.unserved ? el('span', {class: 'badge status-failed'}, 'no worker')
                    : null,
         q.paused ? el('span', {class: 'badge status-cancelled'}, 'paused')
                  : null),
      ['waiting', 'delayed', 'active', 'parked', 'failed', 'completed',
       'cancelled'].map((k) => el('td', {class: `num count-${k}`},
                                 q[k] === undefined ? '' : String(q[k]))),
      el('td', {class: 'num'}, String(q.workers ?? '')),
      el('td', {class: 'num'},
         q.oldest_waiting_seconds ? formatDuration(q.oldest_waiting_seconds)
                                  : ''),
      el('td', null, throughputChart(q.throughput || [], 160, 28, false))));
  return table(['Queue', 'Waiting', 'Delayed', 'Active', 'Parked', 'Failed',
                'Completed', 'Cancelled', 'Workers', 'Oldest waiting',
                'Per minute'],
               rows.length ? rows : [emptyRow(11, 'No queues yet.')],
               {class: 'queues'});
}

function workersTable(workers, now) {
  const rows = workers.map((w) => el(
      'tr', {'data-worker': w.id}, el('td', {class: 'mono'}, w.id),
      el('td', null, (w.queues || []).join(', ')),
      el('td', {title: formatTime(w.last_seen)}, ago(w.last_seen, now))));
  return table(['Worker', 'Queues', 'Last seen'],
               rows.length ? rows : [emptyRow(3, 'No live workers.')],
               {class: 'workers'});
}

// The per-minute sums over all queues.
function totalThroughput(queues) {
  const byMinute = new Map();
  for (const q of queues) {
    for (const point of q.throughput || []) {
      const key = String(point.minute);
      const sum = byMinute.get(key) ||
                  {minute: point.minute, completed: 0, failed: 0};
      sum.completed += point.completed || 0;
      sum.failed += point.failed || 0;
      byMinute.set(key, sum);
    }
  }
  return [...byMinute.values()].sort(
      (a, b) => (toDate(a.minute) || 0) - (toDate(b.minute) || 0));
}

// Bars per minute: completed (green) with failed (red) stacked on top.
function throughputChart(points, width, height, withLabels) {
  const bottom = withLabels ? 18 : 0;
  const top = withLabels ? 16 : 0;  // room for the "max" label
  const plot = height - bottom;
  const chart = svg('svg', {
    class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': 'tasks finished per minute',
  });
  chart.append(svg('line', {x1: 0, y1: plot - 0.5, x2: width, y2: plot - 0.5,
                            class: 'axis'}));
  if (!points.length) {
    if (withLabels) {
      chart.append(svg('text', {x: 4, y: plot / 2, class: 'chart-label'},
                       'no finished tasks in the last minutes'));
    }
    return chart;
  }
  const max = Math.max(1, ...points.map((p) => (p.completed || 0) +
                                               (p.failed || 0)));
  const slot = width / points.length;
  const bar = Math.max(1, slot - 2);
  points.forEach((p, i) => {
    const x = i * slot + 1;
    const done = ((p.completed || 0) / max) * (plot - top - 2);
    const failed = ((p.failed || 0) / max) * (plot - top - 2);
    const tip = `${formatTime(p.minute)}: ${p.completed || 0} completed, ` +
                `${p.failed || 0} failed`;
    chart.append(svg('rect', {x, y: plot - done, width: bar, height: done,
                              class: 'bar-completed'},
                     svg('title', null, tip)));
    if (failed > 0) {
      chart.append(svg('rect', {x, y: plot - done - failed, width: bar,
                                height: failed, class: 'bar-failed'},
                       svg('title', null, tip)));
    }
  });
  if (withLabels) {
    const first = formatTime(points[0].minute).slice(11, 16);
    const last = formatTime(points[points.length - 1].minute).slice(11, 16);
    chart.append(svg('text', {x: 2, y: height - 4, class: 'chart-label'},
                     `${first} UTC`));
    chart.append(svg('text', {x: width - 2, y: height - 4,
                              class: 'chart-label end'}, last));
    chart.append(svg('text', {x: width - 2, y: 12, class: 'chart-label end'},
                     `max ${max}/min`));
  }
  return chart;
}

// A flow's steps drawn as a graph: one column per dependency depth (a step
// sits one column right of its deepest dependency), nodes coloured by
// status, map steps with their done/total and a progress bar.
import {cssToken, svg} from './util.js';

const NODE_W = 168;
const NODE_H = 48;
const COLUMN_GAP = 64;
const ROW_GAP = 18;
const MARGIN = 12;

// Each step's depth: 0 without dependencies, else one more than its
// deepest dependency. Unknown dependencies are ignored; a cycle (which a
// deployed flow cannot have) stops at the step seen twice.
export function depths(steps) {
  const bySlug = new Map(steps.map((s) => [s.slug, s]));
  const depth = new Map();
  const visiting = new Set();
  function visit(slug) {
    if (depth.has(slug)) return depth.get(slug);
    if (visiting.has(slug)) return 0;
    visiting.add(slug);
    let d = 0;
    for (const dep of bySlug.get(slug).depends_on || []) {
      if (bySlug.has(dep)) d = Math.max(d, visit(dep) + 1);
    }
    visiting.delete(slug);
    depth.set(slug, d);
    return d;
  }
  for (const s of steps) visit(s.slug);
  return depth;
}

// Columns of steps; within a column, steps are ordered by the mean row of
// their dependencies (fewer crossing edges), then by their flow order.
function layout(steps) {
  const depth = depths(steps);
  const columns = [];
  steps.forEach((s, order) => {
    const d = depth.get(s.slug);
    (columns[d] = columns[d] || []).push({step: s, order});
  });
  const row = new Map();
  for (const column of columns) {
    if (!column) continue;
    for (const item of column) {
      const deps = (item.step.depends_on || []).filter((d) => row.has(d));
      item.weight = deps.length ?
          deps.reduce((sum, d) => sum + row.get(d), 0) / deps.length :
          item.order;
    }
    column.sort((a, b) => a.weight - b.weight || a.order - b.order);
    column.forEach((item, i) => row.set(item.step.slug, i));
  }
  const tallest = Math.max(1, ...columns.map((c) => (c ? c.length : 0)));
  const height = MARGIN * 2 + tallest * NODE_H + (tallest - 1) * ROW_GAP;
  const position = new Map();
  columns.forEach((column, d) => {
    if (!column) return;
    const used = column.length * NODE_H + (column.length - 1) * ROW_GAP;
    const top = (height - used) / 2;
    column.forEach((item, i) => position.set(item.step.slug, {
      x: MARGIN + d * (NODE_W + COLUMN_GAP),
      y: top + i * (NODE_H + ROW_GAP),
    }));
  });
  const width = MARGIN * 2 + columns.length * NODE_W +
                Math.max(0, columns.length - 1) * COLUMN_GAP;
  return {position, width, height};
}

function shorten(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function nodeDetail(step) {
  const kind = step.kind && step.kind !== 'single' ? `${step.kind} · ` : '';
  const status = step.status || '';
  if (step.kind === 'map' && step.total !== undefined && step.total !== null) {
    return `${kind}${step.done ?? 0}/${step.total} done`;
  }
  return `${kind}${status}`;
}

function node(step, at) {
  const status = cssToken(step.status || 'none');
  const group = svg('g', {
    class: `node status-${status} kind-${cssToken(step.kind || 'single')}`,
    transform: `translate(${at.x},${at.y})`,
    'data-step': step.slug,
    'data-status': step.status || '',
  });
  group.append(
      svg('title', null,
          `${step.slug}: ${step.status || 'not started'}` +
              (step.kind === 'map' ? ` (${step.done ?? 0}/${step.total ?? '?'}` +
                                         ' tasks done)' : '')),
      svg('rect', {width: NODE_W, height: NODE_H, rx: 7, class: 'box'}),
      svg('text', {x: 10, y: 20, class: 'slug'}, shorten(step.slug, 20)),
      svg('text', {x: 10, y: 38, class: 'detail'}, nodeDetail(step)));
  if (step.kind === 'map' && step.total > 0) {
    const fraction = Math.min(1, (step.done || 0) / step.total);
    group.append(
        svg('rect', {x: 10, y: NODE_H - 6, width: NODE_W - 20, height: 3,
                     class: 'progress-track'}),
        svg('rect', {x: 10, y: NODE_H - 6, width: (NODE_W - 20) * fraction,
                     height: 3, class: 'progress'}));
  }
  return group;
}

// The graph as an <svg> element. `steps`: [{slug, depends_on, kind,
// status, done, total}] in flow order.
export function dagSvg(steps) {
  const {position, width, height} = layout(steps);
  const graph = svg('svg', {
    class: 'dag', width, height, viewBox: `0 0 ${width} ${height}`,
    role: 'img', 'aria-label': 'the flow\'s steps and their dependencies',
  });
  graph.append(svg('defs', null,
                   svg('marker', {id: 'arrow', viewBox: '0 0 8 8', refX: 8,
                                  refY: 4, markerWidth: 7, markerHeight: 7,
                                  orient: 'auto'},
                       svg('path', {d: 'M0,0 L8,4 L0,8 z',
                                    class: 'arrowhead'}))));
  for (const step of steps) {
    const to = position.get(step.slug);
    for (const dep of step.depends_on || []) {
      const from = position.get(dep);
      if (!from) continue;
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x - 2;
      const y2 = to.y + NODE_H / 2;
      const bend = Math.max(24, (x2 - x1) / 2);
      graph.append(svg('path', {
        d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`,
        class: 'edge', 'marker-end': 'url(#arrow)',
      }));
    }
  }
  for (const step of steps) graph.append(node(step, position.get(step.slug)));
  return graph;
}

export function dagLegend() {
  const legend = document.createElement('p');
  legend.className = 'legend';
  for (const status of ['created', 'started', 'completed', 'failed',
                        'skipped', 'cancelled']) {
    const item = document.createElement('span');
    item.className = `legend-item status-${status}`;
    item.textContent = status;
    legend.append(item);
  }
  return legend;
}

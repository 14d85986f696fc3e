// A flow's steps drawn as a graph: one column per dependency depth (a step
// sits one column right of its deepest dependency), nodes coloured by
// status, map steps with their done/total and a progress bar.
import {cssToken, svg} from './util.js';

const NODE_W = 168;
const NODE_H = 48;
const COLUMN_GAP = 64;
const ROW_GAP = 18;
const MARGIN = 12;
const PLACEHOLDER_H = 8;  // the slot an edge takes in a column it crosses

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

// Places the steps in columns by depth. An edge that skips columns gets a
// thin placeholder in each column it crosses, so that it runs through a
// free slot instead of across a node (the usual layered layout). Within a
// column, nodes are ordered by the mean row of what they depend on (fewer
// crossings), then by flow order.
function layout(steps) {
  const depth = depths(steps);
  const nodes = new Map();  // id -> {id, column, deps, height, step?}
  let order = 0;
  for (const s of steps) {
    nodes.set(s.slug, {id: s.slug, column: depth.get(s.slug), deps: [],
                       height: NODE_H, step: s, order: order++});
  }
  const edges = [];
  for (const s of steps) {
    for (const dep of s.depends_on || []) {
      if (!nodes.has(dep)) continue;
      let previous = dep;
      const via = [];
      for (let c = depth.get(dep) + 1; c < depth.get(s.slug); c++) {
        const id = `${dep}\u0000${s.slug}\u0000${c}`;
        nodes.set(id, {id, column: c, deps: [previous], height: PLACEHOLDER_H,
                       order: order++});
        via.push(id);
        previous = id;
      }
      nodes.get(s.slug).deps.push(previous);
      edges.push({from: dep, to: s.slug, via});
    }
  }
  const columns = [];
  for (const n of nodes.values()) (columns[n.column] ||= []).push(n);
  const row = new Map();
  for (const column of columns) {
    if (!column) continue;
    for (const n of column) {
      const deps = n.deps.filter((d) => row.has(d));
      n.weight = deps.length ?
          deps.reduce((sum, d) => sum + row.get(d), 0) / deps.length :
          n.order;
    }
    column.sort((a, b) => a.weight - b.weight || a.order - b.order);
    column.forEach((n, i) => row.set(n.id, i));
  }
  const used = (column) => column.reduce((sum, n) => sum + n.height, 0) +
                           (column.length - 1) * ROW_GAP;
  const tallest = Math.max(NODE_H, ...columns.map((c) => (c ? used(c) : 0)));
  const height = MARGIN * 2 + tallest;
  const position = new Map();
  columns.forEach((column, d) => {
    if (!column) return;
    let y = MARGIN + (tallest - used(column)) / 2;
    for (const n of column) {
      position.set(n.id, {x: MARGIN + d * (NODE_W + COLUMN_GAP), y,
                          cy: y + n.height / 2});
      y += n.height + ROW_GAP;
    }
  });
  const width = MARGIN * 2 + columns.length * NODE_W +
                Math.max(0, columns.length - 1) * COLUMN_GAP;
  return {position, edges, width, height};
}

// An edge's path: curves between columns, straight through placeholders.
function edgePath(edge, position) {
  const from = position.get(edge.from);
  const to = position.get(edge.to);
  const points = [[from.x + NODE_W, from.cy]];
  for (const id of edge.via) {
    const p = position.get(id);
    points.push([p.x, p.cy], [p.x + NODE_W, p.cy]);
  }
  points.push([to.x - 2, to.cy]);
  let d = `M${points[0][0]},${points[0][1]}`;
  for (let i = 0; i + 1 < points.length; i += 2) {
    const [x1, y1] = points[i];
    const [x2, y2] = points[i + 1];
    const bend = Math.max(24, (x2 - x1) / 2);
    d += ` C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
    if (i + 2 < points.length) d += ` L${points[i + 2][0]},${points[i + 2][1]}`;
  }
  return d;
}

function shorten(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

// "map · 2/3 done", "wait · created", "completed"; a flow's step (no
// status) shows its kind only.
function nodeDetail(step) {
  const kind = step.kind && step.kind !== 'single' ? step.kind : '';
  let state = step.status || '';
  if (step.kind === 'map' && step.total !== undefined && step.total !== null) {
    state = `${step.done ?? 0}/${step.total} done`;
  }
  return [kind, state].filter((part) => part).join(' · ');
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
  const {position, edges, width, height} = layout(steps);
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
  for (const edge of edges) {
    graph.append(svg('path', {d: edgePath(edge, position), class: 'edge',
                              'marker-end': 'url(#arrow)'}));
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

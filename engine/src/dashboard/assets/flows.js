// Flows: each alias with its versions (which one new runs start on) and
// the active version's steps as a graph.
import {dagSvg} from './dag.js';
import {el, emptyRow, errorBox, formatTime, getJson, replace,
        table} from './util.js';

export function flowsPage(main, params, app) {
  const body = el('div', {id: 'flows'});
  replace(main, el('h1', null, 'Flows'), body);
  let disposed = false;
  async function load() {
    try {
      const data = await getJson('/api/flows');
      if (!disposed) draw(body, data.flows || []);
    } catch (error) {
      if (!disposed) replace(body, errorBox(error));
    }
  }
  load();
  // Deployments are rare and send no events: the page loads once.
  return {onEvent() {}, refresh() {}, dispose() { disposed = true; }};
}

function draw(body, flows) {
  if (!flows.length) {
    replace(body, el('p', {class: 'muted'}, 'No flows are deployed yet.'));
    return;
  }
  replace(body, flows.map((flow) => el(
      'section', {class: 'panel', 'data-flow': flow.alias},
      el('h2', null, flow.alias, ' ',
         el('a', {href: `/runs?flow=${encodeURIComponent(flow.alias)}`,
                  'data-nav': true, class: 'small'}, 'runs')),
      el('p', null, 'Active version: ',
         el('span', {class: 'mono'}, flow.active_version || 'none')),
      stepsView(flow.steps || []),
      versionsTable(flow.versions || []))));
}

// Steps as a graph when they carry their dependencies, else as a list.
function stepsView(steps) {
  if (!steps.length) return null;
  if (steps.every((s) => s && typeof s === 'object' && s.slug)) {
    return el('div', {class: 'dag-scroll'},
              dagSvg(steps.map((s) => ({...s, status: undefined}))));
  }
  return el('p', null, 'Steps: ',
            steps.map((s) => (typeof s === 'string' ? s : JSON.stringify(s)))
                .join(', '));
}

function versionsTable(versions) {
  const rows = versions.map((v) => el(
      'tr', {class: v.active ? 'active-version' : null},
      el('td', {class: 'mono'}, v.slug),
      el('td', null, v.active ? 'active' : ''),
      el('td', null, formatTime(v.created_at))));
  return table(['Version', '', 'Deployed'],
               rows.length ? rows : [emptyRow(3, 'No versions.')],
               {class: 'versions'});
}

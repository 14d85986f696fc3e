// Runs: a filtered, paged list. The filters live in the address
// (?flow=&status=&since=&until=&order=&cursor=), so a view can be shared;
// "Next" follows the API's next_cursor.
import {throttle} from './live.js';
import {between, el, emptyRow, errorBox, formatTime, getJson, replace,
        runLink, statusBadge, table} from './util.js';

const STATUSES = ['started', 'completed', 'failed', 'cancelled'];
const FILTER_KEYS = ['flow', 'status', 'since', 'until', 'order', 'limit'];

export function runsPage(main, params, app) {
  const query = new URLSearchParams(location.search);
  const list = el('div', {id: 'runs'});
  replace(main, el('h1', null, 'Runs'), filterForm(query, app), list);
  let disposed = false;

  async function load() {
    const api = new URLSearchParams();
    for (const key of [...FILTER_KEYS, 'cursor']) {
      if (query.get(key)) api.set(key, query.get(key));
    }
    try {
      const data = await getJson(`/api/runs?${api}`);
      if (!disposed) draw(list, data, query, app);
    } catch (error) {
      if (!disposed) replace(list, errorBox(error));
    }
  }
  const refresh = throttle(load, 1000);
  load();
  return {
    onEvent: (kind) => { if (kind === 'run') refresh(); },
    refresh,
    dispose() { disposed = true; },
  };
}

function filterForm(query, app) {
  const chosen = new Set((query.get('status') || '').split(',')
                             .filter((s) => s));
  const form = el(
      'form', {class: 'filters', id: 'run-filters'},
      el('label', null, 'Flow ',
         el('input', {name: 'flow', value: query.get('flow') || '',
                      placeholder: 'any', size: 16, list: 'flow-names'}),
         flowNames()),
      el('fieldset', null, el('legend', null, 'Status'),
         STATUSES.map((s) => el('label', null,
                                el('input', {type: 'checkbox', name: 'status',
                                             value: s,
                                             checked: chosen.has(s)}),
                                ` ${s}`))),
      el('label', null, 'Since (UTC) ',
         el('input', {type: 'datetime-local', name: 'since', step: 1,
                      value: toUtcInput(query.get('since'))})),
      el('label', null, 'Until (UTC) ',
         el('input', {type: 'datetime-local', name: 'until', step: 1,
                      value: toUtcInput(query.get('until'))})),
      el('label', null, 'Order ',
         el('select', {name: 'order'},
            ['newest', 'oldest'].map((o) => el(
                'option', {value: o, selected: query.get('order') === o},
                o)))),
      el('button', {type: 'submit'}, 'Apply'),
      el('button', {type: 'button', class: 'secondary',
                    onclick: () => app.navigate('/runs')}, 'Clear'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = new URLSearchParams();
    if (data.get('flow')) next.set('flow', data.get('flow').trim());
    const statuses = data.getAll('status');
    if (statuses.length) next.set('status', statuses.join(','));
    for (const key of ['since', 'until']) {
      const value = data.get(key);
      // The inputs hold UTC, as the table shows it.
      const time = value ? new Date(`${value}Z`) : null;
      if (time && !isNaN(time.getTime())) next.set(key, time.toISOString());
    }
    if (data.get('order') === 'oldest') next.set('order', 'oldest');
    app.navigate(`/runs${next.toString() ? `?${next}` : ''}`);
  });
  return form;
}

// The deployed flows' names, offered as the flow filter's suggestions.
function flowNames() {
  const list = el('datalist', {id: 'flow-names'});
  getJson('/api/flows').then((data) => {
    for (const flow of data.flows || []) {
      list.append(el('option', {value: flow.alias}));
    }
  }).catch(() => {});  // suggestions only: the filter works without them
  return list;
}

// An RFC 3339 time as a datetime-local input's value, in UTC.
function toUtcInput(value) {
  if (!value) return '';
  const d = new Date(value);
  return isNaN(d.getTime()) ? '' : d.toISOString().slice(0, 19);
}

function draw(list, data, query, app) {
  const runs = data.runs || [];
  const rows = runs.map((r) => el(
      'tr', {'data-run': r.id},
      el('td', {class: 'mono'}, runLink(r.id)),
      el('td', null, r.flow),
      el('td', {class: 'muted'}, r.version || ''),
      el('td', null, statusBadge(r.status)),
      el('td', null, r.queue || ''),
      el('td', null, formatTime(r.created_at)),
      el('td', null, formatTime(r.finished_at)),
      el('td', {class: 'num'}, between(r.started_at || r.created_at,
                                       r.finished_at))));
  const pager = el('div', {class: 'pager'});
  if (query.get('cursor')) {
    const first = new URLSearchParams(query);
    first.delete('cursor');
    pager.append(el('button', {type: 'button', class: 'secondary',
                               onclick: () => app.navigate(`/runs?${first}`)},
                    'First page'));
  }
  if (data.next_cursor) {
    const next = new URLSearchParams(query);
    next.set('cursor', data.next_cursor);
    pager.append(el('button', {type: 'button', id: 'next-page',
                               onclick: () => app.navigate(`/runs?${next}`)},
                    'Next page'));
  }
  replace(list,
          table(['Run', 'Flow', 'Version', 'Status', 'Queue', 'Created (UTC)',
                 'Finished (UTC)', 'Took'],
                rows.length ? rows : [emptyRow(8, 'No runs match.')],
                {class: 'runs'}),
          pager);
}

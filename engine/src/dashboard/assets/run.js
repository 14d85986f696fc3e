// One run: its summary and actions, the flow's graph coloured by step
// status, the steps, tasks and attempts, and the run's input and output.
// It refreshes when an event names this run, so it follows the run live.
import {actionBar} from './actions.js';
import {dagLegend, dagSvg} from './dag.js';
import {throttle} from './live.js';
import {between, el, emptyRow, errorBox, formatTime, getJson, jsonSummary,
        jsonView, replace, statusBadge, table} from './util.js';

export function runPage(main, params, app) {
  const id = params[0];
  const body = el('div', {id: 'run', 'data-run': id});
  replace(main, el('h1', null, 'Run ', el('span', {class: 'mono'}, id)), body);
  let disposed = false;
  let lastStatus = null;

  async function load() {
    try {
      const data = await getJson(`/api/runs/${encodeURIComponent(id)}`);
      if (disposed) return;
      lastStatus = data.run.status;
      draw(body, data, app, load);
    } catch (error) {
      if (!disposed) replace(body, errorBox(error));
    }
  }
  const refresh = throttle(load, 300);
  load();
  return {
    onEvent(kind, data) {
      if (data && data.run_id === id) refresh();
    },
    refresh() {
      // Polling: a finished run changes only through actions, which
      // reload it themselves.
      if (lastStatus === null || lastStatus === 'started') refresh();
    },
    dispose() { disposed = true; },
  };
}

function draw(body, data, app, reload) {
  const run = data.run;
  const steps = (data.graph && data.graph.steps) || [];
  const onDone = (action) => {
    if (action === 'delete') {
      app.navigate('/runs');
    } else {
      reload();
    }
  };
  // One action bar per page, kept across live redraws (an open token form
  // and the server's last answer stay).
  let actions = body.querySelector('.action-bar');
  if (actions) {
    actions.update(run);
  } else {
    actions = actionBar(run, app, onDone);
  }
  replace(body,
          summary(run), actions,
          el('section', {class: 'panel'}, el('h2', null, 'Graph'),
             el('div', {class: 'dag-scroll'}, dagSvg(steps)), dagLegend()),
          el('section', {class: 'panel'}, el('h2', null, 'Steps'),
             stepsTable(steps)),
          el('section', {class: 'panel'}, el('h2', null, 'Tasks'),
             tasksTable(data.tasks || [])),
          el('section', {class: 'panel'}, el('h2', null, 'Attempts'),
             attemptsTable(data.attempts || [])),
          el('section', {class: 'panel two'},
             el('div', null, el('h2', null, 'Input'),
                jsonView(run.input, 'input')),
             el('div', null, el('h2', null, 'Output'),
                run.output === null || run.output === undefined ?
                    el('p', {class: 'muted'},
                       run.status === 'started' ? 'none yet' : 'none') :
                    jsonView(run.output, 'output'))));
}

function summary(run) {
  const item = (term, ...value) => [el('dt', null, term), el('dd', null, value)];
  return el('dl', {class: 'summary'},
            item('Status', statusBadge(run.status, {id: 'run-status'})),
            item('Flow',
                 el('a', {href: `/runs?flow=${encodeURIComponent(run.flow)}`,
                          'data-nav': true}, run.flow),
                 run.version && run.version !== run.flow ?
                     el('span', {class: 'muted'}, ` (version ${run.version})`) :
                     null),
            item('Queue', run.queue || ''),
            item('Created', utc(run.created_at)),
            item('Started', utc(run.started_at)),
            item('Finished', utc(run.finished_at)),
            item('Took', between(run.started_at || run.created_at,
                                 run.finished_at)),
            run.error ? item('Error', el('span', {class: 'error-text'},
                                         run.error)) : null);
}

function utc(value) {
  const text = formatTime(value);
  return text ? `${text} UTC` : '';
}

function stepsTable(steps) {
  const rows = steps.map((s) => el(
      'tr', {'data-step': s.slug},
      el('td', {class: 'mono'}, s.slug), el('td', null, s.kind || ''),
      el('td', null, statusBadge(s.status)),
      el('td', {class: 'num'},
         s.total === undefined || s.total === null ? '' :
             `${s.done ?? 0}/${s.total}`),
      el('td', null, (s.depends_on || []).join(', '))));
  return table(['Step', 'Kind', 'Status', 'Done', 'Depends on'],
               rows.length ? rows : [emptyRow(5, 'No steps.')]);
}

function tasksTable(tasks) {
  const rows = tasks.map((t) => el(
      'tr', null, el('td', {class: 'mono'}, t.step),
      el('td', {class: 'num'}, String(t.index ?? '')),
      el('td', null, statusBadge(t.status)),
      el('td', {class: 'num'}, String(t.attempts ?? '')),
      el('td', {class: 'mono'}, outputCell(t.output)),
      el('td', {class: 'error-text'}, t.error || '')));
  return table(['Step', 'Task', 'Status', 'Attempts', 'Output', 'Error'],
               rows.length ? rows : [emptyRow(6, 'No tasks yet.')]);
}

// A short summary that opens into the full (or truncated) value.
function outputCell(value) {
  if (value === undefined || value === null) return '';
  return el('details', null, el('summary', null, jsonSummary(value)),
            jsonView(value, 'output'));
}

function attemptsTable(attempts) {
  const rows = attempts.map((a) => el(
      'tr', {class: `outcome-${a.outcome || ''}`},
      el('td', {class: 'mono'}, a.step),
      el('td', {class: 'num'}, String(a.index ?? '')),
      el('td', {class: 'num'}, String(a.attempt ?? '')),
      el('td', {class: 'mono'}, a.worker || ''),
      el('td', null, formatTime(a.started_at)),
      el('td', {class: 'num'}, between(a.started_at, a.finished_at)),
      el('td', null, a.outcome ? statusBadge(a.outcome) : 'running'),
      el('td', {class: 'error-text'}, a.error || '')));
  return table(['Step', 'Task', 'Attempt', 'Worker', 'Started', 'Took',
                'Outcome', 'Error'],
               rows.length ? rows : [emptyRow(8, 'No attempts yet.')]);
}

// Cancel, retry and delete a run. Each asks for the dashboard's token
// (remembered for this tab in sessionStorage), sends it as
// `Authorization: Bearer <token>`, and shows the server's answer: on a
// refusal (401 no token, 403 wrong token or read-only, 409 not allowed
// now), its error text.
import {el, replace, sendAction} from './util.js';

const TOKEN_KEY = 'sluice.dashboard.token';

const ACTIONS = {
  cancel: {label: 'Cancel run', method: 'POST', path: (id) => `cancel`,
           done: 'Cancel accepted.'},
  retry: {label: 'Retry run', method: 'POST', path: (id) => `retry`,
          done: 'Retry accepted: the run is queued again.'},
  delete: {label: 'Delete run', method: 'DELETE', path: () => '',
           done: 'Run deleted.'},
};

function storedToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch (e) {
    return '';
  }
}

function storeToken(token) {
  try {
    if (token) {
      sessionStorage.setItem(TOKEN_KEY, token);
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
    }
  } catch (e) {
    // Storage may be disabled; the token is then asked for each time.
  }
}

// The action bar of a run page: an element with update(run), which a live
// redraw calls so that an open token form and the last answer stay put.
// `onDone(action)` runs after the server accepted an action.
export function actionBar(run, app, onDone) {
  const message = el('div', {class: 'action-message', 'aria-live': 'polite'});
  const form = el('div', {class: 'action-form', hidden: true});
  const buttons = el('div', {class: 'actions'});
  const current = {run};
  for (const [name, action] of Object.entries(ACTIONS)) {
    buttons.append(el('button', {
      type: 'button', 'data-action': name,
      class: name === 'delete' ? 'danger' : null,
      title: app.config.read_only ? 'read-only dashboard: no token configured'
                                  : null,
      onclick: () => ask(name, action, current.run, form, message, onDone),
    }, action.label));
  }
  const note = app.config.read_only ?
      el('p', {class: 'muted'},
         'Read-only: the host configured no token, so actions are refused.') :
      null;
  const bar = el('section', {class: 'action-bar'}, buttons, note, form,
                 message);
  bar.update = (latest) => {
    current.run = latest;
    for (const button of buttons.querySelectorAll('[data-action]')) {
      button.disabled = app.config.read_only ||
                        !allowed(button.dataset.action, latest.status);
    }
  };
  bar.update(run);
  return bar;
}

// Whether an action makes sense for a run in `status` (the server decides;
// this only greys out buttons that would certainly be refused).
function allowed(name, status) {
  if (name === 'cancel') return status === 'started';
  if (name === 'retry') return status === 'failed' || status === 'cancelled';
  return status !== 'started';  // delete: a started run is cancelled first
}

// Shows the token form for `name`; sends the action when it is submitted.
function ask(name, action, run, form, message, onDone) {
  const input = el('input', {type: 'password', name: 'token', id: 'token',
                             autocomplete: 'off', value: storedToken(),
                             placeholder: 'token'});
  const send = el('button', {type: 'submit', 'data-confirm': name},
                  action.label);
  const inner = el('form', null,
                   el('p', null, `${action.label} ${run.id}?`),
                   el('label', null, 'Token ', input), ' ', send, ' ',
                   el('button', {type: 'button', class: 'secondary',
                                 onclick: () => { form.hidden = true; }},
                      'Close'));
  inner.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    send.disabled = true;
    replace(message, el('p', {class: 'muted'}, 'Sending…'));
    const suffix = action.path(run.id);
    const path = `/api/runs/${encodeURIComponent(run.id)}` +
                 (suffix ? `/${suffix}` : '');
    try {
      await sendAction(action.method, path, token);
      storeToken(token);
      form.hidden = true;
      replace(message, el('p', {class: 'notice ok', role: 'status',
                                'data-outcome': 'ok'}, action.done));
      onDone(name);
    } catch (error) {
      // A token the server refused is forgotten, so it is asked for again.
      if (error.status === 401 || error.status === 403) storeToken('');
      const code = error.status ? ` (${error.status})` : '';
      replace(message, el('p', {class: 'notice error', role: 'alert',
                                'data-outcome': 'refused',
                                'data-status': error.status || 0},
                          `Refused${code}: ${error.message}`));
    } finally {
      send.disabled = false;
    }
  });
  replace(form, inner);
  form.hidden = false;
  input.focus();
}

// The Sluice dashboard: a small single-page app. The server answers every
// page path (/, /runs, /runs/<id>, /flows) with the same document; this
// script picks the view from location.pathname and reads the JSON API
// under /api/ (docs/dashboard-api.md).
import {Live} from './live.js';
import {getJson, el, replace, errorBox} from './util.js';
import {overviewPage} from './overview.js';
import {runsPage} from './runs.js';
import {runPage} from './run.js';
import {flowsPage} from './flows.js';

const routes = [
  {pattern: /^\/$/, section: 'overview', page: overviewPage},
  {pattern: /^\/runs\/?$/, section: 'runs', page: runsPage},
  {pattern: /^\/runs\/([^/]+)$/, section: 'runs', page: runPage},
  {pattern: /^\/flows\/?$/, section: 'flows', page: flowsPage},
];

const app = {
  config: {read_only: true, version: ''},
  live: null,
  current: null,  // the mounted page: {onEvent, refresh, dispose}
  navigate,
};

function route(path) {
  for (const r of routes) {
    const match = r.pattern.exec(path);
    if (match) return {...r, params: match.slice(1).map(decodeURIComponent)};
  }
  return null;
}

function render() {
  const main = document.getElementById('main');
  if (app.current && app.current.dispose) app.current.dispose();
  app.current = null;
  const found = route(location.pathname);
  for (const link of document.querySelectorAll('nav a')) {
    link.classList.toggle('active', !!found &&
                          link.dataset.section === found.section);
  }
  if (!found) {
    replace(main, el('h1', null, 'Not found'),
            el('p', null, 'No dashboard page has this address. ',
               el('a', {href: '/', 'data-nav': true}, 'Overview')));
    return;
  }
  replace(main);
  app.current = found.page(main, found.params, app);
  app.live.follow(app.current);
}

// Client-side navigation: same document, new view.
function navigate(href, options) {
  const url = new URL(href, location.href);
  if (options && options.replace) {
    history.replaceState(null, '', url);
  } else {
    history.pushState(null, '', url);
  }
  render();
  window.scrollTo(0, 0);
}

function interceptLinks() {
  document.addEventListener('click', (event) => {
    const link = event.target.closest('a[data-nav]');
    if (!link || event.defaultPrevented || event.button !== 0 ||
        event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    navigate(link.getAttribute('href'));
  });
  window.addEventListener('popstate', render);
}

async function loadConfig() {
  try {
    app.config = await getJson('/api/config');
  } catch (error) {
    replace(document.getElementById('main'), errorBox(error));
  }
  const mode = document.getElementById('mode');
  mode.textContent = app.config.read_only ? 'read-only' : 'actions need token';
  mode.className = `pill ${app.config.read_only ? 'read-only' : 'writable'}`;
  document.getElementById('version').textContent =
      app.config.version ? `v${app.config.version}` : '';
}

async function main() {
  app.live = new Live(document.getElementById('live'));
  interceptLinks();
  await loadConfig();
  app.live.start();
  render();
}

main();

// Helpers every page uses: building DOM nodes (text is always inserted as
// text, never parsed as HTML), calling the JSON API, formatting values.

const SVG_NS = 'http://www.w3.org/2000/svg';

function setAttributes(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

function appendChildren(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
}

// el('a', {href: '/runs'}, 'Runs'): an HTML element.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attrs);
  appendChildren(node, children);
  return node;
}

// svg('rect', {x: 1}): an SVG element.
export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttributes(node, attrs);
  appendChildren(node, children);
  return node;
}

// Replaces everything in `node` with `children`.
export function replace(node, ...children) {
  node.replaceChildren();
  appendChildren(node, children);
}

// An error the API answered with: its HTTP status and {"error": ...} text.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function readAnswer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = null;
  }
  if (!response.ok) {
    const text = body && typeof body.error === 'string' ? body.error : '';
    throw new ApiError(response.status,
                       text || `${response.status} ${response.statusText}`);
  }
  return body;
}

export async function getJson(path) {
  let response;
  try {
    response = await fetch(path, {headers: {Accept: 'application/json'}});
  } catch (e) {
    throw new ApiError(0, 'the dashboard server did not answer');
  }
  return readAnswer(response);
}

// Sends an action (POST or DELETE) with the bearer token, if any.
export async function sendAction(method, path, token) {
  const headers = {Accept: 'application/json'};
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, {method, headers});
  } catch (e) {
    throw new ApiError(0, 'the dashboard server did not answer');
  }
  return readAnswer(response);
}

// API times are RFC 3339 strings (numbers are taken as Unix seconds).
export function toDate(value) {
  if (value === undefined || value === null || value === '') return null;
  const date = typeof value === 'number' ? new Date(value * 1000)
                                         : new Date(value);
  return isNaN(date.getTime()) ? null : date;
}

function pad(n) { return String(n).padStart(2, '0'); }

// "2026-12-02 11:07:25" in UTC, as the sluice CLI prints times.
export function formatTime(value) {
  const d = toDate(value);
  if (!d) return '';
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-` +
         `${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:` +
         `${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

// "850ms", "12s", "3m 5s", "2h 4m".
export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || isNaN(seconds)) return '';
  if (seconds < 1) return `${Math.max(0, Math.round(seconds * 1000))}ms`;
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) {
    return `${Math.floor(seconds / 60)}m ${Math.round(seconds % 60)}s`;
  }
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

export function between(start, end) {
  const a = toDate(start);
  const b = toDate(end);
  return a && b ? formatDuration((b - a) / 1000) : '';
}

export function ago(value, now) {
  const d = toDate(value);
  if (!d) return '';
  const reference = toDate(now) || new Date();
  const seconds = (reference - d) / 1000;
  return seconds < 1 ? 'just now' : `${formatDuration(seconds)} ago`;
}

export function statusBadge(status, attrs) {
  const text = status || 'unknown';
  return el('span', {class: `badge status-${cssToken(text)}`, ...attrs}, text);
}

// A value safe to use inside a class name.
export function cssToken(text) {
  return String(text).toLowerCase().replace(/[^a-z0-9_-]/g, '-');
}

export function runLink(id, text) {
  return el('a', {href: `/runs/${encodeURIComponent(id)}`, 'data-nav': true},
            text || id);
}

export function table(headings, rows, attrs) {
  return el('table', attrs,
            el('thead', null, el('tr', null, headings.map((h) => el('th', null, h)))),
            el('tbody', null, rows));
}

export function emptyRow(columns, text) {
  return el('tr', {class: 'empty'}, el('td', {colspan: columns}, text));
}

export function errorBox(error) {
  const status = error && error.status ? ` (${error.status})` : '';
  return el('p', {class: 'notice error', role: 'alert'},
            `${error && error.message ? error.message : error}${status}`);
}

// A JSON value, pretty-printed. The API replaces a large value with
// {"truncated": true, "bytes": N, "preview": "..."}; that is shown as its
// preview with a marker naming the full size.
export function jsonView(value, label) {
  if (value === undefined) return el('p', {class: 'muted'}, 'none');
  if (isTruncated(value)) {
    return el('div', {class: 'json truncated'},
              el('p', {class: 'truncated-marker'},
                 `${label || 'value'} truncated: ${value.bytes} bytes in ` +
                     'full; the preview shows the start'),
              el('pre', null, `${value.preview}…`));
  }
  return el('div', {class: 'json'},
            el('pre', null, JSON.stringify(value, null, 2)));
}

export function isTruncated(value) {
  return value !== null && typeof value === 'object' &&
         value.truncated === true && typeof value.preview === 'string';
}

// A one-line summary of a JSON value for a table cell.
export function jsonSummary(value) {
  if (value === undefined || value === null) return '';
  if (isTruncated(value)) return `(truncated, ${value.bytes} bytes)`;
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}

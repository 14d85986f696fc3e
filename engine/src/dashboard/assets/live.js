// Keeps the current page current: server-sent events from /api/events tell
// it what changed; while they are not connected, the page polls every two
// seconds instead.

const POLL_MS = 2000;
const RECONNECT_MS = 10000;

export class Live {
  // `indicator`: the element that shows "live", "polling" or "offline".
  constructor(indicator) {
    this.indicator = indicator;
    this.listener = null;  // {onEvent(data), refresh()}
    this.source = null;
    this.pollTimer = null;
    this.reconnectTimer = null;
  }

  start() {
    this.connect();
    this.pollTimer = setInterval(() => this.poll(), POLL_MS);
    // A page left for another (possibly kept in the back/forward cache)
    // must not keep its stream: browsers allow six connections per
    // server, and open streams would starve the next page's requests.
    window.addEventListener('pagehide', () => this.disconnect());
    window.addEventListener('pageshow', (event) => {
      if (event.persisted && this.source === null) this.connect();
    });
  }

  disconnect() {
    if (this.source) this.source.close();
    this.source = null;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
  }

  // The page to notify; replaces the previous one.
  follow(listener) { this.listener = listener; }

  connected() {
    return this.source !== null &&
           this.source.readyState === EventSource.OPEN;
  }

  connect() {
    if (typeof EventSource === 'undefined') {
      this.show('polling');
      return;
    }
    const source = new EventSource('/api/events');
    this.source = source;
    source.addEventListener('open', () => this.show('live'));
    source.addEventListener('error', () => {
      if (this.source !== source) return;  // closed on purpose
      // EventSource reconnects by itself unless the server refused the
      // stream (CLOSED); then try again later and poll meanwhile.
      this.show('polling');
      if (source.readyState === EventSource.CLOSED && !this.reconnectTimer) {
        this.reconnectTimer = setTimeout(() => {
          this.reconnectTimer = null;
          this.connect();
        }, RECONNECT_MS);
      }
    });
    for (const kind of ['run', 'step']) {
      source.addEventListener(kind, (message) => {
        let data = null;
        try {
          data = JSON.parse(message.data);
        } catch (e) {
          return;
        }
        if (this.listener && this.listener.onEvent) {
          this.listener.onEvent(kind, data);
        }
      });
    }
  }

  poll() {
    if (this.connected()) return;
    if (this.listener && this.listener.refresh) this.listener.refresh();
  }

  show(state) {
    this.indicator.textContent = state;
    this.indicator.className = `pill live-${state}`;
  }
}

// Calls `fn` at most once per `ms`, and once more after a burst, so a
// flood of events costs a few refreshes.
export function throttle(fn, ms) {
  let timer = null;
  let pending = false;
  return () => {
    if (timer) {
      pending = true;
      return;
    }
    fn();
    timer = setTimeout(function tick() {
      if (pending) {
        pending = false;
        fn();
        timer = setTimeout(tick, ms);
      } else {
        timer = null;
      }
    }, ms);
  };
}

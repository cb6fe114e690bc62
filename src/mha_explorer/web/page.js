// The standalone page: a tiny model adapter around explorer.js, fed by the server's API.
import explorer from "./explorer.js";

// The subset of the anywidget model the explorer uses: get, set, save_changes, on, off.
export class PageModel {
  constructor(attrs) {
    this.attrs = { ...attrs };
    this.listeners = new Map();
  }
  get(name) {
    return this.attrs[name];
  }
  set(name, value) {
    if (this.attrs[name] === value) return;
    this.attrs[name] = value;
    for (const callback of this.listeners.get(`change:${name}`) || []) callback();
  }
  save_changes() {}
  on(event, callback) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event).add(callback);
  }
  off(event, callback) {
    this.listeners.get(event)?.delete(callback);
  }
}

async function main() {
  const app = document.getElementById("app");
  try {
    const response = await fetch("api/example");
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const payload = await response.json();
    const model = new PageModel({ payload, stage: payload.page_stages[0].id, head: 0, query: payload.query });
    explorer.render({ model, el: app });
    window.mhaExplorer = { model };
  } catch (error) {
    const message = document.createElement("p");
    message.className = "error";
    message.textContent = `The teaching example could not be loaded (${error.message}). Is mha-explorer serve still running?`;
    app.replaceChildren(message);
  }
}

main();

// Real models on the page: pick a model, type a text, pick a layer; the server loads the model
// (with progress), runs it up to that layer and sends the layer's trace, one head at a time. A
// static copy answers instead from the layers written into it, every head at once (staticServer).

// "layer 2" or "layers 0, 2"
const heldLayers = (layers) => `layer${layers.length > 1 ? "s" : ""} ${layers.join(", ")}`;

import { echo, h, outOfRange, plural, tokenLabels, unpack, withDerived, withHead } from "./explorer.js";
import { refine, workable, workAhead } from "./heads.js";


const wait = (ms) => new Promise((done) => setTimeout(done, ms));

// A trace comes binary (raw float32 arrays, viewed in place); errors come as JSON.
const BINARY = "application/vnd.mha-explorer.trace";
// A K/V head's arrays: what a head's answer leaves out where the page holds them (modelview.GROUP_AXIS)
const KV_STAGES = ["k", "v", "k_normed", "k_rotated"];
const KV_WEIGHTS = ["W_K", "W_V", "b_K", "b_V"];
const pick = (arrays, names) => Object.fromEntries(names.filter((name) => arrays[name]).map((name) => [name, arrays[name]]));

const asking = (request) => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...request, encoding: "binary" }) });

// Weights that are not the published float32 ones (quantized, or in 16 bits) are said, so that
// numbers compared with another copy of the model are not taken for wrong ones.
const stored = (state) => (state.config?.weights && !state.config.weights.endsWith("F32") ? ` Weights: ${state.config.weights}.` : "");

// A token's word, as another tokenizer may split the same text: "␣dog" (SmolLM2's "Ġdog") and
// "dog" are one word, in any case; "##bel" is "bel"; a character cut into byte pieces ("␣🐱 1/3")
// is that character, as one tokenizer's unknown token of it ("[UNK] 🐱")
export const word = (label) => label.replace(/^(␣+|##|\[UNK\] )/u, "").replace(/ \d+\/\d+$/u, "").toLowerCase();
const startsWord = (label) => !/ ([2-9]|\d\d+)\/\d+$/u.test(label); // not the second piece of a character or later
// where the query of the view `from` ({ query, payload }) is among the new payload's tokens: the
// same word (its first piece), as many times into the text as it was (else its last time); null
// where they do not hold it
function keptQuery(from, payload) {
  const before = tokenLabels(from.payload), tokens = tokenLabels(payload);
  const wanted = word(before[from.query] ?? "");
  const nth = before.slice(0, from.query).filter((t) => startsWord(t) && word(t) === wanted).length;
  const found = tokens.flatMap((t, i) => (startsWord(t) && word(t) === wanted ? [i] : []));
  return wanted && found.length ? found[Math.min(nth, found.length - 1)] : null;
}

// A problem as one sentence: the server words some messages after their field ("is empty; …").
function said({ field, message }) {
  if (!field || field === "body") return message;
  if (/^(is|has|must) /.test(message)) return `the ${field} ${message}`;
  return message.includes(field) ? message : `${field}: ${message}`;
}

async function answer(response) {
  if (response.ok && response.headers.get("content-type") === BINARY) return unpack(await response.arrayBuffer());
  const body = await response.json().catch(() => ({}));
  if (response.ok) return withDerived(body); // a static copy's layer leaves out what the scores give
  const detail = (body.detail || []).map(said).join("; ");
  const failure = new Error(detail || `the server answered ${response.status}`);
  failure.fields = (body.detail || []).map((d) => d.field); // what the request should change
  throw failure;
}

// The model panel. `onPayload(payload, request)` gets every trace; `getView()` gives { stage, head, query, all };
// `onAhead(payload, head)` gets a head's payload as soon as it is here, before it is asked for;
// `onRefined(payload)` is told when a head's payload worked out on the page now holds the server's numbers.
// `ask` is fetch, or a static copy's answers (staticServer); `fixed` ({ text, layers: name -> [layer] })
// is what a static copy holds: its one text, and the layers of each model.
export function createModels({ container, onPayload, onAhead, onRefined, getView, initial, ask = (...args) => fetch(...args), fixed = null }) {
  const picker = h("select", { id: "model-name" });
  const text = h("textarea", { id: "model-text", rows: 2, spellcheck: "false" });
  const emptyLinkText = typeof initial.text === "string" && !initial.text.trim(); // a link's text=, said when it is traced
  // the text the terminal and a notebook trace when none is given (modelview.DEFAULT_TEXT)
  text.value = emptyLinkText || !initial.text ? "The cat sat on the mat because it was warm." : initial.text;
  const layer = h("select", { id: "model-layer" });
  const go = h("button", { type: "button", class: "primary", title: "Trace the text (Ctrl+Enter in the text box)" }, "Trace");
  const bar = h("progress", { id: "model-progress", max: 1, value: 0, "aria-label": "Loading the model" });
  const status = h("p", { class: "model-status", role: "status" });
  // a load's steps: beside the status line, out of it, so that a screen reader, which says the
  // status line's words whenever they change, says "Loading …" once (the bar's value text has them)
  const step = h("span", { class: "model-step", hidden: true });
  const showLoading = (on) => {
    bar.hidden = step.hidden = !on;
    if (!on) step.textContent = "";
  };
  const error = h("p", { class: "lab-error", id: "model-error", role: "alert" });
  const python = h("details", { class: "in-python" }, h("summary", {}, "This layer in Python"), h("pre", {}, h("code", {})));
  let models = [];
  let current = null; // the request behind the payload on screen
  // The payloads of the heads already seen, for the layer and text of `current`: each holds the
  // layer's shared arrays and one head's own. Going back to a head is immediate.
  let byHead = new Map();
  let wantedHead = null; // the head asked for last: an older answer that arrives later is dropped
  // the layer's other heads, worked out on the page while it is idle (heads.js), where its answer allows
  let ahead = null;
  let traced = null; // { head, payload }: the trace's own answer, whose head never needs fetching again
  let failed = null; // the last trace's failure, if it failed
  let linkProblems = []; // the parts of the link start() was given that it dropped
  const KEEP_HEADS = 6;

  container.replaceChildren(
    h("h2", {}, "Real model"),
    h(
      "div",
      { class: "lab-row" },
      h("div", { class: "field" }, h("label", { for: "model-name" }, "Model"), picker),
      h("div", { class: "field" }, h("label", { for: "model-layer" }, "Layer (from 0)"), layer),
      // Trace beside the text it traces: on a narrower screen they wrap to the next line together
      h("div", { class: "field wide" }, h("label", { for: "model-text" }, "Text"), h("div", { class: "text-and-go" }, text, go), fixed ? h("span", { class: "field-note", id: "model-text-note" }, "This copy holds this text only; mha-explorer serve traces any text.") : null),
    ),
    h("div", { class: "model-load" }, bar, status, step),
    error,
    python,
  );
  showLoading(false);
  python.hidden = true;

  // The layer on screen in Python, to take its arrays further: written when it is opened, and again
  // when the view changes while it is open (once the page is idle, not in the change's frame). A
  // local checkpoint is loaded by its path, which the page does not know: it has none.
  function showPython() {
    const info = current && models.find((m) => m.name === current.model);
    python.hidden = !info || info.family === "local";
    if (python.hidden || !python.open) return;
    const { stage, head, query, all } = getView();
    const name = JSON.stringify(current.model);
    python.querySelector("code").textContent = [
      "from mha_explorer import Explorer",
      "from mha_explorer.models import load_model",
      "",
      `text = ${pythonString(current.text)}`,
      `run = load_model(${name}).run(text, ${current.layer})`,
      `t = run.trace  # every stage of every head, as NumPy arrays: t["weights"] is (n_heads, n, n)`,
      `t["weights"][${head}, ${query}]  # head ${head}'s weights for query ${query} (run.tokens[${query}]) over every key`,
      `Explorer.from_model(${name}, text=text, layer=${current.layer}, stage=${JSON.stringify(stage)}, head=${head}, query=${query}${all ? ", all_queries=True" : ""})  # this view, in a notebook`,
    ].join("\n");
  }
  python.addEventListener("toggle", showPython);
  let pythonQueued = false;
  const viewChanged = () => {
    if (!python.open || pythonQueued) return;
    pythonQueued = true;
    const write = () => {
      pythonQueued = false;
      showPython();
    };
    if (window.requestIdleCallback) requestIdleCallback(write, { timeout: 200 });
    else setTimeout(write, 50);
  };

  // The layer menu of a model (its config, null before it is loaded). Where some layers look through
  // a sliding window and others see every key (Gemma 3), each says which it is.
  function layerLabels(config) {
    const layers = config?.layers || [];
    const mixed = layers.some((l) => l.sliding_window) && layers.some((l) => !l.sliding_window);
    return (i) => (!mixed ? `Layer ${i}` : layers[i].sliding_window ? `Layer ${i} · local (window ${layers[i].sliding_window})` : `Layer ${i} · global`);
  }
  // config: the loaded model's, or before it loads a named model's outline (its layers and their
  // windows). Without either (a local checkpoint not yet loaded) the menu waits, disabled, on "Layer 0".
  function fillLayers(config, keep) {
    const numbers = fixed?.layers[picker.value] ?? Array.from({ length: config?.n_layers || 1 }, (_, i) => i);
    layer.disabled = !config && !fixed?.layers[picker.value];
    const label = layerLabels(config);
    if (numbers.map(label).join("\n") !== [...layer.options].map((o) => o.text).join("\n")) layer.replaceChildren(...numbers.map((i) => h("option", { value: i }, label(i))));
    // a layer it lacks: the nearest it has (of two as near, the later)
    const wanted = keep ?? 0;
    layer.value = String(numbers.reduce((best, i) => (Math.abs(i - wanted) <= Math.abs(best - wanted) ? i : best)));
  }
  if (fixed) {
    text.value = fixed.text;
    text.readOnly = true; // a static copy holds this text only, and says so under it
    text.setAttribute("aria-describedby", "model-text-note");
  }

  async function refresh() {
    models = await answer(await ask("api/models"));
    const keep = picker.value || initial.model || "minilm";
    // only models: a menu's arrow keys choose at once, and an entry that left the mode would take a
    // keyboard user out of it on one key (the mode buttons above lead to the teaching example)
    picker.replaceChildren(
      ...models.map((m) => h("option", { value: m.name, disabled: !m.installed }, `${m.title}${m.installed ? "" : " (not installed)"}${m.heavy ? " · large" : ""}`)),
    );
    picker.value = models.some((m) => m.name === keep && m.installed) ? keep : (models.find((m) => m.installed) || {}).name || "";
    chosen = picker.value;
    const info = models.find((m) => m.name === picker.value);
    fillLayers(info?.config ?? info?.outline, Number(layer.value || initial.layer || 0));
  }

  // The status line is a live region: a screen reader says "Loading SmolLM2…" once, when the load
  // starts; its steps (thirty for SmolLM2) are written beside it, and in the bar's value text.
  // Words written again would be said again.
  function sayLoading(state) {
    const words = `Loading ${state.title}…`;
    const now = `${Math.round(100 * state.fraction)}%: ${state.message}`; // the message may end in brackets of its own
    if (status.textContent !== words) status.textContent = words;
    if (step.textContent !== now) step.textContent = now;
    bar.setAttribute("aria-valuetext", now);
  }

  const STALLED_MS = 2000; // a fraction unchanged for this long: the bar shows work without a measure
  // stale(): a newer pick or trace took this one's place; its load goes on at the server, but
  // its progress is no longer said (the status and bar are the newer one's)
  async function ensureLoaded(name, stale = () => false) {
    let state = await answer(await ask(`api/models/${encodeURIComponent(name)}`));
    const listed = models.find((m) => m.name === name);
    if (listed) listed.state = state.state; // a large model found ready: picking it again loads at once
    if (state.state === "ready") return state;
    state = await answer(await ask(`api/models/${encodeURIComponent(name)}/load`, { method: "POST" }));
    if (stale()) return state; // the bar is a newer pick's now
    showLoading(true);
    let fraction = -1, since = 0; // the last fraction heard, and when it came
    while (state.state === "loading") {
      if (stale()) return state;
      if (state.fraction !== fraction) {
        [fraction, since] = [state.fraction, performance.now()];
        bar.value = fraction;
      } else if (performance.now() - since > STALLED_MS) {
        bar.removeAttribute("value"); // a step that cannot count itself (Gemma's vocabulary): the bar moves to say it is busy, not stuck
      }
      sayLoading(state);
      await wait(250);
      state = await answer(await ask(`api/models/${encodeURIComponent(name)}`));
    }
    if (!stale()) showLoading(false);
    if (state.state === "error") throw new Error(state.message);
    if (listed) listed.state = state.state;
    return state;
  }

  // A message shown as a sentence of its own starts with a capital ("The text is empty: …"); one
  // that starts with a file's name ("static/layer-2.js is …") or a model's ("minilm is not
  // installed") keeps it as written.
  const sentence = (message) =>
    /^[a-z]+ /.test(message) && !models.some((m) => message.startsWith(`${m.name} `)) ? message[0].toUpperCase() + message.slice(1) : message;

  // Only the newest trace shows its answer: a layer or model picked while an older one runs (a key
  // held down on the layer menu) would otherwise let the older answer land last, under menus that
  // name the newer. trace() resolves true when shown, false when it failed, null when a newer
  // trace took its place.
  let latest = 0;
  let tracing = false; // a trace is on its way
  let pickedDuring = null; // a head picked meanwhile: the new layer shows it
  let shownStatus = ""; // what the status line says of the trace on screen
  // from: the view on screen (viewOnScreen), kept in another model's trace where that model has it
  let onItsWay = null; // { request, from } of the trace on its way
  async function trace(request, from = null) {
    const ticket = ++latest;
    tracing = true;
    onItsWay = { request, from };
    pickedDuring = null;
    const stale = () => ticket !== latest;
    tell("");
    failed = null;
    go.setAttribute("aria-disabled", "true"); // not disabled: that would drop the keyboard's focus
    // the heads of the layer on screen wait: their work would take the cores from the server's run
    // (a trace that fails leaves that layer on screen, and they go on)
    ahead?.pause();
    dimView(true);
    try {
      // said at once, in the server's words: an empty text need not wait for a large model to load
      if (!request.text.trim()) throw new Error(`the text ${request.text ? "holds only spaces or line breaks" : "is empty"}: give a sentence to run through the model`);
      // half of a character beyond U+FFFF (an emoji), as some pastes leave: the server would ask for UTF-8, which says nothing here
      if (request.text.isWellFormed?.() === false) throw Object.assign(new Error("the text holds a broken character (half of an emoji, or of another character beyond U+FFFF, as some pastes leave): delete it and trace again"), { fields: ["text"] });
      const state = await ensureLoaded(request.model, stale);
      if (stale()) return null;
      if (!fixed) fillLayers(state.config, request.layer); // the menu as the loaded model has it, on the layer traced
      if (from && request.head >= state.config.n_heads) request.head = 0;
      status.textContent = fixed ? `Reading layer ${request.layer} of this copy…` : `Running ${state.title} up to layer ${request.layer}…`;
      const payload = await answer(
        await ask("api/model-trace", asking(request)),
      );
      if (stale()) return null;
      if (from) payload.query = keptQuery(from, payload) ?? payload.query;
      current = request;
      byHead = new Map([[request.head, payload]]);
      wantedHead = request.head;
      showLoading(false); // (an older pick's load, still going, showed it)
      status.textContent = shownStatus = `${state.title}, layer ${payload.model.layer}: ${plural(payload.tokens.length, "token")}.${stored(state)}`;
      const wanted = from ? getView().head : null; // another model's view: its head now, picked meanwhile perhaps
      onPayload(payload, request);
      traced = { head: request.head, payload };
      ahead?.stop();
      ahead = null;
      if (payload.model.whole_weights && !fixed) workHeadsAhead(request, payload);
      showPython();
      const picked = pickedDuring ?? (from && wanted !== request.head ? wanted : null);
      tracing = false;
      if (from && picked !== null) from.head = picked; // the head wanted now: said if this model lacks it
      if (picked !== null && picked !== request.head && picked < payload.config.n_heads) showHead(picked);
      return true;
    } catch (failure) {
      if (stale()) return null;
      ahead?.resume();
      failed = failure;
      const said = ended(sentence(failure.message));
      // another model's trace on screen, under a menu that names this one: the message says whose it is
      const whose = current && current.model !== request.model ? `, ${models.find((m) => m.name === current.model)?.title ?? current.model}'s layer ${current.layer},` : "";
      tell(current ? `${said} The last good result${whose} stays on screen.` : said, failure.fields?.includes("text")); // a text refused is marked, as the lab marks a field
      status.textContent = current ? shownStatus : ""; // what is on screen is still that
      showLoading(false);
      return false;
    } finally {
      if (!stale()) {
        go.removeAttribute("aria-disabled");
        tracing = false;
        dimView(false);
      }
    }
  }
  // The view on screen while another layer, model or text runs: dimmed (after a moment, so that a
  // quick trace does not flicker), so that its numbers are not read as the new one's; and busy.
  function dimView(on) {
    const app = document.getElementById("app");
    if (!app) return;
    app.classList.toggle("running", on && Boolean(current));
    if (on && current) app.setAttribute("aria-busy", "true");
    else app.removeAttribute("aria-busy");
  }

  // Another model picked while a trace is on its way (its model still loading, perhaps for half a
  // minute): that trace is no longer what the menu names, and is not shown when it comes; the
  // panel is the new model's, and Trace traces it. The old model's load goes on at the server.
  function dropTrace() {
    if (!tracing) return;
    latest++;
    tracing = false;
    dimView(false);
    ahead?.resume(); // the layer on screen stays
    go.removeAttribute("aria-disabled");
    showLoading(false);
  }

  go.addEventListener("click", () => {
    if (go.getAttribute("aria-disabled") === "true") return; // a trace is under way
    const { head, query } = getView();
    const same = current && current.model === picker.value; // the same model: its head stays, and its query when the text does
    if (!traced || (same && text.value === current.text)) return trace({ model: picker.value, text: text.value, layer: Number(layer.value), head: same ? head : 0, query: same ? query : null });
    // another model's, or this one's on another text (a sentence added): the query is found again as
    // its word, its nth time in the text, else said
    const from = viewOnScreen();
    traceKeeping({ model: picker.value, text: text.value, layer: Number(layer.value), head, query: null }, from);
  });
  // the view on screen ({ head, stage, query, payload }), to keep in another trace
  const viewOnScreen = () => ({ ...getView(), payload: traced.payload });
  // another model's trace, or another text's, keeping the view on screen (from) where it has it,
  // then saying after the status what it could not keep (said: what goes first)
  const traceKeeping = (request, from, said = []) => trace(request, from).then((ok) => ok && sayLost(said, from));
  function sayLost(said, from) {
    const now = getView(), before = from.payload, after = traced.payload;
    const title = (p, id) => p.page_stages.find((s) => s.id === id)?.title ?? id;
    if (now.head !== from.head) said.push(`It has ${plural(after.config.n_heads, "head")}: head ${now.head} is shown, not head ${from.head}.`);
    if (now.stage !== from.stage) said.push(`This layer has no ${title(before, from.stage)} stage: ${title(after, now.stage)} is shown.`);
    if (keptQuery(from, after) === null) said.push(`Its tokens hold no “${echo(tokenLabels(before)[from.query])}”: query “${echo(tokenLabels(after)[now.query])}” is shown.`);
    if (said.length) status.textContent = shownStatus = `${shownStatus} ${said.join(" ")}`;
  }
  // a model loads when it is chosen, so its layers can be listed; the bar shows how far it is
  // its config when ready, false when it failed, null when another model was picked meanwhile (its
  // layers are not this one's to list)
  async function prepare(name, keepLayer) {
    tell("");
    try {
      const state = await ensureLoaded(name, () => picker.value !== name);
      if (picker.value !== name) return null;
      showLoading(false);
      fillLayers(state.config, layer.disabled ? keepLayer : Number(layer.value)); // a layer picked from its outline while it loaded stays
      const sizes = `${state.config.n_layers} layers, ${state.config.n_heads} query heads, ${state.config.n_kv_heads} K/V head${state.config.n_kv_heads === 1 ? "" : "s"} (${state.config.kind})`;
      const held = fixed?.layers[name];
      // a trace of this model already shown (its answer came before this check of the load, on a
      // busy machine): the status says what is on screen
      if (current?.model === name) status.textContent = shownStatus;
      else status.textContent = held
        ? `${state.title}: ${sizes}. This page holds ${heldLayers(held)} on the text above${current ? "" : ": press Trace to follow a query through one"}; mha-explorer serve traces any text and layer.`
        : `${state.title} is loaded: ${sizes}.${stored(state)}${current ? "" : " Type a text and press Trace to follow a query through a layer."}`;
      return state.config;
    } catch (failure) {
      if (picker.value !== name) return null;
      tell(ended(sentence(failure.message)));
      status.textContent = "";
      showLoading(false);
      return false;
    }
  }

  // The other heads of a layer whose weights weigh little are worked out on the page while it is
  // idle (heads.js), from every head's weights, asked for once the layer is painted; a layer's
  // weights are the same on every text, and those of the last few layers are kept. Should they not
  // come, each head is fetched when it is picked, as Gemma 3's are.
  const weightsKept = new Map(); // "model|layer" -> the promise of its weights
  function layerWeights(model, layer) {
    const key = `${model}|${layer}`;
    if (!weightsKept.has(key)) {
      const asked = ask("api/model-weights", asking({ model, layer })).then(answer);
      asked.catch(() => weightsKept.delete(key));
      weightsKept.set(key, asked);
      if (weightsKept.size > 4) weightsKept.delete(weightsKept.keys().next().value);
    }
    return weightsKept.get(key);
  }
  async function workHeadsAhead(request, payload) {
    try {
      const { weights } = await layerWeights(request.model, payload.model.layer);
      if (traced?.payload !== payload) return; // another layer's on screen by now
      payload.layerWeights = weights; // (the page's own field: the layer's model.whole_weights says only that it may ask for them)
      if (!workable(payload)) return;
      ahead = workAhead(payload, request.head, (head, worked) => onAhead?.(worked, head));
      if (tracing) ahead.pause(); // (a trace asked for meanwhile: see trace)
    } catch {
      // each head is fetched when picked
    }
  }

  // Another head of the layer on screen: only that head's arrays cross the network, once.
  // (by model, text, layer and head: an older layer's, still on its way, is not this layer's)
  const fetching = new Map(); // "model|layer|head|text" -> the promise of its payload, while it is on its way
  // (announce: the explorer is told, to build its view ahead; not for a head already on screen)
  function fetchHead(head, announce = true) {
    if (byHead.has(head)) return Promise.resolve(byHead.get(head));
    // the server leaves out the K/V head's arrays of a payload held now where the head reads that
    // K/V head too (every head of an MQA layer): they are taken from it
    const [heldHead, held] = byHead.entries().next().value;
    const request = { model: current.model, text: current.text, layer: current.layer, head, kv_held: held.kv_group[heldHead] }; // a head's arrays hold every query
    const key = `${request.model}|${request.layer}|${head}|${request.text}`;
    if (fetching.has(key)) return fetching.get(key);
    const done = (async () => {
      try {
        const arrays = await answer(await ask("api/model-head", asking(request)));
        if (request.text !== current.text || request.layer !== current.layer || request.model !== current.model) return null; // a new trace came first
        const own = arrays.stages.k ? arrays : { ...arrays, stages: { ...pick(held.stages, KV_STAGES), ...arrays.stages }, weights: { ...pick(held.weights, KV_WEIGHTS), ...arrays.weights } };
        const payload = withHead(byHead.values().next().value, own); // (the layer's payload on screen now: a trace of it again may have come meanwhile)
        keep(head, payload);
        if (announce) onAhead?.(payload, head);
        return payload;
      } finally {
        fetching.delete(key);
      }
    })();
    fetching.set(key, done);
    return done;
  }
  function keep(head, payload) {
    byHead.delete(head); // kept as the one used last
    byHead.set(head, payload);
    // the head used longest ago goes, never the one on screen
    if (byHead.size > KEEP_HEADS) byHead.delete([...byHead.keys()].find((kept) => kept !== current.head && kept !== head));
  }

  async function showHead(head) {
    if (!current) return false;
    if (tracing) pickedDuring = head; // the layer on its way shows this head once it is here
    wantedHead = head;
    // already here (seen, fetched while the pointer rested on it, or worked out here): no wait
    let payload = byHead.get(head) ?? ahead?.get(head) ?? (head === traced?.head ? traced.payload : undefined);
    if (!payload) {
      try {
        payload = await fetchHead(head);
      } catch (failure) {
        if (wantedHead !== head) return false;
        tell(`Head ${head} could not be fetched: ${ended(failure.message)} Pick it again to retry.`);
        return null; // (the page gives the view back to the head on screen)
      }
      if (!payload) return false;
    }
    if (wantedHead !== head) return false;
    tell("");
    current = { ...current, head };
    payload.query = getView().query ?? payload.query; // the same object again: the explorer keeps what it drew for it
    onPayload(payload, current);
    if (payload.worked) refineLater(head, payload);
    else keep(head, payload);
    return true;
  }

  // A head worked out on the page, once shown, gets the server's own arrays, copied into its
  // payload in place (heads.js); the explorer writes the numbers on screen again. What stays is
  // the server's, and the view keeps its focus and scroll. Should the fetch fail, the page's own
  // numbers stay: they differ from the server's in the last float32 place or so.
  // The fetch is sent after the head is painted: sending it costs a millisecond or more of the
  // click's own frame.
  async function refineLater(head, worked) {
    try {
      await painted();
      const exact = await fetchHead(head, false); // (or the fetch a pointer resting on the head began)
      if (!exact || !worked.worked || ahead?.get(head) !== worked) return; // refined already, or another layer's by now
      refine(worked, exact);
      byHead.delete(head); // the worked payload, exact now, stays the head's (ahead keeps it): the views built on it stay
      onRefined?.(worked);
    } catch {
      // the page's own numbers stay (see above)
    }
  }

  let chosen = null;
  // the layer asked for before a large model's menu, waiting for Trace, took its place: picking
  // another model then finds it (SmolLM2's 25, shown as Gemma's last, 17), unless a layer was picked meanwhile
  let layerBeforeWait = null;
  picker.addEventListener("change", () => {
    if (picker.value === chosen) return; // the same model again: its layers, and the layer picked, stay
    chosen = picker.value;
    dropTrace();
    // with a trace on screen, the new model traces the same text at once (as a new layer does),
    // so that what is shown always belongs to the model picked
    // the layer picked stays where the new model has it (else the nearest it has)
    const traced = Boolean(current);
    const name = picker.value;
    const info = models.find((m) => m.name === name);
    if (info?.heavy && info.state !== "ready") {
      // a large model loads when asked for, not when the menu passes over it (its arrow keys choose at once)
      tell("");
      layerBeforeWait ??= Number(layer.value) || 0;
      fillLayers(info.outline ?? null, layerBeforeWait); // its own layers, known before it loads, to trace the one picked
      // the list was read when the mode opened: loaded since (by another page), it is taken as any
      // model ready. Until the server says, the status waits: "is large" shown, then taken back a
      // moment later, would flash.
      const before = status.textContent;
      const wait = () => {
        if (picker.value === name && !tracing && status.textContent === before) status.textContent = `${info.title} is large: press Trace to load it (some seconds) and trace the text.`;
      };
      ask(`api/models/${encodeURIComponent(name)}`)
        .then(answer)
        .then((state) => {
          if (picker.value !== name) return;
          if (state.state !== "ready") return wait();
          info.state = "ready";
          take(name, traced);
        })
        .catch(wait); // unheard: Trace loads it, as said
      return;
    }
    take(name, traced);
  });
  // a model picked that is loaded, or not large: its layers, and with a trace on screen the same text
  // traced, at the head and query on screen where the new model has them (the query's word, its
  // nth time in the text, as the new tokenizer splits it), else said
  function take(name, onScreen) {
    const info = models.find((m) => m.name === name);
    const keep = layerBeforeWait ?? (Number(layer.value) || 0);
    layerBeforeWait = null;
    fillLayers(info?.config ?? info?.outline ?? null, keep); // its layers while it loads, not the model's before
    const picks = layerPicks;
    const from = onScreen ? viewOnScreen() : null;
    prepare(name, keep).then((ok) => {
      if (!ok || !from) return;
      const asked = Number(layer.value);
      // the layer on screen is one this model does not have: the one it traces instead is said
      // (not when a layer was picked from the new model's menu meanwhile); so are a head, a stage and a query it lacks
      const instead = layerPicks === picks && asked !== keep ? [`It has no layer ${keep}${fixed ? " in this copy" : ""}: layer ${asked} is traced instead.`] : [];
      traceKeeping({ model: name, text: text.value, layer: asked, head: from.head, query: null }, from, instead);
    });
  }
  let layerPicks = 0; // how many layers were picked from the menu: a model's nearest layer is said only if none was
  layer.addEventListener("change", () => {
    layerPicks++;
    layerBeforeWait = null; // this layer is the one asked for now
    // another model's trace on its way (the model just picked): this layer of it instead
    const coming = tracing && onItsWay?.request.model === picker.value && picker.value !== current?.model ? onItsWay : null;
    if (coming) return (coming.from ? traceKeeping : trace)({ ...coming.request, layer: Number(layer.value) }, coming.from);
    // a large model picked and not yet loaded: its layer waits for Trace, as the model does
    if (!current || picker.value !== current.model) return;
    // the text in the box, even if edited since the last trace: what is shown is always what it says
    // (edited, the query is found again in it, as Trace finds it)
    if (text.value === current.text) trace({ ...current, layer: Number(layer.value), head: getView().head, query: getView().query });
    else traceKeeping({ ...current, text: text.value, layer: Number(layer.value), head: getView().head, query: null }, viewOnScreen());
  });
  // Ctrl+Enter (or Cmd+Enter) in the text traces it; Enter alone starts a new line, as texts may hold them
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      go.click();
    }
  });
  // what the panel says went wrong ("" for nothing); the text box is marked when the text was refused
  function tell(message, textRefused = false) {
    error.textContent = message;
    markText(textRefused);
  }
  const ended = (message) => message.replace(/\.?$/, "."); // one full stop, whether the message ends in one or not
  // the text box marked as refused (described by the message that says why, and by its note in a
  // static copy), or not
  const markText = (refused) => {
    const described = [fixed ? "model-text-note" : null, refused ? "model-error" : null].filter(Boolean).join(" ");
    if (refused) text.setAttribute("aria-invalid", "true");
    else text.removeAttribute("aria-invalid");
    if (described) text.setAttribute("aria-describedby", described);
    else text.removeAttribute("aria-describedby");
  };
  // an edited text is not the one on screen until it is traced: the status line says so
  const sayIfChanged = () => {
    if (current && text.value !== current.text) status.textContent = "The text has changed: press Trace (or Ctrl+Enter) to follow a query through it.";
  };
  text.addEventListener("input", () => {
    sayIfChanged();
    keepDraft();
  });
  // The text in the box is kept with the browser's history entry (its state, which the link's
  // replaceState keeps): Back and Forward reload the page on the entry's link, and a text typed
  // and not traced comes back into the box, not the link's. Written a moment after typing stops
  // (the browser limits how often a page may write its history).
  let drafting = null;
  const writeDraft = () => {
    clearTimeout(drafting);
    drafting = null;
    history.replaceState({ ...history.state, draft: text.value }, "");
  };
  const keepDraft = () => {
    clearTimeout(drafting);
    drafting = setTimeout(writeDraft, 200);
  };
  const opened = text.value; // a box typed in since the page opened keeps what was typed
  const restoreDraft = () => {
    const draft = history.state?.draft;
    if (fixed || typeof draft !== "string" || draft === text.value || text.value !== opened) return;
    text.value = draft;
    sayIfChanged();
  };

  // the view the page was opened on: true when it is shown (or needs no trace), false when the
  // link was refused and said so
  async function startLink() {
    try {
      await refresh();
    } catch (failure) {
      tell(`The list of models could not be read (${failure.message}).`);
      return false;
    }
    // a link to a model this server does not have (or has not installed) says so, rather than open another
    const named = models.find((m) => m.name === initial.model);
    if (!fixed && initial.model && !named?.installed) {
      tell(named
        ? `${named.title} is not installed here: run make models.`
        : `This server has no model “${initial.model}”: a link names one of ${models.filter((m) => m.installed).map((m) => `${m.name} (${m.title})`).join(", ")}.`);
      return false;
    }
    // a static copy holds one text and some models. A link to another model (a lesson's copy made
    // again with another) shows the copy's first, said so: its layer and query were that model's,
    // and go; its stage and head stay, as far as the copy's model has them.
    const otherModel = Boolean(fixed && initial.model && !fixed.layers[initial.model]);
    // another text (a lesson's copy made again on a new sentence): the model and layer on the text
    // the copy holds, said so; the link's query stood for a token of its own text, and goes
    const otherText = Boolean(fixed && initial.text && initial.text !== fixed.text);
    if (otherModel) layer.value = String(fixed.layers[picker.value][0]); // the menu took the link's layer (refresh): it was another model's
    const ready = await prepare(picker.value, otherModel ? Number(layer.value) : initial.layer ?? 0); // (kept where the menu waited, disabled, for the model's layers)
    if (ready === null) return true; // the user picked another model meanwhile
    if (!ready) return false;
    // a layer the model (or the copy) lacks: the menu went to the nearest it has, which a link
    // traces, saying so (its model and text are not lost over one number)
    const layerProblems = emptyLinkText && !fixed ? ["its text is empty, so the example sentence is traced"] : []; // a copy has its own text
    if (initial.damaged && !otherText) layerProblems.push(initial.damaged); // (what page.js says of it)
    if (otherText) layerProblems.push(`its text is not this copy's: the copy holds one text, “${fixed.text}”, shown with the link's ${otherModel ? "stage and head" : "model, layer and head"}${initial.query != null && !otherModel ? " (not its query, a token of its own text)" : ""}`);
    if (otherModel) {
      const title = models.find((m) => m.name === picker.value)?.title ?? picker.value;
      layerProblems.push(`the model “${initial.model}” is not in this page, which holds ${models.map((m) => m.title).join(", ")}: ${title} is shown, at its layer ${layer.value}, the first this copy holds${initial.query != null ? " (not the link's query, a token of that model's)" : ""}`);
    } else if (initial.layer !== undefined && Number(layer.value) !== initial.layer) {
      const held = fixed?.layers[picker.value];
      const count = ready.n_layers ?? layer.options.length; // (a copy's menu holds its layers alone)
      const why = held && initial.layer < count
        ? `layer ${initial.layer} is not in this page: it holds ${heldLayers(held)}`
        : `layer ${initial.layer} does not exist: this model has layers 0 to ${count - 1}${held ? `, and this page holds ${heldLayers(held)}` : ""}`;
      layerProblems.push(`${why}, so layer ${layer.value} is shown`);
    }
    if (otherText || otherModel) initial.query = null; // a token of the link's own text or model's, dropped as said above
    if (!initial.autostart) return true;
    // a link's head or query the layer does not have is dropped alone (the first view's is
    // shown), so that its model, text and layer are not lost over it; linkProblems says so. The
    // head is checked on the model's settings before the trace is asked for (the server would
    // refuse it); the query, on the tokens that come back (page.js): every query's numbers come
    // with the layer, so the request names none
    const request = { model: picker.value, text: text.value, layer: Number(layer.value), head: initial.head || 0, query: null };
    const dropped = [];
    if (request.head > 0) {
      const heads = await ensureLoaded(request.model, () => picker.value !== request.model).then((state) => state.config.n_heads, () => null); // (a model that fails to load: the trace says why)
      if (heads !== null && request.head >= heads) {
        request.head = 0;
        dropped.push("head");
      }
    }
    let shown;
    while (!(shown = await trace(request))) {
      if (shown === null) return true; // the user traced something else meanwhile
      if (request.head === 0 || failed?.fields?.length !== 1 || failed.fields[0] !== "head") return false;
      request.head = 0;
      dropped.push("head");
    }
    // said as the teaching example's and the lab's links say it
    const payload = byHead.get(current.head);
    linkProblems = [...layerProblems, ...dropped.map((field) => outOfRange(field, initial[field], payload))];
    return true;
  }

  return {
    // the link's view, then the text the box held when the page was left, if it was not traced
    start: async () => {
      const started = await startLink();
      restoreDraft();
      return started;
    },
    linkProblems: () => linkProblems, // what start() dropped from the link it was given
    // the page is about to leave this entry for another: the box's text is written to this one
    keepDraftNow: writeDraft,
    // the box's text, for a new entry to take along: as typed on this page, else the one this
    // entry took along (none, not the box's first text, where nothing was typed)
    draft: () => (text.value !== opened ? text.value : history.state?.draft),
    head: showHead,
    // a head the user is about to pick (the pointer or the focus is on a thumbnail, or on a head's
    // name in the head outputs): fetch it now. A static copy holds every head already: it is only
    // announced, so that its view is built ahead all the same.
    prefetch: (head) => {
      if (!current) return;
      if (fixed) onAhead?.(byHead.values().next().value, head);
      else if (ahead?.get(head)?.worked === false) onAhead?.(ahead.get(head), head); // worked out here, the server's numbers in: drawn ahead
      else if (!byHead.has(head)) fetchHead(head).catch(() => {}); // a failure is reported if it is picked
    },
    viewChanged, // the stage, head or query on screen changed: the Python, if open, follows
    error: () => error.textContent, // what the panel says went wrong, if anything
    textRefused: () => Boolean(failed?.fields?.includes("text")), // the last trace failed over its text
    request: () => current,
    kept: () => [...byHead.keys()],
    worked: () => ahead?.heads() ?? [],
  };
}

// Once the next frame is painted (or 100 ms on, in a page that paints no frame: one out of view).
const painted = () =>
  new Promise((done) => {
    requestAnimationFrame(() => setTimeout(done, 0));
    setTimeout(done, 100);
  });

// A text as a Python string literal: JSON's escapes are Python's, and the characters that turn
// the direction of the text around it (U+202E) are escaped too, so that the line reads as it runs.
const pythonString = (text) => JSON.stringify(text).replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

// A static copy (export-site --model) answers the panel's questions from the layers written into it:
// the models, their state (loaded), and the trace of a layer it holds, read from that layer's file
// (static/layer-N.js) the first time it is asked for. The panel offers nothing else (its text is
// read-only, its layers those written, and a link to others is refused before it asks); a head or
// query out of range is refused in the server's words.
export function staticServer(models) {
  const reply = (body, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const refuse = (message, field = "body") => reply({ detail: [{ field, message }] }, 422);
  const state = (m) => ({ name: m.name, title: m.title, installed: true, heavy: false, state: "ready", fraction: 1, message: "loaded", config: m.config });
  const serve = "run mha-explorer serve to trace any text and layer";
  const read = new Map(); // "name/layer" -> the promise of its payload
  // a script, not fetch: browsers refuse fetch from file://, and a copy is often opened from there
  const layerOf = (held, layer) => {
    const key = `${held.name}/${layer}`;
    if (!read.has(key)) {
      const file = `static/layer-${layer}.js`;
      const upload = "put the whole static folder beside index.html, as mha-explorer export-site wrote it";
      const script = document.createElement("script");
      script.src = `${file}?v=${held.versions[layer]}`; // this export's file, not one a cache kept from an earlier
      read.set(key, new Promise((done, failed) => {
        script.onload = () => {
          const payload = globalThis.MHA_LAYERS?.[key];
          // a file of another copy (another text: an upload, or a cache, that mixed two copies) is not shown as this one's
          if (payload && (payload.model.text !== held.text || payload.model.layer !== layer)) failed(new Error(`${file} is another copy's layer ${payload.model.layer}, on another text: ${upload}`));
          else if (payload) done(payload);
          else failed(new Error(`${file} holds no layer: ${upload}`));
        };
        script.onerror = () => failed(new Error(`this copy could not read layer ${layer}, ${file}: ${upload}`));
        document.head.append(script);
      }).catch((failure) => {
        read.delete(key); // asked again, it is read again
        script.remove();
        throw failure;
      }));
    }
    return read.get(key);
  };
  return async (url, options = {}) => {
    const path = String(url);
    if (path === "api/models") return reply(models.map(state));
    const named = /^api\/models\/([^/]+)(\/load)?$/.exec(path);
    const m = named ? models.find((x) => x.name === decodeURIComponent(named[1])) : null;
    if (m) return reply(state(m));
    if (path === "api/model-trace") {
      const request = JSON.parse(options.body);
      const held = models.find((x) => x.name === request.model && x.text === request.text);
      if (!held?.layers.includes(request.layer)) return refuse(`this page does not hold that model, text or layer; ${serve}`);
      let payload;
      try {
        payload = await layerOf(held, request.layer);
      } catch (failure) {
        return refuse(failure.message);
      }
      const heads = payload.config.n_heads;
      if (!(request.head >= 0 && request.head < heads)) return refuse(`head ${request.head} does not exist: this layer has heads 0 to ${heads - 1}`, "head");
      const n = payload.tokens.length;
      if (request.query !== null && request.query !== undefined && !(request.query >= 0 && request.query < n)) return refuse(n > 1 ? `query=${request.query} is out of range; choose 0 to ${n - 1}` : `query=${request.query} is out of range: there is 1 token; choose 0`, "query"); // (as the server says it)
      return reply({ ...payload, query: request.query ?? payload.query, model: { ...payload.model, held_layers: held.layers } }); // the heading says which layers the copy holds
    }
    return refuse(`this static page has no server; ${serve}`);
  };
}

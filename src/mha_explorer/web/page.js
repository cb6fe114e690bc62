// The standalone page: a tiny model adapter around explorer.js, the lab editor, and the link.
// With a server it asks the API for traces; as an exported static site it reads MHA_DATA.
import explorer, { echo, firstQuery, h, outOfRange, plural, unpack } from "./explorer.js";
import { createLab, decodeEdits, encodeEdits, LAB_LIMITS, PRESETS, PRESET_TOKENS } from "./lab.js";
import { createModels, staticServer, word } from "./models.js";

// The subset of the anywidget model the explorer uses: get, set, save_changes, on, off.
class PageModel {
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

// a system in dark mode: the explorer takes the dark colours it has for notebooks (page.css
// darkens the page around it by itself); on paper it stays light
const darkSystem = matchMedia("(prefers-color-scheme: dark)");
const followTheme = () => document.documentElement.classList.toggle("mha-dark", darkSystem.matches);
followTheme();
darkSystem.addEventListener("change", followTheme);
addEventListener("beforeprint", () => document.documentElement.classList.remove("mha-dark"));
addEventListener("afterprint", followTheme);

const STATIC = globalThis.MHA_DATA || null; // present only in an exported site
const COPY = globalThis.MHA_COPY === true; // set by an exported site's script, even when its data did not load
let currentMode = () => "teaching";
const CONFIG_KEYS = ["d_model", "n_heads", "n_kv_heads", "d_head", "d_v"];
const LAB_KEYS = [...CONFIG_KEYS, "tokens", "seed", "values", "edits", "causal", "bias"]; // what a lab link may set

// ---- the link: the whole view in the URL's fragment ----------------------------------------

// A %-escape that makes no UTF-8 (a link cut in the middle of a character) is read as U+FFFD. A
// "%" that starts no escape ("100%") is read as itself, and is no fault.
const decodes = (raw) => {
  try {
    decodeURIComponent(raw.replaceAll("+", " ").replace(/%(?![0-9a-fA-F]{2})/g, "%25"));
    return true;
  } catch {
    return false;
  }
};

// what a link's part read with a broken %-escape is said to be
const brokenEscape = (part) => `its ${part} ${part === "text" ? "has" : "have"} a broken %-escape (the link was cut, or changed by hand), read as “\ufffd”: copy the link again from where it was made`;

function readLink(hash) {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  const damaged = (part) => (decodes(new RegExp(`(?:^#?|&)${part}=([^&]*)`).exec(hash)?.[1] ?? "") ? null : brokenEscape(part)); // null: read whole
  // A part that cannot be read is left out, and said (dropped), and the rest of the link used: a
  // text or settings typed into a link are not lost for one mistyped part.
  const dropped = [];
  const known = new Set(["mode", "stage", "head", "query", "all", "model", "layer", "text", ...LAB_KEYS]);
  // (an edit written as a part of its own, W_Q:0,0,0=0.5, is said with the form that holds it)
  const looseEdits = [];
  for (const key of new Set(params.keys())) {
    if (known.has(key)) continue;
    if (/^[A-Za-z_]+:\d+(,\d+)*$/.test(key)) looseEdits.push(`${key}=${params.get(key)}`);
    else dropped.push(`it has an unknown part “${echo(key)}” (left out)`);
  }
  if (looseEdits.length) dropped.push(`it has ${looseEdits.length === 1 ? "an edit" : `${looseEdits.length} edits`} outside edits= (left out): write ${looseEdits.length === 1 ? "it" : "them"} as “edits=${looseEdits.slice(0, 4).map((edit) => echo(edit, 40)).join(";")}${looseEdits.length > 4 ? ";…" : ""}”`);
  // a part given twice (a link edited by hand) says two things: which was meant is not guessed
  const twice = [...new Set(params.keys())].find((key) => params.getAll(key).length > 1);
  if (twice) throw new Error(`it gives ${twice} twice (${params.getAll(twice).map((v) => `“${echo(v)}”`).join(", ")}); keep one`);
  // a negative lab setting is left to the lab, which says what range it takes and keeps the link's
  // other settings in its form to be fixed; elsewhere it makes the link unusable
  const whole = (name, fallback, negative = false) => {
    if (!params.has(name)) return fallback;
    const text = params.get(name);
    const instead = fallback === null ? "left out" : `${fallback} is used`;
    if (/^-\d+$/.test(text) && !negative) dropped.push(`${name}=“${echo(text)}” is negative: it must be 0 or more (${instead})`);
    else if (!/^-?\d+$/.test(text)) dropped.push(`${name}=“${echo(text)}” is not a whole number (${instead})`);
    else if (!Number.isSafeInteger(Number(text))) dropped.push(`${name}=“${echo(text)}” is far too large (${instead})`); // not said back as 1e+23
    else return Number(text);
    return fallback;
  };
  const flag = (name) => {
    const text = params.get(name) ?? "0";
    if (text === "0" || text === "1") return text === "1";
    dropped.push(`${name}=“${echo(text)}” must be 0 or 1 (0 is used)`);
    return false;
  };
  const mode = params.get("mode") || "teaching";
  if (!["teaching", "lab", "model"].includes(mode)) throw new Error(`mode=“${echo(mode)}” is not teaching, lab or model`);
  // a query by its token ("like", or "the@4" for a repeated one, as the terminal takes it), found once the tokens are here
  const named = params.has("query") && !/^-?\d+$/.test(params.get("query")) && params.get("query").trim() !== "";
  const view = { mode, stage: params.get("stage"), head: whole("head", 0), query: named ? params.get("query") : whole("query", null), all: flag("all") };
  if (mode === "model") {
    if (STATIC && !STATIC.models) throw new Error("real models need the server (mha-explorer serve)");
    const modelNamed = (params.get("model") || "").toLowerCase(); // "MiniLM", as the terminal takes it
    // no model named: the Real model mode as its button opens it, nothing traced yet; unless the
    // link gives a text or a layer to trace, which the first model traces, said
    const model = modelNamed || (params.has("text") || params.has("layer") ? (STATIC?.models?.[0]?.name ?? "minilm") : "");
    if (!modelNamed && model) dropped.push(`it names no model, so the first, ${model}, is traced`);
    if (model && !/^[a-z0-9_-]{1,64}$/.test(model)) throw new Error(`model “${echo(params.get("model"))}” is not a model name`);
    if (model) view.model = { model, layer: whole("layer", 0), text: params.get("text"), damaged: damaged("text") }; // text null when the link has none
  }
  // a lab link with nothing of a lab (#mode=lab) opens the lab as its button does; one with some
  // of a lab needs its whole configuration
  if (mode === "lab" && LAB_KEYS.some((k) => params.has(k))) {
    // a setting that is no whole number ("abc", a typo) is left to the lab too, as typed: its
    // field says what it takes, and the link's other settings stay in the form
    // (so is one too large for a number, kept in its digits)
    const setting = (name, fallback) => (params.has(name) && params.get(name).trim() && !Number.isSafeInteger(Number(params.get(name).trim())) ? params.get(name) : whole(name, fallback, true));
    const config = Object.fromEntries(CONFIG_KEYS.map((k) => [k, setting(k, null)]));
    // settings left out (a link written by hand, "d_model=8&n_heads=2"), each from those before it
    // as Explorer.from_config takes them: every head its own K/V head, the width split among the
    // heads (where it does not split, d_head is left for the lab to mark), d_v = d_head; a width
    // or a head count left out is GQA's preset's, and said (both left out: every setting left out)
    const absent = ["d_model", "n_heads"].filter((k) => !params.has(k));
    // values=example and no settings or tokens (the shortest link to the example in the lab): the
    // example's own settings and tokens, put in once the example is here (main)
    const exampleOwn = params.get("values") === "example" && !params.has("tokens") && !CONFIG_KEYS.some((k) => params.has(k)) && !params.has("causal") && !params.has("bias");
    if (absent.length && !exampleOwn) dropped.push(`it gives no ${absent.join(" or ")} (the GQA preset's ${absent.length > 1 ? "settings are used where it gives none" : `${PRESETS.gqa.config[absent[0]]} is used`})`);
    if (absent.length > 1) for (const k of CONFIG_KEYS) config[k] ??= PRESETS.gqa.config[k];
    const number = (v) => typeof v === "number";
    config.d_model ??= PRESETS.gqa.config.d_model;
    config.n_heads ??= PRESETS.gqa.config.n_heads;
    config.n_kv_heads ??= number(config.n_heads) ? config.n_heads : "";
    const { d_model, n_heads } = config;
    // (a d_model out of the lab's range, 100000 or -8, gives none: 25000 would be one more field to mend)
    const inRange = number(d_model) && d_model >= 1 && d_model <= LAB_LIMITS.width;
    config.d_head ??= inRange && number(n_heads) && n_heads > 0 && d_model % n_heads === 0 ? d_model / n_heads : "";
    config.d_v ??= number(config.d_head) ? config.d_head : "";
    // the fields left blank say what they take; the notice says why they are blank
    if (config.d_head === "") {
      const why = typeof d_model === "string" && /^\s*\d+\s*$/.test(d_model) ? `d_model ${echo(d_model.trim())} is outside the lab's widths, 1 to ${LAB_LIMITS.width}` // digits too many for a number
        : !number(d_model) ? `d_model “${echo(String(d_model))}”, no whole number, cannot be split among the heads`
        : !inRange ? `d_model ${d_model} is outside the lab's widths, 1 to ${LAB_LIMITS.width}`
        : !number(n_heads) ? `n_heads “${echo(String(n_heads))}” is no whole number to split d_model ${d_model} by`
        : n_heads > 0 ? `d_model ${d_model} does not split evenly among ${n_heads} heads`
        : `n_heads ${n_heads} has no head to split d_model ${d_model} among`;
      dropped.push(`it gives no d_head, and ${why}: type d_head${config.d_v === "" ? " and d_v" : ""} in the lab`);
    }
    config.causal = flag("causal");
    config.bias = flag("bias");
    // no tokens in the link (one written by hand): the lab's own, as #mode=lab alone opens it
    const tokens = params.has("tokens") ? params.get("tokens").split(/\s+/).filter(Boolean) : [...PRESET_TOKENS]; // (a line break or tab parts tokens too, as in the lab's box)
    const values = params.get("values");
    if (values !== null && values !== "example") dropped.push(`values=“${echo(values)}” is not “example” (left out)`);
    view.lab = { config, tokens, seed: setting("seed", 0), fromExample: values === "example", exampleOwn, edits: decodeEdits(params.get("edits"), dropped), damaged: damaged("tokens") };
  }
  view.dropped = dropped;
  return view;
}

// Several traits change together; write the link once, after all of them.
let linkQueued = false;
let computing = 0; // lab traces asked of the server and not answered yet
let linkWhenComputed = null; // the link's write, put off until they are answered: LINK_WAIT_MS at most
let linkWaiting = null; // the timer that writes it then, whatever is still computed
const LINK_WAIT_MS = 1000;
let ownHash = location.hash; // the link this page shows: read at its start, or written since
let models = null; // the real-model panel, once the page has one
let resetStep = false; // "Reset example" pressed: its link is a new step of the tab's history
// Each mode's last link in this tab, kept in the state of every history entry: Back and Forward
// reload the page on an entry's link (hashchange), which gives back that mode's view alone; a
// mode's button then opens each other mode as it was left, from its link (reopen)
const modeLinks = { ...history.state?.modeLinks };
function writeLink(model, lab) {
  if (linkQueued) return;
  linkQueued = true;
  // once the page is idle: writing the URL makes the browser lay the page out again (8 ms at 512
  // tokens), which must not delay the frame that shows the change
  const write = (waited) => {
    // not while the server computes a lab trace: writing the URL took 1 to 8 ms of the page's
    // thread, which the answer, come meanwhile, waited for (see compute); for a second at most,
    // so that an answer that never comes leaves no link unwritten
    if (computing && waited !== true) {
      linkWhenComputed = write;
      linkWaiting ??= setTimeout(() => writePutOff(false), LINK_WAIT_MS);
      return;
    }
    linkQueued = false;
    // a link pasted or edited meanwhile is not written over: the page reloads on it (hashchange)
    if (location.hash === ownHash) writeLinkNow(model, currentMode(), lab);
  };
  whenIdle(write);
}
// a link's write, once the page is idle (within 200 ms)
function whenIdle(write) {
  if (window.requestIdleCallback) requestIdleCallback(write, { timeout: 200 });
  else setTimeout(write, 50);
}
// the link's write put off while a lab trace computed: once the page is idle (idle), or now
function writePutOff(idle) {
  const write = linkWhenComputed;
  linkWhenComputed = null;
  clearTimeout(linkWaiting);
  linkWaiting = null;
  if (!write) return;
  if (idle) whenIdle(() => write(true));
  else write(true);
}

function writeLinkNow(model, mode, lab) {
  const params = new URLSearchParams();
  params.set("mode", mode);
  if (mode === "model" && models?.request()) {
    const { model: name, layer, text } = models.request();
    params.set("model", name);
    params.set("layer", layer);
    params.set("text", text);
  }
  if (mode === "lab") {
    for (const k of CONFIG_KEYS) params.set(k, lab.config[k]);
    params.set("causal", lab.config.causal ? "1" : "0");
    params.set("bias", lab.config.bias ? "1" : "0");
    params.set("tokens", lab.tokens.join(" "));
    params.set("seed", lab.seed);
    const { fromExample, edits } = lab.linked;
    if (fromExample) params.set("values", "example"); // the teaching example's, under the edits
    if (edits.size) params.set("edits", encodeEdits(edits));
  }
  const shown = new URLSearchParams(location.hash.slice(1)).get("mode");
  // the model mode before its first trace shows no view of its own: the address names the mode
  // alone (the teaching example's stage, head and query would read as the model's), and a model
  // link on its way to its trace keeps all it says
  const viewless = mode === "model" && !models?.request();
  if (viewless && shown === "model" && new URLSearchParams(location.hash.slice(1)).has("model")) return;
  if (!viewless) {
    params.set("stage", model.get("stage"));
    params.set("head", model.get("head"));
    params.set("query", model.get("query"));
    if (model.get("all_queries")) params.set("all", "1");
  }
  // another mode is a step the browser's Back returns from (to the view the link held); a change
  // within a mode replaces the link, so that Back does not walk through every stage and query
  // (a new entry starts with the modes' links alone; one replaced keeps its own state too: the
  // text typed in the model box)
  if (!viewless) modeLinks[mode] = params.toString();
  // "Reset example" is a step too: the place it leaves is one Back away, not lost by a slip
  const reset = resetStep && `#${params}` !== location.hash;
  resetStep = false;
  if ((shown && shown !== mode) || reset) pushStep(params.toString());
  else history.replaceState({ ...history.state, modeLinks: { ...modeLinks } }, "", `#${params}`);
  ownHash = location.hash;
}

// A new entry of the tab's history, on link. The model's entry being left keeps its box as it is:
// typed just now, or typed before the mode was left once and came back to by its button (an entry
// of its own). The new entry takes the box's text along, as it takes the modes' links: a Back or
// Forward to it, or the model mode opened from it after a reload, gives back a text typed and not
// traced (models.js restoreDraft), not the link's.
function pushStep(link) {
  if (new URLSearchParams(location.hash.slice(1)).get("mode") === "model") models?.keepDraftNow();
  const draft = models ? models.draft() : history.state?.draft;
  history.pushState({ modeLinks: { ...modeLinks }, ...(typeof draft === "string" ? { draft } : {}) }, "", `#${link}`);
}

// A mode this page has not shown since it loaded, left before in this tab (a Back or Forward
// reloaded the page on another mode's link): opened on its last link, as a new step, with the
// page loaded anew on it. False where the page has the mode's view itself.
function reopen(next, shownHere) {
  if (shownHere || !modeLinks[next]) return false;
  pushStep(modeLinks[next]);
  location.reload();
  return true;
}

// ---- traces: from the API, or from the exported data ------------------------------------------

async function teachingPayload() {
  if (STATIC) return STATIC.teaching;
  if (COPY) throw new Error("static/data.js did not load"); // a copy has no server to ask
  const response = await fetch("api/example?encoding=base64");
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  return response.json();
}

const presetWithConfig = (config) => Object.keys(PRESETS).find((id) => JSON.stringify(PRESETS[id].config) === JSON.stringify(config));

const sameTokens = (state) => state.tokens.join(" ") === PRESET_TOKENS.join(" "); // a preset's own, as a copy holds it

// The preset of a lab state's configuration, if any, and what of the state that preset, as a copy
// holds it (its own tokens, seed 0, no edits), lacks: a copy shows the preset when nothing is.
function againstPresets({ config, tokens, seed, edits }) {
  const id = presetWithConfig(config);
  const missing = [
    !sameTokens({ tokens }) ? `tokens (each preset here is on “${PRESET_TOKENS.join(" ")}”)` : "",
    seed !== 0 ? `seed ${seed} (the presets here have seed 0's values)` : "",
    edits?.size ? plural(edits.size, "edited value") : "",
  ].filter(Boolean);
  return { id, missing };
}

function staticPreset(state) {
  const { id, missing } = againstPresets(state);
  return id && !missing.length ? STATIC.presets[id] : null;
}

// What a copy says of a link's lab settings it cannot show: which of them, and the preset shown
// instead. refused: the lab's messages on settings no server would compute either (labMessages).
// The preset's view: the link's stage and head where the preset has the link's configuration (its
// query too, where its tokens are the link's and it names one), else the preset's first view.
function staticLabNotice(state, refused, queried, fromExample) {
  const { id, missing: lacked } = againstPresets(state);
  // a lab on the teaching example's values (values=example) is named so, not as a configuration
  const example = !id && !refused.length && fromExample;
  const missing = id ? lacked : [example ? "lab on the teaching example's values" : refused.length ? `settings (no server computes them either: ${refused.join("; ")})` : "configuration (none of the presets)"];
  const shown = PRESETS[id ?? "gqa"].title;
  const view = !id ? "from its first view" : queried && sameTokens(state) ? "at the link's stage, head and query" : "at the link's stage and head";
  const elsewhere = example ? " The teaching example itself is under Teaching example." : "";
  return `This copy holds the lab's presets only (other settings need mha-explorer serve): the link's ${missing.length > 1 ? `${missing.slice(0, -1).join(", ")} and ${missing.at(-1)}` : missing[0]} cannot be shown here. Showing the preset “${shown}” instead, ${view}.${elsewhere}`;
}

async function compute(state) {
  if (STATIC) {
    const payload = staticPreset(state);
    return payload ? { payload } : { errors: { config: "This static copy holds only the presets; run mha-explorer serve to compute other configurations." } };
  }
  // the server draws the values from the seed, as it drew those on screen, and sets the edited
  // ones: a request stays small however large the configuration
  const body = { config: state.config, tokens: state.tokens, seed: state.seed, edits: Object.fromEntries(state.edits || []), encoding: "binary" };
  computing += 1;
  try {
    const response = await fetch("api/trace", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    if (response.ok) return { payload: unpack(await response.arrayBuffer()) };
    const answer = await response.json();
    const errors = {};
    for (const item of answer.detail || []) errors[item.field] = item.message;
    return { errors: Object.keys(errors).length ? errors : { request: `the server answered ${response.status}` } };
  } catch (error) {
    return { errors: { request: `the server could not be reached (${error.message})` } };
  } finally {
    computing -= 1;
    if (!computing) writePutOff(true);
  }
}

// ---- the page ---------------------------------------------------------------------------------

// A stage a layer lacks gives way to the nearest one before it that the layer has (the Mask stage,
// without the mask, to Scores: the scaled scores it would have masked; a rotary stage to the one
// before it), not to the first. Every stage a layer may have, in order (narrative.PAGE_STAGES).
const STAGE_ORDER = ["projections", "qk_norm", "rope", "scores", "mask", "weights", "mixing", "concat", "output"];
// the stages only some layers have, by their titles, and why a layer lacks each (as narrative.LACKS)
const LACKED = { qk_norm: "Query/key norm", rope: "Rotary positions", mask: "Mask" };
const LACKS = { qk_norm: "it does not normalize q and k", rope: "it has no rotary positions", mask: "it is not causal and has no sliding window" };
const stageBefore = (stage, ids) => STAGE_ORDER.slice(0, Math.max(0, STAGE_ORDER.indexOf(stage))).reverse().find((id) => ids.includes(id)) ?? ids[0];

// The view a link asks for, on this payload: a part it cannot have (a stage the layer lacks, a
// head or query beyond its count) falls back (a stage to the one before it, see stageBefore), and
// `problems` says which, so that the rest of the link (a lab's settings and edits) is not lost over it.
function fitView(payload, view) {
  const ids = payload.page_stages.map((s) => s.id);
  const problems = [];
  let { stage, head, query } = view;
  if (stage !== null && !ids.includes(stage)) {
    const instead = stageBefore(stage, ids);
    const title = payload.page_stages.find((s) => s.id === instead).title;
    const shownInstead = instead === ids[0] ? "the first stage" : title;
    problems.push(
      STAGE_ORDER.includes(stage) // a stage of some layers: this one lacks it (a link made on a causal configuration)
        ? `this layer has no ${LACKED[stage]} stage (${LACKS[stage]}), so ${shownInstead} is shown`
        : `stage “${echo(String(stage))}” is not one of ${ids.join(", ")}, so ${shownInstead} is shown`,
    );
    stage = instead;
  }
  if (head >= payload.config.n_heads) {
    problems.push(outOfRange("head", head, payload));
    head = 0;
  }
  if (typeof query === "string") {
    const [found, why] = tokenNamed(payload, query);
    if (found === null) problems.push(`the query “${echo(query)}” is not a token here${why ? ` (${why})` : ""}: ${choices(payload)}; query “${firstQuery(payload)}” is shown`);
    query = found ?? payload.query;
  }
  if (query !== null && query >= payload.tokens.length) {
    problems.push(outOfRange("query", query, payload));
    query = payload.query; // the one the message names
  }
  return { view: { stage: stage ?? ids[0], head, query: query ?? payload.query, all_queries: view.all }, problems };
}
// The position of the token a link names, found as the terminal's --query finds it: the token as
// the tokenizer spells it ("Ġcat") or as the page labels it ("␣cat"), else as the text reads
// ("cat"; a WordPiece's "bel" for "##bel"), else in any case (a lowercasing tokenizer's "the" for
// "The"), else as a word without its accents or its token's marks (MiniLM's "cafe" for "café", its
// "[UNK] 🐱" for "🐱", a byte piece "␣🐱 1/3" for "🐱"): its first place. "cat@4" (or "cat @4", as a map labels a repeated token) is cat at
// position 4 only; "@4" is position 4. Returns [position, or null, and why not when null].
function tokenNamed(payload, name) {
  const n = payload.tokens.length;
  const labels = payload.model?.labels ?? payload.tokens;
  const texts = payload.model?.readable ?? labels.map((label) => label.replaceAll("␣", " "));
  const ways = [
    (j, word) => payload.tokens[j] === word || labels[j] === word,
    (j, word) => texts[j].trim() === word.trim(),
    (j, word) => texts[j].trim().toLowerCase() === word.trim().toLowerCase(),
    (j, word) => bare(labels[j]) === bare(word),
  ];
  const whole = payload.tokens.findIndex((_, j) => ways[0](j, name)); // a lab's token may hold "@"
  if (whole >= 0) return [whole, null];
  const [, word, at] = /^(.*?) ?@(\d+)$/.exec(name) ?? [null, name, null];
  if (at !== null && word === "") return Number(at) < n ? [Number(at), null] : [null, `position ${at} is past the last, ${n - 1}`];
  for (const way of ways) {
    const found = payload.tokens.flatMap((_, j) => (word.trim() && way(j, word) ? [j] : []));
    if (!found.length) continue;
    if (at === null) return [found[0], null];
    if (found.includes(Number(at))) return [Number(at), null];
    return [null, `“${echo(word)}” is at ${found.length === 1 ? `position ${found[0]}` : `positions ${found.join(", ")}`}, not ${at}`];
  }
  return [null, null];
}
// a token's label or a word as another model's trace finds it (models.js), without its accents
const bare = (label) => word(label.normalize("NFD").replace(/\p{M}/gu, "")).trim();
// The tokens a link may name its query by, as the page labels them (a repeated one with its position)
const choices = (payload) => {
  const labels = payload.model?.labels ?? payload.tokens;
  const named = labels.slice(0, 12).map((t, j) => `“${echo(labels.indexOf(t) === labels.lastIndexOf(t) ? t : `${t}@${j}`)}”`);
  return `name one of ${named.join(", ")}${labels.length > 12 ? ", …" : ""}, or give a position`;
};
const partlyUsed = (problems) => `This link could not be used in full: ${problems.join("; ")}.`;

async function main() {
  const app = document.getElementById("app");
  const notice = document.getElementById("notice");
  const labBox = document.getElementById("lab");
  const teachingButton = document.getElementById("mode-teaching");
  const labButton = document.getElementById("mode-lab");
  const modelButton = document.getElementById("mode-model");
  const modelBox = document.getElementById("models");
  if (STATIC && !STATIC.models) modelButton.hidden = true; // real models need the server, or layers written into the copy
  // The notice says how a link was read, or why it could not be, in the mode it speaks of (hidden in
  // the others, shown again on coming back). Settings refused and then mended say it again or
  // clear it (the lab's first result); a view the user changes after it has been read makes it history.
  let mode = "teaching";
  let noticeMode = mode;
  let noticeView = null; // the view it was said over, as the page settled it a frame later
  let restoring = false; // a mode's view put back as it was left
  let refusedLabLink = null; // a lab link whose settings the lab refused, until they are mended
  const viewKey = () => ["stage", "head", "query", "all_queries"].map((k) => model.get(k)).join("|");
  const showNotice = () => {
    notice.hidden = !notice.textContent || noticeMode !== mode;
  };
  const say = (text, about = mode) => {
    notice.textContent = text;
    [noticeMode, noticeView] = [about, null];
    showNotice();
    if (text) requestAnimationFrame(() => notice.textContent === text && (noticeView = viewKey()));
  };

  // a link pasted into this tab, an edited address, or Back and Forward: show that view (the page
  // writes its own link with replaceState or pushState, which fire no hashchange). Listened to
  // from the start: a Back while the page loads would otherwise be read as the link, but the
  // page would go on taking the address it started on for its own, and never write another.
  window.addEventListener("hashchange", () => location.reload());

  let teaching;
  try {
    teaching = await teachingPayload();
  } catch (error) {
    app.replaceChildren(h("p", { class: "error" }, COPY ? "This copy of the explorer could not read its data, static/data.js: put the whole static folder beside index.html, as mha-explorer export-site wrote it." : `The teaching example could not be loaded (${error.message}). Is mha-explorer serve still running?`));
    return;
  }

  let link;
  ownHash = location.hash; // the link read is the one shown
  try {
    link = readLink(location.hash);
  } catch (error) {
    say(`This link could not be used: ${error.message.replace(/\.+$/, "")}. Showing the teaching example instead.`); // a cell's message ends in its own full stop
    link = { mode: "teaching", stage: null, head: 0, query: null, all: false };
  }

  currentMode = () => mode;
  const { view: start, problems } = fitView(teaching, link.mode === "teaching" ? link : { stage: null, head: 0, query: null, all: false });
  if (link.mode === "teaching") problems.unshift(...(link.dropped ?? []));
  if (problems.length) say(partlyUsed(problems));
  const model = new PageModel({ payload: teaching, ...start });
  const printAll = document.getElementById("print-all");
  explorer.render({ model, el: app, otherConfigs: STATIC ? "with the Attention lab's presets (mha-explorer serve computes any other)" : "with the Attention lab's settings", printAll });
  window.mhaExplorer = {
    model,
    get linkPending() {
      return linkQueued; // the URL does not yet hold the latest change
    },
    get keptHeads() {
      return models?.kept() || []; // a real model's heads the page holds: picking one fetches nothing
    },
    get workedHeads() {
      return models?.worked() || []; // a real model's heads worked out on the page: picking one shows it at once
    },
  };

  // A stage, head or query the lab's settings took away (the Mask stage without the mask, head 2 of
  // 2 heads, a token removed) comes back with the first settings that have it again, unless the
  // user picked one meanwhile (any pick, the stand-in too, forgets it): what was chosen, by trait.
  const takenAway = {};
  let fitting = false; // the lab's own setting of them, as a new payload comes
  const gone = []; // what these settings took away just now, in words, with what stands in for it
  const fitLab = (trait, value, fits, instead, words) => {
    const before = takenAway[trait];
    const wanted = before ?? value;
    delete takenAway[trait];
    if (fits(wanted)) return wanted;
    takenAway[trait] = wanted;
    if (before === undefined) gone.push(words(wanted, instead)); // said once, when it goes
    return instead;
  };
  for (const trait of ["stage", "head", "query"]) model.on(`change:${trait}`, () => fitting || delete takenAway[trait]);
  if (link.lab?.exampleOwn) {
    link.lab.config = Object.fromEntries([...CONFIG_KEYS, "causal", "bias"].map((k) => [k, teaching.config[k]]));
    link.lab.tokens = [...teaching.tokens];
  }
  const initialLab = link.lab || { config: { ...PRESETS.gqa.config }, tokens: [...PRESET_TOKENS], seed: 0, edits: new Map() };
  let pendingView = link.mode !== "teaching" ? link : null;
  // A mode's result that comes while another mode is on screen (the lab's, computed as a field it
  // was typed in lost the focus to another mode's button; a layer picked just before) is shown when
  // that mode is next: it replaced the view on screen, under the other mode's button and address.
  const arrived = {}; // mode -> the call that shows its result
  const whenShown = (owner, show) => (...args) => {
    if (mode === owner) return show(...args);
    arrived[owner] = () => show(...args);
    return "";
  };
  const editor = createLab({
    container: labBox,
    initial: initialLab,
    compute,
    editable: !STATIC,
    example: teaching,
    onPayload: whenShown("lab", (payload, { example } = {}) => {
      let view = { stage: model.get("stage"), head: model.get("head"), query: model.get("query"), all_queries: model.get("all_queries") };
      if (example) { // the teaching example picked: its own head and query, as its first view has them
        view = { ...view, head: 0, query: teaching.query };
        delete takenAway.head;
        delete takenAway.query;
      } else if (model.get("payload").model && !left.lab) {
        // the lab first opened from a real model: a head and a query index of another layer and
        // text would name other ones here; head 0 and the second token, as a link without them
        view = { ...view, head: 0, query: Math.min(1, payload.tokens.length - 1) };
      }
      refusedLabLink = null; // (the lab has a result: its link is written from it)
      if (pendingView?.mode === "lab") {
        // a link without a query: the second token, the first whose row under a causal mask has
        // more than itself to look at (as Explorer.from_config, and as the lab's button keeps the example's)
        const fitted = fitView(payload, { ...pendingView, query: pendingView.query ?? Math.min(1, payload.tokens.length - 1) });
        if (pendingView.lab?.damaged) fitted.problems.unshift(pendingView.lab.damaged);
        fitted.problems.unshift(...(pendingView.dropped ?? []));
        // (a static copy's notice of what of the link it could not show comes first)
        const said = [pendingView.notice, fitted.problems.length ? partlyUsed(fitted.problems) : ""].filter(Boolean);
        say(said.join(" ")); // (nothing, once settings refused by the link are mended)
        view = fitted.view;
        pendingView = null;
      }
      const ids = payload.page_stages.map((s) => s.id);
      const before = model.get("payload"); // whose stage titles and tokens name what goes
      const title = (p, id) => p.page_stages.find((s) => s.id === id)?.title ?? id;
      fitting = true;
      gone.length = 0;
      try {
        model.set("payload", payload);
        model.set("stage", fitLab("stage", view.stage, (stage) => ids.includes(stage), stageBefore(takenAway.stage ?? view.stage, ids), (stage, instead) => `the ${title(before, stage)} stage (${title(payload, instead)} is shown)`));
        model.set("head", fitLab("head", view.head, (head) => head < payload.config.n_heads, 0, (head) => `head ${head} (head 0 is shown)`));
        model.set("query", fitLab("query", view.query, (query) => query < payload.tokens.length, 0, (query) => `the query at position ${query}${before.tokens[query] === undefined ? "" : ` “${echo(before.tokens[query])}”`} (“${echo(payload.tokens[0])}” is shown)`));
        model.set("all_queries", Boolean(view.all_queries));
      } finally {
        fitting = false;
      }
      writeLink(model, editor.lab);
      // said with the lab's status: a change that takes away what is shown says so
      // (a view brought from the teaching example or a real model, not the lab's, is not said)
      if (!gone.length || before === teaching || before.model) return "";
      return `Not in these settings: ${gone.join("; ")}. ${gone.length === 1 ? "It comes" : "Each comes"} back with the first settings that have it.`;
    }),
  });
  // values=example on other settings or tokens (a link edited by hand): said, not opened on the seed's values in silence
  if (editor.exampleLeftOut) link.dropped.push("values=example, as its settings or its number of tokens are not the teaching example's (left out)");

  let modelsStarted = false;
  // a static copy has real models only when layers were written into it (export-site --model)
  const held = STATIC?.models;
  if (!STATIC || held) {
    // (its query is dropped there, set to null, where the copy shows another model or text than the link's)
    const modelLink = link.model ? { ...link.model, head: link.head, query: link.query, autostart: true } : {};
    models = createModels({
      container: modelBox,
      initial: modelLink,
      ...(held && { ask: staticServer(held), fixed: { text: held[0].text, layers: Object.fromEntries(held.map((m) => [m.name, m.layers])) } }),
      getView: () => ({ stage: model.get("stage"), head: model.get("head"), query: model.get("query"), all: model.get("all_queries") }),
      onAhead: (payload, head) => model.set("upcoming", { payload, head }), // the explorer builds its view while idle
      onRefined: (payload) => model.set("refined", { payload }), // the explorer writes its numbers on screen again
      onPayload: whenShown("model", (payload, request) => {
        const ids = payload.page_stages.map((s) => s.id);
        // a link's stage, query and "all queries" (its head the models' part checked): a stage
        // this layer lacks falls back to the one before it, said with the link's other problems
        // (a query, a position or a token's name, is found here, on the tokens the server sent)
        const view = pendingView?.mode === "model" ? fitView(payload, { ...pendingView, head: request.head, query: modelLink.query ?? null }) : null;
        if (view) stageProblems = view.problems;
        const stage = view ? view.view.stage : model.get("stage");
        pendingView = null;
        model.set("payload", payload);
        model.set("stage", ids.includes(stage) ? stage : stageBefore(stage, ids));
        model.set("head", request.head);
        model.set("query", view ? view.view.query : payload.query);
        if (view) model.set("all_queries", Boolean(view.view.all_queries));
        writeLink(model, editor.lab);
      }),
    });
  }

  let stageProblems = []; // what a model link's stage could not be, once its layer is traced

  // each mode's view when the user went to another mode: shown again on coming back (a teacher
  // who shows the lab mid-lesson finds the teaching example at the stage, head and query left)
  const VIEW_TRAITS = ["payload", "stage", "head", "query", "all_queries"];
  const ownPayload = {
    teaching: (payload) => payload === teaching,
    lab: (payload) => payload !== teaching && !payload.model,
    model: (payload) => Boolean(payload.model),
  };
  const left = {}; // mode -> its view when last left
  let opened = false; // the link's mode opened: before it, the page held the teaching example's first view, never shown
  function setMode(next) {
    if (opened && next !== mode && ownPayload[mode]?.(model.get("payload"))) left[mode] = Object.fromEntries(VIEW_TRAITS.map((k) => [k, model.get(k)]));
    opened = true;
    restoring = true; // (a mode's own view back is no change of the user's: the notice stays)
    if (left[next] && !ownPayload[next](model.get("payload"))) for (const k of VIEW_TRAITS) model.set(k, left[next][k]);
    restoring = false;
    mode = next;
    const late = arrived[next]; // its result that came while it was away, over the view it was left at
    delete arrived[next];
    late?.();
    teachingButton.setAttribute("aria-pressed", String(mode === "teaching"));
    labButton.setAttribute("aria-pressed", String(mode === "lab"));
    modelButton.setAttribute("aria-pressed", String(mode === "model"));
    labBox.hidden = mode !== "lab";
    modelBox.hidden = mode !== "model";
    showNotice();
    showExplorer();
    // "Reset example" restores the teaching example; elsewhere the mode buttons lead back to it
    for (const reset of app.querySelectorAll(".mha-explorer button.reset")) reset.hidden = mode !== "teaching";
    if (mode === "teaching") {
      if (model.get("payload") !== teaching) { // never left: its first view
        model.set("payload", teaching);
        model.set("stage", teaching.page_stages[0].id);
        model.set("head", 0);
        model.set("query", teaching.query);
        model.set("all_queries", false); // the first view, as Reset example gives it
      }
      writeLink(model, editor.lab);
    } else if (mode === "model") {
      writeLink(model, editor.lab);
      if (!modelsStarted) {
        modelsStarted = true;
        models.start().then((ok) => {
          const problems = [...(link.mode === "model" ? link.dropped ?? [] : []), ...models.linkProblems(), ...stageProblems];
          if (ok && problems.length) say(partlyUsed(problems));
          if (!ok && pendingView) {
            pendingView = null;
            // the model panel said why; it is hidden with the teaching example, so the notice says it again
            const why = models.error() || "its model, layer or text was rejected.";
            // a text cut inside a character (%E0%A4) may be what was refused: the damage is said too
            const damage = link.model?.damaged ? ` ${link.model.damaged[0].toUpperCase()}${link.model.damaged.slice(1)}.` : "";
            // a text refused is not lost: it waits in the model's box, to be mended there
            const kept = models.textRefused() ? " The link's text is kept in the Real model box, to change there." : "";
            say(`This link could not be used. ${why[0].toUpperCase()}${why.slice(1)}${damage} Showing the teaching example instead.${kept}`, "teaching");
            setMode("teaching");
          }
        });
      }
    } else {
      // its own view back (settings refused since, perhaps: the last that computed are shown): its address too
      if (ownPayload.lab(model.get("payload"))) writeLink(model, editor.lab);
      if (refusedLabLink && !ownPayload.lab(model.get("payload")) && location.hash.slice(1) !== refusedLabLink) {
        history.pushState({ modeLinks: { ...modeLinks } }, "", `#${refusedLabLink}`);
        ownHash = location.hash;
      }
      // the lab's messages on the fields it refused, each without its full stop (a notice has its own)
      const labMessages = (selector) => [...labBox.querySelectorAll(selector)].map((e) => e.textContent.trim().replace(/\.+$/, "")).filter(Boolean);
      editor.start().then((ok) => {
        if (!ok && STATIC) {
          // a copy cannot compute the settings it was given (a link made on a server), nor let them be
          // edited: the lab the link asked for, on the preset of the link's configuration if there is
          // one (at the link's view), else GQA's first view, with what the copy could not show said
          const { id } = againstPresets(editor.lab);
          const notice = staticLabNotice(editor.lab, labMessages("[id^='lab-error-']"), pendingView.query !== null, Boolean(link.lab?.fromExample));
          // what of the link was left out (a d_head it gives none of, say why) is said with it: by the
          // preset's view where there is one, else here
          const dropped = !id && pendingView.dropped?.length ? ` ${partlyUsed(pendingView.dropped)}` : "";
          pendingView = id ? { ...pendingView, query: sameTokens(editor.lab) ? pendingView.query : null, notice } : null;
          say(notice + dropped);
          editor.loadPreset(id ?? "gqa");
        } else if (!ok && pendingView) {
          // the lab stays open on the link's settings, each refused one marked with what to change,
          // and the address keeps the link until they are; the link's stage, head and query wait
          // for the first settings that compute (pendingView): nothing the link held is lost. The
          // notice gathers the lab's messages (each without its full stop: the notice has its own).
          // (mid-sentence there: "Type at least one token" is "type …"; a name such as W_Q or MQA keeps its case)
          const why = labMessages(".lab-error, [id^='lab-error-']").map((m) => m.replace(/^[A-Z](?=[a-z])/, (c) => c.toLowerCase()));
          // (what of the link was left out is said now, not once the settings are mended)
          const dropped = pendingView.dropped?.length ? ` ${partlyUsed(pendingView.dropped)}` : "";
          pendingView = { ...pendingView, dropped: [] };
          // the link is the lab's view until its settings are mended: the address it gets back when
          // the lab is opened again from another mode, and the lab's link in the tab's history
          refusedLabLink = location.hash.slice(1);
          modeLinks.lab = refusedLabLink;
          history.replaceState({ ...history.state, modeLinks: { ...modeLinks } }, "", location.hash);
          say(`This link's lab settings were rejected (${why.join("; ") || "see the Attention lab"}). They are in the lab below: change the ones marked, and the lab computes them.${dropped}`);
        }
      });
    }
  }

  // Real model mode shows a model's layer only: until the first trace, the explorer waits hidden
  // (the model panel says to press Trace) rather than showing the teaching example under it
  // The lab shows its own results only: until it has one (a link's settings refused), the explorer
  // waits hidden, as the lab's messages say what to fix, rather than showing the teaching example
  // or a real model's layer.
  function showExplorer() {
    const payload = model.get("payload");
    app.hidden = (mode === "model" && !payload.model) || (mode === "lab" && (payload === teaching || Boolean(payload.model)));
    printAll.hidden = app.hidden; // no stages to print until the mode has its own
  }
  model.on("change:payload", showExplorer);

  // whether the page has shown the mode since it loaded (its view is here to show again)
  const shownHere = (next) =>
    next === mode || Boolean(left[next]) || ownPayload[next](model.get("payload")) || (next === "model" && Boolean(models?.request())) || (next === "lab" && refusedLabLink !== null);
  app.addEventListener("click", (event) => event.target.closest?.("button.reset") && (resetStep = true), true); // (before the reset)
  // the teaching example is always in the page: left in another page of this tab (a Back or Forward
  // reloaded the page on another mode's link), it comes back as its last link has it, without a reload
  teachingButton.addEventListener("click", () => {
    if (!shownHere("teaching") && modeLinks.teaching) left.teaching = { payload: teaching, ...fitView(teaching, readLink(`#${modeLinks.teaching}`)).view };
    setMode("teaching");
  });
  labButton.addEventListener("click", () => reopen("lab", shownHere("lab")) || setMode("lab"));
  modelButton.addEventListener("click", () => reopen("model", shownHere("model")) || setMode("model"));
  // a real model's payload holds one head: asking for another fetches it. One that cannot be
  // fetched gives the view back to the head whose stage is on screen (the message says why).
  let headHeld = model.get("head"); // the last head asked for that the payload held
  model.on("change:head", () => {
    const payload = model.get("payload");
    const asked = model.get("head");
    if (!(mode === "model" && payload.model && payload.stages.q.heads && !payload.stages.q.heads.includes(asked))) {
      headHeld = asked;
      return;
    }
    const back = headHeld;
    models.head(asked).then((shown) => {
      if (shown === null && model.get("head") === asked && model.get("payload").stages.q.heads?.includes(back)) model.set("head", back);
    });
  });
  model.on("change:payload", () => {
    const heads = model.get("payload")?.stages?.q?.heads;
    if (!heads || heads.includes(model.get("head"))) headHeld = model.get("head"); // (a head fetched, now here)
  });
  // The pointer resting on a button that picks a head (a thumbnail, or a head's name in the head
  // outputs), the focus reaching it, or a press on it, usually comes a hundred milliseconds or
  // more before the click: long enough to fetch that head's arrays. (Resting: 80 ms, so that a
  // pointer sweeping across the row fetches nothing; 150 ms on a menu's option, which a pointer
  // runs down while reading the list.) With the focus on the head picker, the
  // arrow keys step to the next or previous head: those two are fetched.
  const onHeadPicker = () => document.activeElement?.dataset.control === "head";
  const neighbours = () => {
    const n = model.get("payload").config.n_heads;
    for (const step of [1, n - 1]) models.prefetch((model.get("head") + step) % n);
  };
  // (An option of the head menu is one too, where the browser makes its list of page elements.)
  const PICKS_HEAD = ".thumb-button, button[data-pick-head], select[data-control=head] option";
  const pickerOf = (event) => (mode === "model" && models ? event.target.closest?.(PICKS_HEAD) : null);
  const headOf = (picker) => Number(picker.dataset.head ?? picker.dataset.pickHead ?? picker.value);
  let resting = null;
  app.addEventListener("pointerover", (event) => {
    const button = pickerOf(event);
    if (!button) return;
    clearTimeout(resting);
    resting = setTimeout(() => models.prefetch(headOf(button)), button.tagName === "OPTION" ? 150 : 80);
  });
  // a press comes some 100 ms before its click (a touch, or a mouse clicked without resting)
  app.addEventListener("pointerdown", (event) => {
    const button = pickerOf(event);
    if (!button) return;
    clearTimeout(resting);
    models.prefetch(headOf(button));
  });
  app.addEventListener("pointerout", (event) => {
    const button = pickerOf(event);
    if (button && !button.contains(event.relatedTarget)) clearTimeout(resting);
  });
  app.addEventListener("focusin", (event) => {
    const button = pickerOf(event);
    clearTimeout(resting);
    // an option the keys pass over in the open list is fetched once the focus rests there (a key
    // held down would ask for every head)
    if (button?.tagName === "OPTION") resting = setTimeout(() => models.prefetch(headOf(button)), 150);
    else if (button) models.prefetch(headOf(button));
    else if (mode === "model" && models && onHeadPicker()) neighbours();
  });
  model.on("change:head", () => {
    if (mode === "model" && models && onHeadPicker()) neighbours();
  });
  for (const trait of ["stage", "head", "query", "all_queries"]) model.on(`change:${trait}`, () => writeLink(model, editor.lab));
  // (another layer, text, model or edit is a new payload: what was said of the link's no longer stands)
  for (const trait of ["payload", "stage", "head", "query", "all_queries"])
    model.on(`change:${trait}`, () => noticeView !== null && !restoring && noticeMode === mode && (trait === "payload" || viewKey() !== noticeView) && say(""));
  for (const trait of ["stage", "head", "query", "all_queries"]) model.on(`change:${trait}`, () => models?.viewChanged());
  // a handout says where its view lives: the link reproduces it (the lab's settings and edits too).
  // Written now, not when idle (a print right after a change); a copy opened from a file gives its
  // view's part only, not the folders of the computer it was printed on.
  addEventListener("beforeprint", () => {
    if (location.hash === ownHash) writeLinkNow(model, mode, editor.lab);
    const local = location.protocol === "file:";
    document.getElementById("print-link").textContent = local
      ? `This view: ${location.pathname.split("/").pop()}${location.hash} in this copy of the explorer`
      : `This view: ${location.href}`;
  });
  model.on("change:payload", () => {
    // "Reset example" puts the teaching payload back: follow it into teaching mode
    if (model.get("payload") === teaching && mode !== "teaching") setMode("teaching");
  });
  setMode(link.mode);
}

main();

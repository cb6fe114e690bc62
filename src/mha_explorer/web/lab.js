// The attention lab's editor: configuration, tokens, a seed and cell-by-cell values.
// It never computes attention: the page's compute callback asks the server for a trace (POST
// api/trace), and the payload goes to the explorer. A bad value is reported at its field; the
// last good trace stays.

import { echo, h, sup, visibleToken } from "./explorer.js";

export const LAB_LIMITS = { tokens: 64, width: 64, heads: 64, tokenChars: 64 }; // as the server checks them (schema.LAB_MAX_* and MAX_TOKEN_CHARS)

export const PRESETS = {
  mha: { title: "MHA: 4 heads", config: { d_model: 8, n_heads: 4, n_kv_heads: 4, d_head: 2, d_v: 2, causal: false, bias: false } },
  causal: { title: "Causal MHA", config: { d_model: 8, n_heads: 4, n_kv_heads: 4, d_head: 2, d_v: 2, causal: true, bias: false } },
  gqa: { title: "Causal GQA: 4 query heads, 2 K/V heads", config: { d_model: 8, n_heads: 4, n_kv_heads: 2, d_head: 2, d_v: 2, causal: true, bias: false } },
  mqa: { title: "Causal MQA: 4 query heads, 1 K/V head", config: { d_model: 8, n_heads: 4, n_kv_heads: 1, d_head: 2, d_v: 2, causal: true, bias: false } },
};
export const PRESET_TOKENS = ["the", "cat", "sat", "on", "the", "mat"];
// config holds every setting of given (a preset's or the teaching example's configuration)
const holds = (config, given) => Object.entries(given).every(([key, value]) => config[key] === value);
const presetOf = (config) => Object.keys(PRESETS).find((id) => holds(config, PRESETS[id].config)) ?? "";

const CONFIG_FIELDS = [ // name (its label too), smallest, largest
  ["d_model", 1, LAB_LIMITS.width],
  ["n_heads", 1, LAB_LIMITS.heads],
  ["n_kv_heads", 1, LAB_LIMITS.heads],
  ["d_head", 1, LAB_LIMITS.width],
  ["d_v", 1, LAB_LIMITS.width],
];
const SEED_MAX = 2 ** 32 - 1; // seeds are 32-bit
const BLOCK = 8; // columns per block of the value grid: what is drawn or skipped together
const NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;
// An edit's key ("W_K:1,2,0", as a link writes it) in words, as the grids name their cells:
// "W_K K/V head 1, row 2, column 0"; and an array's shape: "2 K/V heads of 8 × 2". Under a
// config where each head has its own K and V (MHA), a head is a head: "W_K head 1".
const headWord = (name, config) => (name.endsWith("Q") || (config && config.n_kv_heads === config.n_heads) ? "head" : "K/V head");
const INDICES = { x: 2, W_Q: 3, W_K: 3, W_V: 3, W_O: 2, b_Q: 2, b_K: 2, b_V: 2, b_O: 1 }; // an array's, in a key
function cellName(key, config) {
  const [name, index] = key.split(":");
  const at = index.split(",");
  if (at.length !== INDICES[name]) return `${name}[${index}]`; // a link's key of other indices than the array has
  const head = /^[Wb]_[QKV]$/.test(name) ? `${headWord(name, config)} ${at.shift()}, ` : "";
  return `${name} ${head}${at.length === 2 ? `row ${at[0]}, ` : ""}column ${at.at(-1)}`;
}
function shapeName(name, shape, config) {
  if (!/^[Wb]_[QKV]$/.test(name)) return shape.join(" × ");
  return `${shape[0]} ${headWord(name, config)}${shape[0] === 1 ? "" : "s"} of ${shape.slice(1).join(" × ")}`;
}
const WHOLE = /^[-+]?\d+(\.0*)?$/; // "8.0" is 8, as a checkpoint's config may write it
// A field's text as a whole number; NaN for anything else (empty, "2,5", "2.5", "abc"), which the checks
// then name. Text fields, not number fields: a browser's number field reads "2,5" as 25 and drops
// letters typed into it, so neither could be said back to the user.
const wholeOf = (text) => (WHOLE.test(text.trim()) ? Number(text.trim()) : NaN);
function wholeField({ lo, hi, value, ...attrs }) {
  const input = h("input", { ...attrs, type: "text", inputmode: "numeric", autocomplete: "off", spellcheck: "false", value });
  // ↑ and ↓ step the number, as in a number field, within its range
  input.addEventListener("keydown", (event) => {
    const step = { ArrowUp: 1, ArrowDown: -1 }[event.key];
    const v = wholeOf(input.value);
    if (!step || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey || Number.isNaN(v)) return; // Shift+↑ selects text
    event.preventDefault();
    input.value = String(Math.min(hi, Math.max(lo, v + step)));
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });
  return input;
}

// Parse one cell as the user typed it: a finite number, or a message saying what to type.
function parseCell(text) {
  const typed = text.trim().replaceAll("\u2212", "-"); // a minus sign as typeset (copied from a paper) is a minus
  if (typed === "") return { error: "Empty: type a number such as 0.5." };
  // "1,500" or "-2,000,000": a thousands comma, or (one comma) a decimal one: both readings said
  if (/^[-+]?[1-9]\d{0,2}(,\d{3})+$/.test(typed)) {
    const decimal = typed.split(",").length === 2 ? ` (or ${typed.replace(",", ".")}, if the comma is a decimal one)` : "";
    return { error: `“${typed}” has a comma: write ${typed.replaceAll(",", "")}, with no comma${decimal}.` };
  }
  if (/^[-+]?\d+,\d+$/.test(typed)) return { error: `“${typed}” has a decimal comma: write it with a point, ${typed.replace(",", ".")}.` };
  if (!NUMBER.test(typed)) return { error: `“${echo(typed)}” is not a number: type one such as 0.5 or -1.` };
  const value = Number(typed);
  // below the smallest number a float64 holds (about 5e-324) a value reads as 0: said, not done in silence
  if (value === 0 && /[1-9]/.test(typed.split(/[eE]/)[0])) return { error: `${echo(typed)} is too small for a computer's numbers (it would be 0): type 0, or a larger one, such as 1e-300.` };
  // beyond it two such values make scores past float64's largest (about 1.8e308); values too large
  // only together are refused by the server (its overflow check), and said at the cell
  if (!(Math.abs(value) < 1e100)) return { error: `${echo(typed)} is too large to compute with: keep it under 1e100.` };
  return { value };
}

// The arrays a config needs, by name, with their shapes (as in the Python weights module).
function arrayShapes(config, n) {
  const { d_model, n_heads, n_kv_heads, d_head, d_v } = config;
  const shapes = {
    x: [n, d_model],
    W_Q: [n_heads, d_model, d_head],
    W_K: [n_kv_heads, d_model, d_head],
    W_V: [n_kv_heads, d_model, d_v],
    W_O: [n_heads * d_v, d_model],
  };
  if (config.bias) Object.assign(shapes, { b_Q: [n_heads, d_head], b_K: [n_kv_heads, d_head], b_V: [n_kv_heads, d_v], b_O: [d_model] });
  return shapes;
}

function inRange(index, shape) {
  return index.length === shape.length && index.every((i, k) => Number.isInteger(i) && i >= 0 && i < shape[k]);
}

// Edits travel in links as "name:i,j,k=value;…".
export function encodeEdits(edits) {
  return [...edits].map(([key, value]) => `${key}=${value}`).join(";");
}

// A link's edits; one that cannot be read is left out, and said in `dropped` (the others are kept).
// the largest shape of each matrix the lab makes (its limits): an edit beyond it fits no settings
const { tokens: T, width: W, heads: H } = LAB_LIMITS;
const LARGEST = { x: [T, W], W_Q: [H, W, W], W_K: [H, W, W], W_V: [H, W, W], W_O: [H * W, W], b_Q: [H, W], b_K: [H, W], b_V: [H, W], b_O: [W] };
export function decodeEdits(text, dropped = []) {
  const edits = new Map();
  if (!text) return edits;
  for (const part of text.split(";")) {
    const match = /^(x|W_Q|W_K|W_V|W_O|b_Q|b_K|b_V|b_O):(\d+(?:,\d+)*)=(.+)$/.exec(part);
    const parsed = match && parseCell(match[3]);
    const at = match ? match[2].split(",").map(Number) : [];
    const largest = match && LARGEST[match[1]];
    if (!match) dropped.push(`the edit “${echo(part, 30)}” is not of the form name:i,j=value (left out)`);
    else if (at.length !== largest.length) dropped.push(`the edit of ${match[1]} at ${match[2]} names ${at.length} ${at.length === 1 ? "index" : "indices"}, where ${match[1]} takes ${largest.length} (left out)`);
    else if (at.some((i, k) => i >= largest[k])) dropped.push(`the edit of ${match[1]} at ${match[2]} lies outside the largest ${match[1]} the lab makes, ${largest.join(" × ")}${largest.length > 1 ? "" : " numbers"} (left out)`);
    else if (parsed.error) dropped.push(`the edit of ${match[1]} at ${match[2]}: ${parsed.error.replace(/\.+$/, "")} (left out)`);
    else {
      const key = `${match[1]}:${match[2]}`;
      // the same number twice (a link edited by hand): the last is used, as the lab would keep it, and said
      if (edits.has(key) && edits.get(key) !== parsed.value) dropped.push(`it edits ${match[1]} at ${match[2]} twice, to ${edits.get(key)} and to ${parsed.value} (${parsed.value} is used)`);
      edits.set(key, parsed.value);
    }
  }
  return edits;
}

// d_head and d_v do not follow d_model: most real layers split the width among the heads, some do not.
function widthsNote({ d_model, n_heads, d_head, d_v }) {
  const concat = n_heads * d_v;
  if (n_heads * d_head === d_model && concat === d_model) return [`n_heads × d_head = ${n_heads} × ${d_head} = ${d_model} = d_model: the heads split the model's width, as in most real layers.`];
  const joined = concat === d_model
    ? [`n_heads × d_v = ${n_heads} × ${d_v} = ${d_model} = d_model, but d_head ${d_head} is its own: each head's q and k are ${d_head} wide.`]
    : [`n_heads × d_v = ${n_heads} × ${d_v} = ${concat}, not d_model ${d_model}: concat is ${concat} wide, and `, ...sup("W", "O"), ` maps it back to ${d_model}.`];
  return [...joined, " Most real layers split the width among the heads (d_head = d_v = d_model / n_heads); some do not (Gemma 3 270M: 4 heads of 256 on a width of 640). d_head and d_v stay as typed when n_heads changes."];
}

// Client-side checks before asking the server; the server checks again and says the same.
function checkConfig(config, tokens) {
  const errors = {};
  for (const [name, lo, hi] of CONFIG_FIELDS) {
    const v = config[name];
    if (!Number.isInteger(v)) errors[name] = `${name} must be a whole number from ${lo} to ${hi}.`;
    else if (v < lo || v > hi) errors[name] = `${name} ${v} is out of range: type a whole number from ${lo} to ${hi}.`; // as a blank or a typo is told
  }
  if (!errors.n_heads && !errors.n_kv_heads) {
    // errors.pair: a rule of the two together (the editor puts it under the one changed)
    const divisors = Array.from({ length: config.n_heads }, (_, i) => i + 1).filter((d) => config.n_heads % d === 0);
    if (config.n_kv_heads > config.n_heads) errors.pair = `n_kv_heads=${config.n_kv_heads} is more than n_heads=${config.n_heads}: a layer has at most as many K/V heads as query heads. Choose n_kv_heads from ${divisors.join(", ")}; or make n_heads a multiple of ${config.n_kv_heads}.`;
    else if (config.n_heads % config.n_kv_heads) {
      errors.pair = `n_heads=${config.n_heads} is not a multiple of n_kv_heads=${config.n_kv_heads}: each K/V head serves as many query heads as the others. Choose n_kv_heads from ${divisors.join(", ")}; or make n_heads a multiple of ${config.n_kv_heads}.`;
    }
  }
  if (tokens.length < 1) errors.tokens = "Type at least one token.";
  else if (tokens.length > LAB_LIMITS.tokens) errors.tokens = `${tokens.length} tokens: the lab takes at most ${LAB_LIMITS.tokens}; remove ${tokens.length - LAB_LIMITS.tokens}.`;
  else {
    const long = tokens.find((t) => [...t].length > LAB_LIMITS.tokenChars); // characters, not UTF-16 units: 🐱 is one
    if (long) errors.tokens = `The token “${[...long].slice(0, 12).join("")}…” is ${[...long].length} characters long; a token has at most ${LAB_LIMITS.tokenChars}: shorten it, or split it with spaces.`;
  }
  return errors;
}

// The editor. `lab` holds { config, tokens, seed, edits }; `compute(lab)` returns a promise of
// { payload } or { errors: {field: message} } and never throws.
// example: the teaching example's payload, offered as a preset with its own values (as edits
// over the seed's), so that one of its numbers can be changed; none in a static copy.
// onPayload(payload, { example }) shows each result (example: the teaching example's preset was
// just picked); what it returns, if anything, is said in the status line (a head or stage the
// settings took from the view).
export function createLab({ container, initial, compute, onPayload, editable, example }) {
  const fields = [...CONFIG_FIELDS.map(([name]) => name), "causal", "bias"];
  const own = editable && example ? { config: Object.fromEntries(fields.map((name) => [name, example.config[name]])), tokens: [...example.tokens], edits: editsOf(arraysOf(example)) } : null;
  // the example's values while they are the lab's (from its preset until new values are drawn or
  // another preset is picked): edits over the seed's values, kept whatever the seed, and not the user's
  let fromExample = null;
  // the lab is the example, some of its values perhaps changed, while it has its configuration and
  // as many tokens (exampleShape: a token renamed takes the example's row of x) and holds a value
  // at every place the example has one
  const exampleShape = () => fields.every((name) => lab.config[name] === own.config[name]) && lab.tokens.length === own.tokens.length;
  const onExample = () => Boolean(fromExample) && exampleShape() && [...own.edits.keys()].every((key) => lab.edits.has(key));
  const presetNow = () => (onExample() ? "example" : presetOf(lab.config));
  // a value the user changed: an edit that is not the example's own value there
  const userEdit = (key, edits = lab.edits) => edits.has(key) && fromExample?.get(key) !== edits.get(key);
  const lab = { config: { ...initial.config }, tokens: [...initial.tokens], seed: initial.seed, edits: new Map(initial.edits) };
  // a link to the example's values (values=example), some of them perhaps changed, opens as the
  // example picked from the menu: only the changed ones are the user's (counted, marked, undone to
  // the example's). The link holds those alone: with all of the example's 80 values it ran to
  // 3,500 characters, above a printed handout's view.
  // (on other settings or tokens, a link edited by hand, the example's values are of no use: left out)
  const exampleLeftOut = Boolean(own && initial.fromExample && !exampleShape());
  if (own && initial.fromExample && !exampleLeftOut) lab.edits = new Map([...own.edits, ...lab.edits]);
  // what a link writes of the values: the example's, and the user's edits over them; or every edit
  Object.defineProperty(lab, "linked", { get: () => (onExample() ? { fromExample: true, edits: new Map([...lab.edits].filter(([key]) => userEdit(key))) } : { fromExample: false, edits: lab.edits }) });
  if (own) {
    fromExample = own.edits;
    if (!onExample()) fromExample = null;
  }
  // edits that do not fit the configuration (a bias unchecked, fewer tokens or heads): set aside
  // for this session (not in the link), and used again by the first configuration they fit
  let parked = new Map();
  const parkedFrom = new Map(); // key -> the tokens and d_v under which it was last in use

  let base = null; // the arrays drawn from the seed for the current config, tokens and seed
  let current = null; // the name of the matrix being edited
  const messages = {};
  const fieldError = (name) => {
    const node = h("span", { class: "field-error", id: `lab-error-${name}`, role: "alert" });
    messages[name] = node;
    return node;
  };

  const tokensInput = h("input", { id: "lab-tokens", type: "text", value: lab.tokens.join(" "), "aria-describedby": "lab-error-tokens", spellcheck: "false" });
  // n_heads and n_kv_heads are judged together: the message of the pair is under either one, and
  // both fields are read with both messages
  const describedBy = (name) => (name === "n_heads" || name === "n_kv_heads" ? "lab-error-n_heads lab-error-n_kv_heads" : `lab-error-${name}`);
  const configInputs = Object.fromEntries(
    CONFIG_FIELDS.map(([name, lo, hi]) => [name, wholeField({ id: `lab-${name}`, lo, hi, value: lab.config[name], "aria-describedby": describedBy(name) })]),
  );
  const causal = h("input", { id: "lab-causal", type: "checkbox" });
  const bias = h("input", { id: "lab-bias", type: "checkbox" });
  causal.checked = lab.config.causal;
  bias.checked = lab.config.bias;
  const seedInput = wholeField({ id: "lab-seed", lo: 0, hi: SEED_MAX, value: lab.seed, "aria-describedby": "lab-error-seed" });
  const draw = h("button", { type: "button" }, "Draw new values");
  // back to the values before the user's edits (the seed's, or the teaching example's own)
  const undo = h("button", { type: "button", hidden: true }, "Undo my edits");
  const exampleOption = own ? h("option", { value: "example" }, "The teaching example, its own values") : null; // "with your edits" once the user changed one
  const presetSelect = h("select", { id: "lab-preset" }, h("option", { value: "" }, "Choose a preset…"), exampleOption, Object.entries(PRESETS).map(([id, p]) => h("option", { value: id }, p.title)));
  const matrixSelect = h("select", { id: "lab-matrix" });
  const gridCaption = h("p", { class: "grid-caption", id: "lab-grid-caption" });
  const gridBox = h("div", { class: "grid-box" }); // the scrolling box around the grid
  // Tab walks the grid cell by cell (up to 64 × 64): a keyboard user can jump past it to the explorer
  const skipGrid = h("button", { type: "button", class: "skip-grid" }, "Skip the grid: go to the explorer");
  skipGrid.addEventListener("click", () => document.querySelector("#app .controls select")?.focus());
  const status = h("p", { class: "lab-status", role: "status" });
  const sayAlso = (words) => {
    if (words) status.textContent = [status.textContent, words].filter(Boolean).join(" ");
  };
  const widths = h("p", { class: "lab-widths field-note" }); // how the heads' widths add up to d_model, or do not
  const general = h("p", { class: "lab-error", role: "alert" });

  const field = (id, label, input) => h("div", { class: "field" }, h("label", { for: id }, label), input);
  // a button with no label, level with the inputs beside it: an empty label's line stands over it
  const unlabelled = (button) => h("div", { class: "field" }, h("span", { class: "spacer", "aria-hidden": "true" }, "\u00a0"), button);
  // the values to edit: hidden until the lab has a result (a link refused has none to edit).
  // Folded away by their button (a projector's screen, where they pushed the figure below it),
  // they stay as they are, edits and all, until shown again.
  const valuesBody = h("div", { id: "lab-values-body" }, h("div", { class: "lab-row" }, field("lab-matrix", editable ? "Edit the values of" : "Values of", matrixSelect), unlabelled(undo)), gridCaption, skipGrid, gridBox);
  const valuesToggle = h("button", { type: "button", class: "values-toggle", "aria-expanded": "true", "aria-controls": "lab-values-body" }, "Hide the values");
  valuesToggle.addEventListener("click", () => {
    const open = valuesBody.hidden;
    valuesBody.hidden = !open;
    valuesToggle.setAttribute("aria-expanded", String(open));
    valuesToggle.textContent = open ? "Hide the values" : "Show the values (X and the weights) to edit them";
  });
  const valuesPart = h("div", { class: "lab-values", hidden: true }, h("div", { class: "lab-row" }, valuesToggle), valuesBody);
  container.replaceChildren(
    ...[
    h("h2", {}, "Attention lab"),
    editable ? null : h("p", { class: "lab-static" }, "This is a static copy of the explorer: editing needs the server (run mha-explorer serve). The presets below can still be stepped through."),
    h(
      "div",
      { class: "lab-row" },
      field("lab-preset", "Preset", presetSelect),
      h("div", { class: "field wide" }, h("label", { for: "lab-tokens" }, "Tokens (separated by spaces)"), tokensInput, fieldError("tokens")),
    ),
    // each setting's message follows it: below the whole row on a wide screen, right under the
    // setting's own line on a phone (the stylesheet orders them), not a wrapped row further down
    h(
      "div",
      { class: "lab-row settings" },
      CONFIG_FIELDS.map(([name]) => [field(`lab-${name}`, name, configInputs[name]), fieldError(name)]),
      h("div", { class: "field check" }, h("label", { for: "lab-causal" }, "Causal mask"), causal),
      h("div", { class: "field check" }, h("label", { for: "lab-bias" }, "Bias"), bias),
      field("lab-seed", "Seed", seedInput),
      fieldError("seed"),
      unlabelled(draw),
    ),
    widths,
    general,
    valuesPart,
    status,
    ].filter(Boolean),
  );
  if (!editable) {
    // a static copy: every value can be read (the matrix chooser stays), none changed
    for (const input of [tokensInput, ...Object.values(configInputs), causal, bias, seedInput, draw]) input.disabled = true;
  }

  let shown = false; // whether a result of the lab is on screen
  // the form's messages only: a bad cell keeps its text and its message until it is corrected
  function clearErrors() {
    for (const node of Object.values(messages)) node.textContent = "";
    general.textContent = "";
    for (const input of [tokensInput, ...Object.values(configInputs), seedInput]) input.removeAttribute("aria-invalid");
  }

  function showErrors(errors) {
    for (const [name, message] of Object.entries(errors)) {
      const key = name.replace(/^config\./, "");
      if (messages[key]) {
        messages[key].textContent = message;
        (configInputs[key] || (key === "tokens" ? tokensInput : key === "seed" ? seedInput : null))?.setAttribute("aria-invalid", "true");
      } else {
        // once the lab has shown a result, it stays; before that (a link refused) there is none
        general.textContent = `${name === "config" ? "" : name + ": "}${message.replace(/\.?$/, ".")}${shown ? " The last good result stays on screen." : ""}`;
      }
    }
  }

  function readForm() {
    const config = Object.fromEntries(CONFIG_FIELDS.map(([name]) => [name, wholeOf(configInputs[name].value)]));
    config.causal = causal.checked;
    config.bias = bias.checked;
    const tokens = tokensInput.value.split(/\s+/).filter(Boolean);
    const seed = wholeOf(seedInput.value); // empty is not 0
    return { config, tokens, seed };
  }

  // Runs can overlap (a quick edit while the last one computes); only the newest one lands.
  // "Computing…" shows only when a run takes long enough to notice: a quick edit repaints the
  // figure and nothing else (a frame of the whole page while the server works costs it time).
  let latest = 0;
  // the edits of the newest run, until it lands or is refused: a cell typed meanwhile builds on
  // them, not on the last that landed (which would drop the cells typed while a run computed)
  let asked = null;
  async function run(next, options = {}) {
    const ticket = ++latest;
    asked = next.edits;
    container.dataset.busy = "true";
    const slow = setTimeout(() => {
      if (ticket === latest) status.textContent = "Computing…";
    }, 300);
    try {
      return await runOnce(next, options, () => ticket === latest);
    } finally {
      clearTimeout(slow);
      if (ticket === latest) {
        asked = null;
        delete container.dataset.busy;
        if (status.textContent === "Computing…") status.textContent = "";
      }
    }
  }

  let rejected = null; // what the server said of the last values it refused (edits it cannot compute with)
  let lastRun = null; // formKey of the settings last run: what a field typed differs from
  const formKey = ({ config, tokens, seed }) => JSON.stringify([CONFIG_FIELDS.map(([name]) => config[name]), config.causal, config.bias, tokens, seed]);
  // the widths line of the settings in use, hidden where they could not be (see runOnce)
  const restoreWidths = () => {
    widths.replaceChildren(...widthsNote(lab.config));
    widths.hidden = Object.values(messages).some((node) => node.textContent);
  };
  async function runOnce(next, { redraw, fromCell, changed, example: picked } = {}, isLatest) {
    clearErrors();
    rejected = null;
    lastRun = formKey(next);
    if (widths.textContent === TYPED) restoreWidths(); // what was typed is run now: the line says what it said
    const errors = formErrors(next);
    // n_heads and n_kv_heads must fit together: the message goes under the one just changed,
    // and both are marked
    if (errors.pair) {
      errors[changed === "n_heads" ? "n_heads" : "n_kv_heads"] = errors.pair;
      delete errors.pair;
      for (const name of ["n_heads", "n_kv_heads"]) configInputs[name].setAttribute("aria-invalid", "true");
    }
    if (Object.keys(errors).length) {
      showErrors(errors);
      presetSelect.value = ""; // no preset is what the fields say (the last good one was shown beside a wrong field); picking one applies it
      widths.hidden = true; // it said how the last good widths add up, beside a field that now says another
      if (shown) status.textContent = "These settings were not used: the figure still shows the last good result.";
      return false;
    }
    const shapes = arrayShapes(next.config, next.tokens.length);
    if (redraw || !base || base.key !== baseKey(next)) {
      const result = await compute({ ...next, edits: new Map() });
      if (!isLatest()) return false;
      if (result.errors) {
        status.textContent = "";
        showErrors(result.errors);
        widths.hidden = true; // (as for a setting refused above)
        return false;
      }
      base = { key: baseKey(next), arrays: arraysOf(result.payload), payload: result.payload };
    }
    // keep every edit that still fits the new shapes, with those set aside that fit again; say
    // which did not
    const fitsShapes = (key) => {
      const [name, index] = key.split(":");
      return shapes[name] && inRange(index.split(",").map(Number), shapes[name]);
    };
    const aside = redraw ? new Map() : new Map([...parked].filter(([key]) => !next.edits.has(key)));
    const back = [...aside.keys()].filter(fitsShapes);
    const fits = new Map([...aside, ...next.edits].filter(([key]) => fitsShapes(key)));
    // a value typed while the settings were wrong is no edit when it is the one drawn; an edit
    // made before stays one, even where new settings (another seed) happen to draw its value
    const kept = new Map([...fits].filter(([key, value]) => value !== drawnAt(key) || (lab.edits.has(key) && !waitingValues.has(key)) || fromExample?.get(key) === value));
    // the edits dropped, each with the shape it missed: "x row 9, column 0 (x is 3 × 8)"
    const dropped = [...next.edits.keys()].filter((key) => !fits.has(key)).map((key) => {
      const name = key.split(":")[0];
      return `${cellName(key, next.config)} (${shapes[name] ? `${name} is ${shapeName(name, shapes[name], next.config)}` : `there is no ${name} here`})`;
    });
    // the edits kept at the same numbers, which now stand for something else: a row of x whose
    // token changed, a row of W^O (head i's component e is row i·d_v + e) under another d_v
    // (for a value coming back from aside, under which it was last in use; one that never was, as
    // a link's that did not fit, stood for nothing)
    const now = { tokens: lab.tokens, d_v: lab.config.d_v };
    // (none when new values replace them all: a preset's, or the seed's)
    const moved = redraw ? [] : [...kept.keys()].filter((key) => {
      const [name, index] = key.split(":");
      const row = Number(index.split(",")[0]);
      const from = lab.edits.has(key) ? now : parkedFrom.get(key);
      return from && ((name === "x" && from.tokens[row] !== undefined && from.tokens[row] !== next.tokens[row]) || (name === "W_O" && from.d_v !== next.config.d_v));
    });
    let payload = base.payload;
    if (kept.size) {
      const result = await compute({ ...next, edits: kept });
      if (!isLatest()) return false;
      if (result.errors) {
        status.textContent = "";
        if (!fromCell) showErrors(result.errors); // an edited cell says it at the cell
        rejected = result.errors;
        return false;
      }
      payload = result.payload;
    }
    Object.assign(lab, next, { edits: kept });
    parked = new Map([...aside, ...next.edits].filter(([key]) => !fitsShapes(key)));
    for (const key of parkedFrom.keys()) if (!parked.has(key)) parkedFrom.delete(key);
    for (const key of parked.keys()) if (!aside.has(key)) parkedFrom.set(key, now); // set aside now: it was typed for the view on screen
    forgetWaiting([...next.edits.keys()]); // those this run took (kept, or dropped as said below)
    valuesPart.hidden = false;
    widths.replaceChildren(...widthsNote(next.config));
    widths.hidden = false;
    presetSelect.value = presetNow(); // the preset this configuration is, if any
    const some = (keys) => (keys.length > 3 ? [...keys.slice(0, 3), `and ${keys.length - 3} more`] : keys).join("; ");
    const named = (keys) => keys.map((key) => cellName(key, next.config));
    // the user's edits moved, and the example's own values (its x rows under other tokens)
    const shownKeys = named(moved.filter((key) => userEdit(key, kept)));
    const example = moved.filter((key) => !userEdit(key, kept));
    // (the example's x by rows: each row is a token's)
    const exampleRows = [...new Set(example.filter((key) => key.startsWith("x:")).map((key) => Number(key.split(":")[1].split(",")[0])))];
    const exampleSaid = [...exampleRows.map((row) => `x row ${row} (“${now.tokens[row]}”'s) is now “${next.tokens[row]}”'s`), ...named(example.filter((key) => !key.startsWith("x:")))];
    const returned = named(back.filter((key) => kept.has(key)));
    // another seed draws new values under the edits, which stay (Draw new values asks before it replaces them)
    const stay = changed === "seed" ? [...kept.keys()].filter((key) => userEdit(key)).length : 0;
    status.textContent = [
      stay ? `${stay === 1 ? "Your edited value stays" : `Your ${stay} edited values stay`} over seed ${next.seed}'s values; Draw new values replaces ${stay === 1 ? "it" : "them"}.` : "",
      dropped.length ? `${dropped.length === 1 ? "An edited value does" : `${dropped.length} edited values do`} not fit this configuration; ${dropped.length === 1 ? "it is" : "they are"} set aside until ${dropped.length === 1 ? "it fits" : "they fit"} again: ${some(dropped)}.` : "",
      returned.length ? `${returned.length === 1 ? "An edited value set aside fits again and is" : `${returned.length} edited values set aside fit again and are`} back: ${some(returned)}.` : "",
      shownKeys.length ? `${shownKeys.length === 1 ? "An edited value keeps its" : `${shownKeys.length} edited values keep their`} row and column numbers, which now stand for other tokens or components: ${some(shownKeys)}.` : "",
      exampleSaid.length ? `The teaching example's values stay in place: ${some(exampleSaid)}.` : "",
    ].filter(Boolean).join(" ");
    sayAlso(onPayload(payload, { example: Boolean(picked) })); // what the settings took away from the view, if anything
    shown = true;
    showUndo();
    // a cell edit changes nothing else in the grid: the cell already shows what was typed
    if (!fromCell || dropped.length) fillMatrixSelect();
    return true;
  }

  // what is wrong with the configuration, tokens and seed: { field: message }, empty when nothing
  function formErrors(next) {
    const errors = checkConfig(next.config, next.tokens);
    // as a field of the configuration says it (checkConfig): the seed typed, and the range
    if (!Number.isInteger(next.seed)) errors.seed = `The seed must be a whole number from 0 to ${SEED_MAX}.`;
    else if (next.seed < 0 || next.seed > SEED_MAX) errors.seed = `The seed ${next.seed} is out of range: type a whole number from 0 to ${SEED_MAX}.`;
    // a field's text that is no whole number is quoted: "2,5" is not read as 25, nor "abc" as nothing
    for (const [name, lo, hi] of [...CONFIG_FIELDS, ["seed", 0, SEED_MAX]]) {
      const typed = (name === "seed" ? seedInput : configInputs[name]).value.trim();
      const what = name === "seed" ? "the seed" : name;
      // "1e9" is a whole number written with an exponent, which the field does not read
      if (!typed) errors[name] = `${name === "seed" ? "The seed" : name} is empty: type a whole number from ${lo} to ${hi}.`;
      else if (!WHOLE.test(typed)) errors[name] = /^[-+]?(\d+\.?\d*|\.\d+)e[-+]?\d+$/i.test(typed) ? `“${echo(typed)}” is written with an exponent: type ${what} in plain digits, from ${lo} to ${hi}.` : `“${echo(typed)}” is not a whole number: type ${what} as one from ${lo} to ${hi}.`;
      // out of range, said as typed: 99999999999999999999999 read as a number would print as 1e+23
      else if (!(wholeOf(typed) >= lo && wholeOf(typed) <= hi)) errors[name] = `${name === "seed" ? "The seed" : name} ${echo(typed)} is out of range: type a whole number from ${lo} to ${hi}.`;
    }
    return errors;
  }

  // the values drawn depend on the tokens' count only, but the payload names the tokens
  function baseKey(s) {
    return JSON.stringify([s.config, s.tokens, s.seed]);
  }

  function fillMatrixSelect() {
    const shapes = arrayShapes(lab.config, lab.tokens.length);
    const options = [];
    for (const [name, shape] of Object.entries(shapes)) {
      if (name === "x" || name === "W_O" || name === "b_O") options.push([name, name === "x" ? "X (inputs)" : name]);
      else for (let i = 0; i < shape[0]; i++) options.push([`${name}:${i}`, `${name} ${headWord(name, lab.config)} ${i}`]);
    }
    const keep = options.some(([v]) => v === current) ? current : "x";
    matrixSelect.replaceChildren(...options.map(([value, label]) => h("option", { value }, label)));
    matrixSelect.value = keep;
    current = keep;
    drawGrid();
  }

  // The grid of the chosen matrix: one input per value, in rows of fixed-width cells grouped in
  // blocks of columns. A bad cell keeps its text and its message. After a recompute the same grid
  // is updated in place, so the cell being edited keeps the focus.
  let gridKey = null;
  let gridRows = []; // the row elements, in order
  let gridCols = 0;
  let drawn = new Set(); // the rows drawn now (see drawWindow)
  let labelled = new Set(); // the rows whose label sticks now: those within LABELLED px of the view
  const LABELLED = 160;
  let focused = null; // [row, column] of the cell with the focus
  const drafts = new Map(); // key -> the text of a bad cell, kept until it is corrected
  // key -> a good value typed while the settings above had an error: used with the next settings
  // that work (as an edit), said at its cell until then
  const waitingValues = new Map();
  const NOT_USED = "That value was not used: the figure still shows the last good result.";
  const TYPED = "Press Enter, or leave the field, to use what you typed.";
  const WAITING = "Not used yet: the settings above have an error. This value is used once they are fixed.";
  // the value drawn from the seed (no edit) at "name:i,j", for the settings last computed
  const drawnAt = (key) => {
    const [name, index] = key.split(":");
    return index.split(",").reduce((a, i) => a?.[Number(i)], base?.arrays[name]);
  };
  const everyEdit = () => new Map([...(asked ?? lab.edits), ...waitingValues]); // the edits (those asked for last), and the values waiting for settings that work
  // the waiting values of these keys (every one, by default) no longer wait: used, or replaced
  function forgetWaiting(keys = [...waitingValues.keys()]) {
    for (const key of keys) {
      if (!waitingValues.delete(key)) continue;
      const message = gridBox.querySelector(`input[data-key="${key}"]`)?.nextSibling;
      if (message?.textContent === WAITING) message.textContent = "";
    }
  }
  function drawGrid() {
    const [name, headText] = current.split(":");
    const values = applyEdits(base.arrays, lab.edits)[name];
    let matrix = headText === undefined ? values : values[Number(headText)];
    if (!Array.isArray(matrix[0])) matrix = [matrix];
    const twice = (r) => lab.tokens.indexOf(lab.tokens[r]) !== lab.tokens.lastIndexOf(lab.tokens[r]); // named with its position, as the figures name it
    const rowName = (r) => (name === "x" ? (twice(r) ? `${visibleToken(lab.tokens[r])} @${r}` : visibleToken(lab.tokens[r])) : name === "W_O" ? `head ${Math.floor(r / lab.config.d_v)} · ${r % lab.config.d_v}` : matrix.length === 1 ? "" : `row ${r}`);
    const indexOf = (r, c) => (headText === undefined ? (name === "b_O" ? [c] : [r, c]) : name.startsWith("b_") ? [Number(headText), c] : [Number(headText), r, c]);
    const key = JSON.stringify([current, matrix.length, matrix[0].length, matrix.map((_, r) => rowName(r))]);
    if (key === gridKey) {
      for (const input of gridBox.querySelectorAll("input[data-key]")) {
        const [r, c] = input.dataset.cell.split(",").map(Number);
        const edited = userEdit(input.dataset.key);
        if (input.classList.contains("edited") !== edited) input.classList.toggle("edited", edited);
        const text = String(matrix[r][c]);
        if (input.hasAttribute("aria-invalid") && !drafts.has(input.dataset.key)) {
          // a value refused (no number, or too large to compute with) that is gone (Undo my edits):
          // the cell shows the value in use again, with no message
          input.removeAttribute("aria-invalid");
          input.nextElementSibling.textContent = "";
        }
        // touch only what changed: a redraw of thousands of inputs would cost a frame or more
        if (input.value !== text && input !== document.activeElement && !input.hasAttribute("aria-invalid") && !waitingValues.has(input.dataset.key)) input.value = text;
      }
      return;
    }
    gridKey = key;
    const cols = (gridCols = matrix[0].length);
    const names = matrix.map((_, r) => rowName(r));
    gridCaption.replaceChildren(`${name}${headText === undefined ? "" : " " + headText}: ${matrix.length} × ${cols}`, ...(editable ? [h("span", { class: "grid-keys" }, " · Tab and the arrow keys move between cells")] : []));
    const cell = (r, c, v) => {
      const key = `${name}:${indexOf(r, c).join(",")}`;
      const draft = drafts.get(key);
      const said = `lab-cell-${r}-${c}`; // the cell's message, read with the cell
      const value = draft ?? (waitingValues.has(key) ? String(waitingValues.get(key)) : String(v));
      // autocomplete off: else the browser copies every cell's state into the history entry on
      // each history.replaceState (the link), 17 ms for 64 × 64 cells. The full keyboard (no
      // inputmode="decimal"): an iPhone's decimal pad has no minus sign.
      const input = h("input", { type: "text", autocomplete: "off", value, "aria-label": `${name} ${headText === undefined ? "" : `${headWord(name, lab.config)} ${headText},`} ${names[r] ? names[r] + "," : ""} column ${c}`.replace(/\s+/g, " "), "aria-describedby": said, "data-key": key, "data-cell": `${r},${c}`, class: userEdit(key) || waitingValues.has(key) ? "edited" : null, "aria-invalid": draft !== undefined && "true" });
      const message = h("span", { class: "cell-error", role: "alert", id: said }, draft !== undefined ? parseCell(draft).error : waitingValues.has(key) ? WAITING : null);
      input.addEventListener("change", () => editCell(input, message, key));
      return h("span", { class: "cell", role: "cell" }, input, message);
    };
    const blocks = (row, r) => Array.from({ length: Math.ceil(cols / BLOCK) }, (_, b) => h("span", { class: "grid-cols far", role: "none" }, row.slice(b * BLOCK, (b + 1) * BLOCK).map((v, i) => cell(r, b * BLOCK + i, v))));
    gridRows = matrix.map((row, r) => h("div", { class: "grid-row far", role: "row", "aria-rowindex": r + 2 }, h("span", { class: "row-head", role: "rowheader", title: names[r] || null }, names[r]), blocks(row, r)));
    const grid = h(
      "div",
      { class: "edit-grid", role: "table", "aria-labelledby": "lab-grid-caption", "aria-rowcount": matrix.length + 1, "aria-colcount": cols + 1 },
      h("div", { class: "grid-head", role: "row" }, h("span", { class: "row-head", role: "cell" }), matrix[0].map((_, c) => h("span", { class: "col-head", role: "columnheader" }, String(c)))),
      gridRows,
    );
    // row labels as wide as the longest, up to 14 characters (the whole label is in the title);
    // set on the box, whose scroll padding keeps a focused cell clear of the labels
    gridBox.style.setProperty("--row-chars", String(Math.min(14, Math.max(1, ...names.map((n) => n.length)))));
    gridBox.replaceChildren(grid);
    if (!editable) for (const input of grid.querySelectorAll("input")) input.disabled = true;
    drawn = new Set();
    labelled = new Set();
    focused = null;
    drawWindow();
  }

  // Only what the box shows is drawn: the rows and blocks of columns in view, one more on each
  // side, and the focused cell. The others are marked "far": their inputs stay in the page (and
  // in what a screen reader reads), but the browser skips their style, layout and paint while
  // they are out of view (content-visibility in page.css), so a 64 × 64 grid costs each frame
  // what its visible part costs. The ring of near ones is drawn ahead: a row scrolled in is
  // never blank for a frame.
  function drawWindow() {
    if (!gridRows.length || !gridBox.clientHeight) return; // hidden: drawn when shown (ResizeObserver)
    const head = gridBox.firstChild.firstChild.children; // the corner, then one heading per column
    const rowHead = head[0].offsetWidth;
    const block = head[1].offsetWidth * BLOCK;
    const { scrollTop, scrollLeft, clientHeight, clientWidth } = gridBox;
    const rows = new Set();
    for (let r = Math.max(0, rowAt(scrollTop) - 1); r <= Math.min(gridRows.length - 1, rowAt(scrollTop + clientHeight) + 1); r++) rows.add(r);
    if (focused) rows.add(focused[0]);
    const first = Math.floor(scrollLeft / block) - 1;
    const last = Math.floor((scrollLeft + clientWidth - rowHead) / block) + 1;
    // a far row's label stays in place (page.css), but one within LABELLED px of the view sticks
    // too: a row scrolled in faster than this runs (the browser scrolls ahead of it, a frame or
    // two) shows its label at once. (Each label that sticks costs the frame after a lab edit.)
    const near = new Set();
    for (let r = Math.max(0, rowAt(scrollTop - LABELLED)); r <= Math.min(gridRows.length - 1, rowAt(scrollTop + clientHeight + LABELLED)); r++) near.add(r);
    for (const r of labelled) if (!near.has(r)) gridRows[r].classList.remove("labelled");
    for (const r of near) if (!labelled.has(r)) gridRows[r].classList.add("labelled");
    labelled = near;
    for (const r of drawn) if (!rows.has(r)) gridRows[r].classList.add("far");
    for (const r of rows) {
      gridRows[r].classList.remove("far");
      const blocks = gridRows[r].children;
      for (let b = 1; b < blocks.length; b++) {
        const near = (b - 1 >= first && b - 1 <= last) || (focused?.[0] === r && Math.floor(focused[1] / BLOCK) === b - 1);
        blocks[b].classList.toggle("far", !near);
      }
    }
    drawn = rows;
  }

  // the row at height y of the grid (rows with a message are taller than the others)
  function rowAt(y) {
    let lo = 0;
    let hi = gridRows.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (gridRows[mid].offsetTop + gridRows[mid].offsetHeight <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  gridBox.addEventListener("scroll", drawWindow, { passive: true });
  new ResizeObserver(drawWindow).observe(gridBox); // e.g. the lab shown after it was hidden
  gridBox.addEventListener("focusin", (event) => {
    if (!event.target.dataset.cell) return;
    focused = event.target.dataset.cell.split(",").map(Number);
    drawWindow();
    const message = event.target.nextSibling;
    if (message?.textContent) showMessage(message); // a bad cell taking the focus says again what is wrong
  });
  gridBox.addEventListener("focusout", () => {
    focused = null;
  });
  // Tab and Shift+Tab go cell by cell in reading order, ↑ and ↓ to the row above or below, ← and →
  // to the cell before or after once the caret is at the value's start or end (else they move the
  // caret, as in any text box); a far cell cannot take the focus, so it is drawn first. Tab past
  // the last cell leaves the grid.
  gridBox.addEventListener("keydown", (event) => {
    const input = event.target;
    const cellText = input.dataset?.cell;
    if (!cellText || event.altKey || event.ctrlKey || event.metaKey) return;
    const cols = gridCols;
    const caret = input.selectionStart === input.selectionEnd ? input.selectionStart : null; // null: some text is selected
    const edge = { ArrowLeft: caret === 0 ? -1 : 0, ArrowRight: caret === input.value.length ? 1 : 0 };
    const step = event.key === "Tab" ? (event.shiftKey ? -1 : 1) : event.shiftKey ? 0 : { ArrowDown: cols, ArrowUp: -cols, ...edge }[event.key];
    if (!step) return;
    const [r, c] = cellText.split(",").map(Number);
    const next = r * cols + c + step;
    if (next < 0 || next >= gridRows.length * cols) return;
    event.preventDefault();
    focused = [Math.floor(next / cols), next % cols];
    drawWindow();
    const to = gridRows[focused[0]].children[1 + Math.floor(focused[1] / BLOCK)].children[focused[1] % BLOCK].firstChild;
    to.focus();
    // going on the same way takes one more press: after ← or →, the caret waits at the edge it
    // will leave by; after Tab, ↑ or ↓ the value is selected, as a spreadsheet's cell, so that
    // what is typed replaces it ("9" over "0.8" is 9, not 90.8)
    if (event.key === "ArrowRight") to.setSelectionRange(to.value.length, to.value.length);
    else if (event.key === "ArrowLeft") to.setSelectionRange(0, 0);
    else to.select();
  });

  // One bad cell's message shows at a time (the one edited or focused last): side by side, the
  // messages of a row's bad cells would lie over one another. The others keep their red border.
  let messageShown = null;
  function showMessage(message) {
    messageShown?.classList.remove("shown");
    messageShown = message;
    message.classList.add("shown");
    const box = gridBox.getBoundingClientRect();
    placeMessage(message, box);
    // the cell and its message in the grid's box (not the page): the cell may have scrolled away
    // since its edit (a value too large only with others is refused after the focus moved on)
    const top = message.parentElement.getBoundingClientRect().top - gridBox.querySelector(".grid-head").offsetHeight;
    const bottom = message.getBoundingClientRect().bottom;
    if (bottom > box.bottom) gridBox.scrollTop += Math.min(bottom - box.bottom + 4, top - box.top);
    else if (top < box.top) gridBox.scrollTop -= box.top - top;
  }

  // A message is as wide as the box shows beside the row names (at most 30em: narrower on a
  // phone), and starts under its cell, or as far left of it as keeps it all in sight.
  function placeMessage(message, box) {
    message.style.width = message.style.marginLeft = "";
    const from = box.left + gridBox.clientLeft + gridRows[0].firstChild.offsetWidth + 4; // past the sticky row names
    const to = box.left + gridBox.clientLeft + gridBox.clientWidth - 4;
    const width = Math.min(message.offsetWidth, to - from);
    if (width <= 0) return; // the box is hidden
    const cell = message.parentElement.getBoundingClientRect().left;
    message.style.width = `${width}px`;
    message.style.marginLeft = `${Math.min(Math.max(cell, from), to - width) - cell}px`;
  }

  async function editCell(input, message, key) {
    const parsed = parseCell(input.value);
    if (parsed.error) {
      drafts.set(key, input.value);
      message.textContent = parsed.error;
      showMessage(message);
      input.setAttribute("aria-invalid", "true");
      status.textContent = NOT_USED;
      return;
    }
    drafts.delete(key);
    message.textContent = "";
    input.removeAttribute("aria-invalid");
    const form = readForm();
    if (Object.keys(formErrors(form)).length) {
      // nothing can be computed with these settings: the value waits for settings that work
      waitingValues.set(key, parsed.value);
      input.classList.add("edited");
      message.textContent = WAITING;
      showMessage(message);
      showUndo();
      return;
    }
    waitingValues.delete(key);
    // the value drawn from the seed again: no longer an edit
    const edits = new Map(asked ?? lab.edits);
    if (parsed.value === drawnAt(key)) edits.delete(key);
    else edits.set(key, parsed.value);
    input.classList.toggle("edited", userEdit(key, edits));
    const used = await run({ ...form, edits }, { fromCell: true });
    if (!used && rejected && document.contains(input)) {
      // the server could not compute with it (too large): the cell says so and keeps its text, as
      // for a value that is not a number; the figure and the link keep the last good values
      drafts.set(key, input.value);
      message.textContent = Object.values(rejected).map((said) => said.replace(/\.?$/, ".")).join(" "); // each a sentence, as a cell's own are
      showMessage(message);
      input.setAttribute("aria-invalid", "true");
      input.classList.toggle("edited", userEdit(key));
      status.textContent = NOT_USED;
      // cells typed before it, whose runs this one overtook, are used without it
      const rest = new Map(edits);
      rest.delete(key);
      const behind = [...rest].some(([other, value]) => lab.edits.get(other) !== value) || [...lab.edits.keys()].some((other) => other !== key && !rest.has(other));
      if (behind && asked === null) await run({ ...readForm(), edits: rest }, { fromCell: true });
    }
  }

  const onForm = (event) => {
    const form = readForm();
    run({ ...form, edits: everyEdit() }, { changed: event.target.id.replace(/^lab-/, "") });
  };
  tokensInput.addEventListener("change", onForm);
  for (const input of [...Object.values(configInputs), causal, bias, seedInput]) input.addEventListener("change", onForm);
  // A value typed is used on Enter or when the focus leaves (typing 16 passes through 1, which
  // would be computed and drawn on the way): meanwhile the line under the settings says so, in
  // place of how the widths add up, which the value typed would change. Typed is what differs
  // from the settings last run (as read: "07" is 7), used or refused.
  for (const input of [tokensInput, ...Object.values(configInputs), seedInput]) {
    input.addEventListener("input", () => {
      if (!shown) return;
      if (formKey(readForm()) !== lastRun) {
        widths.replaceChildren(TYPED);
        widths.hidden = false;
      } else if (widths.textContent === TYPED) restoreWidths();
    });
  }
  // the values the user changed: edits (not the teaching example's own), those waiting, those set aside
  const editedCount = () => [...everyEdit().keys()].filter((key) => waitingValues.has(key) || userEdit(key)).length + parked.size;
  // new values replace the cells the user edited: only when they say so
  const dropEdits = (what) => {
    const edited = editedCount();
    const aside = parked.size ? ` (${parked.size} set aside)` : "";
    return !edited || window.confirm(`${what} replaces the ${edited} value${edited === 1 ? "" : "s"} you edited${aside}. Go on?`);
  };
  function showUndo() {
    undo.hidden = !editable || !editedCount();
    if (exampleOption) exampleOption.textContent = `The teaching example, ${onExample() && editedCount() ? "with your edits" : "its own values"}`; // (picked from another preset, it brings its own)
  }
  undo.addEventListener("click", async () => {
    const focused = document.activeElement === undo;
    drafts.clear();
    forgetWaiting();
    await run({ ...readForm(), edits: new Map(fromExample ?? []) }, { redraw: true }); // those set aside go too
    sayAlso(`Your edits are undone: ${fromExample ? "the teaching example's own values" : "the seed's values"} are back.`); // (a screen reader hears it: the button is gone)
    if (focused && undo.hidden) draw.focus(); // the button leaves with the edits: the focus stays beside it
  });
  draw.addEventListener("click", () => {
    // new values are drawn for the settings typed, from the seed after the one typed: while one of
    // them is wrong (a seed that is no number, too), each stays as typed, with its message, and
    // nothing is replaced (nor the values waiting for settings that work)
    const errors = formErrors(readForm());
    if (Object.keys(errors).length) {
      const { pair, ...each } = errors; // a rule of n_heads and n_kv_heads together is said under n_kv_heads
      showErrors(pair ? { ...each, n_kv_heads: pair } : each);
      (errors.seed ? seedInput : document.querySelector("#lab [aria-invalid='true']"))?.focus();
      return;
    }
    if (!dropEdits("Drawing new values")) return;
    drafts.clear();
    forgetWaiting();
    fromExample = null;
    seedInput.value = String((Number(seedInput.value) + 1) % (SEED_MAX + 1)); // after the largest seed, 0 again
    run({ ...readForm(), edits: new Map() }, { redraw: true });
  });
  // With edits or settings of the user's own to lose, the arrow keys on the closed menu (which
  // change it at once in Chromium on Linux and Windows) only move through the presets: the one
  // reached is applied on Enter, or, once asked, when the focus leaves
  let arrowed = false; // the change comes from an arrow key
  let waiting = false; // a preset reached by the arrow keys, not applied yet
  // the settings in the form are the user's: none of the presets', nor the teaching example's
  const typedOwn = () => {
    const { config } = readForm();
    return presetOf(config) === "" && !(own && holds(config, own.config));
  };
  presetSelect.addEventListener("keydown", (event) => {
    if (["ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"].includes(event.key)) {
      arrowed = true; // for the change the key makes, at once (Chromium); a key that changed nothing (the first entry's ArrowUp, or a macOS popup opened) leaves the next pick alone
      setTimeout(() => (arrowed = false));
    }
    else if (event.key === "Enter" && waiting) applyPreset();
  });
  presetSelect.addEventListener("blur", () => waiting && applyPreset(true));
  presetSelect.addEventListener("change", () => {
    if (arrowed && (editedCount() || typedOwn())) {
      arrowed = false;
      waiting = true;
      return;
    }
    arrowed = false;
    applyPreset();
  });
  // (leaving: a preset only passed over on the way may replace the settings typed; Enter says so)
  function applyPreset(leaving = false) {
    waiting = false;
    const preset = presetSelect.value === "example" ? own : PRESETS[presetSelect.value];
    if (!preset) return;
    const settingsKept = () => !leaving || editedCount() || !typedOwn() || window.confirm(`“${presetSelect.selectedOptions[0].textContent}” replaces the settings you typed. Go on?`);
    if (!dropEdits("A preset") || !settingsKept()) {
      presetSelect.value = Object.keys(formErrors(readForm())).length ? "" : presetNow(); // back to what the form still is: no preset while a setting is wrong
      return;
    }
    loadPreset(preset);
  }
  // A preset is a configuration: the tokens and the seed typed stay (when they are good), except
  // in a static copy, which holds each preset on its own tokens only. The teaching example brings
  // its tokens and its values: the tokens typed before it come back with the next preset picked,
  // as long as the example's are still in the box.
  let tokensBeforeExample = null;
  function loadPreset(preset) {
    drafts.clear();
    forgetWaiting();
    fromExample = preset === own ? own.edits : null;
    const form = readForm();
    const errors = formErrors({ ...form, config: { ...preset.config } });
    const typed = errors.tokens ? lab.tokens : form.tokens;
    const exampleShown = own && form.tokens.join(" ") === own.tokens.join(" ");
    const back = preset !== own && exampleShown ? tokensBeforeExample : null;
    tokensBeforeExample = preset === own && editable && !exampleShown ? typed : preset === own ? tokensBeforeExample : null;
    const tokens = preset.tokens ?? (!editable ? PRESET_TOKENS : back ?? typed);
    const seed = !editable ? 0 : errors.seed ? lab.seed : form.seed;
    for (const [name] of CONFIG_FIELDS) configInputs[name].value = preset.config[name];
    causal.checked = preset.config.causal;
    bias.checked = preset.config.bias;
    tokensInput.value = tokens.join(" ");
    seedInput.value = String(seed);
    const said = preset === own && tokensBeforeExample ? `The teaching example brings its own tokens; yours, “${tokensBeforeExample.join(" ")}”, come back with the next preset you pick.` : "";
    return run({ config: { ...preset.config }, tokens: [...tokens], seed, edits: new Map(preset.edits) }, { redraw: true, example: preset === own }).then((result) => {
      sayAlso(said);
      return result;
    });
  }
  matrixSelect.addEventListener("change", () => {
    current = matrixSelect.value;
    drawGrid();
  });

  // The lab shown (again): what its form says, with the values waiting for it. A form in error
  // (left so before going to another mode) shows the last good result, then says what is wrong.
  async function start() {
    const form = readForm();
    const edits = everyEdit();
    if (!Object.keys(formErrors(form)).length) return run({ ...form, edits });
    const ok = await run({ ...lab });
    if (ok) await run({ ...form, edits });
    return ok;
  }

  // a preset by its id, replacing whatever the form holds (a static copy's answer to settings it cannot compute)
  return { lab, start, loadPreset: (id) => loadPreset(PRESETS[id]), exampleLeftOut };
}

// The x and weight arrays of a payload, as nested lists of plain numbers: the value grid's cells,
// and what the edits are applied to (see applyEdits).
function arraysOf(payload) {
  const nest = ({ shape, data, b64 }) => {
    const flat = Array.from(b64 ? new Float64Array(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)).buffer) : data);
    const build = (offset, dims) => {
      if (dims.length === 1) return flat.slice(offset, offset + dims[0]);
      const size = dims.slice(1).reduce((a, b) => a * b, 1);
      return Array.from({ length: dims[0] }, (_, i) => build(offset + i * size, dims.slice(1)));
    };
    return build(0, shape);
  };
  return { x: nest(payload.stages.x), ...Object.fromEntries(Object.entries(payload.weights).map(([name, a]) => [name, nest(a)])) };
}

// Every value of the arrays as an edit: "W_Q:1,3,0" -> its number.
function editsOf(arrays) {
  const edits = new Map();
  const walk = (name, a, at) => (Array.isArray(a) ? a.forEach((b, i) => walk(name, b, [...at, i])) : edits.set(`${name}:${at.join(",")}`, a));
  for (const [name, a] of Object.entries(arrays)) walk(name, a, []);
  return edits;
}

// The arrays with the edits applied; the arrays without edits are shared, never copied.
function applyEdits(arrays, edits) {
  const out = { ...arrays };
  const copied = new Set();
  for (const [key, value] of edits) {
    const [name, index] = key.split(":");
    if (!copied.has(name)) {
      out[name] = structuredClone(arrays[name]);
      copied.add(name);
    }
    const path = index.split(",").map(Number);
    let target = out[name];
    for (const i of path.slice(0, -1)) target = target[i];
    target[path[path.length - 1]] = value;
  }
  return out;
}

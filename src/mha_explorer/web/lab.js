// The attention lab's editor: configuration, tokens, a seed and cell-by-cell values.
// It never computes attention: it asks the server for a trace (POST api/trace) and hands the
// payload to the explorer. A bad value is reported at its field; the last good trace stays.

export const LAB_LIMITS = { tokens: 64, width: 64, heads: 64 };

export const PRESETS = {
  mha: { title: "MHA: 4 heads", config: { d_model: 8, n_heads: 4, n_kv_heads: 4, d_head: 2, d_v: 2, causal: false, bias: false } },
  causal: { title: "Causal MHA", config: { d_model: 8, n_heads: 4, n_kv_heads: 4, d_head: 2, d_v: 2, causal: true, bias: false } },
  gqa: { title: "GQA: 4 query heads, 2 K/V heads", config: { d_model: 8, n_heads: 4, n_kv_heads: 2, d_head: 2, d_v: 2, causal: true, bias: false } },
  mqa: { title: "MQA: 4 query heads, 1 K/V head", config: { d_model: 8, n_heads: 4, n_kv_heads: 1, d_head: 2, d_v: 2, causal: true, bias: false } },
};
export const PRESET_TOKENS = ["the", "cat", "sat", "on", "the", "mat"];

const CONFIG_FIELDS = [
  ["d_model", "d_model", 1, LAB_LIMITS.width],
  ["n_heads", "n_heads", 1, LAB_LIMITS.heads],
  ["n_kv_heads", "n_kv_heads", 1, LAB_LIMITS.heads],
  ["d_head", "d_head", 1, LAB_LIMITS.width],
  ["d_v", "d_v", 1, LAB_LIMITS.width],
];
const NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// Parse one cell as the user typed it: a finite number, or a message saying what to type.
export function parseCell(text) {
  if (text.trim() === "") return { error: "Empty: type a number such as 0.5." };
  if (!NUMBER.test(text)) return { error: `“${text.trim().slice(0, 20)}” is not a number: type one such as 0.5 or -1.` };
  const value = Number(text);
  if (!Number.isFinite(value)) return { error: `${text.trim().slice(0, 20)} is too large to compute with: keep it under 1e300.` };
  return { value };
}

// The arrays a config needs, by name, with their shapes (as in the Python weights module).
export function arrayShapes(config, n) {
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

export function decodeEdits(text) {
  const edits = new Map();
  if (!text) return edits;
  for (const part of text.split(";")) {
    const match = /^(x|W_Q|W_K|W_V|W_O|b_Q|b_K|b_V|b_O):(\d+(?:,\d+)*)=(.+)$/.exec(part);
    if (!match) throw new Error(`the edit “${part.slice(0, 30)}” is not of the form name:i,j=value`);
    const parsed = parseCell(match[3]);
    if (parsed.error) throw new Error(`the edit of ${match[1]} at ${match[2]}: ${parsed.error}`);
    edits.set(`${match[1]}:${match[2]}`, parsed.value);
  }
  return edits;
}

// Client-side checks before asking the server; the server checks again and says the same.
export function checkConfig(config, tokens) {
  const errors = {};
  for (const [name, , lo, hi] of CONFIG_FIELDS) {
    const v = config[name];
    if (!Number.isInteger(v)) errors[name] = `${name} must be a whole number.`;
    else if (v < lo || v > hi) errors[name] = `${name} must be between ${lo} and ${hi}.`;
  }
  if (!errors.n_heads && !errors.n_kv_heads) {
    if (config.n_kv_heads > config.n_heads) errors.n_kv_heads = `At most n_heads=${config.n_heads} K/V heads.`;
    else if (config.n_heads % config.n_kv_heads) errors.n_kv_heads = `n_heads=${config.n_heads} is not a multiple of n_kv_heads=${config.n_kv_heads}: pick a divisor of ${config.n_heads}.`;
  }
  if (tokens.length < 1) errors.tokens = "Type at least one token.";
  else if (tokens.length > LAB_LIMITS.tokens) errors.tokens = `${tokens.length} tokens: the lab takes at most ${LAB_LIMITS.tokens}.`;
  else if (tokens.some((t) => t.length > 64)) errors.tokens = "A token is longer than 64 characters.";
  return errors;
}

// The editor. `lab` holds { config, tokens, seed, edits }; `compute(lab)` returns a promise of
// { payload } or { errors: {field: message} } and never throws.
export function createLab({ container, initial, compute, onPayload, editable }) {
  const lab = { config: { ...initial.config }, tokens: [...initial.tokens], seed: initial.seed, edits: new Map(initial.edits) };
  let base = null; // the arrays drawn from the seed for the current config, tokens and seed
  let current = null; // the name of the matrix being edited
  const messages = {};
  const fieldError = (name) => {
    const node = el("span", { class: "field-error", id: `lab-error-${name}`, role: "alert" });
    messages[name] = node;
    return node;
  };

  const tokensInput = el("input", { id: "lab-tokens", type: "text", value: lab.tokens.join(" "), "aria-describedby": "lab-error-tokens", spellcheck: "false" });
  const configInputs = Object.fromEntries(
    CONFIG_FIELDS.map(([name, , lo, hi]) => [name, el("input", { id: `lab-${name}`, type: "number", min: lo, max: hi, step: 1, value: lab.config[name], "aria-describedby": `lab-error-${name}` })]),
  );
  const causal = el("input", { id: "lab-causal", type: "checkbox" });
  const bias = el("input", { id: "lab-bias", type: "checkbox" });
  causal.checked = lab.config.causal;
  bias.checked = lab.config.bias;
  const seedInput = el("input", { id: "lab-seed", type: "number", min: 0, step: 1, value: lab.seed, "aria-describedby": "lab-error-seed" });
  const draw = el("button", { type: "button" }, "Draw new values");
  const presetSelect = el("select", { id: "lab-preset" }, el("option", { value: "" }, "Choose a preset…"), Object.entries(PRESETS).map(([id, p]) => el("option", { value: id }, p.title)));
  const matrixSelect = el("select", { id: "lab-matrix" });
  const gridBox = el("div", { class: "grid-box" });
  const status = el("p", { class: "lab-status", role: "status" });
  const general = el("p", { class: "lab-error", role: "alert" });

  const field = (id, label, input, name) => el("div", { class: "field" }, el("label", { for: id }, label), input, name ? fieldError(name) : null);
  container.replaceChildren(
    ...[
    el("h2", {}, "Attention lab"),
    editable ? null : el("p", { class: "lab-static" }, "This is a static copy of the explorer: editing needs the server (run mha-explorer serve). The presets below can still be stepped through."),
    el(
      "div",
      { class: "lab-row" },
      field("lab-preset", "Preset", presetSelect),
      el("div", { class: "field wide" }, el("label", { for: "lab-tokens" }, "Tokens (separated by spaces)"), tokensInput, fieldError("tokens")),
    ),
    el(
      "div",
      { class: "lab-row" },
      CONFIG_FIELDS.map(([name, label]) => field(`lab-${name}`, label, configInputs[name], name)),
      el("div", { class: "field check" }, el("label", { for: "lab-causal" }, "Causal mask"), causal),
      el("div", { class: "field check" }, el("label", { for: "lab-bias" }, "Bias"), bias),
      field("lab-seed", "Seed", seedInput, "seed"),
      el("div", { class: "field" }, el("span", { class: "spacer" }, " "), draw),
    ),
    general,
    el("div", { class: "lab-row" }, field("lab-matrix", "Edit the values of", matrixSelect)),
    gridBox,
    status,
    ].filter(Boolean),
  );
  if (!editable) {
    for (const input of [tokensInput, ...Object.values(configInputs), causal, bias, seedInput, draw, matrixSelect]) input.disabled = true;
  }

  function clearErrors() {
    for (const node of Object.values(messages)) node.textContent = "";
    general.textContent = "";
    for (const input of container.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
  }

  function showErrors(errors) {
    for (const [name, message] of Object.entries(errors)) {
      const key = name.replace(/^config\./, "");
      if (messages[key]) {
        messages[key].textContent = message;
        (configInputs[key] || (key === "tokens" ? tokensInput : key === "seed" ? seedInput : null))?.setAttribute("aria-invalid", "true");
      } else {
        general.textContent = `${name === "config" ? "" : name + ": "}${message} The last good result stays on screen.`;
      }
    }
  }

  function readForm() {
    const config = Object.fromEntries(CONFIG_FIELDS.map(([name]) => [name, Number(configInputs[name].value === "" ? NaN : configInputs[name].value)]));
    config.causal = causal.checked;
    config.bias = bias.checked;
    const tokens = tokensInput.value.split(/\s+/).filter(Boolean);
    const seed = Number(seedInput.value);
    return { config, tokens, seed };
  }

  // Runs can overlap (a quick edit while the last one computes); only the newest one lands.
  let latest = 0;
  async function run(next, options = {}) {
    const ticket = ++latest;
    container.dataset.busy = "true";
    try {
      return await runOnce(next, options, () => ticket === latest);
    } finally {
      if (ticket === latest) delete container.dataset.busy;
    }
  }

  async function runOnce(next, { redraw, fromCell } = {}, isLatest) {
    clearErrors();
    const errors = checkConfig(next.config, next.tokens);
    if (!Number.isInteger(next.seed) || next.seed < 0) errors.seed = "The seed must be a whole number, 0 or more.";
    if (Object.keys(errors).length) {
      showErrors(errors);
      return false;
    }
    status.textContent = "Computing…";
    const shapes = arrayShapes(next.config, next.tokens.length);
    if (redraw || !base || base.key !== baseKey(next)) {
      const result = await compute({ ...next, edits: new Map() });
      if (!isLatest()) return false;
      if (result.errors) {
        status.textContent = "";
        showErrors(result.errors);
        return false;
      }
      base = { key: baseKey(next), arrays: arraysOf(result.payload), payload: result.payload };
    }
    // keep every edit that still fits the new shapes; say how many did not
    const kept = new Map([...next.edits].filter(([key]) => {
      const [name, index] = key.split(":");
      return shapes[name] && inRange(index.split(",").map(Number), shapes[name]);
    }));
    const dropped = next.edits.size - kept.size;
    let payload = base.payload;
    if (kept.size) {
      const result = await compute({ ...next, edits: kept, arrays: applyEdits(base.arrays, kept) });
      if (!isLatest()) return false;
      if (result.errors) {
        status.textContent = "";
        showErrors(result.errors);
        return false;
      }
      payload = result.payload;
    }
    Object.assign(lab, next, { edits: kept });
    status.textContent = dropped ? `${dropped} edited value(s) no longer fit the new shapes and were dropped.` : "";
    onPayload(payload, lab);
    // a cell edit changes nothing else in the grid: the cell already shows what was typed
    if (!fromCell || dropped) fillMatrixSelect();
    return true;
  }

  function baseKey(s) {
    return JSON.stringify([s.config, s.tokens.length, s.seed]);
  }

  function fillMatrixSelect() {
    const shapes = arrayShapes(lab.config, lab.tokens.length);
    const options = [];
    for (const [name, shape] of Object.entries(shapes)) {
      if (name === "x" || name === "W_O" || name === "b_O") options.push([name, name === "x" ? "X (inputs)" : name]);
      else for (let i = 0; i < shape[0]; i++) options.push([`${name}:${i}`, `${name} ${name.endsWith("Q") ? "head" : "K/V head"} ${i}`]);
    }
    const keep = options.some(([v]) => v === current) ? current : "x";
    matrixSelect.replaceChildren(...options.map(([value, label]) => el("option", { value }, label)));
    matrixSelect.value = keep;
    current = keep;
    drawGrid();
  }

  // The grid of the chosen matrix: one input per value. A bad cell keeps its text and its message.
  // After a recompute the same grid is updated in place, so the cell being edited keeps the focus.
  let gridKey = null;
  function drawGrid() {
    const [name, headText] = current.split(":");
    const values = applyEdits(base.arrays, lab.edits)[name];
    let matrix = headText === undefined ? values : values[Number(headText)];
    if (!Array.isArray(matrix[0])) matrix = [matrix];
    const rowName = (r) => (name === "x" ? lab.tokens[r] : name === "W_O" ? `head ${Math.floor(r / lab.config.d_v)} · ${r % lab.config.d_v}` : matrix.length === 1 ? "" : `row ${r}`);
    const indexOf = (r, c) => (headText === undefined ? (name === "b_O" ? [c] : [r, c]) : name.startsWith("b_") ? [Number(headText), c] : [Number(headText), r, c]);
    const key = JSON.stringify([current, matrix.length, matrix[0].length, matrix.map((_, r) => rowName(r))]);
    if (key === gridKey) {
      for (const input of gridBox.querySelectorAll("input[data-key]")) {
        const [r, c] = input.dataset.cell.split(",").map(Number);
        const edited = lab.edits.has(input.dataset.key);
        if (input.classList.contains("edited") !== edited) input.classList.toggle("edited", edited);
        const text = String(matrix[r][c]);
        // touch only what changed: a redraw of thousands of inputs would cost a frame or more
        if (input.value !== text && input !== document.activeElement && !input.hasAttribute("aria-invalid")) input.value = text;
      }
      return;
    }
    gridKey = key;
    const table = el(
      "table",
      { class: "edit-grid" },
      el("caption", {}, `${name}${headText === undefined ? "" : " " + headText}: ${matrix.length} × ${matrix[0].length}`),
      el("thead", {}, el("tr", {}, el("td", {}), matrix[0].map((_, c) => el("th", { scope: "col" }, String(c))))),
      el(
        "tbody",
        {},
        matrix.map((row, r) =>
          el(
            "tr",
            {},
            el("th", { scope: "row" }, rowName(r)),
            row.map((v, c) => {
              const key = `${name}:${indexOf(r, c).join(",")}`;
              const input = el("input", { type: "text", inputmode: "decimal", value: String(v), "aria-label": `${name} ${rowName(r) || ""} column ${c}`.replace(/\s+/g, " "), "data-key": key, "data-cell": `${r},${c}`, class: lab.edits.has(key) ? "edited" : null });
              const message = el("span", { class: "cell-error", role: "alert" });
              input.addEventListener("change", () => editCell(input, message, key));
              return el("td", {}, input, message);
            }),
          ),
        ),
      ),
    );
    gridBox.replaceChildren(table);
    if (!editable) for (const input of table.querySelectorAll("input")) input.disabled = true;
  }

  async function editCell(input, message, key) {
    const parsed = parseCell(input.value);
    if (parsed.error) {
      message.textContent = parsed.error;
      input.setAttribute("aria-invalid", "true");
      status.textContent = "That value was not used: the figure still shows the last good result.";
      return;
    }
    message.textContent = "";
    input.removeAttribute("aria-invalid");
    input.classList.add("edited");
    const edits = new Map(lab.edits);
    edits.set(key, parsed.value);
    await run({ ...readForm(), edits }, { fromCell: true });
  }

  const onForm = () => {
    const form = readForm();
    run({ ...form, edits: lab.edits });
  };
  tokensInput.addEventListener("change", onForm);
  for (const input of [...Object.values(configInputs), causal, bias, seedInput]) input.addEventListener("change", onForm);
  draw.addEventListener("click", () => {
    seedInput.value = String((Number(seedInput.value) || 0) + 1);
    run({ ...readForm(), edits: new Map() }, { redraw: true });
  });
  presetSelect.addEventListener("change", () => {
    const preset = PRESETS[presetSelect.value];
    if (!preset) return;
    for (const [name] of CONFIG_FIELDS) configInputs[name].value = preset.config[name];
    causal.checked = preset.config.causal;
    bias.checked = preset.config.bias;
    tokensInput.value = PRESET_TOKENS.join(" ");
    seedInput.value = "0";
    run({ config: { ...preset.config }, tokens: [...PRESET_TOKENS], seed: 0, edits: new Map() }, { redraw: true });
  });
  matrixSelect.addEventListener("change", () => {
    current = matrixSelect.value;
    drawGrid();
  });

  return { lab, start: () => run({ ...lab }), presetSelect };
}

// The x and weight arrays of a payload, as nested lists (what the request takes).
function arraysOf(payload) {
  const nest = ({ shape, data, b64 }) => {
    const flat = b64 ? Array.from(new Float64Array(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)).buffer)) : data;
    const build = (offset, dims) => {
      if (dims.length === 1) return flat.slice(offset, offset + dims[0]);
      const size = dims.slice(1).reduce((a, b) => a * b, 1);
      return Array.from({ length: dims[0] }, (_, i) => build(offset + i * size, dims.slice(1)));
    };
    return build(0, shape);
  };
  return { x: nest(payload.stages.x), ...Object.fromEntries(Object.entries(payload.weights).map(([name, a]) => [name, nest(a)])) };
}

function applyEdits(arrays, edits) {
  const out = structuredClone(arrays);
  for (const [key, value] of edits) {
    const [name, index] = key.split(":");
    const path = index.split(",").map(Number);
    let target = out[name];
    for (const i of path.slice(0, -1)) target = target[i];
    target[path[path.length - 1]] = value;
  }
  return out;
}

// mha-explorer: follow one query through multi-head attention.
// One ES module in the anywidget form, `export default { render({ model, el }) }`.
// The page, the static site and the notebook widget load it, each with a small `model` adapter
// that provides get(name), set(name, value), save_changes() and on("change:name", callback).
//
// Traits: payload (the trace, schema.TracePayload), stage (a page stage id), head (int), query (int),
// all_queries (bool); head_arrays (another head's arrays, from a notebook's Python) and upcoming
// ({ payload, head } the page fetched ahead, whose view is built while idle) when the adapter has them;
// first_view (a notebook cell's first view of its payload) and refined ({ payload } whose numbers
// were made exact since, to be written on screen again).
// Every string from the payload is put in the page as text, never as markup.

const SVG = "http://www.w3.org/2000/svg";

// ---- small DOM helpers ---------------------------------------------------------------

export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  node.append(...nodesOf(children));
  return node;
}

// children as h() takes them (nested arrays, text, null for none) -> a flat list of nodes
function nodesOf(children) {
  const nodes = [];
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    nodes.push(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return nodes;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  append(node, children);
  return node;
}

// first × second = result, as matrices side by side: each operator stays with the operand after
// it, so that a line too narrow for all breaks before an operator, never after one.
// terms: [operator, operand] pairs; a null one (a bias the layer lacks) is left out.
function equation(first, ...terms) {
  const eq = h("div", { class: "equation" }, first, terms.filter(Boolean).map(([op, operand]) => h("span", { class: "term" }, h("span", { class: "op" }, op), operand)));
  // a wide first matrix (a lab's 8-wide X) and its product: closer cells, so that more of such
  // equations keep to one line on a laptop's screen (the teaching example's 4-wide X keeps its spacing)
  if ((first.matches?.("table.matrix") ? first.querySelectorAll("thead th").length : 0) > 6) eq.classList.add("many-columns");
  return eq;
}

// A map folded to a line that names it (summary: its words). Opened or closed, every panel's
// map of that kind (key: "W_Q") follows, those built ahead and those of other heads too.
function folded(view, key, summary, content) {
  const { open, boxes } = view.unfolded;
  const box = h("details", { class: "folded-map" }, h("summary", {}, summary), content);
  box.open = open.has(key);
  if (!boxes.has(key)) boxes.set(key, new Set());
  const refs = boxes.get(key);
  if (refs.size > 256) for (const ref of refs) if (!ref.deref()) refs.delete(ref); // (the panels of payloads gone)
  refs.add(new WeakRef(box)); // a payload gone takes its panels with it
  box.addEventListener("toggle", () => {
    open[box.open ? "add" : "delete"](key);
    for (const ref of boxes.get(key)) {
      const other = ref.deref();
      if (!other) boxes.get(key).delete(ref);
      else if (other.open !== box.open) other.open = box.open;
    }
  });
  return box;
}

// The K/V head g as the text names it: "K/V head 1" where query heads share them, "head 1" where
// each head has its own (MHA: no sharing to explain).
function kvHead(payload, g) {
  return payload.config.n_kv_heads === payload.config.n_heads ? `head ${g}` : `K/V head ${g}`;
}

// A bias's one row: named for a screen reader (an empty row header reads as nothing) and on a map's
// readout; on screen its caption (b^Q) names it.
const biasRow = () => h("span", { class: "sr-only" }, "bias");

// A token naming a table's row. A word keeps whole (a phone's table squeezed "because" to
// "becaus|e"); past LONG_NAME characters it may break anywhere, so that the row's numbers stay
// beside it (a 49-letter token took the table's width).
const LONG_NAME = 14;
const rowName = (name) => h("span", { class: name.length > LONG_NAME ? "tok long" : "tok" }, name);

// One query's concat on canvas (a real model's, too long to write out): one row per head.
function concatMap(view, query, head) {
  const { payload, t } = view;
  const { n_heads, d_v } = payload.config;
  return heatmap({ caption: `concat for “${tokenName(payload, query)}”: one row of ${n_heads * d_v}, drawn as ${n_heads} rows of ${d_v}, one per head`, rows: n_heads, cols: d_v, value: (i, e) => t.concat.at(query, i * d_v + e), rowLabel: (i) => `head ${i}`, colLabel: (e) => `[${e}]`, mark: head });
}

// A token as the query menu and the titles name it: a token that occurs more than once in the
// text is told apart by its position ("the @4").
const repeated = new WeakMap(); // payload -> the set of tokens that occur more than once
function tokenName(payload, i) {
  if (!repeated.has(payload)) {
    const seen = new Set();
    const twice = new Set();
    for (const tok of payload.tokens) (seen.has(tok) ? twice : seen).add(tok);
    repeated.set(payload, twice);
  }
  const tok = visibleToken(payload.tokens[i]);
  return repeated.get(payload).has(payload.tokens[i]) ? `${tok} @${i}` : tok;
}

// a map's key column: its position, then its token ("key 4 “the”"), the position said once
const keyLabel = (payload, j) => `key ${j} “${visibleToken(payload.tokens[j])}”`;

// A token of invisible characters only (a zero-width space typed in the lab) by its code points,
// "U+200B", so that its menu entry and labels are not blank. The letters of a right-to-left token
// (Arabic, Hebrew), or of one holding a direction mark, are isolated (FSI ... PDI): else what the
// label adds around them (a WordPiece's "##", a byte piece's "1/2", the position "@4") would be
// drawn on the wrong side of them by the browser's bidirectional ordering ("4@ مرحبا"), and an
// override (U+202E) would turn the heading around the label. DIRECTIONAL: such letters, or the
// marks and overrides that set the direction of what follows. A closing isolate (U+2069) in the
// text itself would end the isolation early: it is left out of what is shown.
const DIRECTIONAL = /[\p{Script=Arabic}\p{Script=Hebrew}\p{Script=Syriac}\p{Script=Thaana}\p{Script=Nko}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;
const INVISIBLE = /^[\p{Cf}\p{Cc}\p{Z}]+$/u; // a token of format, control and space characters only
export function visibleToken(tok) {
  if (INVISIBLE.test(tok)) return [...tok].map((c) => `U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`).join(" ");
  if (!DIRECTIONAL.test(tok)) return tok;
  const [, before, letters, piece] = /^(##)?(.*?)( \d+\/\d+)?$/su.exec(tok);
  return `${before ?? ""}\u2068${letters.replaceAll("\u2069", "")}\u2069${piece ?? ""}`;
}

// Text the user typed, said back in a message: cut past `longest` characters with "…", and
// isolated where it holds right-to-left letters or direction marks, so that the message around
// it still reads left to right (an override, U+202E, would turn the rest of the line around).
export function echo(text, longest = 20) {
  const characters = [...text];
  const cut = characters.length > longest ? `${characters.slice(0, longest).join("")}…` : text;
  return DIRECTIONAL.test(cut) ? `\u2068${cut.replaceAll("\u2069", "")}\u2069` : cut;
}

// ---- numbers -------------------------------------------------------------------------

// x to three significant digits times a power of ten, as written by hand: 4.44×10⁴, 1.35×10⁻¹;
// the exponent in a span of its own, set larger (superscript digits are small)
function powerOfTen(x) {
  const [mantissa, exponent] = x.toExponential(2).split("e");
  return [`${mantissa}×10`, h("span", { class: "exp" }, [...String(Number(exponent))].map((c) => "⁰¹²³⁴⁵⁶⁷⁸⁹⁻"["0123456789-".indexOf(c)]).join(""))];
}

// The least of 1, 2, 5, 10, 20, 50, … that is at least x (x >= 1): a step a reader counts in.
function roundStep(x) {
  for (let power = 1; ; power *= 10) for (const step of [1, 2, 5]) if (step * power >= x) return step * power;
}

// "1 key", "3 keys"
export const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;

// Two decimals, rounded on the exact binary value (toFixed); -0.00 shows as 0.00. From a million
// on (a lab's edited values), three significant digits and the power of ten: 3.00e98, not 99 digits.
const HUGE = 1e6;
let hugeShown = false; // since the panel being built began (see roundingHint)
function fmt(value) {
  if (value === null || value === -Infinity) return "−∞";
  if (Math.abs(value) >= HUGE) {
    hugeShown = true;
    return value.toExponential(2).replace("e+", "e");
  }
  const s = value.toFixed(2);
  return s === "-0.00" ? "0.00" : s;
}

// A number as the page shows it (see fmt), for a hand check made from what is shown.
const rounded = (x) => Number(fmt(x));

// A result worked out by hand from the numbers shown, rounded to two decimals as a person rounds
// it: the binary noise of the sum dropped, then a half rounded away from zero (0.47 ÷ 2 = 0.235 is
// 0.24, where the double 0.23499999… would give 0.23).
function byHandFmt(x) {
  const exact = Number(x.toFixed(9));
  return fmt(Math.sign(exact) * (Math.round(Math.abs(exact) * 100 + 1e-6) / 100));
}

// A constant a learner divides by (√d_head): three decimals, trailing zeros dropped (1.414, 8), so
// that a rounded score divided by it lands on the rounded result.
function fmtConstant(value) {
  return String(Number(value.toFixed(3)));
}

// How a panel's numbers are rounded and worked out; `also`, what else is rounded (", the divisor
// 1.414 to three"), said unless numbers of a million or more are rounded otherwise.
const roundedAs = (also = "") =>
  `${hugeShown ? "Every number here is rounded: to two decimals, from a million on to three significant digits" : `Every number here is rounded to two decimals${also}`}, and each result is worked out from the full numbers`;

// Where a hand check from the rounded numbers misses the rounded result: a hint saying why and what
// the rounded numbers give there, or null. Each miss is [what, as worked from the rounded numbers,
// as shown]; `why` says how the numbers are rounded and worked out (the softmax table works eˢ out
// from the scores as shown).
function roundingHint(misses, why = roundedAs()) {
  if (!misses.length) return null;
  const given = misses.map(([what, byHand, shown]) => `${what} comes to ${byHand} (shown: ${shown})`);
  const more = " Point at a number, or tap it, to see it in full.";
  // past ROUNDING_INLINE, one a line: a sentence of ten clauses could not be read off a projector
  if (given.length <= ROUNDING_INLINE) return h("p", { class: "hint" }, `${why}. Worked from the rounded numbers instead, ${given.join("; ")}.`, h("span", { class: "screen-only" }, more));
  return h("p", { class: "hint misses" }, `${why}. Worked from the rounded numbers instead:`, given.map((miss, i) => h("span", { class: "miss" }, `${miss}${i < given.length - 1 ? ";" : "."}`)), h("span", { class: "screen-only" }, more));
}
const ROUNDING_INLINE = 3;

// Every digit the number has: a float32 value (a real model's) with the fewest digits that give
// it back in float32 (at most 9), not the 17 of the double it is read into. A float64 value (the
// lab's) keeps its own shortest form, even where float32 could hold it (0.10000000149011612).
let singlePrecision = false; // the numbers being built are float32: set with each view's build (precisionOf)
const precisionOf = (v) => {
  singlePrecision = v.t.x?.dtype === "float32";
};
function full(value, single = singlePrecision) {
  if (value === null) return "-Infinity";
  if (!single || Math.fround(value) !== value || !Number.isFinite(value)) return String(value);
  for (let digits = 1; digits < 9; digits++) {
    const shorter = Number(value.toPrecision(digits));
    if (Math.fround(shorter) === value) return String(shorter);
  }
  return String(Number(value.toPrecision(9)));
}

function decode(b64, dtype) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return dtype === "float32" ? new Float32Array(bytes.buffer) : new Float64Array(bytes.buffer);
}

// A binary answer (schema.Packer): 8 bytes of head length, the JSON head, then the arrays. Each
// array of the head gets `data`, a typed-array view of its bytes in place: nothing is decoded.
export function unpack(buffer) {
  const size = Number(new DataView(buffer).getBigUint64(0, true));
  const head = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, size)));
  return attach(head, buffer, 8 + size);
}

// A link's head or query that a payload lacks, as the page's notice says it (the first view's is shown).
export function outOfRange(field, asked, payload) {
  const n = field === "head" ? payload.config.n_heads : payload.tokens.length;
  return field === "head"
    ? `head ${asked} is out of range: there ${n === 1 ? "is 1 head" : `are ${n} heads`}, so head 0 is shown`
    : `query ${asked} is out of range: there ${n === 1 ? "is" : "are"} ${plural(n, "token")}, so query “${firstQuery(payload)}” is shown`;
}

// The query of a payload's first view, as the view names it ("␣jumps", not "Ġjumps")
export function firstQuery(payload) {
  return tokenName(payload.model ? { ...payload, tokens: tokenLabels(payload) } : payload, payload.query);
}

// A widget's real-model payload or head arrays: the JSON with `buffer`, every array's bytes (a
// binary part of the widget's message, a DataView). Read as unpack() reads a binary answer, once
// per object; the widget's own state is left as it came.
const attached = new WeakMap();
function inPlace(record) {
  if (!record?.buffer) return record;
  if (!attached.has(record)) {
    const { buffer: view, ...json } = record;
    const bytes = view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength); // starts 8-byte aligned
    attached.set(record, attach(JSON.parse(JSON.stringify(json)), bytes, 0));
  }
  return attached.get(record);
}

// Every array of head whose bytes lie in buffer from `start` gets its typed-array view; the stages
// left out (schema.DERIVED) are made from the scores when first read.
function attach(head, buffer, start) {
  const visit = (node) => {
    if (node === null || typeof node !== "object") return;
    if (typeof node.offset === "number" && Array.isArray(node.shape)) {
      const shape = node.heads ? [node.heads.length * (node.block ?? 1), ...node.shape.slice(1)] : node.shape; // what it holds (see schema.held_shape)
      const count = shape.reduce((a, b) => a * b, 1);
      const View = node.dtype === "float32" ? Float32Array : Float64Array;
      if (node.planes) {
        // stored by place (schema.Packer): put back in order when first read, the bytes never copied twice
        let values = null;
        Object.defineProperty(node, "data", { enumerable: true, get: () => (values ??= unplane(new Uint8Array(buffer, start + node.offset, count * View.BYTES_PER_ELEMENT), count, View)) });
      } else node.data = new View(buffer, start + node.offset, count);
      return;
    }
    for (const value of Object.values(node)) visit(value);
  };
  visit(head);
  return withDerived(head);
}

// An array's bytes stored by place (every number's first byte, then every second...) as its
// numbers. A float32 is put together from its four bytes in one pass (the page's typed arrays are
// little-endian, as the answer's bytes are).
function unplane(bytes, count, View) {
  if (View === Float32Array) {
    const words = new Uint32Array(count);
    const [b0, b1, b2, b3] = [0, 1, 2, 3].map((b) => bytes.subarray(b * count, (b + 1) * count));
    for (let i = 0; i < count; i++) words[i] = b0[i] | (b1[i] << 8) | (b2[i] << 16) | (b3[i] << 24);
    return new Float32Array(words.buffer);
  }
  const size = View.BYTES_PER_ELEMENT;
  const out = new Uint8Array(count * size);
  for (let b = 0; b < size; b++) for (let i = 0; i < count; i++) out[i * size + b] = bytes[b * count + i];
  return new View(out.buffer);
}

// The stages an answer left out (schema.DERIVED: a binary answer, or a static copy's layer) put
// back, each made when first read: z from concat, for the heads the scores hold; the others from
// the scores.
export function withDerived(answer) {
  const { scores, concat } = answer.stages ?? {};
  const c = answer.config;
  const n = scores?.shape[1];
  for (const name of answer.derived || [])
    answer.stages[name] =
      name === "z"
        ? { shape: [c.n_heads, n, c.d_v], heads: scores.heads, dtype: concat.dtype, derive: once(() => headsOfConcat(concat, scores.heads, c)) }
        : name === "contributions"
          ? { shape: [c.n_heads, n, c.d_model], heads: scores.heads, dtype: "float32", rowOf: partOfOutput(answer) }
          : name === "q_normed" || name === "k_normed"
            ? { shape: answer.stages[name[0]].shape, heads: answer.stages[name[0]].heads, dtype: "float32", derive: once(() => normedRows(answer, name[0])) }
            : { shape: scores.shape, heads: scores.heads, dtype: scores.dtype, derive: () => derive(name, scores, c) };
  return answer;
}

// q or k after the q/k norm, as trace.rms_norm makes them: each row divided by its root mean square
// (the answer's factors), then times the multiplier, each step rounded to float32 as NumPy's is (a
// quotient or product of float32 numbers computed in a double and rounded once is the float32 one).
function normedRows(answer, side) {
  const rows = valuesOf(answer.stages[side]); // (k, n, e)
  const rms = valuesOf(answer.factors[`${side}_rms`]); // (k, n)
  const multiplier = valuesOf(answer.weights[`${side}_norm`]); // (e,)
  const e = multiplier.length;
  const out = new Float32Array(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = Math.fround(rows[i] / rms[Math.floor(i / e)]) * multiplier[i % e];
  return out;
}

const once = (make) => {
  let made = null;
  return () => (made ??= make());
};

// An answer's array as numbers: its bytes, its base64, or made from others (withDerived).
export const valuesOf = (a) => a.data ?? (a.b64 ? decode(a.b64, a.dtype) : a.derive());

// A real model's head's part of one query's output, z_i W^O_i, made when the page reads it:
// (slice of the heads the scores hold, query) -> d_model numbers. The products of float32 numbers
// are exact in a double; their sum, in double precision, is rounded once to float32, as
// schema.contributions makes them. A 512-token layer needs a few rows of its (n, d_model) per
// head, not all 512.
function partOfOutput(answer) {
  const { stages, weights, config } = answer;
  const { d_v: f, d_model: d } = config;
  const n = stages.scores.shape[1];
  const heads = stages.scores.heads ?? Array.from({ length: config.n_heads }, (_, i) => i);
  const W_O = weights.W_O;
  let z = null;
  let wo = null;
  return (s, query) => {
    z ??= valuesOf(stages.z); // (heads held, n, f)
    wo ??= valuesOf(W_O); // (held blocks · f, d)
    const block = (W_O.heads ? W_O.heads.indexOf(heads[s]) : heads[s]) * f * d;
    const sum = new Float64Array(d);
    for (let e = 0; e < f; e++) {
      const ze = z[(s * n + query) * f + e];
      const row = block + e * d;
      for (let m = 0; m < d; m++) sum[m] += ze * wo[row + m];
    }
    return Float32Array.from(sum);
  };
}

// z of the given heads (every head, when not given) copied out of concat (n × n_heads·d_v), where
// each row holds the heads' z one after another: (heads, n, d_v).
function headsOfConcat(concat, heads, config) {
  const from = valuesOf(concat);
  const [n, width] = concat.shape;
  const f = config.d_v;
  const which = heads ?? Array.from({ length: config.n_heads }, (_, i) => i);
  const out = new from.constructor(which.length * n * f);
  which.forEach((head, s) => {
    for (let r = 0; r < n; r++) out.set(from.subarray(r * width + head * f, r * width + (head + 1) * f), (s * n + r) * f);
  });
  return out;
}

// A real model's tokens as the view labels them, as the server worked them out
// (modelview.token_labels): the text each stands for, a space at its start or end shown as ␣ and a line
// break as ↵ ("Ġquick" -> "␣quick", "▁the" -> "␣the"; "##ing" stays), and a byte piece of a
// character as that character and its place ("␣🐱 1/3"). The raw tokens where an answer has none.
export function tokenLabels(payload) {
  const labels = payload.model.labels;
  return labels?.length === payload.tokens.length ? labels : payload.tokens;
}

// A layer's payload with another head's arrays (modelview.HeadArrays) in place of its own.
// Every stage either left out is already made (withDerived), each from its own answer's arrays:
// none is left to make again, from the layer's factors of another head.
export function withHead(payload, arrays) {
  return { ...payload, stages: { ...payload.stages, ...arrays.stages }, weights: { ...payload.weights, ...arrays.weights }, derived: [], factors: {} };
}

// The factor of the scores: 1/√d_head, unless the layer's config sets its own.
const scaleOf = (config) => config.scale ?? 1 / Math.sqrt(config.d_head);
// a scale the config sets other than 1/√d_head (as AttentionConfig.own_scale: Gemma's equals it)
const ownScale = (config) => config.scale != null && Math.abs(config.scale * Math.sqrt(config.d_head) - 1) > 1e-9;
const scaleShownOf = (config) => (config.scale != null ? Number(config.scale.toPrecision(4)) : null); // as the page writes it, to four digits

// scaled or mask from the scores, exactly as the server computes them: each score times the scale
// in the scores' own precision (a float32 product of two float32 numbers is exact in a double,
// and storing it in a Float32Array rounds it once, as a float32 multiply does), then -inf where a
// key is hidden from the query (after it when causal; beyond the sliding window).
function derive(name, scores, config) {
  const from = scores.data ?? decode(scores.b64, scores.dtype); // binary, or base64 (a static copy)
  const single = from instanceof Float32Array;
  const scale = scaleOf(config);
  const factor = single ? Math.fround(scale) : scale;
  const out = single ? new Float32Array(from.length) : new Float64Array(from.length);
  for (let i = 0; i < from.length; i++) out[i] = from[i] * factor;
  if (name === "mask") {
    const n = scores.shape[scores.shape.length - 1];
    const window = config.sliding_window;
    for (let o = 0; o < out.length; o += n * n)
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++) if ((config.causal && j > i) || (window != null && j <= i - window)) out[o + i * n + j] = -Infinity;
  }
  return out;
}

// A number the learner can check: two decimals shown, full precision on hover and focus.
// data-src names the trace array and index it came from, so tests can check it. It takes the
// focus from its neighbours with the arrow keys (see roving): only a group's first is a Tab stop.
function num(value, src) {
  return h("span", { class: "num", tabindex: -1, "data-full": full(value), "data-src": src }, fmt(value));
}

// A vector written out: [a, b, c], its entries elements or text.
const vec = (values) => h("span", { class: values.length <= 2 ? "vec pair" : "vec" }, "[", values.flatMap((x, e) => [e ? ", " : "", x]), "]");

// Keyboard: the numbers of one table, vector or list of bars are a single Tab stop, so that Tab
// goes from figure to figure (a stage holds up to a hundred numbers). Inside, the arrow keys move
// the focus: left and right to the previous and next number, up and down a row in a table; Home
// and End to the first and last.
function groupOf(number) {
  return number.closest("table") || number.parentElement.closest(".bars, .vec, .cells") || number.parentElement;
}

function roving(nodes) {
  const seen = new Set();
  for (const node of nodes)
    if (node instanceof Element)
      for (const number of node.querySelectorAll(".num")) {
        const group = groupOf(number);
        if (!seen.has(group)) number.tabIndex = 0;
        seen.add(group);
      }
  return nodes;
}

// A number's full value shows above it, or below it where the top of a scrolling figure would cut
// it off (its first row). Its box: the scrolling figure, or else the panel, which clips what
// overflows it (paint containment) as a scroll box does.
function placeTip(event) {
  const number = event.target.closest?.(".num");
  const box = number?.closest(".figure, .wide-table, .stage, .outputs");
  if (!box) return;
  const [at, edges] = [number.getBoundingClientRect(), box.getBoundingClientRect()];
  // (or the controls, where they stay at the top of the window over the figure)
  const bar = number.closest(".mha-explorer")?.querySelector(":scope > .controls");
  const under = bar && getComputedStyle(bar).position === "sticky" ? bar.getBoundingClientRect().bottom : -Infinity;
  number.classList.toggle("tip-below", at.top - Math.max(edges.top, under) < 28);
  // the tip centred over the number, unless that would cut it at the box's side (a phone): then
  // it keeps to the number's side towards the middle (its width worked out from its characters)
  const half = ((number.dataset.full || "").length * 8 + 12) / 2;
  const middle = (at.left + at.right) / 2;
  number.classList.toggle("tip-end", middle + half > edges.right);
  number.classList.toggle("tip-start", middle + half <= edges.right && middle - half < edges.left);
}

const STEPS = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1 };
const UNANSWERED_MS = 8000; // a head asked of a notebook's Python: past this, the view says what to do
function moveFocus(event) {
  const from = event.target.closest?.(".num");
  if (!from || event.altKey || event.ctrlKey || event.metaKey || !(event.key in STEPS || event.key === "Home" || event.key === "End")) return;
  const group = groupOf(from);
  const numbers = [...group.querySelectorAll(".num")];
  let to = null;
  if (event.key === "Home" || event.key === "End") to = numbers[event.key === "Home" ? 0 : numbers.length - 1];
  else if (group.tagName === "TABLE" && (event.key === "ArrowUp" || event.key === "ArrowDown")) {
    const rows = [...group.rows].filter((row) => row.querySelector(".num"));
    const row = from.closest("tr");
    const there = rows[rows.indexOf(row) + STEPS[event.key]];
    if (there) {
      const cells = [...there.querySelectorAll(".num")];
      to = cells[Math.min([...row.querySelectorAll(".num")].indexOf(from), cells.length - 1)];
    }
  } else to = numbers[numbers.indexOf(from) + STEPS[event.key]];
  event.preventDefault(); // the page does not scroll, even at a table's edge
  if (!to) return;
  from.tabIndex = -1;
  to.tabIndex = 0;
  to.focus();
}

// A menu's options, after a button that shows the chosen one: in a customizable menu
// (explorer.css) that button's text can be cut with an ellipsis, as a system menu's is. Other
// browsers show no button in a menu.
function fillMenu(menu, options) {
  menu.replaceChildren(h("button", { type: "button", tabindex: -1, "aria-hidden": "true" }, h("selectedcontent")), ...options);
}

// A customizable menu (explorer.css) opens its list on an arrow key, where the system's menu steps
// to the next option at once: a closed menu keeps stepping, as someone going through the heads or
// queries one by one expects; Home and End go to the first and the last, Page Up and Page Down ten
// options on. In the open list, Page Up and Page Down move the focus ten options within the list
// (the browser would scroll the page away from it). Alt with an arrow opens the list, as before.
const MENU_STEPS = { ...STEPS, PageUp: -10, PageDown: 10, Home: -Infinity, End: Infinity };
function menuKeys(event) {
  if (!(event.key in MENU_STEPS) || event.altKey || event.ctrlKey || event.metaKey) return;
  const menu = event.target.closest?.("select");
  if (!menu || getComputedStyle(menu).appearance !== "base-select") return; // :open is known where base-select is
  const clamp = (i) => Math.min(Math.max(i, 0), menu.options.length - 1);
  if (menu.matches(":open")) {
    if (event.target.tagName !== "OPTION" || !event.key.startsWith("Page")) return; // the list's own keys
    event.preventDefault();
    const to = menu.options[clamp(event.target.index + MENU_STEPS[event.key])];
    to.focus({ preventScroll: true });
    to.scrollIntoView({ block: "nearest" });
    return;
  }
  event.preventDefault();
  const index = clamp(menu.selectedIndex + MENU_STEPS[event.key]);
  if (index === menu.selectedIndex) return;
  menu.selectedIndex = index;
  menu.dispatchEvent(new Event("input", { bubbles: true }));
  menu.dispatchEvent(new Event("change", { bubbles: true }));
}

// A row-major array from the payload: at(i, j, ...) reads one entry.
class Tensor {
  constructor(source) {
    const { shape, b64, dtype, heads, block, derive, rowOf } = source; // its data is read on first use (see attach)
    this.shape = shape;
    this.b64 = b64;
    this.dtype = dtype;
    this.derive = derive; // a stage the answer left out: computed on first use
    this.rowOf = rowOf; // or made a row at a time, (slice, i) -> the last axis, when read
    this.madeRows = rowOf ? new Map() : null;
    this.source = source;
    this.values = null;
    this.block = block ?? null; // with heads: each head holds a block of this many rows (W^O's d_v)
    // a real model's payload holds only some slices of axis 0 (heads): map head -> slice
    this.slices = heads ? new Map(heads.map((head, i) => [head, i])) : null;
    this.strides = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
    this.lastHead = null; // the last head looked up in slices, and its slice: a map asks for one head 200,000 times
    this.lastSlice = 0;
  }
  get data() {
    if (this.values === null) this.values = this.derive ? this.derive() : this.b64 ? decode(this.b64, this.dtype) : this.source.data; // on first use only
    return this.values;
  }
  has(first) {
    return !this.slices || this.slices.has(first);
  }
  // fixed arguments rather than ...index: heatmaps call this once per cell, 200,000 times at 512 tokens
  at(i, j, k) {
    let first = i;
    if (this.slices) {
      const head = this.block ? Math.floor(i / this.block) : i;
      if (head !== this.lastHead) [this.lastHead, this.lastSlice] = [head, this.slices.get(head)];
      first = this.block ? this.lastSlice * this.block + (i % this.block) : this.lastSlice;
    }
    if (this.rowOf) {
      const key = first * this.shape[1] + j;
      let row = this.madeRows.get(key);
      if (!row) this.madeRows.set(key, (row = this.rowOf(first, j)));
      return row[k];
    }
    const s = this.strides;
    if (s.length === 1) return this.data[first];
    if (s.length === 2) return this.data[first * s[0] + j];
    return this.data[first * s[0] + j * s[1] + k];
  }
  // The values of a 2-D array, or of slice i of a 3-D one, row-major, as one view of the array's
  // own numbers: a map reads them straight instead of calling at() per cell (200,000 calls at 512
  // tokens). null where there is no such view (a head the payload lacks, W^O's blocks, rows made one by one).
  plane(i) {
    if (this.rowOf || this.shape.length !== (i === undefined ? 2 : 3)) return null;
    let first = i ?? 0;
    if (this.slices) {
      if (this.block || !this.slices.has(i)) return null;
      first = this.slices.get(i);
    }
    const size = i === undefined ? this.data.length : this.strides[0];
    return ArrayBuffer.isView(this.data) ? this.data.subarray(first * size, (first + 1) * size) : null;
  }
  row(...index) {
    const last = this.shape[this.shape.length - 1];
    return Array.from({ length: last }, (_, j) => this.at(...index, j));
  }
}

// Tensors by name. An array that is the very object of `before` (another head of the same layer)
// keeps its tensor, with what was decoded and painted from it.
const sources = new WeakMap(); // tensor -> the payload array it was made from
function tensors(record, before) {
  return Object.fromEntries(
    Object.entries(record).map(([name, a]) => {
      const kept = before?.[name];
      if (kept && sources.get(kept) === a) return [name, kept];
      const made = new Tensor(a);
      sources.set(made, a);
      return [name, made];
    }),
  );
}

function mathml(markup) {
  const doc = new DOMParser().parseFromString(markup, "application/xml");
  return doc.documentElement.nodeName === "math" ? document.importNode(doc.documentElement, true) : h("code", {}, markup);
}

// A formula of several equations side by side ("q_i = …,\quad k_{i,j} = …") as one math element
// each, which wrap as words do where the box is too narrow for all of them (a phone): MathML
// itself is never broken across lines. Each keeps its comma; a lone equation stays whole.
function formulaParts(math) {
  const row = math.children.length === 1 ? math.firstElementChild : null;
  if (row?.localName !== "mrow") return [math.cloneNode(true)];
  const parts = [[]];
  for (const node of row.children) {
    const after = parts.at(-1).at(-1);
    if (node.localName === "mspace" && node.getAttribute("width") === "1em" && after?.localName === "mo" && after.textContent === ",") parts.push([]);
    else parts.at(-1).push(node);
  }
  if (parts.length === 1) return [math.cloneNode(true)];
  return parts.map((nodes) => {
    const part = math.cloneNode(false);
    part.append(row.cloneNode(false));
    part.firstChild.append(...nodes.map((node) => node.cloneNode(true)));
    return part;
  });
}

const sub = (base, s) => [base, h("sub", {}, String(s))];
export const sup = (base, s) => [base, h("sup", {}, s)];

// ---- a labelled matrix as a table; hovering a cell can call back --------------------------

function matrix({ caption, rows, cols, value, src, rowLabel, colLabel, rowClass, onCell, cellClass }) {
  const head = h("tr", {}, h("td", { class: "corner" }), cols.map((c) => h("th", { scope: "col" }, colLabel ? colLabel(c) : String(c))));
  const body = rows.map((r, ri) =>
    h(
      "tr",
      { class: rowClass ? rowClass(r, ri) : null, "data-row": ri },
      h("th", { scope: "row" }, rowLabel ? rowLabel(r, ri) : String(r)),
      cols.map((_, ci) =>
        h(
          "td",
          { "data-row": ri, "data-col": ci, class: cellClass ? cellClass(ri, ci) : null },
          num(value(ri, ci), src(ri, ci)),
        ),
      ),
    ),
  );
  const captionNode = h("caption", {}, caption);
  const table = h("table", { class: "matrix" }, captionNode, h("thead", {}, head), h("tbody", {}, body));
  if (captionNode.querySelector("sub, sup")) table.setAttribute("aria-label", spokenText(captionNode).trim()); // W 0 Q, not W0Q
  if (onCell) {
    const hover = (event) => {
      const cell = event.target.closest("td[data-col]");
      if (cell) onCell(Number(cell.dataset.row), Number(cell.dataset.col));
    };
    table.addEventListener("mouseover", hover);
    table.addEventListener("focusin", hover);
  }
  return table;
}

function range(n) {
  return Array.from({ length: n }, (_, i) => i);
}

// Paper does not scroll: a table wider than a page (a real model's q, 32 or 64 numbers in a row)
// is printed as tables of fewer columns, one under the other, each with its row labels and column
// numbers. The screen keeps the table whole; the copies go after the print (unfold).
const PAPER_WIDTH = 600; // CSS pixels: an A4 or Letter page's width between its margins, less an equation's signs
function foldForPaper(root) {
  // (not in a stage kept hidden, which is not printed: read, it would be laid out)
  const wide = [...root.querySelectorAll("table.matrix")].filter((table) => !table.closest(".stage-kept") && table.scrollWidth > PAPER_WIDTH);
  for (const table of wide) {
    const cols = table.tHead.rows[0].cells.length - 1; // after the corner
    const label = table.tHead.rows[0].cells[0].offsetWidth; // the row labels' column
    const fit = Math.max(1, Math.floor((PAPER_WIDTH - label) / ((table.scrollWidth - label) / cols)));
    const per = Math.ceil(cols / Math.ceil(cols / fit)); // parts of even widths
    const copies = range(Math.ceil(cols / per)).map((part) => {
      const copy = table.cloneNode(true);
      for (const row of copy.rows) {
        [...row.cells].slice(1).forEach((cell, col) => {
          if (col < part * per || col >= (part + 1) * per) cell.remove();
        });
      }
      if (part) copy.caption.append(` (continued, columns ${part * per} to ${Math.min(cols, (part + 1) * per) - 1})`);
      return copy;
    });
    table.classList.add("folded");
    table.after(h("div", { class: "paper-fold", "aria-hidden": "true" }, copies));
  }
  return wide;
}
function unfold(table) {
  table.classList.remove("folded");
  if (table.nextElementSibling?.classList.contains("paper-fold")) table.nextElementSibling.remove();
}

// The q and k the scores compare: the last recorded before them (rotated, else normed, else as
// projected), and how the tables write their dot product.
function comparedQK(t) {
  return t.q_rotated ? ["q_rotated", "k_rotated"] : t.q_normed ? ["q_normed", "k_normed"] : ["q", "k"];
}
const QK_LABEL = { q: "q · k", q_normed: "q̂ · k̂", q_rotated: "q̃ · k̃" };

function products(a, b, srcA, srcB) {
  // "a0×b0 + a1×b1 + …" with every factor a checkable number
  return a.flatMap((x, i) => [i ? " + " : "", ...factor(x, num(x, srcA(i))), "×", ...factor(b[i], num(b[i], srcB(i)))]);
}

// A factor of a written product as a person writes it: a negative one in brackets, "0.50×(-1.25)",
// so that no sign stands beside the × or the +.
const factor = (value, shown = fmt(value)) => (fmt(value).startsWith("-") ? ["(", shown, ")"] : [shown]);

const KEPT_PANELS = 64; // stage panels kept per payload: every stage of the last seven places or so (up to nine stages each)
const HEAD_COLOURS = 16; // head-0 to head-15 in the stylesheet
// Head i's colour: head-0 to head-15; of more heads than colours, the inspected head keeps its
// own and every other is one grey (head-other), so that no colour stands for two heads.
const headColour = (i, nHeads, inspected) => (nHeads > HEAD_COLOURS && i !== inspected ? "head-other" : `head-${i % HEAD_COLOURS}`);

// ---- the explorer ------------------------------------------------------------------------

// otherConfigs: where the page around the explorer offers other configurations ("with the Attention
// lab's settings"), the same words in every mode (a view may be shared by the teaching example and the lab);
// a notebook's widget has Explorer.from_config. printAll: the page's button that prints every stage
// of the view's head and query, one after the other (a handout); a notebook prints the notebook.
function render({ model, el, otherConfigs, printAll = null }) {
  const original = model.get("payload");
  const madeView = model.get("first_view"); // a notebook cell's view of that payload (none on the page)
  let view = null; // derived from the payload once per payload change, never per interaction

  const ids = { query: uid("query"), head: uid("head"), stage: uid("stage") };
  const querySelect = h("select", { id: ids.query });
  const headSelect = h("select", { id: ids.head, "data-control": "head" });
  const stageSelect = h("select", { id: ids.stage });
  const previous = h("button", { type: "button", class: "step" }, "Previous");
  const next = h("button", { type: "button", class: "step primary" }, "Next");
  // a notebook's view of a real model resets to its own first view: not an "example"
  const reset = h("button", { type: "button", class: "reset" }, original.model ? "Reset view" : "Reset example");
  const allToggle = h("button", { type: "button", class: "toggle", "aria-pressed": "false" }, "All queries");
  const steps = h("ol", { class: "steps" });
  const live = h("p", { class: "sr-only", "aria-live": "polite", role: "status" });
  // The stage on screen, and beside it a section for each of the view's other stages, hidden
  // (content-visibility): a stage gone back to, or laid out ahead (layOutAhead), shows its panel as
  // it was laid out. Taken out and put back, the teaching example's Projections panel was laid out
  // anew, 6 to 15 ms.
  let stagePanel = h("section", { class: "stage", "aria-labelledby": ids.stage + "-title" });
  const sheets = new Map(); // stage -> its section
  const outputs = h("aside", { class: "outputs", "aria-label": "Head outputs" });
  const notes = h("section", { class: "notes", "aria-label": "Things to keep in mind" });
  const matrices = h("details", { class: "matrices" });
  const costs = h("section", { class: "cost-section", "aria-label": "Cost" });
  const overviewBox = h("section", { class: "overview", "aria-label": "Every head of this layer" });
  const layoutBox = h("div", { class: "layout" }, stagePanel, outputs);

  const controls = h(
    "div",
    { class: "controls" },
    h("div", { class: "field" }, h("label", { for: ids.query }, "Query token"), querySelect),
    h("div", { class: "field" }, h("label", { for: ids.head }, "Inspect head"), headSelect),
    h("div", { class: "field" }, h("label", { for: ids.stage }, "Calculation stage"), stageSelect),
    h("div", { class: "buttons" }, allToggle, previous, next, reset),
  );
  const root = h(
    "div",
    { class: "mha-explorer" },
    controls,
    h("nav", { "aria-label": "Stages" }, steps),
    overviewBox,
    live,
    layoutBox,
    costs,
    matrices,
    notes,
  );
  el.replaceChildren(root);
  // The page keeps the controls at the top of the window on a large screen (page.css; a notebook
  // does not). Their height is kept as it changes, never measured on the way (a measure would lay
  // the page out), for a number focused or a title scrolled to, which stop under them.
  const observers = []; // every observer of the view's sizes, disconnected with the view
  const watching = (observer) => (observers.push(observer), observer);
  let controlsHeight = 0;
  watching(new ResizeObserver(() => {
    controlsHeight = controls.offsetHeight;
    root.style.setProperty("--controls-height", `${controlsHeight}px`);
  })).observe(controls);
  // The stage tabs take rows of equal count: eight tabs too wide for one row go four and four, not
  // seven and one. (On a phone they are one row that scrolls sideways: the stylesheet's flex, which
  // ignores the columns.) Worked out when the width or the number of tabs changes.
  let stepsWidth = 0;
  const balanceSteps = () => {
    const n = steps.children.length;
    if (!n || !stepsWidth) return;
    const style = getComputedStyle(steps);
    const narrowest = 9 * parseFloat(style.fontSize); // a tab's: 9em, as the stylesheet's columns
    const gap = parseFloat(style.columnGap) || 0;
    const fit = Math.max(1, Math.floor((stepsWidth + gap) / (narrowest + gap))); // tabs a row has room for
    const rows = Math.ceil(n / fit);
    steps.style.gridTemplateColumns = `repeat(${Math.ceil(n / rows)}, minmax(0, 1fr))`; // (no more than fit)
  };
  watching(new ResizeObserver(([entry]) => {
    if (entry.contentRect.width === stepsWidth) return; // (its height changes with the rows)
    stepsWidth = entry.contentRect.width;
    balanceSteps();
  })).observe(steps);
  // A formula wider than its box (a phone, a large font) scrolls sideways: it is then a stop of
  // the Tab key, named, so that the arrow keys scroll it too. One that fits is no stop.
  const formulaWidth = watching(new ResizeObserver((entries) => {
    for (const { target } of entries) {
      const scrolls = target.scrollWidth > target.clientWidth;
      if (scrolls === target.hasAttribute("tabindex")) continue;
      if (scrolls) {
        target.tabIndex = 0;
        target.setAttribute("role", "region");
        target.setAttribute("aria-label", "formula, scrolls sideways");
      } else for (const name of ["tabindex", "role", "aria-label"]) target.removeAttribute(name);
    }
  }));
  const watchFormula = (box) => (formulaWidth.observe(box), box);
  // the stage's width as laid out (a fraction of a pixel too): the width its hidden sections are
  // laid out at (showSheet, layOutAhead), kept without a measure that would lay the page out
  let stageWidth = 0;
  const stageSize = watching(new ResizeObserver(([entry]) => {
    stageWidth = entry.borderBoxSize?.[0]?.inlineSize ?? entry.target.getBoundingClientRect().width;
  }));
  stageSize.observe(stagePanel);
  const stay = () => getComputedStyle(controls).position === "sticky";
  root.addEventListener("keydown", moveFocus);
  root.addEventListener("keydown", menuKeys);
  // The keys pressed inside the view stay inside it: a notebook (JupyterLab) would otherwise also
  // take them as its own commands: an arrow, the next cell; a letter typed to find a menu's entry,
  // "m" to make the cell Markdown, "d d" to delete it. Their own work (a menu's next option) is
  // left to the browser. With Ctrl, Alt or Cmd a key is the notebook's (Ctrl+S saves).
  root.addEventListener("keydown", (event) => {
    if (!(event.ctrlKey || event.altKey || event.metaKey)) event.stopPropagation();
  });
  root.addEventListener("mouseover", placeTip);
  root.addEventListener("focusin", placeTip);
  // Escape hides a number's full value (the tip over the focused or pointed number, which covers
  // the number beside it) until the focus or the pointer leaves that number. Heard on the whole
  // document, as it goes down (the view keeps its keys from what is around it): a mouse user's
  // focus is often outside the view.
  const tipsOff = new Set();
  const hideTips = (event) => {
    if (event.key !== "Escape" || !event.isTrusted) return; // (not the one it sends a map, below)
    const focused = root.contains(event.target) ? event.target.closest?.(".num") : null;
    for (const number of [focused, ...root.querySelectorAll(".num:hover")]) {
      if (!number) continue;
      number.classList.add("tip-off");
      tipsOff.add(number);
    }
    // the lens over a map pointed at (a focused map hears the key itself), until the pointer moves
    for (const map of root.querySelectorAll("canvas.heatmap:hover:not(:focus)")) map.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
  };
  document.addEventListener("keydown", hideTips, true);
  const tipBack = (event) => {
    const number = event.target.closest?.(".num");
    number?.classList.remove("tip-off");
    tipsOff.delete(number);
  };
  root.addEventListener("focusout", tipBack);
  root.addEventListener("mouseout", tipBack);
  // the Matrices view is built when first opened, once per payload
  matrices.addEventListener("toggle", () => {
    if (matrices.open && matrices.children.length === 1) fillMatrices();
  });

  function fillMatrices() {
    precisionOf(view);
    matrices.append(...roving([matricesView(view)]));
  }

  // Printed, the view is a handout: Matrices, the costs and the packed view are opened for it
  // (Matrices built at once: the print is laid out before a toggle event would come), and closed
  // again afterwards. A real model's Matrices and packed view, maps of hundreds of rows that took
  // some thirty pages, are printed only when open on screen.
  // Print all stages puts every other stage's panel, for the same head and query, around the one
  // on screen, in order, for that print only.
  let openedForPrint = [];
  let everyStage = false; // the print asked for by Print all stages
  let printedStages = [];
  let foldedForPrint = [];
  const beforePrint = () => {
    if (everyStage && !printedStages.length) addStages();
    openedForPrint = [...root.querySelectorAll("details:not([open])")].filter((details) => !details.matches(".folded-map") && !details.closest(".stage-kept") && !(view.payload.model && details.matches(".matrices, .packed")));
    for (const details of openedForPrint) details.open = true;
    if (matrices.open && matrices.children.length === 1) fillMatrices();
    if (!foldedForPrint.length) foldedForPrint = foldForPaper(root);
  };
  const afterPrint = () => {
    for (const details of openedForPrint) details.open = false;
    openedForPrint = [];
    for (const table of foldedForPrint) unfold(table);
    foldedForPrint = [];
    for (const section of printedStages) section.remove();
    printedStages = [];
  };
  window.addEventListener("beforeprint", beforePrint);
  window.addEventListener("afterprint", afterPrint);
  let printWhenHere = null; // the head on its way when Print all stages was pressed
  const printEveryStage = () => {
    const { head } = placeOf(view);
    if (!view.t.q.has(head)) {
      printWhenHere = head; // printed once it is drawn (update), not as "Loading head…"
      return;
    }
    everyStage = true;
    try {
      window.print(); // the dialog holds the page until it closes
    } finally {
      everyStage = false;
      afterPrint(); // where the browser sent no afterprint
    }
  };
  printAll?.addEventListener("click", printEveryStage);

  function addStages() {
    const place = placeOf(view);
    if (!view.t.q.has(place.head)) return; // the head is still on its way (Ctrl+P): the page prints what it shows
    const at = view.stageIds.indexOf(place.stage);
    const sections = view.stageIds.map((stage) => {
      if (stage === place.stage) return null;
      const panel = panelOf(view, { ...place, stage });
      claimCanvases(...panel.content);
      placeChildren(panel.box, panel.content);
      // lent to the paper: hidden from screen readers, as its title's id repeats the one on screen
      return h("section", { class: "stage printed-stage", "aria-hidden": "true" }, panel);
    });
    stagePanel.before(...sections.slice(0, at));
    stagePanel.after(...sections.slice(at + 1));
    printedStages = sections.filter(Boolean);
  }

  const state = () => ({ stage: model.get("stage"), head: model.get("head"), query: model.get("query"), all: Boolean(model.get("all_queries")) });
  const set = (changes) => {
    for (const [key, value] of Object.entries(changes)) model.set(key, value);
    model.save_changes();
  };

  // a menu says its new value as it changes: the announcement of the view it draws would say it twice
  let saidByMenu = false;
  const byMenu = (changes) => {
    saidByMenu = true;
    set(changes);
  };
  querySelect.addEventListener("change", () => byMenu({ query: Number(querySelect.value) }));
  headSelect.addEventListener("change", () => byMenu({ head: Number(headSelect.value) }));
  stageSelect.addEventListener("change", () => {
    pickStage(stageSelect.value);
    byMenu({ stage: stageSelect.value });
  });
  allToggle.addEventListener("click", () => set({ all_queries: !model.get("all_queries") }));
  // a step, if there is one that way: false for Previous at the first stage, Next at the last
  const move = (delta) => {
    const i = view.stageIds.indexOf(model.get("stage")) + delta;
    if (i < 0 || i >= view.stageIds.length) return false;
    pickStage(view.stageIds[i]);
    set({ stage: view.stageIds[i] });
    return true;
  };
  // a head's name in the head outputs (or the Output stage's lengths) is a button: it inspects that head
  let focusHead = null; // a head picked there by keyboard: its entry keeps the focus when the panel is redrawn
  let outputsTurn = 0; // the views asked for: the head outputs of the last one alone are placed (update)
  let focusShare = false; // (picked in the Output stage's list: its row there keeps it)
  const pickHead = (event) => {
    const button = event.target.closest?.("button[data-pick-head]");
    if (!button) return;
    const byKeys = document.activeElement === button;
    focusHead = byKeys && outputs.contains(button) ? Number(button.dataset.pickHead) : null;
    focusShare = byKeys && !outputs.contains(button);
    // the head outputs under the stage (a phone's one column): the stage, far above, is brought up
    // as it is for a stage picked, else the pick would seem to do nothing
    headPicked = outputs.contains(button) && outputs.getBoundingClientRect().top >= stagePanel.getBoundingClientRect().bottom;
    set({ head: Number(button.dataset.pickHead) });
  };
  layoutBox.addEventListener("click", pickHead); // (the stage's: the Output stage's list of how much each head adds)
  // the stages above the figure, and the thumbnails of a real model's heads, are each one Tab stop
  // (the current one); the arrow keys move between them, Enter or Space picks
  arrowKeys(steps, "button[data-go-stage]");
  arrowKeys(overviewBox, "button.thumb-button");
  // a real model's token strip: each token is a button that makes it the query
  arrowKeys(overviewBox, "button[data-query]");
  overviewBox.addEventListener("click", (event) => {
    const chip = event.target.closest?.("button[data-query]");
    if (chip) set({ query: Number(chip.dataset.query) });
  });
  let chips = []; // the strip's buttons, by position
  let chipOn = null; // the one marked as the query
  let tokenMark = null; // the ring over it
  // a strip of another width (the window resized) wraps its tokens anew: the ring follows its token
  const stripSize = watching(new ResizeObserver(() => chipOn && placeMark(chipOn)));
  // The thumbnails take rows of equal count, as the stage tabs do: twelve too many for one row go
  // six and six, not eleven and one. Worked out when the overview's width changes or new
  // thumbnails come (their box observed anew), once the page is laid out: a thumbnail's width is
  // read then (its label may be wider than its map: "Head 31"), at no cost of its own.
  let overviewWidth = 0;
  let thumbsSeen = null; // the thumbnails' box observed
  const thumbsSize = watching(new ResizeObserver((entries) => {
    for (const { target, contentRect } of entries) if (target === overviewBox) overviewWidth = contentRect.width;
    const box = thumbRows?.box;
    if (!box?.isConnected || !overviewWidth) return;
    const [width, gap, n] = [box.firstElementChild.offsetWidth, parseFloat(getComputedStyle(box).columnGap) || 0, box.children.length];
    const rows = Math.ceil(n / Math.max(1, Math.floor((overviewWidth + gap) / (width + gap))));
    const most = `${Math.ceil(n / rows) * (width + gap) - gap + 1}px`;
    if (box.style.maxWidth !== most) box.style.maxWidth = most;
  }));
  thumbsSize.observe(overviewBox);
  let thumbRows = null; // a real model's thumbnails: { box, size, cells, block }
  let thumbQuery = null; // the query their frame is on
  // the numbered stages above the figure are buttons too
  steps.addEventListener("click", (event) => {
    const button = event.target.closest?.("button[data-go-stage]");
    if (!button) return;
    set({ stage: button.dataset.goStage }); // (not brought into view: the tab, which keeps the focus, would leave it)
  });
  // the button at a stage's end: the next stage is read from its top, where the focus goes too
  // (the button pressed leaves the page with its stage); "steps": a key on a title that steps
  let wentOn = false;
  // A stage picked with Previous, Next or the stage menu, until it is drawn: its title is brought
  // into view when it lies out of it, or in the window's last third (under a real model's overview
  // of every head, or scrolled past), else Next would seem to do nothing. Where the controls stay
  // at the top, it comes just under them. The stage on screen is no pick.
  let pickedStage = null;
  let headPicked = false; // a head picked in the head outputs under the stage, until it is drawn
  const pickStage = (stage) => {
    pickedStage = stage !== model.get("stage") ? stage : null;
  };
  const outOfView = (top, bottom, height, stays) => top < (stays ? controlsHeight : 0) || bottom > height;
  // Seen as the step is painted, by an observer's first report: measured when the step is drawn,
  // the page would be laid out once more for it (8 ms at 512 tokens).
  const bringUp = (title) => {
    const seen = new IntersectionObserver(([entry]) => {
      seen.disconnect();
      const { top, bottom } = entry.boundingClientRect;
      const height = entry.rootBounds?.height ?? window.innerHeight;
      if (!stagePanel.contains(title) || !(outOfView(top, bottom, height, stay()) || top > (2 * height) / 3)) return;
      // Next or the stage menu pressed where the controls scroll with the page (a small window):
      // the controls at the top, the stage under them, when its title fits there, so that the
      // focus stays in view and Enter steps on; else the title at the top, and the focus with it
      // (left on Next, far above, it would be out of sight: the stage's end has a button on)
      const focused = controls.contains(document.activeElement) && !stay();
      const above = focused ? controls.getBoundingClientRect().top : 0;
      if (focused && bottom - above <= height) controls.scrollIntoView({ block: "start" });
      else {
        // (a head picked in the outputs under the stage: the focus, left there, comes up too)
        if (focused || outputs.contains(document.activeElement)) {
          title.tabIndex = -1; // focusable by script only
          title.dataset.steps = ""; // where Next's keys go on stepping (see STEP_KEYS)
          title.focus({ preventScroll: true });
        }
        title.scrollIntoView({ block: "start" });
      }
    });
    seen.observe(title);
  };
  layoutBox.addEventListener("click", (event) => {
    const button = event.target.closest?.("button[data-go-on]");
    if (!button) return;
    wentOn = true;
    set({ stage: button.dataset.goOn });
  });
  previous.addEventListener("click", () => move(-1));
  next.addEventListener("click", () => move(1));
  // With the focus on Previous or Next, a presentation clicker's Page Down and Page Up (and the
  // arrow keys beside them) step the stages, as Enter on Next does; elsewhere they scroll as ever.
  const STEP_KEYS = { PageDown: 1, ArrowRight: 1, PageUp: -1, ArrowLeft: -1 };
  for (const button of [previous, next]) {
    button.addEventListener("keydown", (event) => {
      const delta = STEP_KEYS[event.key];
      if (!delta || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
      if (move(delta)) event.preventDefault(); // past the first or last stage the key scrolls, as elsewhere
    });
  }
  // A stage's title that took the focus from Next (a small window, where Next went out of sight:
  // bringUp) goes on as Next: Enter, Page Down and → step on, Page Up and ← back, and the focus
  // moves to the next title (wentOn), so that a clicker or Enter keeps stepping
  layoutBox.addEventListener("keydown", (event) => {
    if (!event.target.matches?.("h2[data-steps]") || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const delta = event.key === "Enter" ? 1 : STEP_KEYS[event.key];
    if (!delta) return;
    wentOn = "steps";
    if (move(delta)) event.preventDefault();
    else wentOn = false;
  });
  layoutBox.addEventListener("focusout", (event) => {
    if (event.target.matches?.("h2[data-steps]")) delete event.target.dataset.steps; // left: a title again
  });
  reset.addEventListener("click", () => {
    // the teaching example and a configuration go back to their first payload; a real model's view
    // starts again on the layer and text it shows (which Python may have set since)
    const first = original.model ? model.get("payload") : original;
    if (model.get("payload") !== first) model.set("payload", first);
    // a notebook's view goes back to the view its cell made, with that payload: the one put back
    // here, or a real model's layer and text as long as Python sets no other (it then forgets it)
    set((original.model ? model.get("first_view") : madeView) ?? { stage: first.page_stages[0].id, head: 0, query: first.query, all_queries: false });
    // Matrices, costs, packed view: the first view has them closed (once drawn: a panel kept from
    // before, now shown again, may have its packed view open)
    const closeAll = () => {
      for (const open of el.querySelectorAll("details[open]")) open.open = false;
    };
    closeAll();
    queueMicrotask(closeAll);
    // the first view is read from its top: pressed far down a stage, the view's top comes up
    if (root.getBoundingClientRect().top < 0) root.scrollIntoView({ block: "start" });
  });

  // In a notebook, a real model's payload holds one head and Python sends the head on view, when
  // another, as the trait head_arrays (only that head's arrays): it is merged in here. The page
  // merges heads itself and never sets head_arrays.
  let merged = null; // [payload, head arrays, the two merged]
  let unanswered = null; // the timer that says a head asked of Python has not come
  function currentPayload() {
    const payload = inPlace(model.get("payload"));
    const extra = inPlace(model.get("head_arrays"));
    const heads = payload.stages.q?.heads;
    if (!extra || extra.head !== model.get("head") || !heads || heads.includes(extra.head)) return payload;
    if (!merged || merged[0] !== payload || merged[1] !== extra) {
      merged = [payload, extra, withHead(payload, extra)];
    }
    return merged[2];
  }

  // Each payload's view (its tensors and the panels built for it) is made once and kept while the
  // payload lives: going back to a head seen before, or to one built ahead, costs no work.
  const views = new WeakMap(); // payload source -> its view
  const frame = (p) => JSON.stringify([p.config, p.tokens, p.page_stages, p.notes, p.costs]);
  // another head of the layer on screen (a real model's): the tokens, stages, notes, costs and
  // overview are the same objects, so what was built from them stays
  const sameLayer = (a, b) => Boolean(a.model && b && a.model === b.payload.model && a.tokens === b.payload.tokens);
  // new values for the same configuration and tokens (a lab edit): the same selects, steps,
  // notes and costs; only the numbers change
  const sameFrame = (a, b) => Boolean(!a.model && b && !b.payload.model && frame(a) === frame(b.payload));

  function viewOf(source) {
    if (views.has(source)) return views.get(source);
    const payload = source.model ? { ...source, tokens: tokenLabels(source) } : source;
    const layer = sameLayer(payload, view);
    const made = {
      source,
      payload, // a real model's with its tokens as labels (see tokenLabels)
      t: tensors(payload.stages, layer ? view.t : null),
      w: tensors(payload.weights, layer ? view.w : null),
      stageIds: payload.page_stages.map((s) => s.id),
      formulas: layer || sameFrame(payload, view) ? view.formulas : Object.fromEntries(payload.page_stages.map((s) => [s.id, mathml(s.mathml)])),
      fixed: layer || sameFrame(payload, view) ? view.fixed : new Map(), // stage -> the parts of its panel no head or query changes
      panels: new Map(), // "stage|head|query|all" -> the stage panel's nodes
      sharedEquations: new Map(), // "k|head", "v|head" -> [a projection every query's panel shows, the maps in it]
      outputs: new Map(), // "head|query" (or, with many heads, "head") -> the head outputs panel's nodes
      warmed: false, // whether its other stages were built ahead once it was shown (warmStages)
      shares: null, // a real model's head lengths (model.head_shares) as a Tensor, once the Output stage reads them
      // the maps folded to a line that the user opened (see folded): kept from view to view
      unfolded: view?.unfolded ?? { open: new Set(), boxes: new Map() },
    };
    views.set(source, made);
    return made;
  }

  function setPayload() {
    const source = currentPayload();
    if (view && source === view.source) return; // what was built for it stays
    const before = view;
    view = viewOf(source);
    precisionOf(view); // for the overview's maps
    const { payload } = view;
    const kept = sameLayer(payload, before) || sameFrame(payload, before);
    if (!kept) {
      dropPlaces(); // sizes may change
      dropSheets(payload.page_stages.map((s) => s.id));
      for (const { id } of payload.page_stages) sheetOf(id); // (made now: a stage shown makes no element)
    }
    matrices.replaceChildren(h("summary", {}, h("h2", {}, "Matrices"))); // a heading, so that a screen reader lists the section
    if (matrices.open) fillMatrices();
    if (kept) return;
    fillMenu(querySelect, payload.tokens.map((_, i) => h("option", { value: i }, tokenName(payload, i))));
    fillMenu(headSelect, range(payload.config.n_heads).map((i) => h("option", { value: i }, `Head ${i}`)));
    fillMenu(stageSelect, payload.page_stages.map((s) => h("option", { value: s.id }, s.title)));
    steps.replaceChildren(...payload.page_stages.map((s, i) => h("li", { "data-stage": s.id }, h("button", { type: "button", "data-go-stage": s.id }, h("span", { class: "n" }, i + 1), h("span", { class: "title" }, s.title)))));
    stepShown = null; // new tabs (a Mask stage added before it): the current one is brought into the row again
    balanceSteps();
    notes.replaceChildren(h("h2", {}, "Things to keep in mind"), h("ul", {}, payload.notes.map((n) => h("li", { "data-note": n.id }, n.text))));
    const costsOpen = costs.firstChild?.open; // a panel opened stays open for the new numbers (n_kv_heads changed in the lab)
    costs.replaceChildren(costPanel(payload));
    costs.firstChild.open = Boolean(costsOpen);
    // another layer of the same text keeps the token strip as it is, laid out and scrolled (placeChildren)
    placeChildren(overviewBox, payload.model ? modelOverview(payload, (head) => set({ head }), overviewBox.querySelector(".token-strip")) : []);
    overviewBox.hidden = !payload.model;
    chips = [...overviewBox.querySelectorAll("button[data-query]")];
    chipOn = chips.find((chip) => chip.getAttribute("aria-pressed") === "true") ?? null;
    tokenMark = overviewBox.querySelector(".token-mark");
    stripSize.disconnect();
    if (chips.length) stripSize.observe(chips[0].parentElement);
    const thumb = overviewBox.querySelector("canvas.thumb");
    // the thumbnails' size in page pixels, their rows, and the tokens a row stands for
    thumbRows = thumb ? { box: overviewBox.querySelector(".thumbs"), size: parseFloat(thumb.style.width), cells: thumb.height, block: payload.model.overview_block } : null;
    thumbRows?.box.style.setProperty("--query-height", `${thumbRows.size / thumbRows.cells}px`);
    if (thumbsSeen) thumbsSize.unobserve(thumbsSeen);
    thumbsSeen = thumbRows?.box;
    if (thumbsSeen) thumbsSize.observe(thumbsSeen);
    thumbQuery = null;
  }

  // the view's stage (a known one), and the head and query in range
  function placeOf(v) {
    const { head, query } = clampState(state(), v.payload);
    const stage = v.stageIds.includes(state().stage) ? state().stage : v.stageIds[0];
    return { stage, head, query, all: state().all };
  }

  // each panel is built once per view and kept, the KEPT_PANELS used last: going back to one costs no work
  const panelKey = ({ stage, head, query, all }) => `${stage}|${head}|${query}|${all}`;
  function panelOf(v, { stage, head, query, all }) {
    const key = panelKey({ stage, head, query, all });
    const kept = v.panels.get(key);
    if (kept) {
      v.panels.delete(key); // now the last used
      v.panels.set(key, kept);
    } else {
      const i = v.stageIds.indexOf(stage);
      const info = v.payload.page_stages[i];
      hugeShown = false; // a rounding hint says how this panel's numbers are rounded
      precisionOf(v);
      const figure = slotsFor(`${ids.stage}|${stage}|${all}`, () => (all ? allQueries(v, query, head, stage) : STAGE_VIEWS[stage](v, query, head)));
      // the figure's own nodes, put in the stage's figure box when the panel is shown (update)
      const content = roving(nodesOf([figure]));
      // the figure's opening lines stay out of its box: a map wider than the box (a phone) scrolls
      // in it, and they must not scroll away with the map
      const leads = [];
      while (content[0] instanceof Element && content[0].matches("p.lead")) leads.push(content.shift());
      // a head that shares its keys and values (GQA, MQA) says whose they are, in numbers, at each
      // stage that reads them (the formulas say it in letters: k_{g,j})
      const shared = READS_KV.has(stage) ? sharedKV(v.payload, head, `Head ${head}'s`) : "";
      if (shared) leads.push(h("p", { class: "lead once" }, shared.trim()));
      const [above, box, below] = fixedParts(v, stage, all);
      // the last two stages take every head's output: the inspected one is marked "(inspected)" there
      const heads = stage === "concat" || stage === "output" ? `all heads (head ${head} inspected)` : `head ${head}`;
      const title = h("h2", { id: ids.stage + "-title" }, `${i + 1}. ${info.title}`, h("span", { class: "where" }, ` · ${heads} · query “`, tokenName(v.payload, query), "”"));
      v.panels.set(key, Object.assign([title, ...above, ...leads, box, ...below], { box, content }));
      for (const old of v.panels.keys()) {
        if (v.panels.size <= KEPT_PANELS) break;
        v.panels.delete(old);
      }
    }
    return v.panels.get(key);
  }

  // The formula, the explanations and the figure's box of a stage, the same for every head and
  // query: one set of nodes shared by the stage's panels, which stays in the page from one step to
  // the next (put in again, a formula alone took two milliseconds of the browser's style and
  // layout). Only the title and the figure's content change.
  function fixedParts(v, stage, all) {
    const key = `${stage}|${all}`;
    if (!v.fixed.has(key)) {
      const i = v.stageIds.indexOf(stage);
      const model = v.payload.model;
      v.fixed.set(key, [
        [
          watchFormula(h("div", { class: "formula" }, formulaParts(v.formulas[stage]))),
          h("p", { class: "explain" }, v.payload.page_stages[i].explanation),
          // a real model's layer: where X comes from, and where y goes
          stage === "projections" && model?.input_note ? h("p", { class: "explain where-from" }, model.input_note) : null,
          stage === "output" && model?.output_note ? h("p", { class: "explain where-from" }, model.output_note) : null,
          stage === "qk_norm" && model?.norm_note ? h("p", { class: "explain where-from" }, model.norm_note) : null,
          // a layer unlike the model's others (Gemma 3's local and global ones): where its window and rotation are seen
          (stage === "mask" || stage === "rope") && model?.layer_note ? h("p", { class: "explain where-from" }, model.layer_note) : null,
        ].filter(Boolean),
        // the box of the panels' figures
        h("div", { class: "figure", "data-stage": stage, "data-view": all ? "all" : "one" }),
        // the last stage: where to go from here (Next is at its end); the others: a way on from
        // where the reading ends (on a phone, Next is a long way up)
        i === v.stageIds.length - 1
          ? [h("p", { class: "next-steps" }, all ? "That is the whole path of every query through the layer. From here: follow another head, press All queries again to follow one query with its numbers" : "That is the whole path of one query through the layer. From here: follow another head or query token, press All queries to see every query at once", model ? ", or pick another layer." : `, ${otherConfigs ? `or change the configuration (heads, widths, a causal mask) ${otherConfigs}` : "or try another configuration (heads, widths, a causal mask) with Explorer.from_config"}.`)]
          : [h("p", { class: "go-on" }, h("button", { type: "button", "data-go-on": v.stageIds[i + 1] }, `Go on to ${i + 2}. ${v.payload.page_stages[i + 1].title} →`))],
      ]);
    }
    return v.fixed.get(key);
  }

  // A real model's head outputs show only the inspected head's numbers: one panel per head, whose
  // query is set in place (another query changes a title and one z, not the list of every head).
  // Built ahead (ahead), the panel on screen is left as it is: only that query's z is made.
  function outputsOf(v, { head, query }, ahead = false) {
    const key = v.payload.model && manyHeads(v.payload.config) ? String(head) : `${head}|${query}`;
    if (!v.outputs.has(key)) {
      precisionOf(v);
      v.outputs.set(key, roving(slotsFor(`${ids.stage}|outputs`, () => headOutputs(v, query, head))));
    }
    const nodes = v.outputs.get(key);
    if (nodes.showQuery && ahead && nodes[0].isConnected) nodes.prepare(query);
    else nodes.showQuery?.(query);
    return nodes;
  }

  // A payload the page may show next: a real model's head, fetched while the pointer rests on its
  // thumbnail or a key is pressed on it. Its panels for the stage and query on screen are built,
  // and their maps drawn, when the page is idle, so that the click only puts them in.
  let alive = true; // until the view is taken down (a notebook's cell run again): idle work then does nothing
  // Chromium gives no idle time while the pointer rests on an element, as it does on a thumbnail
  // about to be clicked: work asked for when idle runs after IDLE_WAIT ms at the latest.
  const IDLE_WAIT = 50;
  // (unhurried: work for a head no one is about to pick waits for the page to be idle, however long)
  const idle = (task, unhurried = false) => {
    const run = () => alive && task();
    if (window.requestIdleCallback) requestIdleCallback(run, unhurried ? {} : { timeout: IDLE_WAIT });
    else setTimeout(run, 0);
  };
  // This view's canvases, out of every panel that holds one: a panel kept for a payload shown again
  // (a lab left and come back to) claims new ones, and must not keep the old beside them.
  function dropPlaces() {
    for (const [place, pool] of canvasPlaces)
      if (place.startsWith(`${ids.stage}|`)) {
        for (const entry of pool) entry.box.remove();
        canvasPlaces.delete(place);
      }
  }
  // the panels of v at place, built now; with draw, their maps drawn too (on canvases out of the
  // page), or with draw "colours" their cells' colours worked out only, to be drawn when shown
  function buildFor(v, place, draw) {
    const panel = panelOf(v, place);
    const nodes = [...panel.content, ...outputsOf(v, place, true)];
    if (draw) for (const node of nodes) drawAhead(node, draw === true);
    if (draw === true) layOutAhead(v, place, panel);
  }
  // Another stage of the head and query on screen: its panel put in its section and laid out
  // there, at the stage's width, then hidden again, so that showing it lays out nothing new (a first
  // visit to a stage of the teaching example took 8 to 19 ms of layout, a visit again 1 to 2 ms)
  function layOutAhead(v, place, panel) {
    const sheet = sheets.get(place.stage);
    if (v !== view || !sheet || sheet === stagePanel || sheet.firstChild === panel[0] || panelKey(place) !== panelKey({ ...placeOf(v), stage: place.stage })) return;
    placeChildren(panel.box, panel.content);
    placeChildren(sheet, panel);
    panel[0].removeAttribute("id"); // (the title on screen has it)
    sheet.style.width = `${stageWidth || stagePanel.getBoundingClientRect().width}px`;
    sheet.classList.add("laying-out");
    void sheet.offsetHeight; // laid out now
    sheet.classList.remove("laying-out");
  }
  // The other heads of the layer on screen that the page holds (fetched ahead, or worked out on the
  // page: heads.js), head -> payload: once the view rests, their panels at its place are built too.
  let otherHeads = new Map();
  let aboutToPick = null; // the last head announced as about to be picked
  function buildAhead() {
    const upcoming = model.get("upcoming"); // { payload, head }
    if (!upcoming) return;
    if ([...otherHeads.values()][0]?.model !== upcoming.payload.model) otherHeads = new Map(); // another layer's
    otherHeads.set(upcoming.head, upcoming.payload);
    // a head about to be picked (the pointer rests on it) has its maps drawn on the spare canvas,
    // the latest such head only; one worked out ahead of any pick, their colours
    const { worked } = upcoming.payload;
    if (!worked) aboutToPick = upcoming;
    idle(() => {
      const latest = worked ? otherHeads.get(upcoming.head) === upcoming.payload : aboutToPick === upcoming;
      if (!latest || !view || upcoming.payload.model !== view.payload.model) return;
      if (upcoming.payload === view.source && upcoming.head === placeOf(view).head) return; // the head on screen (a payload may hold every head)
      const v = viewOf(upcoming.payload);
      const place = { ...placeOf(v), head: upcoming.head };
      if (v.t.q.has(place.head)) buildFor(v, place, worked ? "colours" : true);
    }, worked);
  }

  // A payload whose numbers were made exact in place (a real model's head worked out on the page,
  // then given the server's own arrays: heads.js): what was made from them is made again when next
  // read (the stages made from the scores, the maps' colours, the panels not on screen), and the
  // numbers on screen are written again. They move in the last float32 place or so; should one
  // shown with two decimals change, the panel on screen is built anew.
  function refresh() {
    const v = views.get(model.get("refined")?.payload);
    if (!v) return;
    for (const tensor of Object.values(v.t)) {
      if (tensor.slices) paintedCells.delete(tensor); // a head's own (X, concat and the output are the layer's, unchanged)
      if (tensor.derive) tensor.values = null;
    }
    const place = placeOf(v);
    const shown = v === view ? v.panels.get(panelKey(place)) : null;
    v.panels.clear();
    v.sharedEquations.clear();
    v.warmed = false; // the stages built ahead are gone: built again once it is shown (warmStages)
    if (!shown) return;
    v.panels.set(panelKey(place), shown);
    const numbers = () => [...stagePanel.querySelectorAll(".num[data-src]"), ...outputs.querySelectorAll(".num[data-src]")];
    let changed = false;
    for (const number of numbers()) {
      const [name, index] = number.dataset.src.split(":");
      const tensor = v.t[name] ?? v.w[name];
      if (!tensor) continue;
      const value = tensor.at(...index.split(",").map(Number));
      changed ||= number.textContent !== fmt(value);
      number.dataset.full = full(value);
    }
    if (changed) {
      // a number that had the focus has it again in the panel built anew
      const had = stagePanel.contains(document.activeElement) || outputs.contains(document.activeElement) ? document.activeElement.dataset.src : undefined;
      v.panels.clear();
      update(false);
      if (had) numbers().find((n) => n.dataset.src === had)?.focus({ preventScroll: true });
    } else warmStages(v);
  }

  // When the view rests a moment (no change for REST ms), the views one step away are built while
  // the page is idle, one per idle moment: the next stage (for Next), drawn too, and the next and
  // previous query (the arrow keys on the query menu), then the other stages. The queries share
  // this stage's canvases: they are drawn when shown (most of their maps are the ones on screen,
  // which need no drawing), so that they never take the one a head fetched ahead was drawn on.
  // Quick changes build nothing ahead.
  const REST = 250;
  let resting = null;
  function buildNeighbours() {
    clearTimeout(resting);
    if (!view.warmed) warmStages(view);
    const shown = view;
    const at = JSON.stringify(placeOf(view));
    const still = () => view === shown && JSON.stringify(placeOf(view)) === at;
    resting = setTimeout(() => {
      const place = placeOf(view);
      if (!still() || !view.t.q.has(place.head)) return;
      const i = view.stageIds.indexOf(place.stage);
      const stage = (s) => [{ ...place, stage: view.stageIds[s] }, true];
      const near = i + 1 < view.stageIds.length ? [stage(i + 1)] : [];
      for (const query of [place.query + 1, place.query - 1]) if (query >= 0 && query < view.payload.tokens.length) near.push([{ ...place, query }, false]);
      // then every other stage, nearest first: a long text's first visit to a stage works out its
      // maps' colours and draws them, up to 100 ms that a later visit does not repeat
      const others = view.stageIds.map((_, s) => s).filter((s) => s !== i && s !== i + 1);
      for (const s of others.sort((a, b) => Math.abs(a - i) - Math.abs(b - i) || b - a)) near.push(stage(s));
      for (const [next, draw] of near) idle(() => still() && buildFor(view, next, draw));
      // then this place's panel of every other head the page holds, its maps' colours worked out
      // and drawn when it is shown (the page's spare canvas is for a head about to be picked: see buildAhead)
      for (const [head, payload] of otherHeads)
        if (head !== place.head && payload.model === view.payload.model) idle(() => still() && buildFor(viewOf(payload), { ...place, head }, "colours"), true);
    }, REST);
  }

  // A real model's new layer, text or head: its other stages, for the head and query it opens on,
  // are built and drawn when the page is idle, without waiting for the view to rest. A long text's
  // first visit to a stage works out its maps' colours and draws them (15 to 25 ms at 512 tokens),
  // and a person often steps on through the stages at once. Stepping meanwhile leaves this work
  // to do; another head or query ends it (that place's own neighbours are built once it rests).
  function warmStages(v) {
    v.warmed = true;
    const place = placeOf(v);
    if (!v.payload.model || !v.t.q.has(place.head)) return;
    const i = v.stageIds.indexOf(place.stage);
    const others = v.stageIds.map((_, s) => s).filter((s) => s !== i);
    for (const s of others.sort((a, b) => Math.abs(a - i) - Math.abs(b - i) || b - a))
      idle(() => {
        const now = placeOf(v);
        if (view === v && now.head === place.head && now.query === place.query && now.all === place.all) buildFor(v, { ...place, stage: v.stageIds[s] }, true);
      }, true);
  }

  function update(announce) {
    for (const number of tipsOff) number.classList.remove("tip-off"); // a full value hidden with Escape shows again on the next view
    tipsOff.clear();
    const { payload } = view;
    const place = placeOf(view);
    const { stage, head, query, all } = place;
    const i = view.stageIds.indexOf(stage);
    const info = payload.page_stages[i];
    const loading = !view.t.q.has(head);
    const panel = loading ? Object.assign([], { content: [] }) : panelOf(view, place);
    const outputNodes = outputsOf(view, place);
    // Draw the heatmaps while their figures are still out of the page and the page is unchanged:
    // text drawn on a canvas in the page first brings the page's styles up to date.
    claimCanvases(...panel.content, ...outputNodes);

    allToggle.setAttribute("aria-pressed", String(all));
    querySelect.value = String(query);
    headSelect.value = String(head);
    stageSelect.value = stage;
    // at the first or last stage the button stays focusable and does nothing (aria-disabled): a
    // disabled button would drop the focus, and the next Enter would press whatever took it
    previous.setAttribute("aria-disabled", String(i <= 0));
    next.setAttribute("aria-disabled", String(i >= view.stageIds.length - 1));
    for (const li of steps.children) {
      // on the button, which takes the focus: a screen reader says it is the current step
      setAttr(li.firstChild, "aria-current", li.dataset.stage === stage ? "step" : null);
      setAttr(li.firstChild, "tabindex", li.dataset.stage === stage ? "0" : "-1");
    }
    if (stage !== stepShown) {
      stepShown = stage;
      requestAnimationFrame(showStep);
    }
    clearTimeout(unanswered);
    if (loading) {
      // a real model's payload holds one head at a time; the adapter fetches the one asked for.
      // Meanwhile the stage on screen stays, dimmed, with a note held in sight at its foot (blanked
      // for the 60 ms a head takes, it flashed; and a page shortened for a moment lost its place).
      // A head that cannot be fetched gives the view back to the head on screen (page.js).
      const note = h("p", { class: "loading-head" }, `Loading head ${head}…`);
      const shown = stagePanel.querySelector(":scope > .loading-head");
      if (shown) shown.replaceWith(note);
      else if (stagePanel.querySelector(":scope > h2")) {
        stagePanel.classList.add("waiting");
        stagePanel.append(note);
      } else stagePanel.replaceChildren(h("h2", { id: ids.stage + "-title" }, `${i + 1}. ${info.title}`), note); // nothing on screen to keep
      // in a notebook the head comes from the Python that made the view: none answers in a saved
      // notebook reopened, or after the kernel restarted (the page's own fetch says its failures)
      if (model.get("head_arrays") !== undefined) {
        unanswered = setTimeout(() => {
          const note = stagePanel.querySelector(".loading-head");
          if (note) note.textContent = `Head ${head} needs the Python kernel that made this view, and no answer came: if the kernel was restarted, or the notebook was saved and opened again, run the cell again.`;
        }, UNANSWERED_MS);
      }
    } else {
      const sheet = sheetOf(stage);
      placeChildren(panel.box, panel.content);
      placeChildren(sheet, panel);
      // a stage changed from outside (a notebook's Python, a link) hides the section that holds the
      // focus: the focus goes to the stage shown, not left on an element out of sight (the page's
      // own ways to change stage move it first, or go on with wentOn)
      const hidden = sheet !== stagePanel && !wentOn && stagePanel.contains(document.activeElement);
      if (sheet !== stagePanel) showSheet(sheet);
      panel[0].id = ids.stage + "-title"; // (a hidden section's title has none: see showSheet)
      stagePanel.classList.remove("waiting");
      for (const figure of stagePanel.querySelectorAll(".heatmap-figure[data-query-row]")) figure.markRow(query); // (shared by every query's panel)
      const share = focusShare && stagePanel.querySelector(".head-shares .bar-row.inspected .tok");
      if (share) {
        focusShare = false;
        share.tabIndex = -1; // focusable by script only: Tab goes on from here
        share.focus({ preventScroll: true });
      }
      const title = panel[0];
      if (hidden || wentOn) {
        title.tabIndex = -1; // focusable by script only
        if (wentOn === "steps") title.dataset.steps = ""; // stepped from the title before: this one steps on
        title.focus({ preventScroll: true });
      }
      if (wentOn) {
        const { top, bottom } = title.getBoundingClientRect(); // (at once: the focus is there)
        if (outOfView(top, bottom, window.innerHeight, stay())) title.scrollIntoView({ block: "start" }); // (a phone's: it lies far above)
      } else if (pickedStage === stage || headPicked) bringUp(title);
      if (pickedStage === stage) pickedStage = null;
      headPicked = false;
    }
    wentOn = false;
    let printing = false;
    if (printWhenHere !== null && (printWhenHere !== head || !loading)) {
      printing = printWhenHere === head;
      if (printing) setTimeout(printEveryStage); // after this view is painted
      printWhenHere = null; // (another head picked meanwhile: no print)
    }
    const turn = ++outputsTurn;
    const placeOutputs = () => {
      if (turn !== outputsTurn || outputs.firstChild === outputNodes[0]) return; // (a later view's placed since)
      // what has the focus in a head's entry keeps it in the entries drawn anew (the head arrived)
      const had = outputs.contains(document.activeElement) ? document.activeElement : null;
      const [entryHead, pick] = [had?.closest(".head-output")?.dataset.head, had?.dataset.pickHead];
      outputNodes.arrange?.();
      placeChildren(outputs, outputNodes);
      showInspected();
      const back = pick !== undefined ? outputs.querySelector(`button[data-pick-head="${pick}"]`) : null;
      if (back) back.focus({ preventScroll: true });
      else if (entryHead !== undefined && focusHead === null) focusHead = Number(entryHead);
    };
    // A real model's head outputs for a head picked from outside their list (a thumbnail, a menu,
    // a notebook): placed two frames later. The frame that answers the change shows the stage; the
    // list's two entries that change (the inspected z: some 130 boxes at 512 tokens, 3 to 4 ms of
    // layout and paint) follow in the next, as the overview's query mark does (markLater). A pick
    // in the list itself, the first view and a print place them at once.
    const later = view.payload.model && outputs.firstChild && !outputs.contains(document.activeElement) && focusHead === null && !printing; // (a head picked in the list by keys: its entry takes the focus below)
    if (later) requestAnimationFrame(() => requestAnimationFrame(placeOutputs));
    else placeOutputs();
    if (focusHead !== null) {
      const entry = outputs.querySelector(`.head-output[data-head="${focusHead}"]`);
      focusHead = null;
      if (entry) {
        entry.tabIndex = -1; // focusable by script only: Tab goes on from here
        entry.focus({ preventScroll: true }); // where the button picked was: the page stays where the user has it
      }
    }
    for (const button of overviewBox.querySelectorAll("button[data-head]")) {
      setAttr(button, "aria-pressed", String(Number(button.dataset.head) === head));
      setAttr(button, "tabindex", Number(button.dataset.head) === head ? "0" : "-1");
    }
    markLater();
    // the view a menu asked for is not announced (the live region is emptied, so that it never
    // holds a view no longer shown); one that comes later (a head fetched) is
    const quiet = saidByMenu;
    saidByMenu = false;
    if (announce && quiet) live.textContent = "";
    else if (announce) {
      // said once: a head fetched is drawn twice (loading, then its numbers), with the same words
      const line = `Stage ${i + 1} of ${view.stageIds.length}: ${info.title}. Head ${head}, query ${tokenName(payload, query)}${all ? ", all queries shown" : ""}.`;
      if (live.textContent !== line) live.textContent = line;
    }
    buildNeighbours();
  }

  // the section of a stage, in the page (hidden until shown)
  function sheetOf(stage) {
    if (!sheets.size) sheets.set(stage, stagePanel); // (the section on screen, when it is kept under no stage)
    if (!sheets.has(stage)) {
      const sheet = h("section", { class: "stage-kept" });
      outputs.before(sheet);
      sheets.set(stage, sheet);
    }
    return sheets.get(stage);
  }
  // the section shown, the one before hidden at the width it had: only the shown one is the
  // "stage", and its title alone has the title's id
  function showSheet(sheet) {
    stagePanel.querySelector(":scope > h2")?.removeAttribute("id");
    stagePanel.removeAttribute("aria-labelledby");
    stagePanel.className = "stage-kept";
    if (stageWidth) stagePanel.style.width = `${stageWidth}px`; // (anything read in it is laid out as it was)
    stageSize.unobserve(stagePanel);
    sheet.className = "stage";
    sheet.style.width = ""; // (laid out ahead at the stage's width: see layOutAhead)
    sheet.setAttribute("aria-labelledby", ids.stage + "-title");
    stageSize.observe(sheet);
    stagePanel = sheet;
  }
  // the sections of other stages than the one shown, out of the page (another layer or text);
  // the one shown is kept under its stage only if the new view has that stage
  function dropSheets(stages) {
    for (const [stage, sheet] of sheets) {
      if (sheet !== stagePanel) sheet.remove();
      if (sheet !== stagePanel || !stages.includes(stage)) sheets.delete(stage);
    }
  }

  // The query in the overview, once the page is idle: the interaction's frame paints the view
  // asked for and nothing else (marking it in the same frame cost 3 to 5 ms at 512 tokens)
  let marksQueued = false;
  function markLater() {
    if (marksQueued || !chips.length) return;
    marksQueued = true;
    idle(() => {
      marksQueued = false;
      const { query } = placeOf(view); // the query now, however many came meanwhile
      markQuery(chips[query] ?? null, query);
    });
  }

  // The query's token in the strip: marked (two buttons touched, whatever the length), and
  // brought into the strip's box when it lies outside it (the box only, never the page); each
  // thumbnail's frame moved to its row
  function markQuery(chip, query) {
    if (thumbRows && query !== thumbQuery) {
      // every thumbnail's frame from two properties of their box (not the overview's: its 512
      // tokens would inherit them, and be styled again)
      const { box, size, cells, block } = thumbRows;
      box.style.setProperty("--query-top", `${(Math.floor(query / block) * size) / cells}px`);
      thumbQuery = query;
    }
    if (chip === chipOn) return;
    for (const [button, on] of [[chipOn, false], [chip, true]]) {
      button?.setAttribute("aria-pressed", String(on));
      button?.setAttribute("tabindex", on ? "0" : "-1");
    }
    chipOn = chip;
    const top = placeMark(chip);
    const strip = chip?.parentElement;
    if (chip && (top < 0 || top + chip.offsetHeight > strip.clientHeight)) {
      strip.scrollTop += top - (strip.clientHeight - chip.offsetHeight) / 2; // the query's row in the middle (snapped to a row)
    }
  }

  // The ring over the query's token, where that token now lies; returns the token's top in the
  // strip's box as it scrolls now
  function placeMark(chip) {
    const mark = tokenMark;
    if (!mark) return 0;
    mark.hidden = !chip;
    if (!chip) return 0;
    const strip = chip.parentElement;
    const [c, s] = [chip.getBoundingClientRect(), strip.getBoundingClientRect()];
    const top = c.top - s.top - strip.clientTop;
    Object.assign(mark.style, { width: `${c.width}px`, height: `${c.height}px`, transform: `translate(${c.left - s.left - strip.clientLeft + strip.scrollLeft}px, ${top + strip.scrollTop}px)` });
    return top;
  }

  // On a phone the stage tabs are one row that scrolls sideways: the current one is brought into
  // it (the row only, never the page), read in the next frame, whose layout is already done
  let stepShown = null;
  const oneRow = window.matchMedia("(max-width: 520px)"); // the stylesheet's phone
  function showStep() {
    const tab = steps.querySelector('[aria-current="step"]');
    if (!oneRow.matches || !tab || steps.scrollWidth <= steps.clientWidth) return;
    const [box, at] = [steps.getBoundingClientRect(), tab.getBoundingClientRect()];
    if (at.left < box.left || at.right > box.right) steps.scrollLeft += at.left - box.left - (box.width - at.width) / 2;
  }

  // A real model's head outputs scroll in a box of their own: the inspected head is brought into
  // it (the box only, never the page), in the frame's own layout
  function showInspected() {
    const list = outputs.querySelector(".head-list.compact");
    if (!list) return;
    requestAnimationFrame(() => {
      const mine = list.querySelector(".inspected");
      if (!mine || !list.isConnected) return;
      const box = list.getBoundingClientRect();
      const at = mine.getBoundingClientRect();
      if (at.top < box.top || at.bottom > box.bottom) list.scrollTop += at.top - box.top - Math.max(0, (box.height - at.height) / 2); // its head at the top when it is taller than the box
    });
  }

  setPayload();
  update(false);
  // Several traits may change in one go (reset, a link); draw once, before the next paint.
  let payloadChanged = false;
  let queued = false;
  const schedule = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      if (payloadChanged) setPayload();
      payloadChanged = false;
      update(true);
    });
  };
  const onState = schedule;
  const onPayload = () => {
    payloadChanged = true;
    schedule();
  };
  model.on("change:stage", onState);
  model.on("change:head", onPayload); // another head may bring or drop the merged head arrays
  model.on("change:query", onState);
  model.on("change:all_queries", onState);
  model.on("change:payload", onPayload);
  model.on("change:head_arrays", onPayload);
  model.on("change:upcoming", buildAhead);
  model.on("change:refined", refresh);
  return () => {
    alive = false;
    document.removeEventListener("keydown", hideTips, true);
    clearTimeout(resting);
    window.removeEventListener("beforeprint", beforePrint);
    window.removeEventListener("afterprint", afterPrint);
    printAll?.removeEventListener("click", printEveryStage);
    for (const observer of observers) observer.disconnect();
    dropPlaces();
    model.off?.("change:upcoming", buildAhead);
    model.off?.("change:refined", refresh);
    model.off?.("change:head_arrays", onPayload);
    model.off?.("change:all_queries", onState);
    model.off?.("change:stage", onState);
    model.off?.("change:head", onPayload);
    model.off?.("change:query", onState);
    model.off?.("change:payload", onPayload);
  };
}

// container's children made nodes, in order, leaving in place those already there: a node taken
// out and put back is styled and laid out anew. The children that go are taken out last, so that
// the container is never shorter than it ends: a page read meanwhile (a focus leaving one of them)
// would lose its scroll position to a page cut short.
function placeChildren(container, nodes) {
  const kept = new Set(nodes);
  const gone = new Set([...container.childNodes].filter((child) => !kept.has(child)));
  let at = container.firstChild;
  for (const node of nodes) {
    while (gone.has(at)) at = at.nextSibling;
    if (node === at) at = at.nextSibling;
    else container.insertBefore(node, at);
  }
  for (const child of gone) child.remove();
}

// An attribute set (null: removed) only when its value changes, so that a step touches only the
// buttons whose state it moves.
function setAttr(element, name, value) {
  if (element.getAttribute(name) === value) return;
  if (value === null) element.removeAttribute(name);
  else element.setAttribute(name, value);
}

function clampState({ head, query }, payload) {
  const inRange = (v, n) => (Number.isInteger(v) && v >= 0 && v < n ? v : 0);
  return { head: inRange(head, payload.config.n_heads), query: inRange(query, payload.tokens.length) };
}

// Ids must be unique in the document. A notebook imports this module once per widget, so each
// copy has its own counter: a random prefix per copy keeps two widgets' ids apart.
const UID_PREFIX = Math.random().toString(36).slice(2, 8);
let uidCount = 0;
function uid(name) {
  uidCount += 1;
  return `mha-${name}-${UID_PREFIX}-${uidCount}`;
}

// ---- the stage views: (view, query, head) -> nodes ---------------------------------------

function projections(view, query, head) {
  const { payload, t, w } = view;
  const c = payload.config;
  const g = payload.kv_group[head];
  // K or V drawn as a map (a long text) has no numbers to point at: the hint names those that do
  const n = payload.tokens.length;
  const pointable = ["q", n * c.d_head <= TABLE_LIMIT && "K", n * c.d_v <= TABLE_LIMIT && "V"].filter(Boolean);
  const which = pointable.length === 1 ? "q" : `${pointable.slice(0, -1).join(", ")} or ${pointable.at(-1)}`;
  const calc = h("p", { class: "calc how", "aria-live": "off" }, c.d_model <= 16 ? `Point at a number of ${which} to see the row of X and the column of W that made it.` : `Point at a number of ${which} to see the largest products of x and the column of W that made it.`);
  const how = calc.textContent; // the instruction, which a breakdown replaces
  const links = [];
  const lit = []; // the cells lit for the number pointed at last, in any of the three equations

  // X as a heatmap (more than TABLE_LIMIT numbers) is drawn once, for K: V's product refers to it
  const bigX = n * c.d_model > TABLE_LIMIT;
  function linked(name, weight, outRows, dOut) {
    // name[r, c] = X[outRows[r]] · W[:, c]; q is the query's row alone (K and V of a one-token text are one row too)
    const one = name === "q";
    const xTable = name === "v" && bigX ? h("p", { class: "same-x" }, "X, as above") : grid({
      source: [t.x, one ? `row ${outRows[0]}` : "all"],
      caption: one ? h("span", {}, sub("x", tokenName(payload, query))) : "X",
      rows: outRows,
      cols: range(c.d_model),
      value: (r, k) => t.x.at(outRows[r], k),
      plane: one ? null : t.x.plane(), // every token's row, in order
      scale: one && bigX ? xScale(t, n, c.d_model) : undefined, // the query's row on the colours of X's map below it
      src: (r, k) => `x:${outRows[r]},${k}`,
      rowLabel: (row) => h("span", { class: "tok" }, tokenName(payload, row)), tokenRows: true,
      rowText: (row) => tokenName(payload, row),
      mark: one ? undefined : query, // the query's row, framed in a map of every token's (outRows: them all)
    });
    const own = weight === "W_Q" ? head : g; // the query head, or the K/V head it reads
    const wMap = grid({
      source: [w[weight], String(own)],
      caption: h("span", {}, sup(sub("W", own), name.toUpperCase())),
      rows: range(c.d_model),
      cols: range(dOut),
      value: (k, j) => w[weight].at(own, k, j),
      plane: w[weight].plane(own), // (Gemma 3's 640 × 256 read through value(): 6 ms a W)
      src: (k, j) => `${weight}:${own},${k},${j}`,
    });
    // a W of many rows (a real model's hundreds, a map of a pixel or two each; a lab's past 16) is
    // folded to its name and size, so that the three equations stay about a screen tall; opened,
    // it stays open for every query and head
    const wTable = !payload.model && c.d_model <= 16 ? wMap : folded(view, weight, [sup(sub("W", own), name.toUpperCase()), `: ${c.d_model} × ${dOut} numbers`, h("span", { class: "fold-hint" }, " (show them)")], wMap);
    // b^Q, b^K or b^V of that head: added to every row of the product
    const bias = c.bias ? w[`b_${name.toUpperCase()}`] : null;
    const bTable = bias && grid({
      source: [bias, String(own)],
      caption: h("span", {}, sup(sub("b", own), name.toUpperCase())),
      rows: [0],
      cols: range(dOut),
      value: (_, j) => bias.at(own, j),
      src: (_, j) => `b_${name.toUpperCase()}:${own},${j}`,
      rowLabel: biasRow,
      limit: 16, // a longer bias is a strip: it would widen the equation more than the product does
    });
    const outTable = grid({
      source: [t[name], `${own} ${one ? outRows[0] : "all"}`],
      caption: h("span", {}, sub(one ? "q" : name.toUpperCase(), own)), // q_i, K_i, V_i: head i's, as its W_i
      rows: outRows,
      cols: range(dOut),
      value: (r, j) => t[name].at(own, outRows[r], j),
      plane: one ? null : t[name].plane(own),
      src: (r, j) => `${name}:${own},${outRows[r]},${j}`,
      rowLabel: (row) => h("span", { class: "tok" }, tokenName(payload, row)), tokenRows: true,
      rowText: (row) => tokenName(payload, row),
      mark: one ? undefined : query,
      onCell: (r, j) => {
        for (const cell of lit.splice(0)) cell.classList.remove("hl"); // one derivation lit at a time
        lit.push(
          ...xTable.querySelectorAll(`td[data-row="${r}"]`),
          ...wTable.querySelectorAll(`td[data-col="${j}"]`),
          ...(bTable ? bTable.querySelectorAll(`td[data-col="${j}"]`) : []),
          outTable.querySelector(`td[data-row="${r}"][data-col="${j}"]`),
        );
        for (const cell of lit) cell.classList.add("hl");
        const x = range(c.d_model).map((k) => t.x.at(outRows[r], k));
        const wc = range(c.d_model).map((k) => w[weight].at(own, k, j));
        const value = t[name].at(own, outRows[r], j);
        // every product when they are few; of hundreds (a real model's d_model), the largest five
        const terms = c.d_model <= 16 ? range(c.d_model) : range(c.d_model).sort((a, b) => Math.abs(x[b] * wc[b]) - Math.abs(x[a] * wc[a])).slice(0, 5);
        calc.classList.remove("how"); // a sum of numbers now, not the instruction
        calc.replaceChildren(
          `${name}[${tokenName(payload, outRows[r])}][${j}] = `,
          ...terms.flatMap((k, i) => [i ? " + " : "", ...factor(x[k]), "×", ...factor(wc[k])]),
          c.d_model > 16 ? ` + … (the 5 largest of ${c.d_model} products x[m]×W[m][${j}])` : "",
          bias ? ` + ${factor(bias.at(own, j)).join("")} (bias)` : "",
          ` = ${fmt(value)}`,
        );
      },
    });
    links.push(outTable);
    const shown = equation(xTable, ["×", wTable], bTable && ["+", bTable], ["=", outTable]);
    // the derivation stays lit when the pointer leaves for empty space, to be read; a number
    // pointed at or focused that is no part of it (another equation's W, say) puts it out, lest it
    // seem that number's own
    const away = (event) => {
      const cell = event.target.closest?.("td[data-col]");
      if (!cell || !lit.length || lit.includes(cell) || links.some((table) => table.contains(cell))) return;
      for (const lone of lit.splice(0)) lone.classList.remove("hl");
      calc.classList.add("how");
      calc.replaceChildren(how);
    };
    shown.addEventListener("mouseover", away);
    shown.addEventListener("focusin", away);
    return shown;
  }

  // K and V are the same for every query. As maps (no numbers linked to this panel's calculation),
  // each head's are built once and shared by the panels of its queries: they stay in the page
  // from one query to the next.
  const all = range(n);
  const keysOrValues = (name, weight, dOut) => {
    if (n * dOut <= TABLE_LIMIT) return linked(name, weight, all, dOut);
    const key = `${name}|${head}`;
    if (view.sharedEquations.has(key)) {
      const [equation, maps] = view.sharedEquations.get(key);
      slots.next += maps; // the maps after it keep the places (and canvases) they have in every query's panel
      return equation;
    }
    const first = slots.next;
    const equation = linked(name, weight, all, dOut); // (its maps take their places)
    // its maps of every token frame the query shown, moved when the panel is (update)
    for (const figure of equation.querySelectorAll(".heatmap-figure")) if (figure.markRow) figure.dataset.queryRow = "";
    view.sharedEquations.set(key, [equation, slots.next - first]);
    return equation;
  };
  // the breakdown of a number pointed at comes right under its equation: under q's when only q's
  // numbers can be pointed at, else under all three
  const onlyQ = pointable.length === 1;
  return [
    h("p", { class: "lead" }, `Head ${head} projects the full ${c.d_model}-wide input.`, sharedKV(payload, head)),
    linked("q", "W_Q", [query], c.d_head),
    onlyQ ? calc : null,
    keysOrValues("k", "W_K", c.d_head),
    keysOrValues("v", "W_V", c.d_v),
    onlyQ ? null : calc,
    w.W_Q.slices ? null : packed(view, query, head), // a real model's payload holds one head's W^Q
  ];
}

// Beyond this many tokens a one-query view lists the top keys and draws the rest on canvas.
const MANY_TOKENS = 24;
const TOP_KEYS = 8;

// The keys this query may see (all of them, unless a causal mask or a sliding window hides some).
function visibleKeys(view, query, head) {
  const { t } = view;
  const n = view.payload.tokens.length;
  return t.mask ? range(n).filter((j) => t.mask.at(head, query, j) > -Infinity) : range(n);
}

// The visible keys with the most weight, most first: the highest scaled scores, as softmax keeps
// their order. Hidden keys (weight exactly 0) are never listed.
function topKeys(view, query, head) {
  return visibleKeys(view, query, head)
    .sort((a, b) => view.t.weights.at(head, query, b) - view.t.weights.at(head, query, a))
    .slice(0, TOP_KEYS);
}

// One vector: a row of checkable numbers when short, a heatmap strip when long.
function vector(caption, length, value, src, label, labelsAtLeast = 0, scale = undefined, colLabel = (e) => `[${e}]`) {
  if (length <= 16) return h("div", { class: "vector" }, h("span", { class: "vector-caption" }, caption, " = "), vec(range(length).map((e) => num(value(e), src(e)))));
  return heatmap({ caption, rows: 1, cols: length, value: (_, e) => value(e), rowLabel: () => label, colLabel, labelsAtLeast, scale });
}

function keyStrip(view, query, head, name, caption, kind) {
  const { payload, t } = view;
  const n = payload.tokens.length;
  // the weights of keys the mask hid are grey and struck through, not a white zero like a weak key's
  const masked = kind === "weights" && t.mask ? (_, j) => hiddenKey(t, head, query, j) : undefined;
  // in a box of its own: wider than a phone, it scrolls there, and the table under it, which fits,
  // is not dimmed by the fade of a figure scrolled sideways
  return h("div", { class: "wide-table" }, heatmap({ caption, rows: 1, cols: n, value: (_, j) => t[name].at(head, query, j), rowLabel: () => tokenName(payload, query), colLabel: (j) => keyLabel(payload, j), colName: (j) => tokenName(payload, j), kind, masked }));
}

function scores(view, query, head) {
  if (view.payload.tokens.length > MANY_TOKENS || view.payload.config.d_head > 8) return scoresMany(view, query, head);
  const { payload, t } = view;
  const g = payload.kv_group[head];
  const n = payload.tokens.length;
  const root = Math.sqrt(payload.config.d_head);
  const divisor = 1 / scaleOf(payload.config); // √d_head unless the layer sets its own scale
  const [qName, kName] = comparedQK(t);
  const q = t[qName].row(head, query);
  const seen = new Set(visibleKeys(view, query, head)); // a causal or windowed layer hides the others next
  const rows = range(n).map((j) =>
    h(
      "tr",
      { class: seen.has(j) ? null : "masked" },
      h("th", { scope: "row" }, rowName(tokenName(payload, j)), seen.has(j) ? null : h("span", { class: "pos" }, " · masked next")),
      h("td", { class: "terms" }, products(q, t[kName].row(g, j), (e) => `${qName}:${head},${query},${e}`, (e) => `${kName}:${g},${j},${e}`)),
      h("td", {}, num(t.scores.at(head, query, j), `scores:${head},${query},${j}`)),
      h("td", { class: "div" }, "÷ ", h("span", { class: "worked" }, fmtConstant(divisor))), // in the numbers' type, as the softmax's Σ eˢ
      h("td", {}, num(t.scaled.at(head, query, j), `scaled:${head},${query},${j}`)),
    ),
  );
  // by hand: the rounded products added, then divided by the divisor as shown
  const off = range(n).flatMap((j) => {
    const k = t[kName].row(g, j);
    const dot = byHandFmt(q.reduce((sum, x, e) => sum + rounded(x) * rounded(k[e]), 0));
    const scaled = byHandFmt(rounded(t.scores.at(head, query, j)) / Number(fmtConstant(divisor)));
    const [score, scaledShown] = [fmt(t.scores.at(head, query, j)), fmt(t.scaled.at(head, query, j))];
    return [
      ...(dot !== score ? [[`${QK_LABEL[qName]} of “${tokenName(payload, j)}”`, dot, score]] : []),
      ...(scaled !== scaledShown ? [[`the scaled score of “${tokenName(payload, j)}”`, scaled, scaledShown]] : []),
    ];
  });
  return [
    h("p", { class: "lead" }, "q = ", vec(q.map((x, e) => num(x, `q:${head},${query},${e}`))), ` for “`, tokenName(payload, query), `”, head ${head}. `, ownScale(payload.config) ? `This layer's config sets the scale, ${scaleShownOf(payload.config)}: each score is divided by ${fmtConstant(divisor)}, in place of √d_head = √${payload.config.d_head} = ${fmtConstant(root)}.` : `√d_head = √${payload.config.d_head} = ${fmtConstant(root)}.`),
    h(
      "table",
      { class: "calc-table" },
      h("caption", {}, "Dot product of the query with each key, then scaled"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "key"), h("th", { scope: "col" }, `${QK_LABEL[qName]} as a sum of products`), h("th", { scope: "col" }, QK_LABEL[qName]), h("th", { scope: "col" }, unseen("divided by √d_head")), h("th", { scope: "col" }, "scaled"))),
      h("tbody", {}, rows),
    ),
    seen.size < n ? h("p", { class: "hint" }, "Keys marked “masked next” are hidden from the query: the mask, next, sets their scores to −∞, so their weights are 0.") : null,
    // √2 is shown as 1.414: the note says so where the divisor has decimals
    roundingHint(off, fmtConstant(divisor).includes(".") ? roundedAs(`, the divisor ${fmtConstant(divisor)} to three`) : undefined),
  ];
}

function mask(view, query, head) {
  const { payload, t } = view;
  const hidden = (j) => {
    const v = t.mask.at(head, query, j);
    return v === null || v === -Infinity;
  };
  const n = payload.tokens.length;
  const count = range(n).filter(hidden).length;
  const windowSize = payload.config.sliding_window;
  const rule = windowSize ? `keys after it, and keys ${windowSize} or more positions before it,` : "keys after it";
  // a windowed layer: how many of the masked keys the window hid, and where to look when none
  // (the first view's query, the text's middle word, lies inside the window of a long text too)
  const outside = windowSize ? range(query).filter(hidden).length : 0;
  const cut = !windowSize || !count
    ? ""
    : outside
      ? `: ${count - outside} after it, ${outside} outside the window`
      : n > windowSize
        ? `, all after it: no earlier key is outside the window for this query; pick one at position ${windowSize} or later to see the window cut`
        : `, all after it: the text is shorter than the window of ${windowSize}, so the window cuts nothing`;
  if (n > MANY_TOKENS)
    return [
      h("p", { class: "lead" }, `Query “`, tokenName(payload, query), `” is at position ${query}: ${rule} are set to −∞. ${count} of ${n} keys are masked (grey)${cut}.`),
      heatmap({ caption: `Scaled scores after the mask, head\u00a0${head}`, rows: 1, cols: n, value: (_, j) => t.mask.at(head, query, j), rowLabel: () => tokenName(payload, query), colLabel: (j) => keyLabel(payload, j), colName: (j) => tokenName(payload, j) }),
    ];
  const rows = range(n).map((j) =>
    h(
      "tr",
      { class: hidden(j) ? "masked" : null },
      h("th", { scope: "row" }, rowName(tokenName(payload, j))),
      h("td", {}, String(j)),
      h("td", {}, num(t.scaled.at(head, query, j), `scaled:${head},${query},${j}`)),
      h("td", {}, hidden(j) ? (j > query ? "masked: after the query" : "masked: outside the window") : "visible"),
      h("td", {}, num(t.mask.at(head, query, j), `mask:${head},${query},${j}`)),
    ),
  );
  return h(
    "table",
    { class: "calc-table" },
    h("caption", {}, `Query “`, tokenName(payload, query), `” is at position ${query}: ${rule} are set to −∞`, count ? "" : " (here there are none: nothing is masked)"),
    h("thead", {}, h("tr", {}, ["key", "position", "scaled", "to this query", "after the mask"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows),
  );
}

function scoresMany(view, query, head) {
  const { payload, t } = view;
  const g = payload.kv_group[head];
  // every key has a score (the mask comes next). A short text's table lists every key in order,
  // the hidden ones marked; a long text's follows the keys the query may see (the ones the next
  // stages weigh) and says how many hidden keys scored above them
  const score = (j) => t.scores.at(head, query, j);
  const n = payload.tokens.length;
  const few = n <= MANY_TOKENS; // every key fits: all of them, in order, the hidden ones marked
  const visible = visibleKeys(view, query, head);
  const top = few ? range(n) : [...visible].sort((a, b) => score(b) - score(a)).slice(0, TOP_KEYS);
  const masked = visible.length < n;
  const lowest = score(top[top.length - 1]);
  const seen = new Set(visible);
  const hiddenAbove = few ? 0 : range(n).filter((j) => !seen.has(j) && score(j) > lowest).length;
  const scale = scaleOf(payload.config);
  const divisor = fmtConstant(1 / scale);
  const rows = top.map((j) =>
    h(
      "tr",
      { class: seen.has(j) ? null : "masked" },
      // in order, a key is named as the other stages name it (its position only when its token repeats);
      // out of order, always by its position
      h("th", { scope: "row" }, few ? rowName(tokenName(payload, j)) : [rowName(visibleToken(payload.tokens[j])), h("span", { class: "pos" }, ` @${j}`)], seen.has(j) ? null : h("span", { class: "pos" }, " · masked next")),
      h("td", {}, `Σ of ${payload.config.d_head} products`),
      h("td", {}, num(score(j), `scores:${head},${query},${j}`)),
      h("td", { class: "div" }, "÷ ", h("span", { class: "worked" }, divisor)),
      h("td", {}, num(t.scaled.at(head, query, j), `scaled:${head},${query},${j}`)),
    ),
  );
  // by hand: each listed score as shown, divided by the divisor as shown
  const off = top.flatMap((j) => {
    const [byHand, shown] = [byHandFmt(rounded(score(j)) / Number(divisor)), fmt(t.scaled.at(head, query, j))];
    const key = few ? `“${tokenName(payload, j)}”` : `“${visibleToken(payload.tokens[j])}” @${j}`;
    return byHand === shown ? [] : [[`the scaled score of ${key}`, byHand, shown]];
  });
  const keys = (count) => (count === 1 ? "one key" : `${count} keys`);
  const which = few ? `${keys(n)}, in order`
    : !masked ? `${keys(top.length)} with the highest scores`
    : top.length === visible.length ? `${keys(top.length)} the query may see`
    : `${keys(top.length)} the query may see with the highest scores`;
  return [
    h("p", { class: "lead" }, `The query “`, tokenName(payload, query), `” (position ${query}) against all ${payload.tokens.length} keys of ${kvHead(payload, g)}. The strip shows every scaled score; the table lists the ${which}${few ? "" : ", highest first"}.`, few && masked ? " Those marked “masked next” are hidden from the query: the mask, next, sets their scores to −∞." : "", hiddenAbove ? ` ${hiddenAbove} hidden ${hiddenAbove === 1 ? "key scores" : "keys score"} higher than the last one listed: the mask, next, sets ${hiddenAbove === 1 ? "its score" : "their scores"} to −∞.` : ""),
    keyStrip(view, query, head, "scaled", `Scaled scores of head ${head} for every key`),
    h(
      "table",
      { class: "calc-table" },
      h("caption", {}, `The ${which}`),
      h("thead", {}, h("tr", {}, ["key", "computed as", QK_LABEL[comparedQK(t)[0]], unseen("divided by √d_head"), "scaled"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows),
    ),
    roundingHint(off, divisor.includes(".") ? roundedAs(`, the divisor ${divisor} to three`) : undefined),
  ];
}

// whether the mask hides key j from the query (a weight of 0 alone is no sign: an exponential can
// underflow for a key the query sees)
const hiddenKey = (t, head, query, j) => Boolean(t.mask) && !(t.mask.at(head, query, j) > -Infinity);

function weights(view, query, head) {
  if (view.payload.tokens.length > MANY_TOKENS) return weightsMany(view, query, head);
  const { payload, t } = view;
  const n = payload.tokens.length;
  const a = range(n).map((j) => t.weights.at(head, query, j));
  const bars = range(n).map((j) =>
    h(
      "div",
      { class: "bar-row" + (hiddenKey(t, head, query, j) ? " masked" : "") },
      h("span", { class: "tok" }, tokenName(payload, j)),
      h("span", { class: "bar-track" }, h("span", { class: `bar head-${head % HEAD_COLOURS}`, "data-width": a[j] })),
      num(a[j], `weights:${head},${query},${j}`),
    ),
  );
  for (const row of bars) {
    const bar = row.querySelector(".bar");
    bar.style.width = `${(100 * Number(bar.dataset.width)).toFixed(2)}%`;
  }
  const stack = h("div", { class: `stack head-${head % HEAD_COLOURS}`, "aria-hidden": "true" }); // in the bars' colour
  a.forEach((x, j) => {
    if (x <= 0) return;
    // a name too long for its segment (a phone's narrow bar) ends in an ellipsis, not cut mid-letter
    // (pointed at, every segment names its key and weight: one too narrow for its name has no other)
    const seg = h("span", { class: `seg shade-${j % 2}`, title: `${tokenName(payload, j)}: ${fmt(x)}` }, x >= 0.07 ? h("span", { class: "seg-name" }, tokenName(payload, j)) : "");
    seg.style.width = `${(100 * x).toFixed(2)}%`;
    stack.append(seg);
  });
  const total = a.reduce((s, x) => s + x, 0);
  const byHand = a.reduce((s, x) => s + rounded(x), 0);
  const e = softmaxTable(view, query, head);
  return [
    h("div", { class: "bars", role: "group", "aria-label": `Softmax weights of head ${head}` }, bars),
    h("p", { class: "lead" }, "Together they fill one whole: ", h("span", { class: "sum" }, "Σ = ", fmt(total))),
    stack,
    e.table,
    roundingHint(
      [...(byHandFmt(byHand) !== fmt(total) ? [["the sum Σ of the weights as shown", byHandFmt(byHand), fmt(total)]] : []), ...e.off.map(([j, byHand]) => [`the weight of “${tokenName(payload, j)}”`, byHand, fmt(t.weights.at(head, query, j))])],
      `The scores and weights here are rounded to two decimals. Each eˢ is worked out from its score as shown, and Σ eˢ from the eˢ as shown, to ${e.digits}; each weight, and their sum, from the full numbers`,
    ),
  ];
}

// The softmax of one query's scores, step by step: each score s, e^s, their sum, and each e^s
// divided by it. e^s is worked out here (the trace keeps only the weights), to three decimals so
// that a division by hand lands on the weight shown; past a sum of 1e5, or below 0.0005, to three
// significant digits.
// Returns the table and the keys where that division still misses.
const POWERS = ", each to three digits times a power of ten (1.35×10⁻¹ is 0.135)";
function softmaxTable(view, query, head) {
  const { payload, t } = view;
  const n = payload.tokens.length;
  const logits = t.mask || t.scaled;
  const source = t.mask ? "mask" : "scaled";
  const s = range(n).map((j) => logits.at(head, query, j));
  // each step from the one before as shown, so that a learner can redo it: eˢ of s to two decimals,
  // their sum as the eˢ shown add up; the weight is the layer's, and a note names the rows where
  // the shown steps do not land on it
  // where eˢ, or their sum, would pass the largest number (a top score past 709 − ln n), or every
  // eˢ would lose its digits near 0 (all scores below -700), the largest score m is taken off
  // first, as a softmax may: e^(s − m), the same weights
  const seen = s.filter((x) => x !== null && x !== -Infinity).map(rounded);
  const top = seen.length ? Math.max(...seen) : 0;
  const shift = top > 709 - Math.log(seen.length) || top < -700 ? top : 0;
  const e = s.map((x) => (x === null || x === -Infinity ? 0 : Math.exp(rounded(x) - shift)));
  // a sum of 100,000 or more, or an eˢ three decimals would write 0.000 (a key the query sees, with
  // a score below -7.6): every eˢ, and the sum, to three significant digits times a power of ten
  // (4.44×10⁴, 1.35×10⁻¹: in a column of eˢ, 1.35e-1 reads as 1.35 times e to the -1), not some
  // written one way and some the other
  const big = e.reduce((total, x) => total + x, 0) >= 1e5 || e.some((x) => x > 0 && x < 5e-4);
  const kept = (x) => (!big ? x.toFixed(3) : x === 0 ? "0" : x.toExponential(2)); // the number written
  const sum = e.reduce((total, x) => total + Number(kept(x)), 0);
  const shown = (x) => h("span", { class: "num", tabindex: -1, "data-full": String(x) }, ...(!big || x === 0 ? [kept(x)] : powerOfTen(x)));
  // [key, its eˢ over the sum as shown] where that misses the weight
  const weighed = (j) => byHandFmt(Number(kept(e[j])) / Number(kept(sum)));
  const off = sum > 0 ? range(n).filter((j) => e[j] > 0 && weighed(j) !== fmt(t.weights.at(head, query, j))).map((j) => [j, weighed(j)]) : [];
  const rows = range(n).map((j) =>
    h(
      "tr",
      { class: hiddenKey(t, head, query, j) ? "masked" : null },
      h("th", { scope: "row" }, rowName(tokenName(payload, j))),
      h("td", {}, num(s[j], `${source}:${head},${query},${j}`)),
      h("td", {}, shown(e[j])),
      h("td", { class: "div" }, "÷ ", shown(sum)),
      h("td", {}, num(t.weights.at(head, query, j), `weights:${head},${query},${j}`)),
    ),
  );
  const table = h(
    "table",
    { class: "calc-table softmax" },
    h(
      "caption",
      {},
      shift
        ? `The softmax by hand, head ${head}: eˢ itself would ${shift > 0 ? "pass the largest number a computer holds" : "be 0 for every key"}, so the largest score, m = ${fmt(shift)}, is taken off first (the weights stay the same): e^(s − m) of each s as shown, then each over their sum${big ? POWERS : ""}`
        : `The softmax by hand, head ${head}: eˢ of each s as shown, then each eˢ over their sum${big ? POWERS : ""}`,
    ),
    h("thead", {}, h("tr", {}, ["key", "scaled score\u00a0s" /* the s keeps to its words */, shift ? "e^(s − m)" : "eˢ", shift ? "÷ Σ" : "÷ Σ eˢ", "weight"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows),
  );
  return { table, off, digits: big ? "three significant digits" : "three decimals" };
}

function weightsMany(view, query, head) {
  const { payload, t } = view;
  const top = topKeys(view, query, head);
  const topWeights = top.map((j) => t.weights.at(head, query, j));
  // each bar against the largest listed: a long text's weights are often a hundredth or so each,
  // which bars out of 1 draw a few pixels long, all alike
  const largest = Math.max(...topWeights) || 1;
  const bars = top.map((j, r) => {
    const bar = h("span", { class: `bar head-${head % HEAD_COLOURS}` });
    bar.style.width = `${((100 * topWeights[r]) / largest).toFixed(2)}%`;
    return h("div", { class: "bar-row" }, h("span", { class: "tok" }, visibleToken(payload.tokens[j]), h("span", { class: "pos" }, ` @${j}`)), h("span", { class: "bar-track" }, bar), num(topWeights[r], `weights:${head},${query},${j}`));
  });
  const shown = visibleKeys(view, query, head);
  let rest = 0;
  for (const j of shown) if (!top.includes(j)) rest += t.weights.at(head, query, j);
  const listed = topWeights.reduce((sum, a) => sum + a, 0);
  const hidden = payload.tokens.length - shown.length;
  return [
    keyStrip(view, query, head, "weights", `Weights of head ${head} over all ${payload.tokens.length} keys (darker = more)`, "weights"),
    h("p", { class: "bars-scale" }, `The ${top.length} largest, each bar against the largest of them, ${scaleOf2(largest)}:`),
    h("div", { class: "bars", role: "group", "aria-label": `The ${top.length} largest weights of head ${head}` }, bars),
    h(
      "p",
      { class: "lead" },
      // an early query of a causal text may see no key beyond those listed
      shown.length > top.length ? `These ${top.length} share ${fmt(listed)} of the weight, and the other ${plural(shown.length - top.length, "key")} it sees ${fmt(rest)}.` : `These are all the keys it sees.`,
      hidden ? ` The ${plural(hidden, "masked key")} ${hidden === 1 ? "gets" : "get"} exactly 0.` : "",
    ),
  ];
}

function mixing(view, query, head) {
  if (view.payload.tokens.length > MANY_TOKENS || view.payload.config.d_v > 8) return mixingMany(view, query, head);
  const { payload, t } = view;
  const g = payload.kv_group[head];
  const n = payload.tokens.length;
  const dv = payload.config.d_v;
  const weighted = range(n).map((j) => range(dv).map((e) => t.weights.at(head, query, j) * t.v.at(g, j, e))); // (n, d_v)
  const rows = range(n).map((j) => {
    const aj = t.weights.at(head, query, j);
    return h(
      "tr",
      { class: hiddenKey(t, head, query, j) ? "masked" : null },
      h("th", { scope: "row" }, rowName(tokenName(payload, j))),
      h("td", {}, num(aj, `weights:${head},${query},${j}`)),
      h("td", { class: "op" }, "×"),
      h("td", {}, vec(range(dv).map((e) => num(t.v.at(g, j, e), `v:${g},${j},${e}`)))),
      h("td", { class: "op" }, "="),
      // worked out here, set as the numbers beside it; pointed at, in full as they are (no trace array holds them: no data-src)
      h("td", {}, vec(weighted[j].map((x) => h("span", { class: "num worked", tabindex: -1, "data-full": full(x, false) }, fmt(x))))),
    );
  });
  const z = h(
    "tr",
    { class: "total" },
    h("th", { scope: "row" }, sub("z", head)),
    h("td", { colspan: 3 }, "sum of the rows above"),
    h("td", { class: "op" }, "="),
    h("td", {}, vec(range(dv).map((e) => num(t.z.at(head, query, e), `z:${head},${query},${e}`)))),
  );
  const byHand = (e) => range(n).reduce((sum, j) => sum + rounded(weighted[j][e]), 0);
  // a row whose weight times its value row, as shown, misses the weighted row shown
  const timesHand = range(n).map((j) => range(dv).map((e) => byHandFmt(rounded(t.weights.at(head, query, j)) * rounded(t.v.at(g, j, e)))));
  const rowsOff = range(n).filter((j) => timesHand[j].some((x, e) => x !== fmt(weighted[j][e])));
  const written = (xs) => `[${xs.join(", ")}]`;
  return [
    h(
      "table",
      { class: "calc-table" },
      h("caption", {}, `Weighted sum of the value rows, head\u00a0${head}`),
      h("thead", {}, h("tr", {}, ["key", "weight", unseen("times"), "value row", unseen("equals"), "weighted"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows, z),
    ),
    roundingHint([
      ...rowsOff.map((j) => [`the weighted row of “${tokenName(payload, j)}”`, written(timesHand[j]), written(weighted[j].map(fmt))]),
      // z[e] alone would read as head e's z
      ...range(dv).filter((e) => byHandFmt(byHand(e)) !== fmt(t.z.at(head, query, e))).map((e) => [`head ${head}'s z[${e}]`, byHandFmt(byHand(e)), fmt(t.z.at(head, query, e))]),
    ]),
  ];
}

function mixingMany(view, query, head) {
  const { payload, t } = view;
  const g = payload.kv_group[head];
  const dv = payload.config.d_v;
  const visible = visibleKeys(view, query, head);
  const few = payload.tokens.length <= MANY_TOKENS; // every row fits: all of them, in order
  const top = few ? visible : topKeys(view, query, head);
  // in order, a key is named as the other stages name it; the top keys, out of order, by their positions
  const keyName = (j) => (few ? tokenName(payload, j) : `${visibleToken(payload.tokens[j])} @${j}`);
  const weighted = (r) => `${fmt(t.weights.at(head, query, top[r]))} × ${keyName(top[r])}`;
  // the three maps' cells start at one x: component e of v, of a·v and of z stand in one column
  const left = labelRoom([...top.map((_, r) => [r, weighted(r)]), [0, `z${head}`]], Math.round(12 * labelScale()));
  return [
    h("p", { class: "lead" }, `z is the weighted sum of the ${visible.length} value rows of ${kvHead(payload, g)} that “`, tokenName(payload, query), `” sees. Below: ${few ? "those value rows, each with its weight" : `the value rows of the ${top.length} keys with the most weight`}, then z.`),
    h("div", { class: "aligned-maps" }, heatmap({
      caption: few ? "Value rows, one per key, each to be scaled by its weight" : "Value rows of the top keys, one per key, each to be scaled by its weight",
      rows: top.length,
      cols: dv,
      value: (r, e) => t.v.at(g, top[r], e),
      rowLabel: weighted,
      colLabel: (e) => `v[${e}]`,
      labelsAtLeast: left,
    }),
    // the rows scaled: a row of little weight, however bright above, fades here
    heatmap({
      caption: `The same rows times their weights, a·v: what each key adds to z${few ? " (the rows add up to z)" : ""}`,
      rows: top.length,
      cols: dv,
      value: (r, e) => t.weights.at(head, query, top[r]) * t.v.at(g, top[r], e),
      rowLabel: (r) => keyName(top[r]),
      colLabel: (e) => `a·v[${e}]`,
      labelsAtLeast: left,
    }),
    vector(h("span", {}, sub("z", head)), dv, (e) => t.z.at(head, query, e), (e) => `z:${head},${query},${e}`, `z${head}`, left)),
  ];
}

// q before and after the rotation on one colour scale (the query's own); q after the q/k norm, the
// same q̂, is drawn on it too.
function rotaryQScale(view, query, head) {
  const { payload, t } = view;
  const qIn = t.q_normed ? "q_normed" : "q";
  return sharedScale(1, payload.config.d_head, (_, e) => t[qIn].at(head, query, e), (_, e) => t.q_rotated.at(head, query, e));
}

// K before and after the rotation on one colour scale; the same K after the q/k norm is drawn on
// it too, so that one K is never shown on two scales. The same for every query: worked out once a
// K/V head, not at each query's panel.
function rotaryKScale(view, g) {
  const { payload, t } = view;
  const kIn = t.k_normed ? "k_normed" : "k";
  view.rotatedScales ??= new Map();
  if (!view.rotatedScales.has(g)) view.rotatedScales.set(g, sharedScale(payload.tokens.length, payload.config.d_head, planeOf(t[kIn], g), planeOf(t.k_rotated, g)));
  return view.rotatedScales.get(g);
}

function normed(view, query, head) {
  const { payload, t, w } = view;
  const g = payload.kv_group[head];
  const d = payload.config.d_head;
  const n = payload.tokens.length;
  // the divisor, worked out here from the q shown: √(mean of q² + ε)
  const eps = payload.config.norm_eps;
  const epsShown = String(Number(eps.toPrecision(6))); // 1e-6 read from a float32 file is 9.99999997e-7
  const rmsOf = (x) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / d + eps);
  const rms = rmsOf(range(d).map((e) => t.q.at(head, query, e)));
  const kRms = rmsOf(range(d).map((e) => t.k.at(g, query, e))); // the query's own key, one row of K
  return [
    h("p", { class: "lead" }, `Below: q of “`, tokenName(payload, query), `” before and after the norm, then every key of ${kvHead(payload, g)}, before and after. The same learned vector multiplies every head's q (and another every k).`),
    vector("q before", d, (e) => t.q.at(head, query, e), (e) => `q:${head},${query},${e}`, "q"),
    h("p", { class: "lead" }, `rms(q) = √(mean of q² + ${epsShown}) = ${fmtConstant(rms)}: each component of q is divided by it, then multiplied by the learned w`, h("sup", {}, "q"), " below."),
    vector(h("span", {}, "The learned w", h("sup", {}, "q")), d, (e) => w.q_norm.at(e), (e) => `q_norm:${e}`, "w^q"),
    vector("q̂ after", d, (e) => t.q_normed.at(head, query, e), (e) => `q_normed:${head},${query},${e}`, "q normed", 0, t.q_rotated ? rotaryQScale(view, query, head) : undefined),
    h("p", { class: "lead" }, `Each row of K is normed the same way, by its own rms and the learned w`, h("sup", {}, "k"), ` below: the row of “`, tokenName(payload, query), `” itself has rms(k) = √(mean of k² + ${epsShown}) = ${fmtConstant(kRms)}.`),
    vector(h("span", {}, "The learned w", h("sup", {}, "k")), d, (e) => w.k_norm.at(e), (e) => `k_norm:${e}`, "w^k"),
    heatmap({ caption: `K of ${kvHead(payload, g)} before the norm`, rows: n, cols: d, value: (r, e) => t.k.at(g, r, e), plane: t.k.plane(g), rowLabel: (r) => tokenName(payload, r), colLabel: (e) => `k[${e}]`, tokenAt: (r) => r, mark: query }),
    heatmap({ caption: `K̂ after the norm`, rows: n, cols: d, value: (r, e) => t.k_normed.at(g, r, e), plane: t.k_normed.plane(g), rowLabel: (r) => tokenName(payload, r), colLabel: (e) => `k[${e}]`, tokenAt: (r) => r, mark: query, scale: t.k_rotated ? rotaryKScale(view, g) : undefined }),
  ];
}

function rope(view, query, head) {
  const { payload, t } = view;
  const g = payload.kv_group[head];
  const d = payload.config.d_head;
  const n = payload.tokens.length;
  const qIn = t.q_normed ? "q_normed" : "q";
  const kIn = t.k_normed ? "k_normed" : "k";
  // how much the rotation moves q here: with a large θ (Gemma's global layers, 1,000,000) most pairs
  // barely turn, and where q's length lies in them the two strips below look alike
  const at = position(payload, query); // by which q turns
  const turned = range(d / 2).filter((m) => Math.abs(at) * Math.pow(payload.config.rope_theta, (-2 * m) / d) > 0.1).length;
  let change = 0, length = 0;
  for (let e = 0; e < d; e++) {
    const [before, after] = [t[qIn].at(head, query, e), t.q_rotated.at(head, query, e)];
    change += (after - before) ** 2;
    length += before ** 2;
  }
  const moved = Math.sqrt(change / (length || 1)); // |q̃ − q| / |q|
  // before and after on one colour scale each for q and for K: a colour means one value in both
  const qBefore = (e) => t[qIn].at(head, query, e);
  const qAfter = (e) => t.q_rotated.at(head, query, e);
  const kBefore = (r, e) => t[kIn].at(g, r, e);
  const kAfter = (r, e) => t.k_rotated.at(g, r, e);
  const qScale = rotaryQScale(view, query, head);
  const kScale = rotaryKScale(view, g);
  // a layer with a q/k norm turns the normed q̂ and K̂: named so, as the stage's text names them; what comes out is q̃ and K̃
  const [qName, kName] = t.q_normed ? ["q̂", "K̂"] : ["q", "K"];
  const said = at === 0
    ? ` At position 0 no pair turns: ${qName} is the same after the rotation.`
    : ` At position ${at}, ${turned} of the ${d / 2} pairs ${turned === 1 ? "turns" : "turn"} by more than 0.1 radian (about 6°), and ${qName} moves by ${Math.round(100 * moved)}% of its length (|q̃ − ${qName}| / |${qName}|)${moved < 0.25 ? `: the strips of ${qName} before and after look much alike` : ""}.`;
  return [
    h("p", { class: "lead" }, `Here θ = ${payload.config.rope_theta}: per position, the first pair turns by 1 radian and pair m by θ^(−2m/${d}) radians, so the last pairs barely turn. Query “`, tokenName(payload, query), `”${at === query ? "" : ` (token ${query} of the text)`} is at position ${at}.${said}`),
    vector(`${qName} at position ${at}, before`, d, qBefore, (e) => `${qIn}:${head},${query},${e}`, "before", 0, qScale),
    vector("q̃ after the rotation, on the same colour scale", d, qAfter, (e) => `q_rotated:${head},${query},${e}`, "after", 0, qScale),
    // (scrolled by itself: on a phone the maps around it are wider than the screen, and the
    // table scrolled with them, its pairs and title out of sight)
    ...turnedPairs(view, query, head, qIn),
    heatmap({ caption: `${kName} of ${kvHead(payload, g)} before the rotation`, rows: n, cols: d, value: kBefore, plane: t[kIn].plane(g), rowLabel: (r) => tokenName(payload, r), colLabel: (e) => `k[${e}]`, tokenAt: (r) => r, mark: query, scale: kScale }),
    heatmap({ caption: `K̃ after the rotation, on the same colour scale`, rows: n, cols: d, value: kAfter, plane: t.k_rotated.plane(g), rowLabel: (r) => tokenName(payload, r), colLabel: (e) => `k[${e}]`, tokenAt: (r) => r, mark: query, scale: kScale }),
  ];
}

// A token's position, by which RoPE turns it: its index, unless the trace was given positions of its own.
const position = (payload, i) => payload.positions?.[i] ?? i;

// Three of q's pairs turned by hand (fewer where d_head/2 is under 3): the first (fastest), the second and the last (slowest). The
// angle is position × θ^(−2m/d_head); a′ = a cos − b sin and b′ = a sin + b cos give the numbers
// after the rotation (worked here in double precision, the layer's own are float32). The angle is
// shown to four significant digits and cos and sin to four decimals: at two, a slow pair's small
// turn (0.002783) read 0.00, and its a′ ≠ a looked like a rotation by nothing. A note says where a
// pair worked from the numbers as shown misses the one shown after. Returns the table and the note.
function turnedPairs(view, query, head, qIn) {
  const { payload, t } = view;
  const d = payload.config.d_head;
  const half = d / 2;
  const pairs = [...new Set([0, 1, half - 1])].filter((m) => m < half);
  const off = [];
  const rows = pairs.map((m) => {
    const angle = position(payload, query) * Math.pow(payload.config.rope_theta, (-2 * m) / d);
    const [a, b] = [t[qIn].at(head, query, m), t[qIn].at(head, query, m + half)];
    const [cos, sin] = [Math.cos(angle), Math.sin(angle)];
    const pair = `(${m}, ${m + half})`;
    const [cosShown, sinShown] = [fmtTurn(cos), fmtTurn(sin)];
    const [aHand, bHand] = [rounded(a) * Number(cosShown) - rounded(b) * Number(sinShown), rounded(a) * Number(sinShown) + rounded(b) * Number(cosShown)].map(byHandFmt);
    const [aAfter, bAfter] = [fmt(t.q_rotated.at(head, query, m)), fmt(t.q_rotated.at(head, query, m + half))];
    off.push(...(aHand !== aAfter ? [[`a′ of pair ${pair}`, aHand, aAfter]] : []), ...(bHand !== bAfter ? [[`b′ of pair ${pair}`, bHand, bAfter]] : []));
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, pair),
      h("td", {}, fmtAngle(angle)),
      h("td", {}, `${cosShown}, ${sinShown}`),
      h("td", {}, num(a, `${qIn}:${head},${query},${m}`), ", ", num(b, `${qIn}:${head},${query},${m + half}`)),
      h("td", { class: "terms" }, `${fmt(a * cos - b * sin)}, ${fmt(a * sin + b * cos)}`),
      h("td", {}, num(t.q_rotated.at(head, query, m), `q_rotated:${head},${query},${m}`), ", ", num(t.q_rotated.at(head, query, m + half), `q_rotated:${head},${query},${m + half}`)),
    );
  });
  const table = h(
    "table",
    { class: "calc-table rotary" },
    h("caption", {}, `${["One pair", "Two pairs", "Three pairs"][pairs.length - 1]} of ${qIn === "q_normed" ? "q̂" : "q"} turned by hand, at position ${position(payload, query)}`),
    h("thead", {}, h("tr", {}, ["pair (m, m + d/2)", "angle (radians)", "cos, sin", "before: a, b", "a cos − b sin, a sin + b cos", "after"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows),
  );
  return [h("div", { class: "wide-table" }, table), roundingHint(off, roundedAs(", the angle to four significant digits, cos and sin to four decimals"))];
}

// an angle as the rotary table shows it: four significant digits, under 0.001 with its power of
// ten (2.866e-5, as the terminal writes it: "0.00002866" is long and its zeros are miscounted)
const fmtAngle = (angle) => (angle > 0 && angle < 1e-3 ? angle.toExponential(3) : String(Number(angle.toPrecision(4))));

// cos or sin of a turn as the rotary table shows it: four decimals ("-0.0000" as "0.0000")
function fmtTurn(x) {
  const s = x.toFixed(4);
  return s === "-0.0000" ? "0.0000" : s;
}

// the stages that read a head's keys or values (or what they made)
const READS_KV = new Set(["scores", "mask", "weights", "mixing"]);

// " Its keys and values come from K/V head g, shared with heads …" when other query heads read
// the same K/V head (GQA, MQA), else nothing
function sharedKV(payload, head, whose = "Its") {
  const g = payload.kv_group[head];
  const readers = payload.kv_group.map((x, i) => (x === g ? i : null)).filter((i) => i !== null);
  if (readers.length < 2) return "";
  const others = readers.filter((i) => i !== head);
  return ` ${whose} keys and values come from K/V head ${g}, shared with head${others.length > 1 ? "s" : ""} ${others.join(", ")}.`;
}

function concat(view, query, head) {
  if (manyHeads(view.payload.config)) return concatMany(view, query, head);
  const { payload, t } = view;
  const { n_heads, d_v } = payload.config;
  const blocks = range(n_heads).map((i) =>
    h(
      "div",
      { class: `block ${headColour(i, n_heads, head)}` + (i === head ? " inspected" : "") },
      h("div", { class: "block-label" }, sub("z", i), ` · head ${i}`, i === head ? " (inspected)" : ""),
      h("div", { class: "cells" }, range(d_v).map((e) => num(t.concat.at(query, i * d_v + e), `concat:${query},${i * d_v + e}`))),
      h("div", { class: "block-index" }, d_v === 1 ? `column ${i}` : `columns ${blockOf(i, d_v)}`),
    ),
  );
  return [
    h("p", { class: "lead" }, `concat has ${plural(n_heads, "head")} × ${plural(d_v, "number")} each (d_v) = ${n_heads * d_v} numbers: the head outputs in head order. Read one after another, head 0's first, the blocks below are that one vector.`),
    h("div", { class: "concat" }, blocks),
  ];
}

function concatMany(view, query, head) {
  const { payload } = view;
  const { n_heads, d_v } = payload.config;
  return [
    h("p", { class: "lead" }, `concat has ${plural(n_heads, "head")} × ${plural(d_v, "number")} each (d_v) = ${n_heads * d_v} numbers: the head outputs in head order. Each row below is one head's z; read them left to right, top to bottom.`),
    concatMap(view, query, head),
  ];
}

// Head i's block of width indices: "4–5", or "4" alone where a block is one wide (d_v = 1).
const blockOf = (i, width) => (width === 1 ? `${i}` : `${i * width}–${(i + 1) * width - 1}`);

// The rows of W^O a payload holds: every head's block of d_v, or a real model's inspected head's.
const heldRows = (W_O, { n_heads, d_v }) => range(n_heads).filter((i) => W_O.has(i)).flatMap((i) => range(d_v).map((e) => i * d_v + e));

// What a caption of W^O says after its name: `whole` where the payload holds every head's rows,
// else which head's block it holds (a real model's inspected head).
const rowsOf = (W_O, config, whole) => {
  const held = range(config.n_heads).filter((i) => W_O.has(i));
  if (held.length === config.n_heads) return whole;
  const rows = held.map((i) => blockOf(i, config.d_v)).join(", ");
  return [`, head ${held.join(", ")}'s block (${held.length * config.d_v} × ${config.d_model}): its ${held.length * config.d_v === 1 ? "row" : "rows"} ${rows} of ${config.n_heads * config.d_v}`, h("span", { class: "screen-only" }, "; pick another head to see its rows")];
};

function output(view, query, head) {
  const { payload, t, w } = view;
  const { n_heads, d_v, d_model } = payload.config;
  const rows = heldRows(w.W_O, payload.config);
  const oneBlock = rows.length < n_heads * d_v; // a real model's payload: the inspected head's rows only
  const wo = grid({
    source: [w.W_O, "output"],
    caption: h("span", {}, sup("W", "O"), rowsOf(w.W_O, payload.config, "")),
    rows,
    cols: range(d_model),
    value: (r, m) => w.W_O.at(rows[r], m),
    src: (r, m) => `W_O:${rows[r]},${m}`,
    rowLabel: (r) => `head ${Math.floor(r / d_v)} · z[${r % d_v}]`, // the row that multiplies that head's z[e], as the terminal names it
    blockLabel: (r) => (rows[r] % d_v === 0 ? `head ${rows[r] / d_v}` : null), // drawn as a map: one label per head's block
    rowClass: (r) => `block-row ${headColour(Math.floor(r / d_v), n_heads, head)}` + (Math.floor(r / d_v) === head ? " inspected" : ""),
    colLabel: (m) => `y[${m}]`,
    // drawn as a map, the inspected head's block is framed and named, as its rows are in a table
    mark: oneBlock ? null : rows.indexOf(head * d_v),
    markSpan: d_v,
  });
  const y = range(d_model).map((m) => t.output.at(query, m));
  const shown = range(n_heads).filter((i) => t.contributions.has(i)); // a real model's payload: the inspected head
  const contrib = shown.map((i) => range(d_model).map((m) => t.contributions.at(i, query, m)));
  const bias = payload.config.bias ? range(d_model).map((m) => w.b_O.at(m)) : null; // b^O, added once
  const table = () => h(
    "table",
    { class: "calc-table contributions" },
    h("caption", {}, "Each output component is the sum of every head's contribution"),
    h("thead", {}, h("tr", {}, h("td", {}), range(d_model).map((m) => h("th", { scope: "col" }, `y[${m}]`)))),
    h(
      "tbody",
      {},
      shown.map((i, r) =>
        h("tr", { class: i === head ? "inspected" : null }, h("th", { scope: "row" }, h("span", { class: `key ${headColour(i, n_heads, head)}` }), `head ${i}`, i === head ? " (inspected)" : ""), range(d_model).map((m) => h("td", {}, num(contrib[r][m], `contributions:${i},${query},${m}`)))),
      ),
      payload.config.bias ? h("tr", {}, h("th", { scope: "row" }, "bias"), range(d_model).map((m) => h("td", {}, num(w.b_O.at(m), `b_O:${m}`)))) : null,
      h("tr", { class: "total" }, h("th", { scope: "row" }, "output y"), range(d_model).map((m) => h("td", {}, num(y[m], `output:${query},${m}`)))),
    ),
  );
  const wide = d_model > 16 || shown.length < n_heads;
  const component = (m) => `y[${m}]`; // a strip's readout names its cell as the output component it adds to
  // a real model's payload holds one head: its share and the output as two strips, each on its own
  // colour scale (one head's share is small beside the sum, and would look blank on the output's)
  const oneHead = () =>
    h(
      "div",
      { class: "aligned-maps" },
      vector(h("span", {}, `Head ${head}'s contribution to each output component, `, sub("z", head), " ", sup("W", "O"), `[${head}]`, h("span", { class: "screen-only" }, " (pick another head to see its share)")), d_model, (m) => contrib[shown.indexOf(head)][m], (m) => `contributions:${head},${query},${m}`, `head ${head}`, 0, undefined, component),
      payload.config.bias ? vector(h("span", {}, "The bias ", sup("b", "O"), ", added once"), d_model, (m) => w.b_O.at(m), (m) => `b_O:${m}`, "bias", 0, undefined, component) : null,
      vector(`The output y: every head's contribution${payload.config.bias ? ", and the bias," : ""} added`, d_model, (m) => y[m], (m) => `output:${query},${m}`, "output y", 0, undefined, component),
    );
  // rows: every head, the bias (added once) where the layer has one, then the output, their sum
  const mapRows = [...shown.map((i, r) => [`head ${i}`, (m) => contrib[r][m]]), ...(bias ? [["bias bᴼ", (m) => bias[m]]] : []), ["output y", (m) => y[m]]];
  const contribMap = () =>
    shown.length < n_heads ? oneHead() : heatmap({
      caption: `Each head's contribution to each output component (rows: heads, ${payload.config.bias ? "the bias, " : ""}then the output)`,
      rows: mapRows.length,
      cols: d_model,
      value: (r, m) => mapRows[r][1](m),
      rowLabel: (r) => mapRows[r][0],
      colLabel: (m) => `y[${m}]`,
      mark: shown.indexOf(head),
      // coloured on the heads' (and bias's) own scale: y, the sum of 64 of them, would set a scale on
      // which each head's row is almost white; y beyond it takes the full colour, as the legend says
      scale: sharedScale(mapRows.length - 1, d_model, (r, m) => mapRows[r][1](m)),
      lastLabel: true,
    });
  // more than 64 numbers: concat as one row per head on canvas, as in the Concatenation stage; with
  // one head's block of W^O, that head's block of concat, which the block multiplies
  const concat = oneBlock
    ? vector(h("span", {}, sub("z", head), ` for “${tokenName(payload, query)}”: head ${head}'s block of concat, its ${d_v} numbers of ${n_heads * d_v}`), d_v, (e) => t.concat.at(query, head * d_v + e), (e) => `concat:${query},${head * d_v + e}`, `head ${head}`)
    : manyHeads(payload.config)
    ? concatMap(view, query, head)
    : h("div", { class: "concat-row" }, "concat = ", vec(range(n_heads * d_v).map((r) => num(t.concat.at(query, r), `concat:${query},${r}`))));
  // a learner adding the rounded parts by hand may land a little off the rounded total: say where, and why
  const byHand = (m) => contrib.reduce((sum, row) => sum + rounded(row[m]), bias ? rounded(bias[m]) : 0);
  const off = wide ? [] : range(d_model).filter((m) => byHandFmt(byHand(m)) !== fmt(y[m]));
  // a head's part of y[m]: its z, as concat shows it, times its rows of W^O's column m, as shown
  const part = (i, m) => range(d_v).reduce((sum, e) => sum + rounded(t.concat.at(query, i * d_v + e)) * rounded(w.W_O.at(i * d_v + e, m)), 0);
  const checkable = !wide && !manyHeads(payload.config) && n_heads * d_v * d_model <= TABLE_LIMIT; // concat and W^O shown as numbers
  const partsOff = !checkable ? [] : shown.flatMap((i, r) => range(d_model).filter((m) => byHandFmt(part(i, m)) !== fmt(contrib[r][m])).map((m) => [`head ${i}'s part of y[${m}]`, byHandFmt(part(i, m)), fmt(contrib[r][m])]));
  const rounding = roundingHint([...partsOff, ...off.map((m) => [`y[${m}]`, byHandFmt(byHand(m)), fmt(y[m])])]);
  return [
    equation(concat, ["×", wo]),
    wide ? contribMap() : h("div", { class: "wide-table" }, table()), // (wider than the stage, the lab's 8 components at 911 px: it scrolls by itself)
    payload.model?.head_shares ? headShares(view, query, head) : null,
    rounding,
    wide ? null : contributionChart(contrib, y, head, bias),
  ];
}

// A real model's layer: how much each head adds to the query's output, the length of its
// contribution |z_i W^O_i| (the payload holds every head's length, though only the inspected
// head's numbers), so that the heads the output draws on most stand out. A head's name picks it.
function headShares(view, query, head) {
  const { payload } = view;
  view.shares ??= new Tensor(payload.model.head_shares); // (n_heads, n)
  const lengths = range(payload.config.n_heads).map((i) => view.shares.at(i, query));
  const longest = Math.max(...lengths) || 1;
  const rows = lengths.map((length, i) => {
    const bar = h("span", { class: `bar ${headColour(i, lengths.length, head)}` });
    bar.style.width = `${((100 * length) / longest).toFixed(2)}%`;
    const name = i === head ? h("span", { class: "tok" }, `head ${i}`, h("span", { class: "badge" }, "inspected")) : h("button", { type: "button", class: "head-name", "data-pick-head": i, title: `Inspect head ${i}` }, `head ${i}`);
    return h("div", { class: "bar-row" + (i === head ? " inspected" : "") }, name, h("span", { class: "bar-track" }, bar), num(length, `head_shares:${i},${query}`));
  });
  const most = lengths.indexOf(longest);
  return h(
    "figure",
    { class: "head-shares" },
    h("figcaption", {}, "How much each head adds to y for “", tokenName(payload, query), "”: the length of its contribution, ", h("span", { class: "nowrap" }, "|", sub("z", "i"), " ", sup("W", "O"), "[i]|")),
    h("div", { class: "bars", role: "group", "aria-label": `Length of each head's contribution to the output of ${tokenName(payload, query)}` }, rows),
    h("p", { class: "hint" }, `Head ${most}'s contribution is the longest. A long contribution can still be cancelled by other heads, component by component: above are ${range(payload.config.n_heads).every((i) => view.t.contributions.has(i)) ? "every head's components" : "the inspected head's components"}, and y's.`),
  );
}

// Diverging stacked bars: for each output component, positive contributions stack right of 0,
// negative ones left; a tick marks the total. Heads are told apart by label and pattern, not colour
// alone. Past the 16 colours, which would repeat, the inspected head keeps its own and the others
// are one grey, each still a segment of its own (its tooltip names it; the table above gives each).
function contributionChart(contrib, y, head, bias) {
  const nHeads = contrib.length;
  const others = nHeads > HEAD_COLOURS;
  const parts = bias ? [...contrib, bias] : contrib; // rows: the heads, then the bias b^O (added once)
  const d = y.length;
  const rowH = 34;
  const left = 56;
  // drawn about as wide as it will be shown (a phone: 300 px), so that its text stays legible
  const width = Math.min(520, Math.max(300, window.innerWidth - 90));
  const plot = width - left - 16;
  let extent = 0;
  for (let m = 0; m < d; m++) {
    let pos = 0;
    let neg = 0;
    for (const part of parts) (part[m] > 0 ? (pos += part[m]) : (neg -= part[m]));
    extent = Math.max(extent, pos, neg, Math.abs(y[m]));
  }
  extent = extent || 1;
  const scale = plot / 2 / extent;
  const zero = left + plot / 2;
  // the legend: one entry per head (or the inspected one, then the others), then the bias's and
  // the total's, in rows of as many as fit; "head 15 (h15)" needs more room than "head 5 (h5)"
  const entries = (others ? 2 : nHeads) + (bias ? 1 : 0) + 1;
  const step = others ? 160 : nHeads > 10 ? 108 : 96;
  const perLine = Math.floor((width - left) / step);
  const legendLines = Math.ceil(entries / perLine);
  const height = d * rowH + 28 + 18 * legendLines;
  const chart = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `Contributions of each head${bias ? " and of the bias" : ""} to each output component, as stacked bars: the table above gives each one` });
  const defs = svg("defs", {});
  const hatch = uid("hatch"); // the patterns' ids, unique per chart: several charts can share a document
  for (let i = 0; i < nHeads; i++) {
    const p = svg("pattern", { id: `${hatch}-${i}`, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: `rotate(${45 * (i % 4)})` });
    p.append(svg("rect", { width: 6, height: 6, class: `fill head-${i % HEAD_COLOURS}` }), svg("rect", { width: i % 2 ? 2 : 0, height: 6, fill: "rgba(255,255,255,0.55)" }));
    defs.append(p);
  }
  chart.append(defs);
  chart.append(svg("line", { x1: zero, x2: zero, y1: 4, y2: d * rowH + 8, class: "axis" }));
  for (let m = 0; m < d; m++) {
    const top = 8 + m * rowH;
    chart.append(svg("text", { x: left - 8, y: top + rowH / 2 + 4, "text-anchor": "end", class: "label" }, `y[${m}]`));
    let pos = zero;
    let neg = zero;
    const labels = []; // [x, width, head] of the segments wide enough for a label
    parts.forEach((part, i) => {
      const v = part[m];
      const wpx = Math.abs(v) * scale;
      const x = v >= 0 ? pos : neg - wpx;
      if (v >= 0) pos += wpx;
      else neg -= wpx;
      const ofBias = i === nHeads;
      const look = ofBias ? { class: "seg-rect bias" } : others && i !== head ? { class: "seg-rect other-head" } : { fill: `url(#${hatch}-${i})`, class: "seg-rect" + (i === head ? " inspected" : "") };
      const rect = svg("rect", { x, y: top + 5, width: Math.max(wpx, 0.5), height: rowH - 12, ...look });
      rect.append(svg("title", {}, ofBias ? `bias bᴼ: ${fmt(v)}` : `head ${i}: ${fmt(v)}`));
      chart.append(rect);
      if (wpx > 26 && !(others && i !== head && !ofBias)) labels.push([x, wpx, ofBias ? "b" : `h${i}`]);
    });
    const ty = zero + y[m] * scale;
    chart.append(svg("line", { x1: ty, x2: ty, y1: top + 1, y2: top + rowH - 3, class: "total-tick" }));
    // a segment's label at its middle; where the total's tick falls there, in the wider part beside
    // the tick, or left out when neither part has room (the pattern still names the head)
    for (const [x, wpx, name] of labels) {
      let at = x + wpx / 2;
      if (Math.abs(at - ty) < 12) {
        const [before, after] = [ty - x, x + wpx - ty];
        if (Math.max(before, after) < 30) continue;
        at = before > after ? x + before / 2 - 2 : ty + after / 2 + 2;
      }
      chart.append(svg("text", { x: at, y: top + rowH / 2 + 4, "text-anchor": "middle", class: "seg-label" }, name));
    }
  }
  const at = (k) => [left + (k % perLine) * step, d * rowH + 30 + 18 * Math.floor(k / perLine)]; // legend entry k
  const keyed = others ? [head] : range(nHeads);
  keyed.forEach((i, k) => {
    const [lx, ly] = at(k);
    chart.append(svg("rect", { x: lx, y: ly - 10, width: 14, height: 12, fill: `url(#${hatch}-${i})` }));
    chart.append(svg("text", { x: lx + 18, y: ly, class: "label" }, `head ${i} (h${i})`));
  });
  if (others) {
    const [ox, oy] = at(1);
    chart.append(svg("rect", { x: ox, y: oy - 10, width: 14, height: 12, class: "seg-rect other-head" }));
    chart.append(svg("text", { x: ox + 18, y: oy, class: "label" }, `the other ${nHeads - 1} heads`));
  }
  if (bias) {
    const [bx, by] = at(keyed.length + (others ? 1 : 0));
    chart.append(svg("rect", { x: bx, y: by - 10, width: 14, height: 12, class: "seg-rect bias" }));
    chart.append(svg("text", { x: bx + 18, y: by, class: "label" }, "bias bᴼ (b)"));
  }
  const [tx, ty] = at(entries - 1);
  chart.append(svg("line", { x1: tx, x2: tx, y1: ty - 11, y2: ty + 2, class: "total-tick" }));
  chart.append(svg("text", { x: tx + 6, y: ty, class: "label" }, "total y"));
  const caption = `Bars right of the axis add, bars left subtract${bias ? " (the bias too)" : ""}; the heavy tick marks the output component, their sum.`;
  return h("figure", { class: "chart-figure" }, chart, h("figcaption", {}, caption));
}

// ---- big matrices: a canvas heatmap with a readout, instead of thousands of table cells ----

// A column's header a screen reader says where the table shows none (a sign's column, ÷ or ×)
const unseen = (text) => h("span", { class: "sr-only" }, text);

const TABLE_LIMIT = 160; // cells; above this a matrix is drawn on canvas
const HAND_SIZED = 64; // numbers: every query's map is a table up to this size (8 queries by 8 keys), readable at a glance

function grid(options) {
  const { rows, cols } = options;
  if (rows.length * cols.length <= (options.limit ?? TABLE_LIMIT)) return matrix(options);
  return heatmap({
    caption: options.caption,
    rows: rows.length,
    cols: cols.length,
    value: options.value,
    plane: options.plane ?? null,
    // (rowText: a label's text, where rowLabel builds an element for a table's row: a map's frame
    // moved to another row names it without building one)
    rowLabel: (r) => (options.rowText ? options.rowText(rows[r]) : textOf(options.rowLabel ? options.rowLabel(rows[r], r) : rows[r])),
    colLabel: (c) => textOf(options.colLabel ? options.colLabel(cols[c]) : cols[c]),
    blockLabel: options.blockLabel,
    tokenAt: options.tokenRows ? (r) => rows[r] : null,
    source: options.source,
    mark: options.mark,
    markSpan: options.markSpan,
    scale: options.scale,
  });
}

// X's colour scale, as its map takes it (sharedScale), worked out once for a trace: the query's row
// of X, drawn above the map, takes it too (on its own scale, the same numbers looked otherwise)
const xScales = new WeakMap();
function xScale(t, n, d) {
  if (!xScales.has(t.x)) xScales.set(t.x, sharedScale(n, d, planeOf(t.x)));
  return xScales.get(t.x);
}

function textOf(x) {
  return x instanceof Node ? x.textContent : Array.isArray(x) ? x.map(textOf).join("") : String(x);
}

// The text a screen reader is given: a sub- or superscript set apart ("W 0 Q", not "W0Q").
function spokenText(x) {
  if (x instanceof Element && (x.tagName === "SUB" || x.tagName === "SUP")) return ` ${x.textContent}`;
  if (x instanceof Element) return [...x.childNodes].map(spokenText).join("");
  if (x instanceof Node) return x.textContent;
  return Array.isArray(x) ? x.map(spokenText).join("") : String(x);
}

// Cell colours: white to blue for weights, blue (negative) or orange (positive) for signed
// values, grey for a masked cell. Each colour comes in 256 shades from white, as RGBA words, so
// that painting a cell (every cell of a 512 x 512 map) is a table lookup and one store.
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
function rgbaWord([r, g, b]) {
  return (LITTLE_ENDIAN ? ((255 << 24) | (b << 16) | (g << 8) | r) : ((r << 24) | (g << 16) | (b << 8) | 255)) >>> 0;
}
function shades(rgb) {
  return Uint32Array.from({ length: 256 }, (_, k) => rgbaWord(rgb.map((c) => Math.round(255 + ((c - 255) * k) / 255))));
}
const WEIGHT_SHADES = shades([29, 78, 160]);
const NEGATIVE_SHADES = shades([47, 111, 208]);
const POSITIVE_SHADES = shades([208, 102, 31]);
const MASKED_WORD = rgbaWord([228, 230, 234]);

// Painted heatmap cells, per array of a payload: views of other queries reuse them.
const paintedCells = new WeakMap();

// A canvas is costly to create: its first drawing allocates its pixels. While a panel is built
// (slotsFor), each heatmap gets a place, "panel|order|size"; the view of another query or head
// reuses a canvas of the same place, taking it when its panel is shown (claimCanvases).
// The canvas holds the cells and labels and is redrawn only when the cells change. The query's
// row and the cursor are outlines laid over it, so that another query draws nothing: the first
// drawing on a canvas in a frame costs a millisecond or two, however small it is.
// A place has two canvases at most: the one in the page, and one for a panel drawn ahead (a
// head about to be picked, see drawAhead), which must leave the page's alone.
const canvasPlaces = new Map(); // place -> [{ canvas, box, mark, markLabel, cursor, active: the handlers showing it, base: the cells drawn, shown: ever on screen }]
const CANVASES_PER_PLACE = 2;
const claims = new WeakMap(); // figure -> () => void: put its canvas in, and draw
const drawnBy = new WeakMap(); // canvas -> the handlers of the heatmap last drawn on it
let slots = null; // { panel, next } while a panel is built

function slotsFor(panel, build) {
  slots = { panel, next: 0 };
  try {
    return build();
  } finally {
    slots = null;
  }
}

// The maps of the nodes about to be shown, each given its canvas. None takes the canvas of
// another among them (the page's own canvas is taken only from a map these replace).
let showing = null; // the figures being given their canvases, while they are
function claimCanvases(...nodes) {
  const figures = [];
  for (const node of nodes) forEachMap(node, (figure) => figures.push(figure));
  showing = new Set(figures);
  try {
    for (const figure of figures) claims.get(figure)?.();
  } finally {
    showing = null;
  }
}

// A panel's maps drawn before it is shown, each on a canvas the page is not showing: showing the
// panel then draws nothing.
const aheads = new WeakMap(); // figure -> (onCanvas) => void
function drawAhead(node, onCanvas = true) {
  forEachMap(node, (figure) => aheads.get(figure)?.(onCanvas));
}

function forEachMap(node, task) {
  if (!(node instanceof Element)) return;
  if (node.matches("figure.heatmap-figure")) task(node);
  for (const figure of node.querySelectorAll("figure.heatmap-figure")) task(figure);
}

// The width left of a heatmap for its row labels: room for the longest one drawn, from 76 px up to
// 200 (a longer one is cut with an ellipsis), so that "0.03 × teacher" or "transformers @143" is read whole.
const LABEL_MIN = 76;
const LABEL_MAX = 200;
let measuring = null;
function labelRoom(labels, fontSize) {
  measuring ??= document.createElement("canvas").getContext("2d");
  measuring.font = `${fontSize}px system-ui, sans-serif`;
  const [least, most] = [LABEL_MIN, LABEL_MAX].map((px) => px * labelScale());
  let widest = 0;
  for (let i = 0; i < labels.length && widest < most; i++) widest = Math.max(widest, measuring.measureText(String(labels[i][1])).width);
  return Math.round(Math.min(most, Math.max(least, widest + 10)));
}

// A reader who set a larger default font (24 px, not 16) reads the maps' labels larger too, as
// the page's text: the canvas's sizes are pixels, which that setting leaves alone (zooming scales
// both). Never smaller: a notebook's own root size is no reader's choice. Read once: a style read
// amid a change would make the browser work out the page's styles there and then.
let grownLabels = 0;
function labelScale() {
  return (grownLabels ||= Math.max(1, parseFloat(getComputedStyle(document.documentElement).fontSize) / 16 || 1));
}

// Left and Right (Up and Down too), Home and End move the focus along a row of buttons.
function arrowKeys(container, selector) {
  container.addEventListener("keydown", (event) => {
    if (!event.target.matches?.(selector) || !(event.key in STEPS || event.key === "Home" || event.key === "End")) return;
    const all = [...container.querySelectorAll(selector)];
    const at = all.indexOf(event.target);
    const to = event.key === "Home" ? 0 : event.key === "End" ? all.length - 1 : Math.min(all.length - 1, Math.max(0, at + STEPS[event.key]));
    event.preventDefault();
    all[to].focus();
  });
}

// text cut to fit width px in ctx's font, an ellipsis marking the cut ("head 0 · 16" must not
// become "head 0 · 1")
function fitText(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let end = text.length - 1;
  while (end > 1 && ctx.measureText(`${text.slice(0, end)}…`).width > width) end--;
  return `${text.slice(0, end)}…`;
}

// A canvas for a heatmap with these handlers and cells: one already showing them, else one whose
// cells are these (nothing to redraw), else one out of the page, else a new one. Drawn ahead, it
// never takes the page's: null when the place has no other. A map being shown (claimCanvases)
// takes one out of the page that was shown before, else the page's own, which the map it
// replaces lets go, before one never shown: a canvas's first showing costs that frame 5 to 15 ms
// more at 512 tokens (the browser sets up its pixels for the screen).
function heatmapCanvas(place, handlers, cells, ahead) {
  const pool = place ? (canvasPlaces.get(place) ?? []) : [];
  const out = pool.filter((e) => !e.box.isConnected);
  const free = ahead ? out : pool;
  const replaced = () => (showing ? pool.find((e) => e.box.isConnected && !showing.has(e.box.parentNode)) : undefined); // (a map shown with it keeps its own)
  let entry = free.find((e) => e.active === handlers) ?? free.find((e) => e.base && e.base === cells) ?? (ahead ? out[0] : (out.find((e) => e.shown) ?? replaced() ?? out[0]));
  if (!entry && pool.length < CANVASES_PER_PLACE) {
    // an application, not an image: a screen reader in browse mode would keep the arrow keys that read the map
    const canvas = h("canvas", { class: "heatmap", tabindex: 0, role: "application", "aria-roledescription": "heatmap" });
    const [mark, markLabel, cursor] = ["heatmap-mark", "heatmap-mark-label", "heatmap-cursor"].map((name) => h("div", { class: name, hidden: true, "aria-hidden": "true" }));
    const lens = h("canvas", { class: "heatmap-lens", hidden: true, "aria-hidden": "true" });
    const made = { canvas, mark, markLabel, cursor, lens, box: h("div", { class: "heatmap-box" }, canvas, mark, markLabel, cursor, lens), active: handlers, base: null };
    for (const type of ["mousemove", "keydown", "focus", "mouseleave", "blur"]) canvas.addEventListener(type, (event) => made.active[type](event));
    if (place) canvasPlaces.set(place, [...pool, made]);
    entry = made;
  }
  entry ??= ahead ? null : pool[0];
  if (entry) entry.active = handlers;
  return entry;
}

// An element laid over a heatmap at [left, top, width, height] px, or hidden when box is falsy.
function outline(element, box) {
  element.hidden = !box;
  if (!box) return;
  const [left, top, width, height] = box;
  Object.assign(element.style, { left: `${left}px`, top: `${top}px`, width: `${width}px`, height: `${height}px` });
}

// A map's cells, a pixel each, on a canvas out of the page (one a size, a few kept): the browser
// blows it up onto the map's canvas (drawImage, no smoothing) to the very pixels putCells' loop
// makes, in a tenth of the time for a 512-row map (0.2-0.5 ms against 1.2-4.6 for 512 x 64 cells
// 8 px wide). A map under BLOWN_UP device pixels is as quick by the loop.
const BLOWN_UP = 1 << 15;
const cellCanvases = new Map(); // "cols x rows" -> canvas
function cellsCanvas(cells, cols, rows) {
  const key = `${cols}x${rows}`;
  let canvas = cellCanvases.get(key);
  if (!canvas) {
    if (cellCanvases.size >= 8) cellCanvases.clear();
    canvas = Object.assign(document.createElement("canvas"), { width: cols, height: rows });
    cellCanvases.set(key, canvas);
  }
  canvas.getContext("2d").putImageData(new ImageData(cells, cols, rows), 0, 0);
  return canvas;
}

// the lens over a map of small cells: cells below LENS_MIN px get it; it shows LENS_CELLS of them
// each way, LENS_ZOOM px each
const LENS_MIN = 6;
const LENS_CELLS = 15;
const LENS_ZOOM = 10;

// Row labels drawn on canvas take --muted of explorer.css by hand: a canvas drawn before it is in the
// page has no computed style. A dark notebook theme marks the body as the stylesheet's dark block
// reads it; the page in a dark system theme marks its root mha-dark (page.js).
const LIGHT_LABELS = "#5b6475";
const DARK_LABELS = "#a4adbc";
const darkHost = () => document.body.dataset.jpThemeLight === "false" || document.body.classList.contains("vscode-dark") || document.documentElement.classList.contains("mha-dark");

// A rows x cols heatmap on canvas. The readout names the cell under the pointer or the keyboard
// cursor (arrow keys) with its value at two decimals and in full. `mark` outlines one row.
// blockLabel(r): where rows are too thin for a label each, the label drawn at row r, or null for
// none (W^O's thousand rows: "head 2" where each head's block starts); the readout still names the row.
// labelsAtLeast: room for the row labels of at least this many px (maps stacked to be compared
// column by column start their cells at one x). scale: the colour scale, given (two maps compared
// by eye share one; see sharedScale), instead of the map's own.
// plane: the rows x cols values as one row-major typed array, if they are one (see Tensor.plane),
// read instead of value() where every cell is read.
function heatmap({ caption, rows, cols, value, plane = null, rowLabel, colLabel, colName, mark, markSpan = 1, kind, masked, source, blockLabel, tokenAt = null, labelsAtLeast = 0, scale: given, lastLabel = false }) {
  const single = singlePrecision; // its readout writes a value in full as the view's numbers are
  // source = [tensor, key]: these cells depend only on that tensor, never on the query
  let store = null;
  if (source) {
    if (!paintedCells.has(source[0])) paintedCells.set(source[0], new Map());
    store = paintedCells.get(source[0]);
  }
  const hit = store?.get(source[1]);
  // Square cells, except: a map of few rows is drawn at least 16 px tall, with rows of at least
  // 12 px while that keeps it under 320 px (so that its row labels can be read), else rows as tall
  // as keep it under 320 px, up to 8 times higher than wide (X of a 40-token text, 384 wide, or one
  // head's block of W^O: not a strip of 1 px rows); and a tall map of few columns (every token's
  // q, K, V; a W) gets cells up to 8 times wider than high, so that it can be seen and pointed at.
  // (Those 16 and 12 px, and the labels' 8 to 12 px, grow with a larger default font: labelScale.)
  const grown = labelScale();
  const [tallest, readable] = [Math.round(16 * grown), Math.round(12 * grown)]; // a map's least height, a row's
  const square = Math.max(1, Math.min(28, Math.floor(560 / cols), Math.floor(320 / rows)));
  const ch = Math.max(square, Math.min(Math.max(28, tallest), Math.ceil(tallest / rows)), rows * readable <= 320 ? readable : Math.min(Math.floor(320 / rows), 8 * square));
  // more columns than FIT_COLUMNS px (SmolLM2's 1,024 keys): all of them, several to a pixel, in
  // that width (they ran past the stage's column, its last keys and axis label out of sight)
  const cw = cols > FIT_COLUMNS ? FIT_COLUMNS / cols : Math.max(square, Math.min(28, Math.floor(560 / cols), 8 * square));
  const fontSize = Math.round(Math.min(12 * grown, Math.max(8 * grown, ch - 2))); // of the row labels
  // every query's weights over a long text: most are far below the largest, and a linear scale
  // leaves the map white; a square root (as the thumbnails) shows the faint ones, up to the map's
  // largest, or its 99th percentile where a few weights (a first query's 1) stand far above the rest
  const root = kind === "weights" && rows > 1 && cols > 64;
  // labels a line of text apart, at least, and the second clear of the first (moved down inside
  // the map), in a round step (0, 20, 40: with a step of 10, the 10 fell under the 0 and was left out)
  const every = ch >= fontSize + 2 ? 1 : roundStep(Math.max(fontSize + 2, 1.5 * fontSize + 2 - ch / 2) / ch);
  // the rows labelled, and with what: each; one in `every`; or, given blockLabel, where blocks start
  // (labels kept 10 px apart at least)
  const height = rows * ch;
  // a label's middle beside its row, kept whole inside the map's height (the first and last of thin rows)
  const labelY = (r) => Math.min(height - fontSize / 2 - 1, Math.max(fontSize / 2 + 1, blockLabel && every > 1 ? r * ch + fontSize / 2 : r * ch + ch / 2));
  const drawnLabels = [];
  // blocks of one size (each head's rows of W^O) are labelled in a round step of blocks, as rows
  // are (head 0, 2, 4; 0, 5, 10): taken as they fitted, they ran head 0, 3, 5, 7, and heads 1 and
  // 2 seemed to be missing
  let blockStep = null; // [the first block's row, rows a block, blocks a label]
  if (blockLabel && every > 1) {
    const starts = [];
    for (let r = 0; r < rows && starts.length < 2; r++) if (blockLabel(r) !== null) starts.push(r);
    if (starts.length === 2) blockStep = [starts[0], starts[1] - starts[0], roundStep((Math.max(fontSize + 1, 10) + 1) / ((starts[1] - starts[0]) * ch))];
  }
  const inStep = (r) => !blockStep || ((r - blockStep[0]) / blockStep[1]) % blockStep[2] === 0;
  for (let r = 0; r < rows; r += blockLabel && every > 1 ? 1 : every) {
    let label = blockLabel && every > 1 ? (inStep(r) ? blockLabel(r) : null) : rowLabel(r);
    // one token in `every` is labelled (tokenAt: the token position of a row): each with its
    // position, a lone “:” placed as “: @260”
    if (tokenAt && every > 1 && label !== null && !/ @\d+$/.test(label)) label = `${label} @${tokenAt(r)}`;
    // none written over the one before (the first and last, moved inside the map, could be)
    if (label !== null && !(drawnLabels.length && labelY(r) - labelY(drawnLabels[drawnLabels.length - 1][0]) < Math.max(fontSize + 1, blockLabel && every > 1 ? 10 : 0))) drawnLabels.push([r, label]);
  }
  // lastLabel: the last row is labelled whatever the step (a sum under the rows it adds: "output y"),
  // the label before it left out if it would be written over
  if (lastLabel && drawnLabels.at(-1)?.[0] !== rows - 1) {
    if (drawnLabels.length && labelY(rows - 1) - labelY(drawnLabels.at(-1)[0]) < fontSize + 1) drawnLabels.pop();
    drawnLabels.push([rows - 1, rowLabel(rows - 1)]);
  }
  const left = Math.max(labelsAtLeast, labelRoom(drawnLabels, fontSize));
  const width = left + Math.round(cols * cw);
  // each value read once (a cell of a 512-token map is one of 200,000), for the scale and the colours
  let values = null;
  let scale = 0;
  let anyHidden = Boolean(masked) || Boolean(hit && hit.hiddenCells.length);
  let peak = 0; // the largest |value|: the scale, unless a few outliers would wash out the rest
  if (hit) [scale, peak] = [hit.scale, hit.peak];
  else {
    values = new Float64Array(rows * cols); // a masked cell (null in JSON) is kept as -Infinity
    if (plane) values.set(plane);
    else for (let r = 0, o = 0; r < rows; r++) for (let c = 0; c < cols; c++, o++) values[o] = value(r, c) ?? -Infinity;
    for (let o = 0; o < values.length; o++) {
      const v = values[o];
      if (v === -Infinity) anyHidden = true;
      else if (Math.abs(v) > peak) peak = Math.abs(v);
    }
    // weights run from 0 to 1 in a map of a few keys, the same for every query; over many keys, up
    // to the map's largest (root, above); one query's strip over hundreds of keys, whose largest
    // weight may be 0.03, runs from 0 to its own largest
    if (kind === "weights") scale = peak === 0 ? 1 : root ? robustScale(values, peak) : rows > 1 ? 1 : peak;
    else scale = given ?? (rows > 1 ? robustScale(values, peak) : peak); // a strip has no legend to say so
  }
  const ratio = window.devicePixelRatio || 1;
  const firstOfPanel = !slots || slots.next === 0; // says how to read a map; the maps after it need not
  const place = slots ? `${slots.panel}|${slots.next++}|${width}x${height}x${ratio}` : null;
  let entry = null; // its canvases, once claimed
  // until a cell is read, the first map's readout says how to read one, in the page's words' type
  const readout = h("p", { class: firstOfPanel ? "readout how" : "readout", "aria-live": "polite" }, firstOfPanel ? "Point at a cell (or tap it), or focus the map and use the arrow keys." : "");
  let cursor = null;

  // The cells' colours are worked out once, one RGBA pixel each (kept for other queries), then
  // blown up to the cell size into the canvas's pixels: by the browser (see cellsCanvas) where
  // each cell is a whole number of device pixels and the map is big, else by the loop in putCells.
  let cells = hit ? hit.cells : null; // Uint8ClampedArray, rows x cols x RGBA
  let hiddenCells = hit ? hit.hiddenCells : []; // [row, col] of masked cells
  function paintCells() {
    cells = new Uint8ClampedArray(rows * cols * 4);
    const words = new Uint32Array(cells.buffer); // one RGBA cell per word
    const step = 255 / (scale || 1);
    const over = scale || 1;
    hiddenCells = [];
    const [below, above] = kind === "weights" ? [WEIGHT_SHADES, WEIGHT_SHADES] : [NEGATIVE_SHADES, POSITIVE_SHADES];
    for (let r = 0, i = 0; r < rows; r++)
      for (let c = 0; c < cols; c++, i++) {
        const v = masked && masked(r, c) ? null : values ? values[i] : value(r, c);
        if (v === null || v === -Infinity) {
          words[i] = MASKED_WORD;
          hiddenCells.push([r, c]);
        } else {
          const shade = root ? Math.round(255 * Math.sqrt(Math.abs(v) / over)) : Math.round(Math.abs(v) * step); // (written out: a call per cell cost more)
          words[i] = (v < 0 ? below : above)[shade < 255 ? shade : 255];
        }
      }
    values = null;
    store?.set(source[1], { cells, scale, peak, hiddenCells });
  }

  function putCells(ctx) {
    // device pixels: each takes the colour of the cell it falls in
    const across = Math.round(cols * cw * ratio);
    const down = Math.floor(rows * ch * ratio);
    if (across === cols && down === rows) {
      ctx.putImageData(new ImageData(cells, cols, rows), Math.round(left * ratio), 0); // a pixel per cell (512 tokens)
      return;
    }
    if (Number.isInteger(cw * ratio) && Number.isInteger(ch * ratio) && across * down >= BLOWN_UP) {
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0); // device pixels, as putImageData's
      ctx.imageSmoothingEnabled = false; // each pixel the colour of its cell, no blend at the edges
      ctx.drawImage(cellsCanvas(cells, cols, rows), 0, 0, cols, rows, Math.round(left * ratio), 0, across, down);
      ctx.restore();
      return;
    }
    const image = ctx.createImageData(across, down);
    const to = new Uint32Array(image.data.buffer); // one RGBA pixel per word, bytes in order
    const from = new Uint32Array(cells.buffer);
    const column = new Int32Array(across + 1);
    for (let x = 0; x < across; x++) column[x] = Math.min(cols - 1, Math.floor(x / (cw * ratio)));
    column[across] = cols;
    // fewer pixels than cells: a pixel shows the strongest of the cells it covers (the colour
    // farthest from white), so that no key's large weight falls between two pixels
    const pooled = cw * ratio < 1;
    const strength = (w) => 255 - Math.min(w & 255, (w >>> 8) & 255, (w >>> 16) & 255);
    let lastRow = -1;
    for (let y = 0; y < down; y++) {
      const r = Math.min(rows - 1, Math.floor(y / (ch * ratio)));
      if (r === lastRow) to.copyWithin(y * across, (y - 1) * across, y * across);
      else if (!pooled) for (let x = 0, o = y * across, start = r * cols; x < across; x++) to[o + x] = from[start + column[x]];
      else
        for (let x = 0, o = y * across, start = r * cols; x < across; x++) {
          let best = from[start + column[x]];
          for (let c = column[x] + 1, most = strength(best); c < column[x + 1]; c++) {
            const s = strength(from[start + c]);
            if (s > most) [best, most] = [from[start + c], s];
          }
          to[o + x] = best;
        }
      lastRow = r;
    }
    ctx.putImageData(image, Math.round(left * ratio), 0);
  }

  function draw() {
    if (!cells) paintCells();
    if (entry.base !== cells) drawBase(); // the same cells are already on this canvas
    const marked = mark !== undefined && mark !== null;
    // a thin row (a long text's) is framed around, not over: its own cells stay in sight
    // (markSpan rows from mark: an inspected head's block of W^O, labelled by its block's label)
    const tall = markSpan * ch;
    outline(entry.mark, marked && (tall < 8 ? [left - 2, mark * ch - 2, cols * cw + 4, tall + 4] : [left, mark * ch, cols * cw, tall]));
    // the query's label, dark, on the panel's white over the grey labels it may overlap
    // it covers wholly the grey labels it overlaps, never leaving half a neighbour's label
    const middle = !marked ? 0 : markSpan > 1 ? Math.min(height - fontSize / 2 - 1, Math.max(fontSize / 2 + 1, (mark + markSpan / 2) * ch)) : labelY(mark);
    // (a label's own height, as the others': rows a label apart keep their neighbours' labels)
    let [top, bottom] = [middle - fontSize / 2 - 1, middle + fontSize / 2 + 1];
    for (let grown = marked; grown; ) {
      grown = false;
      for (const [r] of drawnLabels) {
        const [from, to] = [labelY(r) - fontSize / 2 - 1, labelY(r) + fontSize / 2 + 1];
        if (from < bottom && to > top && (from < top || to > bottom)) {
          [top, bottom, grown] = [Math.min(top, from), Math.max(bottom, to), true];
        }
      }
    }
    [top, bottom] = [Math.max(0, top), Math.min(height, bottom)];
    outline(entry.markLabel, marked && [0, top, left - 2, bottom - top]);
    if (marked) {
      entry.markLabel.textContent = markSpan > 1 && blockLabel ? blockLabel(mark) : rowLabel(mark); // cut by CSS, with an ellipsis, where it is too long
      const line = fontSize + 2;
      Object.assign(entry.markLabel.style, { fontSize: `${fontSize}px`, lineHeight: `${line}px`, paddingTop: `${Math.max(0, middle - top - line / 2)}px` });
    }
    outline(entry.cursor, cursor && [left + cursor[1] * cw, cursor[0] * ch, cw, ch]);
    drawLens();
  }

  // Cells a few pixels wide (a long text's map, a pixel per cell) are shown enlarged around the
  // cursor while it is on the map: LENS_CELLS × LENS_CELLS of them, the cursor's outlined, and the
  // query's row framed when it is among them.
  const small = cw < LENS_MIN || ch < LENS_MIN;
  let lensOn = false;
  function drawLens() {
    const lens = entry.lens;
    lens.hidden = !(small && lensOn && cursor);
    if (lens.hidden) return;
    // each way, cells already big enough keep their size: a strip's (one query's row) stay its height
    const [zx, zy] = [cw < LENS_MIN ? LENS_ZOOM : cw, ch < LENS_MIN ? LENS_ZOOM : ch];
    // as many rows as fit the map's height (a wide map of 1-px rows may be 40 px tall): the lens
    // stays on the map, whose figure clips what goes past it; a strip's lens hangs below it
    const down = rows === 1 ? 1 : Math.min(LENS_CELLS, rows, Math.max(1, Math.floor(height / zy)));
    const across = Math.min(LENS_CELLS, cols);
    const top = Math.min(rows - down, Math.max(0, cursor[0] - (down >> 1))); // the window stays on the map
    const first = Math.min(cols - across, Math.max(0, cursor[1] - (across >> 1)));
    const [w, ht] = [across * zx, down * zy];
    const [pw, ph] = [Math.round(w * ratio), Math.round(ht * ratio)]; // whole device pixels
    if (lens.width !== pw || lens.height !== ph) {
      lens.width = pw;
      lens.height = ph;
      Object.assign(lens.style, { width: `${w}px`, height: `${ht}px` });
    }
    const ctx = lens.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    const words = new Uint32Array(cells.buffer);
    const colour = new Uint8ClampedArray(4);
    const word = new Uint32Array(colour.buffer);
    for (let r = 0; r < down; r++)
      for (let c = 0; c < across; c++) {
        word[0] = words[(top + r) * cols + first + c];
        ctx.fillStyle = `rgb(${colour[0]},${colour[1]},${colour[2]})`;
        ctx.fillRect(c * zx, r * zy, zx, zy);
      }
    ctx.lineWidth = 2;
    if (rows > 1 && mark !== undefined && mark !== null && mark + markSpan > top && mark < top + down) {
      ctx.strokeStyle = "#1d2330"; // --ink: the query's row, as the mark over the map
      ctx.strokeRect(1, (mark - top) * zy + 1, w - 2, markSpan * zy - 2);
    }
    ctx.strokeStyle = "#c2410c"; // the cursor's colour on the map
    ctx.strokeRect((cursor[1] - first) * zx + 1, (cursor[0] - top) * zy + 1, zx - 2, zy - 2);
    // beside the cursor, right of it and below, on the map; on the other side where the map ends
    // first, or the part of it in view (a map wider than a phone scrolls in its figure)
    const x = left + cursor[1] * cw;
    const gap = 14;
    const at = entry.box.getBoundingClientRect();
    const view = entry.box.closest(".figure")?.getBoundingClientRect() ?? { left: 0, right: innerWidth };
    const [seenLeft, seenRight] = [Math.max(0, view.left - at.left), Math.min(width, view.right - at.left, innerWidth - at.left)];
    const lx = x + gap + w <= seenRight ? x + gap : Math.max(seenLeft, x - gap - w);
    const ly = rows === 1 ? height + 2 : Math.max(0, Math.min(height - ht, cursor[0] * ch + gap));
    Object.assign(lens.style, { left: `${lx}px`, top: `${ly}px` });
  }

  // the row labels as drawn: another head's map of the same tokens (K, V) finds them on the canvas
  // already, and draws its cells alone (the labels were a millisecond a head change at 512 tokens)
  const labelsDrawn = () => `${left}|${fontSize}|${darkHost()}|${drawnLabels.map(([r, label]) => `${r}:${label}`).join("\n")}`;
  function drawBase() {
    const ctx = entry.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    const labels = labelsDrawn();
    const same = entry.labels === labels;
    if (same) ctx.clearRect(left, 0, width - left, height);
    else ctx.clearRect(0, 0, width, height);
    putCells(ctx);
    if (!same) {
      ctx.font = `${fontSize}px system-ui, sans-serif`;
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      ctx.fillStyle = darkHost() ? DARK_LABELS : LIGHT_LABELS; // --muted of the two looks (the canvas may be out of the page here)
      for (const [r, label] of drawnLabels) ctx.fillText(fitText(ctx, String(label), left - 8), left - 6, labelY(r));
      entry.labels = labels;
    }
    if (cw >= 6) {
      // masked cells: a diagonal stroke as well as grey, so colour is not the only sign
      ctx.strokeStyle = "#a0a6b0";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (const [r, c] of hiddenCells) {
        ctx.moveTo(left + c * cw, (r + 1) * ch);
        ctx.lineTo(left + (c + 1) * cw, r * ch);
      }
      ctx.stroke();
    }
    entry.base = cells;
  }

  // spoken: from the keyboard; silent: from the pointer (each cell it crosses would be read out)
  function show(r, c, spoken = true) {
    cursor = [r, c];
    const v = value(r, c);
    const note = masked && masked(r, c) ? " (masked)" : "";
    readout.setAttribute("aria-live", spoken ? "polite" : "off");
    readout.textContent = `${rowLabel(r)} · ${colLabel(c)}: ${fmt(v)} (${full(v === -Infinity ? null : v, single)})${note}`;
    readout.classList.remove("how");
    draw();
  }

  const handlers = {
    mousemove: (event) => {
      pointed = { entry, handlers, clientX: event.clientX, clientY: event.clientY };
      const box = entry.canvas.getBoundingClientRect();
      const c = Math.floor((event.clientX - box.left - left) / cw);
      const r = Math.floor((event.clientY - box.top) / ch);
      const inside = r >= 0 && r < rows && c >= 0 && c < cols; // not over the row labels
      lensOn = inside;
      if (inside && (!cursor || cursor[0] !== r || cursor[1] !== c)) show(r, c, false);
      else drawLens();
    },
    mouseleave: () => {
      if (pointed?.handlers === handlers) pointed = null;
      lensOn = entry.canvas.matches(":focus-visible"); // kept for the keys, not after a click
      drawLens();
    },
    blur: () => {
      lensOn = false;
      drawLens();
    },
    keydown: (event) => {
      if (pointed?.handlers === handlers) pointed = null; // the keys move the cursor now, not a scroll under the pointer
      if (event.key === "Escape" && lensOn) { // as a number's full value: the lens covers what is around it
        lensOn = false;
        drawLens();
        return;
      }
      // the arrows a cell; Home and End the row's first and last (with Ctrl, the map's); Page Up and
      // Down ten rows (ten cells along a one-row strip), rather than scrolling the page from the map
      const [r, c] = cursor || [0, 0];
      const moves = {
        ArrowUp: [r - 1, c], ArrowDown: [r + 1, c], ArrowLeft: [r, c - 1], ArrowRight: [r, c + 1],
        Home: event.ctrlKey ? [0, 0] : [r, 0], End: event.ctrlKey ? [rows - 1, cols - 1] : [r, cols - 1],
        PageUp: rows > 1 ? [r - MAP_PAGE, c] : [r, c - MAP_PAGE], PageDown: rows > 1 ? [r + MAP_PAGE, c] : [r, c + MAP_PAGE],
      };
      if (!moves[event.key] || event.altKey || event.metaKey) return;
      event.preventDefault();
      lensOn = true;
      const [to, at] = cursor ? moves[event.key] : [0, 0];
      show(Math.min(rows - 1, Math.max(0, to)), Math.min(cols - 1, Math.max(0, at)));
    },
    focus: () => {
      if (pointed?.handlers === handlers) pointed = null; // (as a key: the focus may scroll the map into view)
      lensOn ||= entry.canvas.matches(":focus-visible"); // reached by Tab
      if (cursor) drawLens();
      else show(mark ?? 0, 0);
    },
  };
  // what the columns are: given colName (a map whose columns are the keys), each one's name under it
  // where the columns are wide enough for a line of text on its side; else the first and the last,
  // under the map's left and right edges
  const named = colName && cw >= COLUMN_NAMED;
  const axis = cols < 2 ? null
    : named ? h("p", { class: "heatmap-axis names", "aria-hidden": "true" }, range(cols).map((c) => h("span", {}, colName(c))))
    : h("p", { class: "heatmap-axis", "aria-hidden": "true" }, h("span", {}, colLabel(0)), cols * cw >= NARROW_AXIS ? h("span", {}, "→") : null, h("span", {}, colLabel(cols - 1)));
  // under a narrow map (64 heads' concat, two columns wide) the first and last alone, within its width
  if (axis) Object.assign(axis.style, { marginLeft: `${left}px`, width: `${cols * cw}px` }, cols * cw < NARROW_AXIS ? { minWidth: "0" } : {});
  if (named) axis.style.setProperty("--column", `${cw}px`);
  const figure = h("figure", { class: "heatmap-figure" }, h("figcaption", {}, caption), legend(kind, scale, anyHidden, peak, root), axis, readout);
  function claim(ahead = false) {
    // a figure already on screen when its turn to be drawn ahead comes (an idle task queued before it was shown) keeps its canvas
    const outOfPage = ahead && !figure.isConnected;
    const taken = heatmapCanvas(place, handlers, cells, outOfPage);
    if (!taken) return cells || paintCells(); // the page's canvas is not for a panel drawn ahead: its colours at least
    entry = taken;
    entry.shown ||= Boolean(showing?.has(figure)); // (a stage laid out ahead, hidden, is in the page and not shown)
    const { canvas, box } = entry;
    if (box.parentNode === figure && drawnBy.get(canvas) === handlers) return; // still showing this map
    if (canvas.width !== width * ratio || canvas.height !== height * ratio) {
      canvas.width = width * ratio; // clears it
      canvas.height = height * ratio;
      canvas.style.width = `${width}px`;
      canvas.style.height = `${height}px`;
      entry.base = entry.labels = null;
    }
    canvas.setAttribute("aria-label", `${spokenText(caption)}: ${rows} × ${cols}; use the arrow keys to read values`);
    if (box.parentNode !== figure) figure.insertBefore(box, axis || readout);
    // a map showing again (another query's, then this one's) has its lens as the pointer and focus are now
    lensOn = canvas.matches(":hover") || canvas.matches(":focus-visible");
    draw();
    drawnBy.set(canvas, handlers);
  }
  if (place) {
    claims.set(figure, claim);
    aheads.set(figure, (onCanvas) => (onCanvas ? claim(true) : cells || paintCells()));
  }
  else claim(); // built outside a panel: a canvas of its own, drawn now
  // a map that frames a row frames another when told (a map shared by every query's panel, K's)
  if (mark !== undefined && mark !== null) {
    figure.markRow = (r) => {
      mark = r;
      if (entry?.active === handlers) draw();
    };
  }
  return figure;
}

// The map under the pointer, and where the pointer rests. Scrolled under it (the wheel, a figure
// scrolled sideways), the map reads the cell now under the pointer: the readout and the lens named
// the cell it had left until the pointer moved.
let pointed = null;
if (typeof window !== "undefined") {
  addEventListener("scroll", () => {
    // (not a canvas another map has taken since: its handlers are that map's now; nor one in a
    // stage left, hidden: read, it would be laid out there and then)
    if (pointed && pointed.entry.active === pointed.handlers && pointed.entry.canvas.isConnected && !pointed.entry.canvas.closest(".stage-kept")) pointed.handlers.mousemove(pointed);
  }, { capture: true, passive: true });
}

const COLUMN_NAMED = 12; // px: a column this wide or wider has its name written under it, on its side
const FIT_COLUMNS = 640; // px: a map of more columns than this draws them all in this width
const MAP_PAGE = 10; // rows a map's Page Up and Page Down move
const NARROW_AXIS = 144; // px: a map narrower than this has its first and last columns named, no arrow between

// The colour scale of a map: its largest |value|, unless that is more than OUTLIER times the
// 99th percentile of |value|. A weight matrix with a few huge entries (W^O of a decoder) would
// otherwise be white; its scale is then that percentile, and the few beyond take the full colour.
const OUTLIER = 4;
// A 2-D tensor's values (or slice i of a 3-D one's) for sharedScale: its plane, or else a reader
// of them one at a time
const planeOf = (tensor, ...i) => tensor.plane(...i) ?? ((r, c) => tensor.at(...i, r, c));
// One colour scale for maps of rows x cols values each, given as value(r, c) functions or as
// planes (Tensor.plane: the rows x cols values, row-major), one a map, compared by eye: the widest
// of the scales each would take on its own (not for weights, whose scale is theirs). A plane is
// read as it is, with no call a value: X of a 512-token text, 1.5 ms against 3.4 to 5.2 ms.
function sharedScale(rows, cols, ...values) {
  return Math.max(...values.map((value) => {
    let all = value;
    let peak = 0;
    if (typeof value === "function") {
      all = new Float64Array(rows * cols);
      for (let r = 0, o = 0; r < rows; r++) for (let c = 0; c < cols; c++, o++) peak = Math.max(peak, Math.abs((all[o] = value(r, c))));
    } else for (let o = 0; o < all.length; o++) peak = Math.max(peak, Math.abs(all[o]));
    return rows > 1 ? robustScale(all, peak) : peak;
  }));
}

function robustScale(values, peak) {
  if (!(peak > 0) || values.length < 100) return peak;
  const bins = new Uint32Array(1024); // |value| / peak in 1024 bins: one pass, no sort
  const toBin = 1024 / peak;
  let count = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === -Infinity) continue;
    bins[Math.min(1023, Math.floor(Math.abs(v) * toBin))]++;
    count++;
  }
  let below = 0;
  for (let b = 0; b < 1024; b++) {
    below += bins[b];
    if (below >= 0.99 * count) {
      const p99 = ((b + 1) / 1024) * peak; // the bin's upper edge: at least the percentile
      return p99 * OUTLIER < peak ? Number(p99.toPrecision(2)) : peak;
    }
  }
  return peak;
}

// A scale's bound: a bound as small as 0.0008 (a bias) keeps two significant digits, where two
// decimals would say 0.00.
const scaleOf2 = (x) => (x !== 0 && x < 0.1 ? String(Number(x.toPrecision(2))) : fmt(x));

// What a map's colours mean: its scale (and, when outliers were left out of it, how far they go),
// and grey for masked cells.
function legend(kind, scale, masked, peak, root) {
  const swatch = (name) => h("span", { class: `swatch ${name}`, "aria-hidden": "true" });
  const largest = root ? (peak > scale ? "" : " (the map's largest)") : " (this row's largest)";
  const parts =
    kind === "weights"
      // (as the bars' scale writes it: 0.10, not 0.1)
      ? [swatch("zero"), " 0 to ", swatch("weight"), scale === 1 ? " 1" : ` ${scaleOf2(scale)}${largest}`, root ? ", on a square-root scale so that faint weights show" : ""]
      : [swatch("negative"), ` −${scaleOf2(scale)} · `, swatch("zero"), " 0 · ", swatch("positive"), ` +${scaleOf2(scale)}`];
  const sign = kind === "weights" ? "" : "±";
  const beyond = peak > scale ? `; beyond ${sign}${scaleOf2(scale)} (up to ${sign}${scaleOf2(peak)}), full colour` : null;
  return h("p", { class: "heatmap-legend" }, "Colours: ", ...parts, beyond, masked ? [" · ", swatch("masked"), " masked"] : null);
}

// ---- every query at once: the current stage as whole matrices ------------------------------

function allQueries(view, query, head, stage) {
  const { payload, t } = view;
  const c = payload.config;
  const n = payload.tokens.length;
  const g = payload.kv_group[head];
  const tok = (r) => tokenName(payload, r);
  const later = t.mask ? (r, j) => hiddenKey(t, head, r, j) : null; // a key the mask hid (after the query, or outside the window)
  // a map of few numbers (the teaching example's) is a table of them, each checkable by hand;
  // a bigger one is a heatmap
  const map = (caption, name, index, cols, colLabel, kind, masked, colName) =>
    n * cols <= HAND_SIZED
      ? matrix({
          caption,
          rows: range(n),
          cols: range(cols),
          value: (r, j) => t[name].at(...index(r, j)),
          src: (r, j) => `${name}:${index(r, j).join(",")}`,
          rowLabel: (r) => h("span", { class: "tok" }, tok(r)),
          // a narrow column's heading breaks only before a quoted name ("key 0" over "“the”")
          colLabel: (j) => {
            const label = colLabel(j);
            return label.includes("“") ? label.replaceAll(" ", "\u00a0").replace("\u00a0“", " “") : label;
          },
          rowClass: (r) => (r === query ? "inspected" : null),
          cellClass: masked ? (r, j) => (masked(r, j) ? "masked" : null) : null,
        })
      : heatmap({ caption, rows: n, cols, value: (r, j) => t[name].at(...index(r, j)), plane: t[name].plane(...index(0, 0).slice(0, -2)), rowLabel: tok, tokenAt: (r) => r, colLabel, colName, mark: query, kind, masked });
  const byToken = (j) => keyLabel(payload, j); // as the one-query maps name a key
  const comp = (name) => (j) => `${name}[${j}]`;
  // a weights table whose shown numbers add up to 1.01 or 0.99 in some row says which
  const sumsOff = () => {
    if (n * n > HAND_SIZED) return null;
    const shownSums = range(n).map((r) => byHandFmt(range(n).reduce((sum, j) => sum + rounded(t.weights.at(head, r, j)), 0)));
    const off = range(n).filter((r) => shownSums[r] !== fmt(1));
    if (!off.length) return null;
    return h("p", { class: "hint" }, `The weights are rounded to two decimals: as shown, ${off.map((r) => `the row of “${tok(r)}” adds up to ${shownSums[r]}`).join(", ")}; in full, every row adds up to 1.`);
  };
  // a scaled table whose numbers are not the shown scores scaled as its caption gives it (over √d_head
  // as 1.414, or times the layer's own scale to four digits) says where
  const scaleShown = scaleShownOf(c);
  const scaledOff = () => {
    if (n * n > HAND_SIZED) return null;
    const divisor = fmtConstant(1 / scaleOf(c));
    const worked = (r, j) => byHandFmt(scaleShown != null ? rounded(t.scores.at(head, r, j)) * scaleShown : rounded(t.scores.at(head, r, j)) / Number(divisor));
    const off = range(n).flatMap((r) => range(n).filter((j) => worked(r, j) !== fmt(t.scaled.at(head, r, j))).map((j) => [r, j]));
    const why = scaleShown != null ? (scaleShown !== c.scale ? roundedAs(`, the scale ${scaleShown} to four digits`) : undefined) : divisor.includes(".") ? roundedAs(`, the divisor ${divisor} to three`) : undefined;
    return roundingHint(off.map(([r, j]) => [`the scaled score of query “${tok(r)}”, key “${tok(j)}”`, worked(r, j), fmt(t.scaled.at(head, r, j))]), why);
  };
  const views = {
    projections: () => [
      map(`Q of head\u00a0${head} (n × d_head)`, "q", (r, j) => [head, r, j], c.d_head, comp("q")),
      map(`K of ${kvHead(payload, g)}`, "k", (r, j) => [g, r, j], c.d_head, comp("k")),
      map(`V of ${kvHead(payload, g)}`, "v", (r, j) => [g, r, j], c.d_v, comp("v")),
    ],
    scores: () => [
      map(`Q Kᵀ of head\u00a0${head}: row = query, column = key`, "scores", (r, j) => [head, r, j], n, byToken, undefined, null, tok),
      map(scaleShown != null ? `Scaled: × ${scaleShown}` : `Scaled by 1/√${c.d_head}`, "scaled", (r, j) => [head, r, j], n, byToken, undefined, null, tok),
      scaledOff(),
    ],
    mask: () => [map(`Scaled scores after the mask (grey = −∞), head\u00a0${head}`, "mask", (r, j) => [head, r, j], n, byToken, "scores", later, tok)],
    weights: () => [map(`Weights A of head\u00a0${head}: every row sums to 1${later ? "; grey cells are masked (exactly 0)" : ""}`, "weights", (r, j) => [head, r, j], n, byToken, "weights", later, tok), sumsOff()],
    mixing: () => [map(`Z = A V of head\u00a0${head} (n × d_v)`, "z", (r, j) => [head, r, j], c.d_v, comp("z"))],
    concat: () => [map(`concat (n × ${c.n_heads}·${c.d_v})`, "concat", (r, j) => [r, j], c.n_heads * c.d_v, (j) => `head ${Math.floor(j / c.d_v)} · z[${j % c.d_v}]`)],
    output: () => [map("output Y (n × d_model)", "output", (r, j) => [r, j], c.d_model, comp("y"))],
    qk_norm: () => [
      map(`Q of head\u00a0${head} after the norm`, "q_normed", (r, j) => [head, r, j], c.d_head, comp("q")),
      map(`K of ${kvHead(payload, g)} after the norm`, "k_normed", (r, j) => [g, r, j], c.d_head, comp("k")),
    ],
    rope: () => [
      map(`Q of head\u00a0${head} after the rotation`, "q_rotated", (r, j) => [head, r, j], c.d_head, comp("q")),
      map(`K of ${kvHead(payload, g)} after the rotation`, "k_rotated", (r, j) => [g, r, j], c.d_head, comp("k")),
    ],
  };
  return [
    h("p", { class: "lead once" }, `Every query at once: one row per query token. The marked row is “`, tok(query), "”, the query of the one-query view. In practice all rows are computed together, as matrix products."),
    h("div", { class: "maps" }, views[stage]()),
  ];
}

// ---- K/V sharing and costs -----------------------------------------------------------------

// Which query heads read which K/V head: a diagram up to 12 query heads; beyond, whose circles
// would be too small to read, a sentence.
const SHARING_DRAWN = 12;
function sharing(payload) {
  const { n_heads, n_kv_heads } = payload.config;
  if (n_heads > SHARING_DRAWN) return h("figure", { class: "sharing-figure" }, h("p", { class: "sharing-text" }, sharingText(payload)));
  const width = Math.max(220, n_heads * 34 + 20);
  const x = (i, count) => 10 + ((i + 0.5) * (width - 20)) / count;
  const chart = svg("svg", { class: "sharing", viewBox: `0 0 ${width} 96`, role: "img", "aria-label": `${n_heads} query heads reading ${n_kv_heads} key/value heads: ${payload.kv_group.map((g, i) => `head ${i} reads K/V ${g}`).join(", ")}` });
  payload.kv_group.forEach((g, i) => chart.append(svg("line", { x1: x(i, n_heads), y1: 26, x2: x(g, n_kv_heads), y2: 70, class: "link" })));
  for (let i = 0; i < n_heads; i++) {
    chart.append(svg("circle", { cx: x(i, n_heads), cy: 18, r: 9, class: `fill head-${i % HEAD_COLOURS}` }));
    chart.append(svg("text", { x: x(i, n_heads), y: 22, "text-anchor": "middle", class: "node-label" }, `${i}`));
  }
  for (let g = 0; g < n_kv_heads; g++) {
    chart.append(svg("rect", { x: x(g, n_kv_heads) - 14, y: 70, width: 28, height: 18, rx: 3, class: "kv" }));
    chart.append(svg("text", { x: x(g, n_kv_heads), y: 83, "text-anchor": "middle", class: "node-label dark" }, `${g}`));
  }
  chart.style.maxWidth = `${width}px`; // drawn at its own size: a few heads, blown up to the figure's width, took some 200 px
  return h("figure", { class: "sharing-figure" }, chart, h("figcaption", {}, "query heads (top) read key/value heads (bottom)"));
}

function sharingText(payload) {
  const { n_heads, n_kv_heads } = payload.config;
  if (n_kv_heads === n_heads) return `Each of the ${n_heads} query heads reads a key/value head of its own (MHA).`;
  if (n_kv_heads === 1) return `All ${n_heads} query heads read the one key/value head (MQA).`;
  const groups = range(n_kv_heads).map((g) => {
    const heads = range(n_heads).filter((i) => payload.kv_group[i] === g);
    return `heads ${heads[0]}–${heads[heads.length - 1]} read K/V ${g}`;
  });
  const listed = groups.length <= 8 ? groups : [...groups.slice(0, 3), "…", groups[groups.length - 1]];
  return `Each of the ${n_kv_heads} key/value heads is read by ${n_heads / n_kv_heads} query heads in a row (GQA): ${listed.join(", ")}.`;
}

function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

function costPanel(payload) {
  const k = payload.costs;
  const c = payload.config;
  const rows = [
    [`${c.kind} (this)`, k.kv_cache],
    ["MHA", k.kv_cache_mha],
    ["MQA", k.kv_cache_mqa],
  ].filter(([, kv], i) => i === 0 || kv.n_kv_heads !== c.n_kv_heads); // "MHA (this)" needs no second MHA row, nor one head's an MQA row: the same layer
  // the table's title above its scroller, not a caption: a caption is as wide as the table, and on
  // a phone its end would be scrolled out of sight
  // a layer without the causal mask keeps no cache: said first, so that the table reads as what a decoder would keep
  // (a sentence of four lines, in the text's weight: in bold it read as a heading)
  const uncached = payload.model
    ? "This encoder keeps no KV cache; a decoder of its widths would keep, per layer, "
    : "A layer without the causal mask, as here, sees every token at once and keeps no KV cache; as a causal decoder generating text it would keep, per layer, ";
  const cacheTitle = h("p", { class: c.causal ? "table-title" : "table-title sentence", id: uid("kv-cache") }, c.causal ? "KV cache per layer: " : uncached, "one key and one value per K/V head per token", k.kv_cache.tokens < k.n ? `; this layer's sliding window keeps only the last ${k.kv_cache.tokens} of the ${k.n} tokens (the keys the newest query reads, itself among them)` : "", c.causal ? "" : "."); // a sentence ends with a full stop; a title does not
  const cache = h(
    "table",
    { class: "calc-table cost", "aria-labelledby": cacheTitle.id },
    h("thead", {}, h("tr", {}, [unseen("kind"), "K/V heads", "numbers / token", "float16 / token", "float32 / token", `float16, ${plural(k.kv_cache.tokens, "token")}`, `float32, ${plural(k.kv_cache.tokens, "token")}`].map((x) => h("th", { scope: "col" }, x)))),
    h(
      "tbody",
      {},
      rows.map(([label, kv]) =>
        h("tr", { "data-kind": kv.kind }, h("th", { scope: "row" }, label), h("td", {}, String(kv.n_kv_heads)), h("td", {}, kv.numbers_per_token.toLocaleString("en")), h("td", {}, bytes(kv.bytes_per_token.float16)), h("td", {}, bytes(kv.bytes_per_token.float32)), h("td", {}, bytes(kv.bytes.float16)), h("td", {}, bytes(kv.bytes.float32))),
      ),
    ),
  );
  const stages = Object.entries(k.multiply_adds);
  const total = stages.reduce((sum, [, v]) => sum + v, 0);
  // the rows that count multiply-adds alone: what a FLOP count (two a multiply-add) is made of
  const macRows = stages.filter(([name]) => !(name in COUNTED));
  const plainMacs = macRows.reduce((sum, [, v]) => sum + v, 0);
  const macs = h(
    "div",
    {},
    h(
      "table",
      { class: "calc-table cost" },
      h("caption", {}, `Arithmetic for n = ${plural(k.n, "token")}`),
      h("thead", {}, h("tr", {}, ["stage", "count", "of"].map((x) => h("th", { scope: "col" }, x)))),
      h(
        "tbody",
        {},
        stages.map(([name, v]) => h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, v.toLocaleString("en")), h("td", { class: "counted" }, name === "scaled" && c.scale != null ? "multiplies by the layer's own scale, one per score" : COUNTED[name] ?? "multiply-adds"))),
        // the rows count different operations: the multiply-adds alone first, then the sum, which says so
        plainMacs !== total ? h("tr", { class: "subtotal" }, h("th", { scope: "row" }, "multiply-adds"), h("td", {}, plainMacs.toLocaleString("en")), h("td", { class: "counted" }, `the multiply-add rows added (${macRows.map(([name]) => name).join(", ")}): about ${(2 * plainMacs).toLocaleString("en")} floating-point operations`)) : null,
        h("tr", { class: "total" }, h("th", { scope: "row" }, "total"), h("td", {}, total.toLocaleString("en")), h("td", { class: "counted" }, "every stage's row added, each in its own unit: a softmax entry, its exponential and its division, counts as one", c.bias ? "; the biases' additions, one per number of q, k, v and y, are not counted" : "")),
      ),
    ),
    // a plain implementation computes every entry; the mask only sets some to −∞ afterwards
    c.causal || c.sliding_window != null
      ? h("p", { class: "hint" }, "Every entry is counted, masked ones too, as a plain implementation computes them; a kernel that skips the masked ones does about half the scores and z work of a causal layer", c.causal && c.sliding_window != null && k.n > c.sliding_window ? `, and with this window at most ${c.sliding_window} keys per query` : "", ".")
      : null,
  );
  return h(
    "details",
    { class: "costs" },
    h("summary", {}, h("h2", {}, "Cost of this configuration")),
    h("div", { class: "costs-body" }, h("div", {}, h("p", { class: "entries" }, `A materialized attention matrix holds h·n² = ${c.n_heads}·${k.n}² = `, h("strong", {}, k.attention_entries.toLocaleString("en")), " entries."), sharing(payload), h("div", {}, cacheTitle, h("div", { class: "wide-table" }, cache), cacheWhy(c, k.kv_cache)), wholeModel(payload)), macs),
  );
}

// What the cost table counts for each stage, where it is not one multiply-add each
const COUNTED = {
  qk_norm: "multiply-adds for the root mean squares (then as many divisions and multiplies by w)",
  rope: "components turned (two multiplies and an add each)",
  scaled: "divisions by √d_head, one per score (computed as multiplies by 1/√d_head)",
  weights: "exponentials, then as many divisions",
};

// A real model's KV cache over all its layers, each with its own K/V heads and window.
function wholeModel(payload) {
  const m = payload.model;
  const all = m?.kv_cache_all_layers;
  if (!all?.float16) return null;
  const encoder = !payload.config.causal; // it reads the whole text at once: nothing is kept for a next token
  return h(
    "p",
    { class: "whole-model" },
    `All ${m.n_layers} layers of ${m.title}, ${encoder ? "K and V for" : "after"} these ${payload.tokens.length} tokens: `,
    h("strong", {}, bytes(all.float16)),
    " in float16, ",
    h("strong", {}, bytes(all.float32)),
    " in float32.",
    cacheSum(m.kv_cache_layers ?? [], payload.tokens.length),
    encoder ? " An encoder reads the whole text in one pass and keeps no cache: this is what a decoder of these sizes would keep." : "",
  );
}

// The whole model's cache written out, to be checked by hand: its layers grouped by the tokens
// each keeps (a sliding-window layer, its window's last ones), times the bytes of a token
// (layers: [tokens kept, numbers a token] each). Said where every layer has as many numbers a token.
function cacheSum(layers, n) {
  const numbers = new Set(layers.map(([, each]) => each));
  if (!layers.length || numbers.size !== 1) return "";
  const [each] = numbers; // numbers a token, in every layer
  const perToken = bytes(2 * each);
  const kept = new Map(); // tokens kept -> layers that keep them
  for (const [tokens] of layers) kept.set(tokens, (kept.get(tokens) ?? 0) + 1);
  const terms = [...kept].map(([tokens, count]) => `${plural(count, "layer")} × ${plural(tokens, "token")}`);
  const windowed = layers.filter(([tokens]) => tokens < n).length;
  const all = bytes(2 * each * n * layers.length);
  return (
    ` That is ${terms.length > 1 ? `(${terms.join(" + ")})` : terms[0]} × ${perToken} a token in float16` +
    (windowed ? `: ${windowed === 1 ? "one layer keeps" : `${windowed} layers keep`} only the tokens of ${windowed === 1 ? "its" : "their"} sliding window (without the window, ${all}).` : ".")
  );
}

// ---- the packed view: all heads' W^Q side by side, one product, then a reshape ---------------

function packed(view, query, head) {
  const { payload, t, w } = view;
  const c = payload.config;
  const width = c.n_heads * c.d_head;
  const headOf = (col) => Math.floor(col / c.d_head);
  const wq = grid({
    caption: h("span", {}, sup("W", "Q"), ` packed (${c.d_model} × ${c.n_heads}·${c.d_head})`),
    rows: range(c.d_model),
    cols: range(width),
    value: (m, col) => w.W_Q.at(headOf(col), m, col % c.d_head),
    src: (m, col) => `W_Q:${headOf(col)},${m},${col % c.d_head}`,
    colLabel: (col) => `h${headOf(col)}·${col % c.d_head}`,
  });
  const x = grid({
    caption: h("span", {}, sub("x", tokenName(payload, query))),
    rows: [query],
    cols: range(c.d_model),
    value: (_, m) => t.x.at(query, m),
    src: (_, m) => `x:${query},${m}`,
    rowLabel: (r) => h("span", { class: "tok" }, tokenName(payload, r)), tokenRows: true,
  });
  const b = c.bias
    ? grid({
        caption: h("span", {}, sup("b", "Q"), " packed"),
        rows: [0],
        cols: range(width),
        value: (_, col) => w.b_Q.at(headOf(col), col % c.d_head),
        src: (_, col) => `b_Q:${headOf(col)},${col % c.d_head}`,
        rowLabel: biasRow,
        colLabel: (col) => `h${headOf(col)}·${col % c.d_head}`,
      })
    : null;
  const q = grid({
    caption: h("span", {}, "x ", sup("W", "Q"), c.bias ? [" + ", sup("b", "Q")] : ""),
    rows: [query],
    cols: range(width),
    value: (_, col) => t.q.at(headOf(col), query, col % c.d_head),
    src: (_, col) => `q:${headOf(col)},${query},${col % c.d_head}`,
    rowLabel: (r) => h("span", { class: "tok" }, tokenName(payload, r)), tokenRows: true,
    colLabel: (col) => `h${headOf(col)}·${col % c.d_head}`,
  });
  // the same numbers reshaped: row i is head i's q, as the stages show it, the inspected head's
  // marked (up to 16 heads: past them, a column as tall as the page, which the words say well enough)
  const split = c.n_heads <= HEAD_COLOURS && grid({
    caption: h("span", {}, "x ", sup("W", "Q"), c.bias ? [" + ", sup("b", "Q")] : "", ", split into heads"),
    rows: range(c.n_heads),
    cols: range(c.d_head),
    value: (i, e) => t.q.at(i, query, e),
    src: (i, e) => `q:${i},${query},${e}`,
    rowLabel: (i) => `head ${i}`,
    colLabel: (e) => `q[${e}]`,
    rowClass: (i) => (i === head ? "inspected" : null),
  });
  return h(
    "details",
    { class: "packed" },
    h("summary", {}, h("h3", {}, "Packed view: all heads in one matrix")),
    h("p", {}, "Libraries keep every head's ", sup("W", "Q"), ` side by side in one ${c.d_model} × ${width} matrix${c.bias ? ", and the biases side by side in one vector" : ""}. One product with the full input x gives all heads' queries at once; reshaping the ${width} numbers into ${c.n_heads} rows of ${c.d_head} gives each head's q. The columns marked h0 belong to head 0, and so on${c.d_model * width > TABLE_LIMIT ? " (on the map, point at a column to read its head)" : ""}. The input is never sliced per head: every head reads all of x. `, sup("W", "K"), " and ", sup("W", "V"), ` are packed the same way, one block per ${c.n_kv_heads === c.n_heads ? "head." : `K/V head: ${c.n_kv_heads} block${c.n_kv_heads === 1 ? "" : "s"} where `}`, ...(c.n_kv_heads === c.n_heads ? [] : [sup("W", "Q"), ` has ${c.n_heads}, as the query heads share them.`])),
    equation(x, ["×", wq], b && ["+", b], ["=", q]),
    split ? h("div", { class: "equation" }, split) : null, // under the product: beside it, it wrapped a laptop's line
  );
}

const STAGE_VIEWS = { projections, qk_norm: normed, rope, scores, mask, weights, mixing, concat, output };

// ---- always visible: every head's output for the current query ----------------------------

const manyHeads = (c) => c.n_heads * c.d_v > 64; // too many numbers to show every head's z

// The head outputs list the inspected head's z whole up to this width (SmolLM2's 64), else its
// first Z_SHOWN numbers.
const Z_LISTED = 64;
const Z_SHOWN = 16;

const layerLists = new WeakMap(); // a real model's layer (its payload's model) -> { list, entries: head -> its entry, not inspected }
function headOutputs(view, query, head) {
  const { payload, t } = view;
  const { n_heads, d_v, d_model } = payload.config;
  const many = manyHeads(payload.config); // a real model: say which head, show its z on inspection only
  const scrolls = many || n_heads > 16; // a list taller than a screen (the lab's 64 heads of one number) scrolls in its box
  // a head as wide as Gemma 3's (256) would fill the list with its z and hide the other heads:
  // its first numbers, and where every one is
  const cut = d_v > Z_LISTED ? Z_SHOWN : d_v;
  const zOf = (i, q) =>
    h(
      "span",
      {},
      sub("z", i),
      " = ",
      vec([...range(cut).map((e) => num(t.concat.at(q, i * d_v + e), `concat:${q},${i * d_v + e}`)), ...(cut < d_v ? ["…"] : [])]),
      cut < d_v ? h("span", { class: "hint" }, ` the first ${cut} of ${d_v}; Value mixing shows every one`) : "",
    );
  const title = h("h2", {}, "Head outputs for “", tokenName(payload, query), "”");
  let shown = null; // with many heads, the inspected head's z: set again for another query
  // past the colours there are, one colour would name two heads (16 and 0): the inspected head
  // keeps its own, the others are grey, as in the Output stage's chart
  const colour = (i) => headColour(i, n_heads, head);
  const entry = (i) =>
    h(
      "li",
      { class: `head-output ${colour(i)}` + (i === head ? " inspected" : ""), "data-head": i },
      i === head
        ? h("span", { class: "head-name" }, h("span", { class: `key ${colour(i)}` }), `Head ${i}`, h("span", { class: "badge" }, "inspected"))
        : h("button", { type: "button", class: "head-name", "data-pick-head": i, title: `Inspect head ${i}` }, h("span", { class: `key ${colour(i)}` }), `Head ${i}`),
      many && i !== head ? h("span", { class: "hint" }, sub("z", i), `: ${d_v} numbers`) : i === head ? (shown = zOf(i, query)) : zOf(i, query),
    );
  // a real model's list is one for the layer: the entries of the heads not inspected are the same
  // whichever head is, and stay in the page when another is picked (arrange), so that only the
  // two entries that change are laid out anew
  const layer = many && payload.model ? (layerLists.get(payload.model) ?? layerLists.set(payload.model, { list: h("ul", { class: "head-list compact" }), entries: new Map() }).get(payload.model)) : null;
  const entries = range(n_heads).map((i) => (layer && i !== head ? (layer.entries.get(i) ?? layer.entries.set(i, entry(i)).get(i)) : entry(i)));
  const list = layer ? layer.list : h("ul", { class: "head-list" + (scrolls ? " compact" : "") }, entries);
  const nodes = [
    title,
    list,
    scrolls ? h("p", { class: "hint list-note screen-only" }, `All ${n_heads} heads are in this list, which scrolls when they do not fit; pick one to inspect it.`) : null,
    many ? null : h("p", { class: "y" }, "output y = ", vec(range(d_model).map((m) => num(t.output.at(query, m), `output:${query},${m}`)))),
    h("p", { class: "hint" }, configLine(payload.config)),
  ].filter(Boolean);
  if (layer) nodes.arrange = () => placeChildren(list, entries);
  if (many && payload.model) {
    let at = query;
    const ready = new Map(); // query -> its z, built ahead (the queries next to the one shown)
    nodes.prepare = (q) => q === at || ready.has(q) || ready.set(q, roving([zOf(head, q)])[0]);
    nodes.showQuery = (q) => {
      if (q === at) return;
      at = q;
      title.replaceChildren("Head outputs for “", tokenName(payload, q), "”");
      const z = ready.get(q) ?? roving([zOf(head, q)])[0];
      ready.clear();
      shown.replaceWith(z);
      shown = z;
    };
  }
  return nodes;
}

// What the KV cache is for, and where its numbers per token come from.
function cacheWhy(c, kv) {
  return h(
    "p",
    { class: "hint cache-why" },
    "A decoder that writes text one token at a time keeps the keys and values of every token before (the KV cache), so that each new token computes only its own: ",
    `per layer and token, n_kv_heads × (d_head + d_v) = ${c.n_kv_heads} × (${c.d_head} + ${c.d_v}) = ${kv.numbers_per_token.toLocaleString("en")} numbers, of 2 bytes each in float16 and 4 in float32.`,
  );
}

// "GQA · d_model 16 · 8 heads, 2 K/V heads · d_head 4, d_v 6 · causal · bias": what tells the
// configurations apart (a scale of its own too: "scale 0.05")
function configLine(c) {
  const kv = c.n_kv_heads === c.n_heads ? "" : `, ${plural(c.n_kv_heads, "K/V head")}`;
  const dv = c.d_v === c.d_head ? "" : `, d_v ${c.d_v}`;
  const mask = c.causal ? ` · causal${c.sliding_window != null ? `, window ${c.sliding_window}` : ""}` : c.sliding_window != null ? ` · window ${c.sliding_window}` : "";
  const scale = ownScale(c) ? ` · scale ${scaleShownOf(c)}` : "";
  return `${c.kind} · d_model ${c.d_model} · ${plural(c.n_heads, "head")}${kv} · d_head ${c.d_head}${dv}${mask}${c.bias ? " · bias" : ""}${scale}`;
}

// ---- a real model: every head of the layer in small, and the tokens as the tokenizer split them

// strip: the token strip shown before, kept (with the lead above it) where it shows these very tokens.
function modelOverview(payload, pick, strip = null) {
  const m = payload.model;
  const small = new Tensor(m.overview);
  const [heads, cells] = small.shape;
  const size = Math.max(48, Math.min(96, Math.floor(900 / heads) - 12));
  // a cell most of whose query-key pairs the mask keeps apart is grey, as on the big maps: keys
  // after the query (causal), or outside its window. Its average counts their weights, 0, and would
  // read as white, little attention (a block astride the window's edge drew a white line)
  const n = payload.tokens.length;
  const { causal, sliding_window: windowSize } = payload.config;
  const b = m.overview_block;
  const hidden = (q, firstKey, lastKey) => // how many of these keys query q does not see
    (causal ? Math.max(0, lastKey - Math.max(firstKey, q + 1) + 1) : 0) + (windowSize != null ? Math.max(0, Math.min(lastKey, q - windowSize) - firstKey + 1) : 0);
  const greys = range(cells).map((r) => range(cells).map((c) => {
    const [firstQuery, lastQuery] = [r * b, Math.min((r + 1) * b, n) - 1];
    const [firstKey, lastKey] = [c * b, Math.min((c + 1) * b, n) - 1];
    let count = 0;
    for (let q = firstQuery; q <= lastQuery; q++) count += hidden(q, firstKey, lastKey);
    return 2 * count > (lastQuery - firstQuery + 1) * (lastKey - firstKey + 1);
  }));
  const masked = (r, c) => greys[r][c];
  const { n_heads: nHeads, n_kv_heads: nKv } = payload.config;
  const shared = nKv < nHeads;
  const buttons = range(heads).map((i) => {
    const canvas = h("canvas", { width: cells, height: cells, class: "thumb", "aria-hidden": "true" });
    canvas.style.width = canvas.style.height = `${size}px`;
    const ctx = canvas.getContext("2d");
    const image = ctx.createImageData(cells, cells);
    const pixels = new Uint32Array(image.data.buffer); // one RGBA word a cell, as the heatmaps paint
    let top = 0;
    for (let r = 0; r < cells; r++) for (let c = 0; c < cells; c++) top = Math.max(top, small.at(i, r, c));
    for (let r = 0; r < cells; r++)
      for (let c = 0; c < cells; c++) {
        const v = Math.sqrt(small.at(i, r, c) / (top || 1)); // square root: faint patterns stay visible
        pixels[r * cells + c] = masked(r, c) ? MASKED_WORD : WEIGHT_SHADES[Math.round(v * 255)];
      }
    ctx.putImageData(image, 0, 0);
    // the query's row, framed: where it lies is set on the overview once per query (see markQuery)
    const map = h("span", { class: "thumb-map" }, canvas, h("span", { class: "thumb-query", "aria-hidden": "true" }));
    // under GQA or MQA, the K/V head it reads: the heads that share one read the same keys and values
    const kv = shared ? h("span", { class: "thumb-kv" }, kvHead(payload, payload.kv_group[i])) : null;
    return h("button", { type: "button", class: "thumb-button", "data-head": i, "aria-pressed": "false", onclick: () => pick(i) }, map, h("span", {}, `Head ${i}`), kv);
  });
  // the text as the tokenizer split it, where the token's label (payload.tokens) is that text with
  // the spaces it starts or ends with marked ␣; else the label: a byte piece, which is no text alone (␣🐱 1/3), a
  // WordPiece piece inside a word with its ## ("un", "##bel"), a blank one (⇥, ↵), and an unknown
  // token with the text it stands for ([UNK] 🐱)
  // (either as the menus show it: by its code where it is invisible, "U+0007"; isolated where it
  // holds right-to-left letters or an override, which would turn its "1/2" around)
  const shown = (label, text) => visibleToken(text && text.trim() && label.replaceAll("␣", " ") === text ? text : label);
  const tokensKey = JSON.stringify([payload.tokens, m.readable, m.special]);
  if (strip?.tokensKey !== tokensKey) {
    const tokens = payload.tokens.map((label, j) =>
      h("button", { type: "button", class: "token" + (m.special[j] ? " special" : ""), "data-query": j, "aria-pressed": "false", tabindex: -1, title: `position ${j}: pick it as the query` }, shown(label, m.readable[j])),
    );
    const lead = h("p", { class: "hint strip-lead", id: uid("strip-lead") }, `${plural(payload.tokens.length, "token")}${payload.tokens.some((tok) => /^␣|␣$/.test(tok)) ? " (elsewhere on the page, ␣ marks a space a token starts or ends with)" : ""}; pick one as the query:`);
    strip = h("div", { class: "token-strip", role: "group", "aria-label": "Tokens as the tokenizer split them", "aria-describedby": lead.id }, tokens, h("span", { class: "token-mark", "aria-hidden": "true", hidden: true }));
    Object.assign(strip, { lead, tokensKey });
  }
  return [
    // (a narrow screen breaks the heading between its parts, never inside "0–5")
    h("h2", {}, `${m.title} · layer ${m.layer} (layers `, h("span", { class: "nowrap" }, `0–${m.n_layers - 1}`), `${m.held_layers?.length < m.n_layers ? `; this copy holds ${m.held_layers.join(", ")}` : ""}) · every head's weights`),
    h("p", { class: "hint" }, `Rows are queries, columns keys${m.overview_block > 1 ? `, averaged over blocks of ${m.overview_block} tokens` : ""}${payload.config.causal || payload.config.sliding_window != null ? `; grey is masked${m.overview_block > 1 ? " (most of a block)" : ""}` : ""}; the query's row is framed.${shared ? ` ${nKv === 1 ? `All ${nHeads} heads read one K/V head's keys and values (MQA)` : `Each K/V head's keys and values are read by ${nHeads / nKv} heads (GQA)`}: their patterns differ by their queries alone.` : ""} Pick a head to follow it stage by stage.`),
    h("div", { class: "thumbs" }, buttons),
    // the lead above the strip, not in it: a long text's strip scrolls to the query, and would take it out of sight
    strip.lead,
    strip,
  ];
}

// ---- the Matrices view -----------------------------------------------------------------

function matricesView(view) {
  const { payload, t, w } = view;
  const c = payload.config;
  const tok = (r) => h("span", { class: "tok" }, tokenName(payload, r));
  const perHead = (name, i, width) =>
    grid({
      caption: h("span", {}, sup(sub("W", i), name.slice(2))),
      rows: range(c.d_model),
      cols: range(width),
      value: (k, j) => w[name].at(i, k, j),
      src: (k, j) => `${name}:${i},${k},${j}`,
    });
  // with biases, each W stands above its b (one row of the same width)
  const biasOf = (name, i, width) =>
    c.bias
      ? grid({ caption: h("span", {}, sup(sub("b", i), name.slice(2))), rows: [0], cols: range(width), value: (_, j) => w[`b_${name.slice(2)}`].at(i, j), src: (_, j) => `b_${name.slice(2)}:${i},${j}`, rowLabel: biasRow, limit: 16 })
      : null;
  const column = (name, i, width) => h("div", { class: "with-bias" }, perHead(name, i, width), biasOf(name, i, width));
  // one block per K/V head: its W^K and W^V once, beside the W^Q of every query head that reads it
  const heads = range(c.n_kv_heads).map((g) => {
    const readers = range(c.n_heads).filter((i) => payload.kv_group[i] === g);
    const shown = readers.filter((i) => w.W_Q.has(i)); // a real model's payload: the inspected head
    if (!shown.length) return null;
    // shared K/V heads: the title says whose each matrix is (over a query head's W^Q, "K/V head 0,
    // shared by query heads 0–3" read as if W^Q were shared too)
    const title = c.n_kv_heads === c.n_heads ? `Head ${g}`
      : [sup("W", "Q"), ` of query head${shown.length > 1 ? "s" : ""} ${shown.join(", ")} · `, sup("W", "K"), " and ", sup("W", "V"), ` of K/V head ${g}, `, shown.length === readers.length ? "which they share" : `shared by query heads ${readers.join(", ")}`];
    return h("div", { class: "head-matrices" }, h("h3", {}, title), h("div", { class: "row" }, shown.map((i) => column("W_Q", i, c.d_head)), column("W_K", g, c.d_head), column("W_V", g, c.d_v)));
  });
  const rows = heldRows(w.W_O, c);
  const wo = grid({
    caption: h("span", {}, sup("W", "O"), rowsOf(w.W_O, c, ` (${c.n_heads * c.d_v} × ${c.d_model}): rows ${c.d_v} at a time belong to one head`)),
    rows,
    cols: range(c.d_model),
    colLabel: (m) => `y[${m}]`,
    value: (r, m) => w.W_O.at(rows[r], m),
    src: (r, m) => `W_O:${rows[r]},${m}`,
    rowLabel: (r) => `head ${Math.floor(r / c.d_v)} · z[${r % c.d_v}]`,
    blockLabel: (r) => (rows[r] % c.d_v === 0 ? `head ${rows[r] / c.d_v}` : null),
    rowClass: (r) => `block-row ${headColour(Math.floor(r / c.d_v), c.n_heads, null)}`, // (no head is inspected here)
  });
  return h(
    "div",
    { class: "matrices-body" },
    h("p", {}, "The numbers this view computes with. Every head reads all of X. ", sup("W", "O"), ` has a block of rows for each head, and each of its columns (one output component) runs through every block, so every output component gets contributions from ${c.n_heads === 2 ? "both heads" : `all ${c.n_heads} heads`}.`, range(c.n_heads).some((i) => !w.W_Q.has(i)) ? [" Below are the inspected head's projections and its block of rows of ", sup("W", "O"), ` only (head ${range(c.n_heads).find((i) => w.W_Q.has(i))}): pick another head to see its own.`] : ""),
    grid({ caption: `X (${payload.tokens.length} × ${c.d_model})`, rows: range(payload.tokens.length), cols: range(c.d_model), value: (r, k) => t.x.at(r, k), src: (r, k) => `x:${r},${k}`, rowLabel: tok, tokenRows: true }),
    heads,
    wo,
    c.bias ? grid({ caption: h("span", {}, sup("b", "O"), ` (${c.d_model}): added once, after the heads`), rows: [0], cols: range(c.d_model), value: (_, m) => w.b_O.at(m), src: (_, m) => `b_O:${m}`, rowLabel: biasRow, limit: 16 }) : null,
  );
}

export default { render };

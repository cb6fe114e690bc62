// A real model's other heads, worked out on the page while it is idle, so that picking one shows
// it at once instead of waiting for the server's round trip.
//
// The layer's answer holds X and concat (every head's z); where they weigh little, the page asks
// for the layer's W^Q, W^K, W^V, their biases and W^O, every head's (modelview.layer_weights), and
// keeps them as the payload's layerWeights: from them each head's q, k, v, its rotation, scores
// and weights follow as trace() computes them. Sums are taken in double
// precision and every stage is rounded to float32 where trace() stores one, so the numbers agree
// with the server's to about one unit in the last place of a float32, not always to the bit
// (NumPy's float32 products sum in another order). Once such a head is shown the page fetches its
// own arrays and copies them in (refine): what stays on screen is the server's. z, and each head's
// part of the output, come from concat as for any head: those are the server's from the start.
//
// Shapes use trace.py's letters: n tokens, d d_model, e d_head, f d_v.

import { valuesOf, withDerived, withHead } from "./explorer.js";

// Whether the heads of this layer's answer can be worked out here: a server's answer of one head
// (a static copy holds them all) with the whole weights, on a layer without a q/k norm.
export function workable(payload) {
  const { stages, layerWeights, config } = payload;
  return Boolean(payload.model && stages.scores?.heads && stages.x && stages.concat && layerWeights?.W_Q && !config.qk_norm);
}

// Head `head`'s slices of the whole weights, as modelview.head_arrays sends them: its W^Q and
// b^Q, its K/V head's W^K, W^V and biases, its block of rows of W^O (views of the same bytes).
function weightsOf(whole, head, g, config) {
  const out = {};
  for (const [name, a] of Object.entries(whole)) {
    const index = name === "W_Q" || name === "b_Q" || name === "W_O" ? head : g;
    const size = a.data.length / (name === "W_O" ? config.n_heads : a.shape[0]);
    out[name] = { shape: a.shape, heads: [index], ...(name === "W_O" && { block: config.d_v }), dtype: a.dtype, data: a.data.subarray(index * size, (index + 1) * size) };
  }
  return out;
}

// x W + b, row by row: (n, d) times (d, c) plus (c,), each sum in double precision, rounded to
// float32, then the bias added as a float32 sum (as NumPy adds it to the float32 product).
function* project(x, d, W, offset, c, bias, biasOffset, out) {
  const n = out.length / c;
  const sum = new Float64Array(c);
  for (let r = 0; r < n; r++) {
    sum.fill(0);
    for (let m = 0; m < d; m++) {
      const xm = x[r * d + m];
      const row = offset + m * c;
      for (let j = 0; j < c; j++) sum[j] += xm * W[row + j];
    }
    for (let j = 0; j < c; j++) out[r * c + j] = bias ? Math.fround(Math.fround(sum[j]) + bias[biasOffset + j]) : sum[j];
    if (r % 32 === 31) yield;
  }
}

// cos and sin of each position's angles, (n, e) each, as trace._rotary makes them in float32.
function rotary(positions, n, e, theta) {
  const half = e / 2;
  const inverse = new Float64Array(half);
  for (let m = 0; m < half; m++) inverse[m] = Math.fround(1 / Math.fround(theta ** Math.fround((2 * m) / e)));
  const cos = new Float32Array(n * e);
  const sin = new Float32Array(n * e);
  for (let r = 0; r < n; r++)
    for (let m = 0; m < half; m++) {
      const angle = Math.fround(Math.fround(positions?.[r] ?? r) * inverse[m]);
      cos[r * e + m] = cos[r * e + m + half] = Math.cos(angle);
      sin[r * e + m] = sin[r * e + m + half] = Math.sin(angle);
    }
  return { cos, sin };
}

// a * cos + rotate_half(a) * sin, each product and the sum rounded to float32: (n, e)
function rotate(a, { cos, sin }, e) {
  const half = e / 2;
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) {
    const c = i % e;
    const turned = c < half ? -a[i + half] : a[i - half];
    out[i] = Math.fround(Math.fround(a[i] * cos[i]) + Math.fround(turned * sin[i]));
  }
  return out;
}

// The root of each row's sum of squares, (n,) from (n, e): the bound trace() puts on the scores.
function rowNorms(a, e) {
  const out = new Float64Array(a.length / e);
  for (let r = 0; r < out.length; r++) {
    let s = 0;
    for (let c = 0; c < e; c++) s += a[r * e + c] ** 2;
    out[r] = Math.sqrt(s);
  }
  return out;
}

// trace.hidden_keys: query i does not see key j after it (causal) or beyond the sliding window
const keyHidden = (config, i, j) => (config.causal && j > i) || (config.sliding_window != null && j <= i - config.sliding_window);

// trace._EXP_SAFE: a row whose scaled scores may pass this size has its maximum subtracted first
const EXP_SAFE = 60;

// Head `head`'s arrays (as modelview.head_arrays sends them, after withDerived), worked out a few
// rows at a time: a generator that yields between blocks and returns them. `groups` holds the
// K/V heads worked out already (g -> { k, v, kTurned, kNorms }), shared by the heads of a group.
function* workHead(payload, head, groups) {
  const { config, stages } = payload;
  const weights = payload.layerWeights;
  const { d_model: d, d_head: e, d_v: f, n_heads: nHeads, n_kv_heads: nGroups } = config;
  const n = payload.tokens.length;
  const x = valuesOf(stages.x); // (n, d)
  const g = payload.kv_group[head];
  const turns = config.rope_theta != null ? rotary(payload.positions, n, e, config.rope_theta) : null;
  // the K/V head's arrays: the answer's own where it holds them (the heads of the head on screen's group)
  const sliceOf = (a, size) => (a?.heads?.includes(g) ? valuesOf(a).subarray(a.heads.indexOf(g) * size, (a.heads.indexOf(g) + 1) * size) : null);
  if (!groups.has(g)) {
    let k = sliceOf(stages.k, n * e);
    let v = sliceOf(stages.v, n * f);
    if (!k) yield* project(x, d, valuesOf(weights.W_K), g * d * e, e, weights.b_K && valuesOf(weights.b_K), g * e, (k = new Float32Array(n * e)));
    if (!v) yield* project(x, d, valuesOf(weights.W_V), g * d * f, f, weights.b_V && valuesOf(weights.b_V), g * f, (v = new Float32Array(n * f)));
    const kTurned = turns ? (sliceOf(stages.k_rotated, n * e) ?? rotate(k, turns, e)) : k;
    const kNorms = rowNorms(kTurned, e); // (n,)
    // the longest key row a query may see: up to its own when causal, else any
    let longest = 0;
    for (let j = 0; j < n; j++) kNorms[j] = longest = Math.max(longest, kNorms[j]);
    if (!config.causal) kNorms.fill(longest);
    groups.set(g, { k, v, kTurned, kNorms });
  }
  const { k, v, kTurned, kNorms } = groups.get(g);
  const q = new Float32Array(n * e);
  yield* project(x, d, valuesOf(weights.W_Q), head * d * e, e, weights.b_Q && valuesOf(weights.b_Q), head * e, q);
  const qTurned = turns ? rotate(q, turns, e) : q;
  const qNorms = rowNorms(qTurned, e);
  const scale = config.scale ?? 1 / Math.sqrt(e);
  const scale32 = Math.fround(scale);

  const scores = new Float32Array(n * n);
  const attention = new Float32Array(n * n);
  const row = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const qi = i * e;
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let c = 0; c < e; c++) s += qTurned[qi + c] * kTurned[j * e + c];
      scores[i * n + j] = s;
    }
    // softmax over the keys, as trace() takes it: the scaled scores (hidden keys at -inf), less
    // the row's largest where some could pass EXP_SAFE, exponentiated; then each times 1/sum
    let largest = -Infinity;
    for (let j = 0; j < n; j++) {
      row[j] = keyHidden(config, i, j) ? -Infinity : Math.fround(scores[i * n + j] * scale32);
      largest = Math.max(largest, row[j]);
    }
    const shift = Math.abs(scale) * qNorms[i] * kNorms[i] > EXP_SAFE ? largest : 0;
    let sum = 0;
    for (let j = 0; j < n; j++) sum += row[j] = Math.fround(Math.exp(Math.fround(row[j] - shift)));
    const reciprocal = Math.fround(1 / Math.fround(sum));
    for (let j = 0; j < n; j++) attention[i * n + j] = row[j] * reciprocal;
    if (i % 16 === 15) yield;
  }

  const ofHead = (width, data) => ({ shape: [nHeads, n, width], heads: [head], dtype: "float32", data });
  const ofGroup = (width, data) => ({ shape: [nGroups, n, width], heads: [g], dtype: "float32", data });
  const own = {
    concat: stages.concat, // (each head's z is read from it, as for any head)
    q: ofHead(e, q),
    k: ofGroup(e, k),
    v: ofGroup(f, v),
    ...(turns && { q_rotated: ofHead(e, qTurned), k_rotated: ofGroup(e, kTurned) }),
    scores: ofHead(n, scores),
    weights: ofHead(n, attention),
  };
  const derived = ["scaled", "mask", "z", "contributions"].filter((name) => name in stages || payload.derived?.includes(name));
  const arrays = withDerived({ head, config, stages: own, derived, factors: {}, weights: { ...payload.weights, ...weightsOf(weights, head, g, config) } });
  return { ...withHead(payload, arrays), worked: true };
}

// The server's own arrays of a head worked out here (its payload with modelview.head_arrays)
// copied into its payload, in place: the views built on it read the server's numbers from now on.
export function refine(worked, exact) {
  for (const name of OWN) if (worked.stages[name]) worked.stages[name].data.set(exact.stages[name].data);
  worked.worked = false;
}
const OWN = ["q", "k", "v", "q_rotated", "k_rotated", "scores", "weights"]; // what workHead makes

// Every other head of the layer worked out while the page is idle, nearest to `first` first, a
// few milliseconds at a time (so that a click meanwhile waits for one block of rows at most).
// get(head) gives a head's payload once it is made, and onMade(head, payload) is told of it;
// pause() and resume() hold the work back (while the server runs a trace), stop() ends it (a new layer).
export function workAhead(payload, first, onMade) {
  const n = payload.config.n_heads;
  const order = Array.from({ length: n - 1 }, (_, s) => (s % 2 ? first - (s + 1) / 2 : first + s / 2 + 1)).map((h) => (h + n) % n);
  const made = new Map();
  const groups = new Map();
  let stopped = false;
  let paused = false;
  let waiting = false; // an idle callback is asked for
  let steps = null;
  let at = 0;
  const run = (deadline) => {
    waiting = false;
    if (stopped || paused) return;
    const until = performance.now() + Math.max(4, Math.min(deadline.timeRemaining(), 12));
    while (at < order.length && performance.now() < until) {
      const head = order[at];
      if (made.has(head)) {
        at++;
        continue;
      }
      steps ??= workHead(payload, head, groups);
      const step = steps.next();
      if (step.done) {
        made.set(head, step.value);
        onMade(head, step.value);
        steps = null;
        at++;
      }
    }
    if (at < order.length) later();
  };
  const later = () => {
    if (waiting) return;
    waiting = true;
    if (window.requestIdleCallback) requestIdleCallback(run, { timeout: 1000 });
    else setTimeout(() => run({ timeRemaining: () => 8 }), 20);
  };
  later();
  return {
    get: (head) => made.get(head),
    heads: () => [...made.keys()],
    pause: () => {
      paused = true;
    },
    resume: () => {
      paused = false;
      if (!stopped && at < order.length) later();
    },
    stop: () => {
      stopped = true;
    },
  };
}

// The forward pass of the book's blocks in plain JavaScript, for the live boards on the static
// site: what toylib's PyTorch modules compute, written once and shared by the chapters. No
// library, no network: a page carries this file, the chapter's file and the trained weights.
//
// A tensor is {shape, data}: data a Float64Array, row major. The weights are float32 values;
// the arithmetic is in double precision, and tests/test_live.py checks the results against
// PyTorch's float32 ones on thousands of inputs (logits within 1e-4).
(function (root) {
  "use strict";
  if (root.ToyNN) return; // a page with several live boards loads this once

  // weights as toylib.live writes them: {name: {shape, b64}}, float32 little-endian
  function load(weights) {
    const out = {};
    for (const [name, w] of Object.entries(weights)) {
      const bytes = Uint8Array.from(atob(w.b64), (c) => c.charCodeAt(0));
      // widened to double once: the arithmetic below then mixes no types, which runs faster
      out[name] = { shape: w.shape, data: Float64Array.from(new Float32Array(bytes.buffer)) };
    }
    return out;
  }

  // x (n, in) times W (in, out), as `x @ W`
  function matmul(x, n, W) {
    const [k, m] = W.shape, w = W.data, y = new Float64Array(n * m);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < k; j++) {
        const a = x[i * k + j];
        if (a === 0) continue;
        for (let o = 0; o < m; o++) y[i * m + o] += a * w[j * m + o];
      }
    return y;
  }

  // nn.Linear: x (n, in), weight (out, in), bias (out,) or undefined
  function linear(x, n, W, b) {
    const [m, k] = W.shape, w = W.data, y = new Float64Array(n * m), bias = b ? b.data : null;
    for (let i = 0; i < n; i++) {
      const xi = i * k;
      for (let o = 0; o < m; o++) {
        const wo = o * k;
        let s = 0;
        for (let j = 0; j < k; j++) s += x[xi + j] * w[wo + j];
        y[i * m + o] = bias ? s + bias[o] : s;
      }
    }
    return y;
  }

  // nn.LayerNorm over the last dimension d (eps 1e-5, biased variance, as PyTorch)
  function layerNorm(x, n, d, g, b) {
    const y = new Float64Array(n * d);
    for (let i = 0; i < n; i++) {
      let mean = 0, varsum = 0;
      for (let j = 0; j < d; j++) mean += x[i * d + j];
      mean /= d;
      for (let j = 0; j < d; j++) varsum += (x[i * d + j] - mean) ** 2;
      const inv = 1 / Math.sqrt(varsum / d + 1e-5);
      for (let j = 0; j < d; j++) y[i * d + j] = (x[i * d + j] - mean) * inv * g.data[j] + b.data[j];
    }
    return y;
  }

  // erf to about 1e-15 (a continued Taylor series near 0, its complement's continued fraction
  // beyond): GELU here is PyTorch's exact one, x * Phi(x), not the tanh approximation
  function erf(x) {
    const z = Math.abs(x);
    let r;
    if (z < 2.5) {
      let term = z, sum = z;
      for (let k = 1; k < 60; k++) {
        term *= (-z * z) / k;
        const add = term / (2 * k + 1);
        sum += add;
        if (Math.abs(add) < 1e-17) break;
      }
      r = (2 / Math.sqrt(Math.PI)) * sum;
    } else {
      let f = 0; // erfc(z) = exp(-z^2) / sqrt(pi) * 1 / (z + 1/2 / (z + 1 / (z + 3/2 / (z + ...))))
      for (let k = 60; k >= 1; k--) f = (k / 2) / (z + f);
      r = 1 - Math.exp(-z * z) / Math.sqrt(Math.PI) / (z + f);
    }
    return x < 0 ? -r : r;
  }
  const gelu = (v) => 0.5 * v * (1 + erf(v / Math.SQRT2));
  const silu = (v) => v / (1 + Math.exp(-v));
  const map = (x, f) => x.map(f);

  // softmax of each row of (n, m) in place; -Infinity entries get 0, and a row of nothing but
  // -Infinity gets zeros (as toylib.attention.attention reads nothing there)
  function softmaxRows(s, n, m) {
    for (let i = 0; i < n; i++) {
      let top = -Infinity;
      for (let j = 0; j < m; j++) top = Math.max(top, s[i * m + j]);
      let sum = 0;
      for (let j = 0; j < m; j++) {
        const e = top === -Infinity ? 0 : Math.exp(s[i * m + j] - top);
        s[i * m + j] = e;
        sum += e;
      }
      for (let j = 0; j < m; j++) s[i * m + j] = sum > 0 ? s[i * m + j] / sum : 0;
    }
    return s;
  }

  // scaled dot-product attention for each head: q (nq, heads * dh), k and v (nk, heads * dh);
  // bias(h, i, j) is added to the scores (-Infinity: may not look), or null. Returns the output
  // (nq, heads * dh) and the pattern (heads, nq, nk).
  function attention(q, k, v, nq, nk, heads, dh, bias) {
    const d = heads * dh, out = new Float64Array(nq * d), pattern = new Float64Array(heads * nq * nk);
    const scale = 1 / Math.sqrt(dh);
    const head = (t, n, h) => { // one head's columns, contiguous: (n, dh)
      const y = new Float64Array(n * dh);
      for (let i = 0; i < n; i++) for (let c = 0; c < dh; c++) y[i * dh + c] = t[i * d + h * dh + c];
      return y;
    };
    for (let h = 0; h < heads; h++) {
      const p = pattern.subarray(h * nq * nk, (h + 1) * nq * nk);
      const qh = head(q, nq, h), kh = head(k, nk, h), vh = head(v, nk, h), z = new Float64Array(dh);
      for (let i = 0; i < nq; i++) {
        const a = i * dh;
        for (let j = 0; j < nk; j++) {
          let s0 = 0, s1 = 0, c = 0; // two sums at once: the loop runs about twice as fast
          const b = j * dh;
          for (; c + 1 < dh; c += 2) {
            s0 += qh[a + c] * kh[b + c];
            s1 += qh[a + c + 1] * kh[b + c + 1];
          }
          if (c < dh) s0 += qh[a + c] * kh[b + c];
          p[i * nk + j] = (s0 + s1) * scale;
        }
        if (bias) for (let j = 0; j < nk; j++) p[i * nk + j] += bias(h, i, j);
      }
      softmaxRows(p, nq, nk);
      for (let i = 0; i < nq; i++) {
        z.fill(0);
        for (let j = 0; j < nk; j++) {
          const a = p[i * nk + j];
          if (a === 0) continue;
          for (let c = 0, b = j * dh; c < dh; c++) z[c] += a * vh[b + c];
        }
        for (let c = 0; c < dh; c++) out[i * d + h * dh + c] = z[c];
      }
    }
    return { out, pattern };
  }

  const at = (w, prefix, name) => {
    const t = w[prefix + name];
    if (!t) throw new Error("no weight named " + prefix + name);
    return t;
  };

  // toylib.attention.MultiHeadAttention (self-attention) on x (n, d)
  function selfAttention(w, prefix, x, n, d, heads, bias) {
    const lin = (name) => linear(x, n, at(w, prefix, name + ".weight"), w[prefix + name + ".bias"]);
    const a = attention(lin("W_Q"), lin("W_K"), lin("W_V"), n, n, heads, d / heads, bias);
    return { out: linear(a.out, n, at(w, prefix, "W_O.weight"), w[prefix + "W_O.bias"]), pattern: a.pattern };
  }

  // toylib.attention.EncoderBlock: pre-LayerNorm attention, then the GELU feed-forward layer
  function encoderBlock(w, prefix, x, n, d, heads, bias) {
    const ln = (name, y) => layerNorm(y, n, d, at(w, prefix, name + ".weight"), at(w, prefix, name + ".bias"));
    const a = selfAttention(w, prefix + "attn.", ln("ln_attn", x), n, d, heads, bias);
    const y = x.map((v, i) => v + a.out[i]);
    const hidden = map(linear(ln("ln_mlp", y), n, at(w, prefix, "mlp.0.weight"), at(w, prefix, "mlp.0.bias")), gelu);
    const mlp = linear(hidden, n, at(w, prefix, "mlp.2.weight"), at(w, prefix, "mlp.2.bias"));
    return { x: y.map((v, i) => v + mlp[i]), pattern: a.pattern };
  }

  // toylib.attention.Encoder: the blocks, then the final LayerNorm. biases[l] for layer l.
  // Returns x (n, d) and patterns[l] (heads, n, n).
  function encoder(w, prefix, x, n, d, heads, layers, biases) {
    const patterns = [];
    for (let l = 0; l < layers; l++) {
      const r = encoderBlock(w, `${prefix}blocks.${l}.`, x, n, d, heads, biases ? biases[l] : null);
      x = r.x;
      patterns.push(r.pattern);
    }
    return { x: layerNorm(x, n, d, at(w, prefix, "ln_final.weight"), at(w, prefix, "ln_final.bias")), patterns };
  }

  // the largest of xs; among values within `tie` of it, the first (so that a position the
  // model scores alike by symmetry gets the same answer in every browser)
  function argmax(xs, tie = 0) {
    let best = -Infinity;
    for (const v of xs) best = Math.max(best, v);
    for (let i = 0; i < xs.length; i++) if (xs[i] >= best - tie) return i;
    return -1;
  }

  const api = { load, matmul, linear, layerNorm, erf, gelu, silu, softmaxRows, attention, selfAttention,
                encoderBlock, encoder, argmax };
  root.ToyNN = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

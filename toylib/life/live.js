// Life on the static page: the rule on a torus, the chapter's model (SingleAttentionNet,
// mixer="attention") on ToyNN, and a board to draw on, step and look into. What each part
// mirrors in toylib: world.py (life_step, PATTERNS), net.py (SingleAttentionNet.forward).
(function (root) {
  "use strict";
  if (root.ToyLife) return;
  const nn = root.ToyNN;

  // ------------------------------------------------------------------ the rule (world.py)
  // grid: an array of rows of 0/1. A cell lives next with 3 live neighbours, or 2 and alive.
  function step(grid) {
    const R = grid.length, C = grid[0].length;
    return grid.map((row, r) => row.map((alive, c) => {
      let n = 0;
      for (let dr = -1; dr <= 1; dr++)
        for (let dc = -1; dc <= 1; dc++)
          if (dr || dc) n += grid[(r + dr + R) % R][(c + dc + C) % C];
      return +(n === 3 || (alive === 1 && n === 2));
    }));
  }

  // ------------------------------------------------------------------ the model (net.py)
  // model: {weights (ToyNN.load), grid_size, d_model, mask_self, positions ("rows_cols" or "cells")}
  // Returns logits (cells,), > 0: alive next, and pattern (cells, cells): each cell's attention.
  function forward(model, grid) {
    const w = model.weights, d = model.d_model, size = model.grid_size, n = size * size;
    const x = new Float64Array(n * d);
    for (let i = 0; i < n; i++) {
      const r = Math.floor(i / size), c = i % size, s = grid[r][c];
      for (let j = 0; j < d; j++) {
        const pos = model.positions === "cells" ? w.W_pos.data[i * d + j] : w.W_row.data[r * d + j] + w.W_col.data[c * d + j];
        x[i * d + j] = w.W_state.data[s * d + j] + pos;
      }
    }
    const scale = Math.exp(w.log_scale.data[0]);
    const q = nn.matmul(x, n, w.W_Q).map((v) => v * scale), k = nn.matmul(x, n, w.W_K), v = nn.matmul(x, n, w.W_V);
    const bias = model.mask_self ? (h, i, j) => (i === j ? -Infinity : 0) : null;
    const a = nn.attention(q, k, v, n, n, 1, d, bias);
    const y = x.map((t, i) => t + a.out[i]);
    const hidden = nn.matmul(y, n, w.W_hidden);
    const z = y.map((t, i) => t + nn.silu(hidden[i]));
    return { logits: nn.matmul(z, n, w.W_class), pattern: a.pattern };
  }

  // OffsetAttentionNet (mixer="offset"), the any-size model: every cell attends to the cells
  // within `radius` on the torus by one learned score per offset, so the attention is one
  // (2r+1, 2r+1) pattern shared by all cells. model: {weights, d_model, radius, mask_self}.
  // Returns logits (rows * cols,) and that pattern.
  function forwardAny(model, grid) {
    const w = model.weights, d = model.d_model, r = model.radius, width = 2 * r + 1;
    const R = grid.length, C = grid[0].length;
    const scores = Array.from(w.offset_scores.data, (v, i) => (model.mask_self && i === r * width + r ? -Infinity : v));
    const pattern = nn.softmaxRows(Float64Array.from(scores), 1, width * width);
    const value = (s) => nn.matmul(w.W_state.data.subarray(s * d, (s + 1) * d), 1, w.W_V); // W_V of a dead or live token
    const vDead = value(0), vAlive = value(1), logits = new Float64Array(R * C), x = new Float64Array(d);
    for (let i = 0; i < R; i++)
      for (let j = 0; j < C; j++) {
        let onAlive = 0; // the attention on live cells: the values are v_dead + that * (v_alive - v_dead)
        for (let dr = -r; dr <= r; dr++)
          for (let dc = -r; dc <= r; dc++) onAlive += pattern[(dr + r) * width + dc + r] * grid[(i + dr + R) % R][(j + dc + C) % C];
        for (let k = 0; k < d; k++) x[k] = w.W_state.data[grid[i][j] * d + k] + vDead[k] + onAlive * (vAlive[k] - vDead[k]);
        const hidden = nn.matmul(x, 1, w.W_hidden);
        const y = x.map((t, k) => t + nn.silu(hidden[k]));
        logits[i * C + j] = nn.matmul(y, 1, w.W_class)[0];
      }
    return { logits, pattern };
  }

  // ------------------------------------------------------------------ the page
  // model: the 16x16 model's settings and weights, and under `any` the any-size model's, or null
  const SHAPES = [[16, 16], [8, 8], [5, 7], [12, 30], [32, 32]]; // the any-size model's choice of boards
  function mount(el, model) {
    model.weights = nn.load(model.weights);
    if (model.any) model.any.weights = nn.load(model.any.weights);
    let which = "main", R = model.grid_size, C = model.grid_size;
    let grid, wrong, picked = null, steps = 0, mode = "draw", looked = null; // looked: the attention on show
    const pick = model.any ? `<div class="toy-row"><button data-model="main">the ${R}x${C} model</button>
        <button data-model="any">the any-size model</button><select data-role="shape" disabled>
        ${SHAPES.map(([r, c]) => `<option value="${r}x${c}">${r}x${c}</option>`).join("")}</select></div>` : "";
    el.innerHTML = `${pick}
      <div class="toy-row">
        <button data-mode="draw">draw: a click flips a cell</button><button data-mode="look">look: a click shows where a cell looks</button></div>
      <div class="toy-row">
        <button data-role="step">step with the model</button><button data-role="glider">glider</button>
        <button data-role="random">random</button><button data-role="clear">clear</button></div>
      <p class="toy-status" data-role="status"></p>
      <div class="toy-row">
        <figure><div class="toy-grid" data-role="board"></div>
          <figcaption>the board (red outline: the model got it wrong)</figcaption></figure>
        <figure><div class="toy-grid" data-role="heat"></div>
          <figcaption data-role="heat-caption">where the picked cell looks</figcaption></figure></div>`;
    const $ = (q) => el.querySelector(q);
    let boardCells = [], heatCells = [];
    const run = (g) => (which === "any" ? forwardAny(model.any, g) : forward(model, g));

    function build() { // the two grids for a board of R x C cells, small enough cells to fit a phone
      const cell = Math.max(6, Math.min(17, Math.floor(340 / C) - 1));
      for (const role of ["board", "heat"]) {
        const g = $(`[data-role=${role}]`), name = role === "board" ? "cell" : "heat";
        g.style.gridTemplateColumns = `repeat(${C}, var(--cell))`;
        g.style.setProperty("--cell", `${cell}px`);
        g.innerHTML = [...Array(R * C)].map((_, i) => `<div data-${name}="${i}" title="row ${Math.floor(i / C)}, column ${i % C}"></div>`).join("");
      }
      boardCells = [...el.querySelectorAll("[data-cell]")];
      heatCells = [...el.querySelectorAll("[data-heat]")];
      boardCells.forEach((div, i) => div.addEventListener("click", () => {
        if (mode === "look") {
          picked = i;
        } else {
          grid[Math.floor(i / C)][i % C] ^= 1;
          wrong = new Set();
          looked = null;
        }
        render();
      }));
    }
    // the attention of cell p over every cell of the board on show
    function attentionOf(p) {
      looked = looked || run(grid).pattern;
      if (which === "main") return looked.subarray(p * R * C, (p + 1) * R * C);
      const r = model.any.radius, width = 2 * r + 1, row = new Float64Array(R * C), pr = Math.floor(p / C), pc = p % C;
      for (let dr = -r; dr <= r; dr++)
        for (let dc = -r; dc <= r; dc++) row[((pr + dr + R) % R) * C + (pc + dc + C) % C] += looked[(dr + r) * width + dc + r];
      return row;
    }
    function render(message) {
      boardCells.forEach((div, i) => {
        div.classList.toggle("toy-alive", grid[Math.floor(i / C)][i % C] === 1);
        div.classList.toggle("toy-wrong", wrong.has(i));
        div.classList.toggle("toy-picked", i === picked);
      });
      if (picked !== null) {
        const row = attentionOf(picked), top = Math.max(...row), pr = Math.floor(picked / C), pc = picked % C;
        let near = 0;
        heatCells.forEach((div, j) => {
          const r = Math.floor(j / C), c = j % C;
          const dr = Math.min((r - pr + R) % R, (pr - r + R) % R), dc = Math.min((c - pc + C) % C, (pc - c + C) % C);
          if (dr <= 1 && dc <= 1 && j !== picked) near += row[j];
          const alpha = (row[j] / top).toFixed(3); // over white, not the grid lines behind the cell
          div.style.background = `linear-gradient(rgba(214,39,40,${alpha}), rgba(214,39,40,${alpha})), #fff`;
          div.classList.toggle("toy-picked", j === picked);
        });
        $("[data-role=heat-caption]").textContent =
          `cell (${pr}, ${pc}): ${(100 * near).toFixed(1)} % of its attention on its 8 neighbours`;
      } else {
        heatCells.forEach((div) => { div.style.background = ""; });
        $("[data-role=heat-caption]").textContent = "where the picked cell looks";
      }
      el.querySelectorAll("[data-mode]").forEach((b) => b.classList.toggle("toy-on", b.dataset.mode === mode));
      el.querySelectorAll("[data-model]").forEach((b) => b.classList.toggle("toy-on", b.dataset.model === which));
      const alive = grid.flat().reduce((a, b) => a + b, 0);
      $("[data-role=status]").textContent = message || `${alive} live cells on ${R}x${C}; step ${steps}`;
    }
    function set(g) {
      grid = g;
      wrong = new Set();
      looked = null;
      steps = 0;
      render();
    }
    function glider() { // five cells near the top left, heading down and to the right
      const g = [...Array(R)].map(() => Array(C).fill(0));
      [[0, 1], [1, 2], [2, 0], [2, 1], [2, 2]].forEach(([r, c]) => { g[(r + 1) % R][(c + 1) % C] = 1; });
      set(g);
    }
    function reshape(rows, cols) { // a new board starts on a glider: the model has something to do at once
      R = rows;
      C = cols;
      picked = mode === "look" ? Math.floor(R / 2) * C + Math.floor(C / 2) : null;
      build();
      glider();
    }
    el.querySelectorAll("[data-mode]").forEach((b) => b.addEventListener("click", () => {
      mode = b.dataset.mode;
      if (mode === "look" && picked === null) picked = Math.floor(R / 2) * C + Math.floor(C / 2);
      render();
    }));
    el.querySelectorAll("[data-model]").forEach((b) => b.addEventListener("click", () => {
      which = b.dataset.model;
      $("[data-role=shape]").disabled = which !== "any";
      const [rows, cols] = which === "any" ? $("[data-role=shape]").value.split("x").map(Number) : [model.grid_size, model.grid_size];
      reshape(rows, cols);
    }));
    if (model.any) $("[data-role=shape]").addEventListener("change", (e) => reshape(...e.target.value.split("x").map(Number)));
    $("[data-role=step]").addEventListener("click", () => {
      const out = run(grid), truth = step(grid);
      const next = grid.map((row, r) => row.map((_, c) => +(out.logits[r * C + c] > 0)));
      wrong = new Set();
      next.flat().forEach((v, i) => { if (v !== truth[Math.floor(i / C)][i % C]) wrong.add(i); });
      grid = next;
      looked = null;
      steps += 1;
      const alive = grid.flat().reduce((a, b) => a + b, 0);
      render(`step ${steps}: ${alive} live cells; the model ${wrong.size ? `and the rule differ on ${wrong.size} cells` : "agrees with the rule on every cell"}`);
    });
    $("[data-role=clear]").addEventListener("click", () => set(grid.map((row) => row.map(() => 0))));
    $("[data-role=glider]").addEventListener("click", glider);
    $("[data-role=random]").addEventListener("click", () => set(grid.map((row) => row.map(() => +(Math.random() < 0.35)))));
    reshape(R, C);
    el.toyLive = { grid: () => grid.map((row) => row.slice()), wrong: () => [...wrong], which: () => which }; // what the page shows, for scripts/live_drivers.js
    return el.toyLive;
  }

  const api = { step, forward, forwardAny, mount };
  root.ToyLife = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

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

  // ------------------------------------------------------------------ the page
  function mount(el, model) {
    model.weights = nn.load(model.weights);
    const size = model.grid_size, n = size * size;
    let grid = [...Array(size)].map(() => Array(size).fill(0)), wrong = new Set(), picked = null, steps = 0;
    let mode = "draw", looked = null; // looked: the pattern of the board on show
    const cells = (role) => [...Array(n)].map((_, i) => `<div data-${role}="${i}" title="row ${(i / size) | 0}, column ${i % size}"></div>`).join("");
    el.innerHTML = `
      <div class="toy-row">
        <button data-mode="draw">draw: a click flips a cell</button><button data-mode="look">look: a click shows where a cell looks</button></div>
      <div class="toy-row">
        <button data-role="step">step with the model</button><button data-role="glider">glider</button>
        <button data-role="random">random</button><button data-role="clear">clear</button></div>
      <p class="toy-status" data-role="status"></p>
      <div class="toy-row">
        <figure><div class="toy-grid" data-role="board" style="grid-template-columns: repeat(${size}, var(--cell))">${cells("cell")}</div>
          <figcaption>the board (red outline: the model got it wrong)</figcaption></figure>
        <figure><div class="toy-grid" data-role="heat" style="grid-template-columns: repeat(${size}, var(--cell))">${cells("heat")}</div>
          <figcaption data-role="heat-caption">where the picked cell looks</figcaption></figure></div>`;
    const $ = (q) => el.querySelector(q);
    const boardCells = [...el.querySelectorAll("[data-cell]")], heatCells = [...el.querySelectorAll("[data-heat]")];

    function render(message) {
      boardCells.forEach((div, i) => {
        div.classList.toggle("toy-alive", grid[(i / size) | 0][i % size] === 1);
        div.classList.toggle("toy-wrong", wrong.has(i));
        div.classList.toggle("toy-picked", i === picked);
      });
      if (picked !== null) {
        looked = looked || forward(model, grid).pattern;
        const row = looked.subarray(picked * n, (picked + 1) * n), top = Math.max(...row);
        let near = 0;
        heatCells.forEach((div, j) => {
          const [r, c, pr, pc] = [(j / size) | 0, j % size, (picked / size) | 0, picked % size];
          const dr = Math.min((r - pr + size) % size, (pr - r + size) % size), dc = Math.min((c - pc + size) % size, (pc - c + size) % size);
          if (dr <= 1 && dc <= 1 && j !== picked) near += row[j];
          const alpha = (row[j] / top).toFixed(3); // over white, not the grid lines behind the cell
          div.style.background = `linear-gradient(rgba(214,39,40,${alpha}), rgba(214,39,40,${alpha})), #fff`;
          div.classList.toggle("toy-picked", j === picked);
        });
        $("[data-role=heat-caption]").textContent =
          `cell (${(picked / size) | 0}, ${picked % size}): ${(100 * near).toFixed(1)} % of its attention on its 8 neighbours`;
      }
      el.querySelectorAll("[data-mode]").forEach((b) => b.classList.toggle("toy-on", b.dataset.mode === mode));
      const alive = grid.flat().reduce((a, b) => a + b, 0);
      $("[data-role=status]").textContent = message || `${alive} live cells; step ${steps}`;
    }
    function set(g) {
      grid = g;
      wrong = new Set();
      looked = null;
      steps = 0;
      render();
    }
    boardCells.forEach((div, i) => div.addEventListener("click", () => {
      if (mode === "look") {
        picked = i;
      } else {
        grid[(i / size) | 0][i % size] ^= 1;
        wrong = new Set();
        looked = null;
      }
      render();
    }));
    el.querySelectorAll("[data-mode]").forEach((b) => b.addEventListener("click", () => {
      mode = b.dataset.mode;
      if (mode === "look" && picked === null) picked = (size / 2) * size + size / 2;
      render();
    }));
    $("[data-role=step]").addEventListener("click", () => {
      const out = forward(model, grid), truth = step(grid);
      const next = grid.map((row, r) => row.map((_, c) => +(out.logits[r * size + c] > 0)));
      wrong = new Set();
      next.flat().forEach((v, i) => { if (v !== truth[(i / size) | 0][i % size]) wrong.add(i); });
      grid = next;
      looked = null;
      steps += 1;
      const alive = grid.flat().reduce((a, b) => a + b, 0);
      render(`step ${steps}: ${alive} live cells; the model ${wrong.size ? `and the rule differ on ${wrong.size} cells` : "agrees with the rule on every cell"}`);
    });
    $("[data-role=clear]").addEventListener("click", () => set(grid.map((row) => row.map(() => 0))));
    $("[data-role=glider]").addEventListener("click", () => {
      const g = grid.map((row) => row.map(() => 0));
      [[0, 1], [1, 2], [2, 0], [2, 1], [2, 2]].forEach(([r, c]) => { g[r + 1][c + 1] = 1; });
      set(g);
    });
    $("[data-role=random]").addEventListener("click", () => set(grid.map((row) => row.map(() => +(Math.random() < 0.35)))));
    render();
    el.toyLive = { grid: () => grid.map((row) => row.slice()), wrong: () => [...wrong] }; // what the page shows, for scripts/live_drivers.js
    return el.toyLive;
  }

  const api = { step, forward, mount };
  root.ToyLife = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

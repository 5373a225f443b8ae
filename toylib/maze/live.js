// Mazes on the static page: the world (tiles with arms, BFS), the chapter's looped model
// (MazeNet) on ToyNN, greedy walking, and a maze to edit and watch the model walk. What each
// part mirrors in toylib: world.py (to_pixels, exits, shortest_path), dataset.py
// (connections), net.py (MazeNet.encode and decode, _greedy).
(function (root) {
  "use strict";
  if (root.ToyMaze) return;
  const nn = root.ToyNN;
  const TILE = 5, CENTRE = 2;
  const STOP = 0, UP = 1, RIGHT = 2, DOWN = 3, LEFT = 4, START = 5;
  const NAMES = ["STOP", "UP", "RIGHT", "DOWN", "LEFT", "START"];
  const DIRECTIONS = [UP, RIGHT, DOWN, LEFT]; // arm k points towards DIRECTIONS[k]
  const STEP = { [UP]: [-1, 0], [RIGHT]: [0, 1], [DOWN]: [1, 0], [LEFT]: [0, -1] };
  const SIZES = [5, 6, 7, 8, 9, 10, 12, 16, 24, 32]; // a new maze's tiles a side: the training size to 32x32
  const ARM_PIXELS = [[[0, 1], [CENTRE]], [[CENTRE], [3, 4]], [[3, 4], [CENTRE]], [[CENTRE], [0, 1]]]; // rows, cols

  // ------------------------------------------------------------------ the world (world.py)
  // a maze: {rows, cols, arms: [r][c][k] booleans, start: [r, c], end: [r, c]}
  // exits: whether the move DIRECTIONS[k] leads from tile (r, c) to a connected neighbour
  function exits(m) {
    return m.arms.map((row, r) => row.map((arms, c) => DIRECTIONS.map((move, k) => {
      const [dr, dc] = STEP[move], rr = r + dr, cc = c + dc;
      return rr >= 0 && rr < m.rows && cc >= 0 && cc < m.cols && arms[k] && m.arms[rr][cc][(k + 2) % 4];
    })));
  }
  // a tile's pixels (TILE x TILE): blocked 0, open 1, start 2, end 3
  function tilePixels(m, r, c) {
    const p = [...Array(TILE)].map(() => Array(TILE).fill(0));
    m.arms[r][c].forEach((open, k) => { if (open) for (const i of ARM_PIXELS[k][0]) for (const j of ARM_PIXELS[k][1]) p[i][j] = 1; });
    p[CENTRE][CENTRE] = m.arms[r][c].some((a) => a) ? 1 : 0;
    if (r === m.start[0] && c === m.start[1]) p[CENTRE][CENTRE] = 2;
    if (r === m.end[0] && c === m.end[1]) p[CENTRE][CENTRE] = 3;
    return p;
  }
  // BFS's shortest path from start to end: the moves, or null when the end cannot be reached
  function shortestPath(m) {
    const ex = exits(m), key = (r, c) => r * m.cols + c, back = new Map([[key(...m.start), null]]);
    const queue = [m.start];
    while (queue.length) {
      const [r, c] = queue.shift();
      if (r === m.end[0] && c === m.end[1]) {
        const moves = [];
        for (let at = key(r, c); back.get(at); at = back.get(at)[0]) moves.unshift(back.get(at)[1]);
        return moves;
      }
      DIRECTIONS.forEach((move, k) => {
        const rr = r + STEP[move][0], cc = c + STEP[move][1];
        if (ex[r][c][k] && !back.has(key(rr, cc))) { back.set(key(rr, cc), [key(r, c), move]); queue.push([rr, cc]); }
      });
    }
    return null;
  }
  // where a walk of moves goes: the tiles, whether every move went through an open passage,
  // and whether it ended by STOP on the end tile
  function walk(m, moves) {
    const ex = exits(m), tiles = [m.start.slice()];
    let [r, c] = m.start, valid = true, stopped = false;
    for (const move of moves) {
      if (move === STOP) { stopped = true; break; }
      const k = DIRECTIONS.indexOf(move);
      if (k < 0 || !ex[r][c][k]) { valid = false; break; }
      r += STEP[move][0]; c += STEP[move][1];
      tiles.push([r, c]);
    }
    return { tiles, valid, solved: valid && stopped && r === m.end[0] && c === m.end[1] };
  }

  // ------------------------------------------------------------------ the model (net.py)
  // model: {weights (ToyNN.load), d_model, n_heads, n_decoder_layers, radius, and the search
  // preset's squash, window, extra_passes, settled, quiet and still (absent or 0 in the chapter's
  // model)}
  // The encoder: a token per tile from its pixels, then one block run once per tile, each
  // head reading the tile itself and its neighbour along DIRECTIONS[h % 4] where they connect.
  // With squash, every state number is bounded after each pass, and without a given count
  // the passes stop once one moves no number by more than `settled`, or once the way head
  // (if the weights have one) has named the same way on every tile for `quiet` passes. With a
  // way head, a tile takes a pass only while it or a neighbour it connects to moved by more
  // than `still` in the pass before (net.py's STILL): where nothing moves, states stay put, so
  // a pass computes the tiles that take it and the neighbours they read, not the whole maze
  // (MazeNet.settle_woken), and a 32x32 maze costs as its moving front.
  function encode(model, m, iterations) {
    const w = model.weights, d = model.d_model, H = model.n_heads, dh = d / H, n = m.rows * m.cols, ex = exits(m);
    const onehot = new Float64Array(n * TILE * TILE * 4);
    for (let r = 0; r < m.rows; r++)
      for (let c = 0; c < m.cols; c++) {
        const p = tilePixels(m, r, c);
        for (let i = 0; i < TILE; i++) for (let j = 0; j < TILE; j++) onehot[(r * m.cols + c) * 100 + (i * TILE + j) * 4 + p[i][j]] = 1;
      }
    const tile = nn.linear(onehot, n, w["tile_embed.weight"], w["tile_embed.bias"]);
    // beside[k][t]: tile t's neighbour along DIRECTIONS[k], or -1 where the two do not connect;
    // head h reads the one along DIRECTIONS[h % 4]
    const beside = [0, 1, 2, 3].map((k) => [...Array(n)].map((_, t) => {
      const r = Math.floor(t / m.cols), c = t % m.cols, [dr, dc] = STEP[DIRECTIONS[k]];
      return ex[r][c][k] ? (r + dr) * m.cols + c + dc : -1;
    }));
    const keys = [...Array(H)].map((_, h) => beside[h % 4]);
    const look = w["look"].data, L = (name) => w["step." + name];
    const x = new Float64Array(n * d);
    const squash = model.squash || 0, settle = !iterations && squash > 0, head = w["way_head.weight"];
    const search = settle && head;
    const ways = new Int32Array(n).fill(-1); // each tile's way to the end so far (the way head's)
    let quiet = 0, moved = new Float64Array(n).fill(Infinity); // passes the ways have held; how far each tile moved
    const every = [...Array(n).keys()], place = new Int32Array(n);
    for (let it = 0; it < (iterations || n + (model.extra_passes || 0)); it++) {
      const woke = (t) => moved[t] > model.still;
      const woken = !search ? every : every.filter((t) => woke(t) || beside.some((row) => row[t] >= 0 && woke(row[t])));
      // the rows this pass computes: the woken tiles first, then the neighbours they read
      const rows = woken.slice();
      place.fill(-1);
      woken.forEach((t, i) => { place[t] = i; });
      for (const t of woken) for (let h = 0; h < H; h++) {
        const j = keys[h][t];
        if (j >= 0 && place[j] < 0) { place[j] = rows.length; rows.push(j); }
      }
      const nw = woken.length, nr = rows.length, y = new Float64Array(nr * d);
      rows.forEach((t, i) => { for (let c = 0; c < d; c++) y[i * d + c] = x[t * d + c] + tile[t * d + c]; });
      const h0 = nn.layerNorm(y, nr, d, L("ln_attn.weight"), L("ln_attn.bias"));
      const q = nn.linear(h0, nw, L("attn.W_Q.weight"), L("attn.W_Q.bias"));
      const kk = nn.linear(h0, nr, L("attn.W_K.weight"), L("attn.W_K.bias"));
      const v = nn.linear(h0, nr, L("attn.W_V.weight"), L("attn.W_V.bias"));
      const z = new Float64Array(nw * d);
      for (let h = 0; h < H; h++)
        for (let i = 0; i < nw; i++) {
          const score = (j) => { let s = 0; for (let c = 0; c < dh; c++) s += q[i * d + h * dh + c] * kk[j * d + h * dh + c]; return s / Math.sqrt(dh); };
          const self = score(i) + look[2 * h], j = keys[h][woken[i]] < 0 ? -1 : place[keys[h][woken[i]]];
          const other = j < 0 ? -Infinity : score(j) + look[2 * h + 1];
          const top = Math.max(self, other), a = Math.exp(self - top), b = j < 0 ? 0 : Math.exp(other - top);
          for (let c = 0; c < dh; c++)
            z[i * d + h * dh + c] = (a * v[i * d + h * dh + c] + (j < 0 ? 0 : b * v[j * d + h * dh + c])) / (a + b);
        }
      const attn = nn.linear(z, nw, L("attn.W_O.weight"), L("attn.W_O.bias"));
      const y1 = y.subarray(0, nw * d).map((val, i) => val + attn[i]);
      const hidden = nn.linear(nn.layerNorm(y1, nw, d, L("ln_mlp.weight"), L("ln_mlp.bias")), nw, L("mlp.0.weight"), L("mlp.0.bias")).map(nn.gelu);
      const mlp = nn.linear(hidden, nw, L("mlp.2.weight"), L("mlp.2.bias"));
      // "recall": the tile is added afresh each pass; a tile that sleeps keeps its state (moved 0)
      let most = 0;
      moved = new Float64Array(n);
      woken.forEach((t, i) => {
        for (let c = 0; c < d; c++) {
          let val = y1[i * d + c] + mlp[i * d + c] - tile[t * d + c];
          if (squash) val = squash * Math.tanh(val / squash);
          moved[t] = Math.max(moved[t], Math.abs(val - x[t * d + c]));
          x[t * d + c] = val;
        }
        most = Math.max(most, moved[t]);
      });
      if (settle && head) { // only the woken tiles can have turned
        const states = new Float64Array(nw * d);
        woken.forEach((t, i) => states.set(x.subarray(t * d, (t + 1) * d), i * d));
        const logits = nn.linear(nn.layerNorm(states, nw, d, w["ln_memory.weight"], w["ln_memory.bias"]), nw, head, w["way_head.bias"]);
        const k = logits.length / Math.max(nw, 1);
        let held = it > 0;
        woken.forEach((t, i) => {
          const way = nn.argmax(Array.from(logits.subarray(i * k, (i + 1) * k)));
          if (way !== ways[t]) held = false;
          ways[t] = way;
        });
        quiet = held ? quiet + 1 : 0;
      }
      if (settle && (most <= model.settled || quiet >= model.quiet)) break;
    }
    return { states: nn.layerNorm(x, n, d, w["ln_memory.weight"], w["ln_memory.bias"]), rows: m.rows, cols: m.cols, start: m.start };
  }

  // The decoder, one token at a time (MultiHeadAttention.extend): each layer keeps the keys
  // and values of the tokens so far, and reads the memory's cross-attention keys and values,
  // computed once (Decoder.memory_keys_values), at the tiles the walker's token may read: those
  // within the window (net.py's window_tiles), or every tile. next(token) appends a token
  // (START, then moves) and gives the logits (6,) of the move after it.
  function decoder(model, memory) {
    const w = model.weights, d = model.d_model, H = model.n_heads, n = memory.rows * memory.cols;
    const R = model.radius, width = 2 * R + 1, ob = w["offset_bias"].data, most = n + 2;
    const B = (l, name) => w[`decoder.blocks.${l}.${name}`];
    const layers = [...Array(model.n_decoder_layers)].map((_, l) => ({
      k: new Float64Array(most * d), v: new Float64Array(most * d),
      mk: nn.linear(memory.states, n, B(l, "cross_attn.W_K.weight"), B(l, "cross_attn.W_K.bias")),
      mv: nn.linear(memory.states, n, B(l, "cross_attn.W_V.weight"), B(l, "cross_attn.W_V.bias")),
    }));
    const rowsOf = (a, list) => { // the rows `list` of a (n, d) array
      const out = new Float64Array(list.length * d);
      list.forEach((j, i) => out.set(a.subarray(j * d, (j + 1) * d), i * d));
      return out;
    };
    let T = 0, [r, c] = memory.start;
    function next(token) {
      if (T >= most) throw new Error(`the decoder holds ${most} tokens`);
      // where the walker stands (walk_tiles: STOP and START stay put, the edge holds)
      if (STEP[token]) { r = Math.min(Math.max(r + STEP[token][0], 0), memory.rows - 1); c = Math.min(Math.max(c + STEP[token][1], 0), memory.cols - 1); }
      const near = [], bias = []; // the tiles it may read, and each one's offset's place
      for (let j = 0; j < n; j++) {
        const rows = Math.floor(j / memory.cols) - r, cols = (j % memory.cols) - c;
        if (model.window && Math.max(Math.abs(rows), Math.abs(cols)) > R) continue; // outside the window
        near.push(j);
        bias.push((Math.min(Math.max(rows, -R), R) + R) * width + Math.min(Math.max(cols, -R), R) + R);
      }
      let x = w["move_embed.weight"].data.slice(token * d, (token + 1) * d);
      layers.forEach((layer, l) => {
        const ln = (name, y) => nn.layerNorm(y, 1, d, B(l, name + ".weight"), B(l, name + ".bias"));
        const lin = (name, y) => nn.linear(y, 1, B(l, name + ".weight"), B(l, name + ".bias"));
        const h = ln("ln_self", x);
        layer.k.set(lin("self_attn.W_K", h), T * d);
        layer.v.set(lin("self_attn.W_V", h), T * d);
        const s = nn.attention(lin("self_attn.W_Q", h), layer.k.subarray(0, (T + 1) * d), layer.v.subarray(0, (T + 1) * d),
                               1, T + 1, H, d / H, null);
        const own = lin("self_attn.W_O", s.out);
        x = x.map((val, i) => val + own[i]);
        const a = nn.attention(lin("cross_attn.W_Q", ln("ln_cross", x)), rowsOf(layer.mk, near), rowsOf(layer.mv, near),
                               1, near.length, H, d / H, (hh, i, j) => ob[hh * width * width + bias[j]]);
        const out = lin("cross_attn.W_O", a.out);
        x = x.map((val, i) => val + out[i]);
        const hidden = nn.linear(ln("ln_mlp", x), 1, B(l, "mlp.0.weight"), B(l, "mlp.0.bias")).map(nn.gelu);
        const mlp = nn.linear(hidden, 1, B(l, "mlp.2.weight"), B(l, "mlp.2.bias"));
        x = x.map((val, i) => val + mlp[i]);
      });
      T += 1;
      const last = nn.layerNorm(x, 1, d, w["decoder.ln_final.weight"], w["decoder.ln_final.bias"]);
      const logits = nn.linear(last, 1, w["unembed.weight"], w["unembed.bias"]);
      if (w["way_head.weight"]) { // MazeNet.read_way: plus the way head's log-probabilities on the walker's tile
        const t = r * memory.cols + c;
        const way = nn.linear(memory.states.subarray(t * d, (t + 1) * d), 1, w["way_head.weight"], w["way_head.bias"]);
        const top = Math.max(...way), norm = top + Math.log(way.reduce((s, v) => s + Math.exp(v - top), 0));
        for (let i = 0; i < logits.length; i++) logits[i] += way[i] - norm;
      }
      return logits;
    }
    return { next };
  }

  // the logits (6,) of the move after the tokens so far (START, moves...)
  function decode(model, memory, tokens) {
    const dec = decoder(model, memory);
    let logits = null;
    for (const t of tokens) logits = dec.next(t);
    return { logits };
  }

  // measure._greedy: START, then the likeliest move, until STOP, a move the maze does not allow
  // (kept), or as many moves as the maze has tiles
  function solve(model, m, memory) {
    memory = memory || encode(model, m);
    const ex = exits(m), tokens = [START], dec = decoder(model, memory);
    let [r, c] = m.start, logits = dec.next(START);
    while (tokens.length < m.rows * m.cols + 1) {
      const move = nn.argmax(Array.from(logits));
      tokens.push(move);
      if (move === STOP) break;
      const k = DIRECTIONS.indexOf(move);
      if (k < 0 || !ex[r][c][k]) break; // START again, into a wall or off the grid
      r += STEP[move][0]; c += STEP[move][1];
      if (tokens.length < m.rows * m.cols + 1) logits = dec.next(move);
    }
    return tokens.slice(1);
  }

  // a maze with no loops: a random depth-first search carves a spanning tree of the tiles
  function randomMaze(rows, cols, random = Math.random) {
    const arms = [...Array(rows)].map(() => [...Array(cols)].map(() => [false, false, false, false]));
    const seen = new Set(["0,0"]), stack = [[0, 0]];
    while (stack.length) {
      const [r, c] = stack[stack.length - 1];
      const next = DIRECTIONS.map((move, k) => [k, r + STEP[move][0], c + STEP[move][1]])
        .filter(([, rr, cc]) => rr >= 0 && rr < rows && cc >= 0 && cc < cols && !seen.has(`${rr},${cc}`));
      if (!next.length) { stack.pop(); continue; }
      const [k, rr, cc] = next[Math.floor(random() * next.length)];
      arms[r][c][k] = arms[rr][cc][(k + 2) % 4] = true;
      seen.add(`${rr},${cc}`);
      stack.push([rr, cc]);
    }
    const pick = () => [Math.floor(random() * rows), Math.floor(random() * cols)];
    let start = pick(), end = pick();
    while (end[0] === start[0] && end[1] === start[1]) end = pick();
    return { rows, cols, arms, start, end };
  }

  // ------------------------------------------------------------------ the page
  function mount(el, model) {
    model.weights = nn.load(model.weights);
    let maze = model.maze, mode = "passage", memory = null, moves = [], shown = 0;
    el.innerHTML = `
      <div class="toy-row"><button data-mode="passage">a click opens or closes a passage</button>
        <button data-mode="start">a click moves the start</button><button data-mode="end">a click moves the end</button></div>
      <div class="toy-row"><button data-role="step">one step</button><button data-role="solve">walk to the end</button>
        <button data-role="reset">walk again</button>
        <label>new maze, <select data-role="size">${SIZES.map((s) => `<option value="${s}">${s}x${s}</option>`).join("")}</select></label>
        <button data-role="new">new maze</button></div>
      <p class="toy-status" data-role="status"></p>
      <div class="toy-maze" data-role="maze"></div>
      <p class="toy-note">Blue: the model's walk (numbered where the tiles have room); dots: a shortest path by BFS; S start, E end.</p>`;
    const $ = (q) => el.querySelector(q);

    function draw() {
      // tiles as big as fit the page's width (at most 30 pixels, as live.css draws them), walls
      // thinner in a big maze; steps are numbered where a tile has room for the number
      const gap = maze.cols > 12 ? 3 : 6, room = Math.max(240, (el.clientWidth || 640) - 2 * gap);
      const size = Math.max(6, Math.min(30, Math.floor(room / maze.cols) - gap)), numbered = size >= 18;
      const px = (v) => `${v}px`, ring = `inset 0 0 0 ${px(Math.round(0.3 * size))} #f2eee3, inset 0 0 0 ${px(size)} #9ecae1`;
      const bfs = shortestPath(maze), onBfs = new Set();
      if (bfs) walk(maze, bfs).tiles.forEach(([r, c]) => onBfs.add(`${r},${c}`));
      const w = walk(maze, moves.slice(0, shown)), step = new Map();
      w.tiles.forEach(([r, c], i) => step.set(`${r},${c}`, i));
      const cells = [];
      for (let i = 0; i < 2 * maze.rows - 1; i++)
        for (let j = 0; j < 2 * maze.cols - 1; j++) {
          const r = i >> 1, c = j >> 1;
          if (i % 2 === 0 && j % 2 === 0) {
            const key = `${r},${c}`, label = key === maze.start.join() ? "S" : key === maze.end.join() ? "E" : step.has(key) && numbered ? step.get(key) : "";
            const cls = [maze.arms[r][c].some((a) => a) ? "" : "toy-solid", step.has(key) ? "toy-walked" : "", onBfs.has(key) ? "toy-bfs" : ""];
            const look = `width:${px(size)};height:${px(size)};font-size:${px(Math.min(11, size - 2))}` + (cls[2] && !cls[1] ? `;box-shadow:${ring}` : "");
            cells.push(`<div data-tile="${key}" class="${cls.join(" ")}" style="${look}">${label}</div>`);
          } else if (i % 2 !== j % 2) { // a passage between two tiles: to the right (k 1) or below (k 2)
            const k = i % 2 ? 2 : 1, open = maze.arms[r][c][k] && maze.arms[r + (k === 2)][c + (k === 1)][(k + 2) % 4];
            const look = i % 2 ? `height:${px(gap)};width:${px(size)}` : `width:${px(gap)};height:${px(size)}`;
            cells.push(`<div data-edge="${r},${c},${k}" class="toy-edge ${open ? "toy-open" : ""} ${i % 2 ? "toy-h" : "toy-v"}" style="${look}"></div>`);
          } else cells.push(`<div class="toy-post" style="width:${px(gap)};height:${px(gap)}"></div>`);
        }
      const grid = $("[data-role=maze]");
      grid.style.gridTemplateColumns = [...Array(2 * maze.cols - 1)].map((_, j) => px(j % 2 ? gap : size)).join(" ");
      grid.style.padding = px(gap);
      grid.innerHTML = cells.join("");
      el.querySelectorAll("[data-mode]").forEach((b) => b.classList.toggle("toy-on", b.dataset.mode === mode));
      const done = shown >= moves.length && moves.length > 0;
      const steps = moves.filter((m) => m !== STOP).length; // its walk: the moves, then STOP (or a wrong move)
      const taken = moves.slice(0, shown).filter((m) => m !== STOP);
      const letters = taken.map((m) => NAMES[m][0]).join(""); // the last 40 of a long walk
      const said = moves.length ? `after ${taken.length} of its ${steps} moves (${letters.length > 40 ? "…" + letters.slice(-40) : letters || "none yet"})` : "not walked yet";
      const verdict = !done ? "" : w.solved ? (bfs && moves.length - 1 === bfs.length ? ": solved by a shortest path" : ": solved, but not by a shortest path")
        : w.valid ? ": it stopped short of the end" : ": it walked into a wall";
      $("[data-role=status]").textContent = `The model, ${said}${verdict}. BFS: ${bfs ? `${bfs.length} moves` : "the end cannot be reached"}.`;
    }
    function changed() { memory = null; moves = []; shown = 0; draw(); }
    function think() { memory = memory || encode(model, maze); if (!moves.length) moves = solve(model, maze, memory); }
    $("[data-role=maze]").addEventListener("click", (e) => {
      const t = e.target.closest("[data-tile],[data-edge]");
      if (!t) return;
      if (t.dataset.edge && mode === "passage") {
        const [r, c, k] = t.dataset.edge.split(",").map(Number), [rr, cc] = k === 1 ? [r, c + 1] : [r + 1, c];
        const open = !(maze.arms[r][c][k] && maze.arms[rr][cc][(k + 2) % 4]);
        maze.arms[r][c][k] = maze.arms[rr][cc][(k + 2) % 4] = open;
        changed();
      } else if (t.dataset.tile && mode !== "passage") {
        const at = t.dataset.tile.split(",").map(Number), other = mode === "start" ? maze.end : maze.start;
        if (at[0] !== other[0] || at[1] !== other[1]) { maze[mode] = at; changed(); }
      }
    });
    el.querySelectorAll("[data-mode]").forEach((b) => b.addEventListener("click", () => { mode = b.dataset.mode; draw(); }));
    $("[data-role=step]").addEventListener("click", () => { think(); shown = Math.min(shown + 1, moves.length); draw(); });
    $("[data-role=solve]").addEventListener("click", () => { think(); shown = moves.length; draw(); });
    $("[data-role=reset]").addEventListener("click", () => { shown = 0; draw(); });
    $("[data-role=new]").addEventListener("click", () => { const s = +$("[data-role=size]").value; maze = randomMaze(s, s); changed(); });
    draw();
    el.toyLive = { maze: () => JSON.parse(JSON.stringify(maze)), moves: () => moves.slice() }; // what the page shows, for scripts/live_drivers.js
    return el.toyLive;
  }

  const api = { TILE, STOP, START, DIRECTIONS, exits, tilePixels, shortestPath, walk, encode, decoder, decode, solve, randomMaze, mount };
  root.ToyMaze = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

// Sokoban on the static page: one-box boards with undo, BFS's moves left, the chapter's policy
// (BoardEncoder's convolutions, then a causal transformer over the goal and the boards so far)
// on ToyNN, and a level to play with the mouse or the keyboard. What each part mirrors in
// toylib: world.py (Board, Play, encode, moves_to_goal), net.py (BoardEncoder, SokobanPolicy),
// look.py (live_board, which writes this board into the page).
(function (root) {
  "use strict";
  if (root.ToySokoban) return;
  const nn = root.ToyNN;
  const SIZE = 8, UP = 0, DOWN = 1, LEFT = 2, RIGHT = 3, UNDO = 4;
  const NAMES = ["up", "down", "left", "right", "undo"];
  const STEP = [[-1, 0], [1, 0], [0, -1], [0, 1]];
  const NSTEPS_WORDS = ["unsolvable", "solved", "1..3", "4..11", "12..32", "33..89", "90+"];

  // ------------------------------------------------------------------ the world (world.py)
  // a board: {walls: 64 booleans, goal, box, player}, squares numbered row * SIZE + column
  function to(square, move) {
    const r = Math.floor(square / SIZE) + STEP[move][0], c = (square % SIZE) + STEP[move][1];
    return r < 0 || r >= SIZE || c < 0 || c >= SIZE ? -1 : r * SIZE + c;
  }
  // the board after a move, or null when a wall or the edge stops the player or the box
  function after(b, move) {
    const player = to(b.player, move);
    if (player < 0 || b.walls[player]) return null;
    let box = b.box;
    if (player === box) {
      box = to(box, move);
      if (box < 0 || b.walls[box]) return null;
    }
    return { walls: b.walls, goal: b.goal, box, player };
  }
  const legalMoves = (b) => [UP, DOWN, LEFT, RIGHT].filter((m) => after(b, m) !== null);
  // world.moves_to_goal by BFS forward from this board: the fewest moves to put the box on the
  // goal, or null when no moves can (the board is lost)
  function movesLeft(b) {
    const key = (x) => x.box * 64 + x.player, seen = new Set([key(b)]);
    let frontier = [b];
    for (let n = 0; frontier.length; n++) {
      const next = [];
      for (const x of frontier) {
        if (x.box === x.goal) return n;
        for (const m of [UP, DOWN, LEFT, RIGHT]) {
          const y = after(x, m);
          if (y && !seen.has(key(y))) { seen.add(key(y)); next.push(y); }
        }
      }
      frontier = next;
    }
    return null;
  }

  // ------------------------------------------------------------------ the policy (net.py)
  // world.encode: the 5 planes (wall, floor, goal, player, box), each (8, 8); the goal board
  // has the box on the goal and no player (player -1)
  // With region (net.walkable), a sixth plane: 1 where the player can walk without pushing
  // the box, a flood from the player over the floor (none on the goal board).
  function planes(b, region) {
    const p = new Float64Array((region ? 6 : 5) * 64);
    for (let s = 0; s < 64; s++) {
      p[s] = b.walls[s] ? 1 : 0;
      p[64 + s] = b.walls[s] ? 0 : 1;
      p[128 + s] = s === b.goal ? 1 : 0;
      p[192 + s] = s === b.player ? 1 : 0;
      p[256 + s] = s === b.box ? 1 : 0;
    }
    if (region && b.player >= 0) {
      const stack = [b.player];
      p[320 + b.player] = 1;
      while (stack.length) {
        const s = stack.pop();
        for (const m of [UP, DOWN, LEFT, RIGHT]) {
          const n = to(s, m);
          if (n >= 0 && !b.walls[n] && n !== b.box && !p[320 + n]) { p[320 + n] = 1; stack.push(n); }
        }
      }
    }
    return p;
  }
  // nn.Conv2d, 3x3, padding 1, on an n x n map: x (in, n * n) -> (out, n * n). The input is
  // copied into an (n + 2) x (n + 2) frame of zeros first, so that the inner loops test no edges.
  function conv(x, W, bias, n) {
    const [out, inp] = W.shape, w = W.data, f = n + 2, y = new Float64Array(out * n * n), xp = new Float64Array(inp * f * f);
    for (let i = 0; i < inp; i++)
      for (let r = 0; r < n; r++)
        for (let c = 0; c < n; c++) xp[i * f * f + (r + 1) * f + c + 1] = x[i * n * n + r * n + c];
    for (let o = 0; o < out; o++) {
      const acc = y.subarray(o * n * n, (o + 1) * n * n).fill(bias.data[o]);
      for (let i = 0; i < inp; i++)
        for (let kr = 0; kr < 3; kr++)
          for (let kc = 0; kc < 3; kc++) {
            const wv = w[((o * inp + i) * 3 + kr) * 3 + kc];
            for (let r = 0; r < n; r++) {
              const from = i * f * f + (r + kr) * f + kc, to = r * n;
              for (let c = 0; c < n; c++) acc[to + c] += wv * xp[from + c];
            }
          }
    }
    return y;
  }
  // planes (k, 64) -> (k, 36): the squares inside the border wall
  function inside(p) {
    const k = p.length / 64, n = SIZE - 2, q = new Float64Array(k * n * n);
    for (let i = 0; i < k; i++)
      for (let r = 0; r < n; r++)
        for (let c = 0; c < n; c++) q[i * n * n + r * n + c] = p[i * 64 + (r + 1) * SIZE + c + 1];
    return q;
  }
  // BoardEncoder: a board's planes -> its token (d_model,)
  function token(model, b) {
    const w = model.weights, n = model.inside ? SIZE - 2 : SIZE, m = n * n;
    const p = model.inside ? inside(planes(b, model.region)) : planes(b, model.region);
    let x = conv(p, w["encoder.first.weight"], w["encoder.first.bias"], n).map(nn.gelu);
    for (let l = 0; l < model.conv_layers - 1; l++) {
      const y = conv(x, w[`encoder.convs.${l}.weight`], w[`encoder.convs.${l}.bias`], n);
      x = x.map((v, i) => v + nn.gelu(y[i]));
    }
    // each channel's maximum and mean; with pieces, its values at the box and the player
    // (planes 4 and 3 as weights: zero where a piece is absent)
    const ch = model.channels, pooled = new Float64Array((model.pieces ? 4 : 2) * ch);
    for (let k = 0; k < ch; k++) {
      let top = -Infinity, sum = 0, box = 0, player = 0;
      for (let s = 0; s < m; s++) {
        const v = x[k * m + s];
        top = Math.max(top, v);
        sum += v;
        box += v * p[4 * m + s];
        player += v * p[3 * m + s];
      }
      pooled[k] = top;
      pooled[ch + k] = sum / m;
      if (model.pieces) { pooled[2 * ch + k] = box; pooled[3 * ch + k] = player; }
    }
    return nn.linear(pooled, 1, w["encoder.out.weight"], w["encoder.out.bias"]);
  }
  // SokobanPolicy.attend on the tokens of the goal and of the boards so far (start first):
  // the action logits (5,) and nsteps logits (7,) at the last board, and each layer's
  // attention from it (heads, positions)
  function read(model, goal, tokens) {
    const w = model.weights, d = model.d_model, n = tokens.length + 1;
    const x = new Float64Array(n * d);
    [goal, ...tokens].forEach((t, i) => { for (let j = 0; j < d; j++) x[i * d + j] = t[j] + w["position.weight"].data[i * d + j]; });
    const causal = model.history ? (h, i, j) => (j > i ? -Infinity : 0) : (h, i, j) => (j === 0 || j === i ? 0 : -Infinity);
    const enc = nn.encoder(w, "blocks.", x, n, d, model.n_heads, model.n_layers, Array(model.n_layers).fill(causal));
    const last = enc.x.subarray((n - 1) * d);
    return {
      action: nn.linear(last, 1, w["action_head.weight"], w["action_head.bias"]),
      nsteps: nn.linear(last, 1, w["nsteps_head.weight"], w["nsteps_head.bias"]),
      attention: enc.patterns.map((p) => [...Array(model.n_heads)].map((_, h) => Array.from(p.subarray(h * n * n + (n - 1) * n, h * n * n + n * n)))),
    };
  }
  const goalBoard = (b) => ({ walls: b.walls, goal: b.goal, box: b.goal, player: -1 });

  // ------------------------------------------------------------------ the page
  function mount(el, model) {
    model.weights = nn.load(model.weights);
    const levels = model.levels;
    let level = 0, start, play, history, tokens, goal, moves, note, actions = [];
    el.innerHTML = `
      <div class="toy-row"><button data-act="0">&uarr; up</button><button data-act="1">&darr; down</button>
        <button data-act="2">&larr; left</button><button data-act="3">&rarr; right</button><button data-act="4">undo (u)</button></div>
      <div class="toy-row"><button data-role="suggest">the model's move</button><button data-role="finish">let the model finish</button>
        <button data-role="restart">start again</button><button data-role="new">another level</button></div>
      <div class="toy-soko" data-role="board" tabindex="0" aria-label="Sokoban board: arrow keys move, u undoes">${[...Array(64)].map((_, s) => `<div data-square="${s}"></div>`).join("")}</div>
      <p class="toy-status" data-role="status"></p>
      <p class="toy-note">Click the board, then play with the arrow keys and <kbd>u</kbd> for undo; or click a square next to the player.</p>`;
    const $ = (q) => el.querySelector(q), squares = [...el.querySelectorAll("[data-square]")];

    function reset(b, why) {
      start = b;
      play = { board: b, earlier: [] };
      history = [b];
      tokens = [token(model, b)];
      goal = token(model, goalBoard(b));
      moves = why ? moves : 0;
      if (!why) actions = [];
      note = why || "";
      show();
    }
    function legal() {
      const here = play.board, done = here.box === here.goal;
      return (done ? [] : legalMoves(here)).concat(play.earlier.length ? [UNDO] : []);
    }
    function best() {
      const r = read(model, goal, tokens), ok = legal();
      const masked = Array.from(r.action).map((v, a) => (ok.includes(a) ? v : -Infinity));
      return { r, ok, move: ok.length ? nn.argmax(masked) : null };
    }
    function show() {
      const here = play.board, { r, move } = best(), left = movesLeft(here);
      squares.forEach((div, s) => {
        div.className = here.walls[s] ? "toy-wall" : s === here.box ? (s === here.goal ? "toy-box toy-on-goal" : "toy-box")
          : s === here.player ? "toy-player" : s === here.goal ? "toy-goal" : "";
        div.textContent = s === here.player ? "@" : s === here.box ? "$" : s === here.goal ? "." : "";
      });
      el.querySelectorAll("[data-act]").forEach((b) => { b.disabled = !legal().includes(+b.dataset.act); });
      const top = Math.max(...r.action), e = Array.from(r.action).map((v) => Math.exp(v - top)), z = e.reduce((a, b) => a + b, 0);
      const words = NSTEPS_WORDS[nn.argmax(Array.from(r.nsteps))];
      const estimate = /^\d/.test(words) ? `${words} moves left` : words;
      const bfs = left === null ? `no solution from this board${play.earlier.length ? " (undo!)" : ""}` : left === 0 ? "solved" : `${left} moves left`;
      const line = here.box === here.goal ? `Solved in ${moves} moves (the fewest: ${model.levels[level].fewest}).`
        : move === null ? "No legal move." : `The model suggests ${NAMES[move]} (p = ${(e[move] / z).toFixed(2)}).`;
      $("[data-role=status]").textContent = `${line} Its nsteps estimate: ${estimate}. Breadth-first search: ${bfs}.${note}`;
      $("[data-role=suggest]").disabled = $("[data-role=finish]").disabled = move === null || here.box === here.goal;
    }
    function act(a) {
      if (!legal().includes(a)) return false;
      if (a === UNDO) play = { board: play.earlier[play.earlier.length - 1], earlier: play.earlier.slice(0, -1) };
      else play = { board: after(play.board, a), earlier: play.earlier.concat([play.board]) };
      moves += 1;
      actions.push(a);
      if (history.length === model.n_ctx) { // the policy's history is full: go on from here as a new start
        reset(play.board, ` (The model's history of ${model.n_ctx} boards was full: play goes on from this board as a new start.)`);
        return true;
      }
      history.push(play.board);
      tokens.push(token(model, play.board));
      note = "";
      show();
      return true;
    }
    el.querySelectorAll("[data-act]").forEach((b) => b.addEventListener("click", () => act(+b.dataset.act)));
    $("[data-role=board]").addEventListener("click", (e) => {
      const s = +((e.target.closest("[data-square]") || {}).dataset || {}).square;
      const m = [UP, DOWN, LEFT, RIGHT].find((m) => to(play.board.player, m) === s);
      if (m !== undefined) act(m);
      $("[data-role=board]").focus();
    });
    $("[data-role=board]").addEventListener("keydown", (e) => {
      const a = { ArrowUp: UP, ArrowDown: DOWN, ArrowLeft: LEFT, ArrowRight: RIGHT, u: UNDO, U: UNDO }[e.key];
      if (a === undefined) return;
      e.preventDefault(); // arrows move the player, not the page
      act(a);
    });
    $("[data-role=suggest]").addEventListener("click", () => { const m = best().move; if (m !== null) act(m); });
    $("[data-role=finish]").addEventListener("click", () => { // greedy decoding, as measure.solve_greedy
      for (let i = 0; i < model.n_ctx && play.board.box !== play.board.goal; i++) {
        const m = best().move;
        if (m === null || !act(m) || note) break;
      }
    });
    $("[data-role=restart]").addEventListener("click", () => reset(levels[level].board));
    $("[data-role=new]").addEventListener("click", () => { level = (level + 1) % levels.length; reset(levels[level].board); });
    reset(levels[level].board);
    el.toyLive = { state: () => ({ board: play.board, moves, actions: actions.slice(), history: history.length, level }) }; // what the page shows, for scripts/live_drivers.js
    return el.toyLive;
  }

  const api = { SIZE, UP, DOWN, LEFT, RIGHT, UNDO, after, legalMoves, movesLeft, planes, token, read, goalBoard, mount };
  root.ToySokoban = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

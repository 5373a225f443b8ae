// Tic-tac-toe on the static page: the rules and minimax, the chapter's model (TicTacToeNet,
// positions="graph", relative=True) on ToyNN, and a board to play against it. What each part
// mirrors in toylib: world.py (rules, minimax), net.py (forward, model_moves), look.py.
(function (root) {
  "use strict";
  if (root.ToyTicTacToe) return;
  const nn = root.ToyNN || (typeof require !== "undefined" ? require("../js/nn.js") : null);
  const EMPTY = 0, X = 1, O = 2, SYMBOLS = ".XO";
  const LINES = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]];

  // ------------------------------------------------------------------ the game (world.py)
  const count = (b, s) => b.filter((c) => c === s).length;
  const toMove = (b) => (count(b, X) === count(b, O) ? X : O);
  function winner(b) {
    for (const [i, j, k] of LINES) if (b[i] !== EMPTY && b[i] === b[j] && b[j] === b[k]) return b[i];
    return EMPTY;
  }
  const isOver = (b) => winner(b) !== EMPTY || !b.includes(EMPTY);
  const legal = (b) => (isOver(b) ? [] : b.map((c, i) => (c === EMPTY ? i : -1)).filter((i) => i >= 0));
  const play = (b, cell) => b.map((c, i) => (i === cell ? toMove(b) : c));

  // world.minimax: the score for the player to move; a loss scores -(1 + empty cells left)
  const memo = new Map();
  function minimax(b) {
    const key = b.join("");
    if (memo.has(key)) return memo.get(key);
    let score;
    if (winner(b) !== EMPTY) score = -(1 + count(b, EMPTY)); // the player to move has lost
    else if (!b.includes(EMPTY)) score = 0;
    else score = Math.max(...legal(b).map((m) => -minimax(play(b, m))));
    memo.set(key, score);
    return score;
  }
  // world.move_scores: each legal move's score for the player making it
  const moveScores = (b) => Object.fromEntries(legal(b).map((m) => [m, -minimax(play(b, m))]));

  // ------------------------------------------------------------------ the model (net.py)
  // model: {weights (ToyNN.load), d_model, n_heads, n_layers, relations (17 x 17), kinds (17,)}
  function forward(model, board) {
    const w = model.weights, d = model.d_model, n = 17;
    const mover = toMove(board);
    const tokens = board.map((c) => (c === EMPTY ? 0 : c === mover ? 1 : 2)); // as_seen_by_mover
    const x = new Float64Array(n * d);
    for (let t = 0; t < n; t++)
      for (let j = 0; j < d; j++)
        x[t * d + j] = w["kind.weight"].data[model.kinds[t] * d + j] + (t < 9 ? w["symbol.weight"].data[tokens[t] * d + j] : 0);
    const rb = w["relation_bias"], relations = model.relations, nr = rb.shape[2];
    const biases = [];
    for (let l = 0; l < model.n_layers; l++)
      biases.push((h, i, j) => rb.data[(l * model.n_heads + h) * nr + relations[i][j]]);
    const enc = nn.encoder(w, "blocks.", x, n, d, model.n_heads, model.n_layers, biases);
    const cells = enc.x.subarray(0, 9 * d);
    let logits = nn.linear(cells, 9, w["unembed.weight"], w["unembed.bias"]);
    const values = nn.linear(cells, 9, w["value.weight"], w["value.bias"]);
    if (mover === O) logits = logits.map((_, i) => logits[i - (i % 3) + [0, 2, 1][i % 3]]); // back to (empty, X, O)
    return { logits, values, patterns: enc.patterns };
  }

  // measure.model_moves: rank each legal move by how much it raises log P(the next board), plus
  // the outcome the value head expects of it (-1 a loss to 1 a win) times model.outcome_weight
  // (measure.OUTCOME_WEIGHT; 0 for a model without a trained value head)
  function moves(model, board) {
    const out = forward(model, board), mover = toMove(board);
    const gain = [], worth = [];
    for (let c = 0; c < 9; c++) {
      const l = out.logits.subarray(3 * c, 3 * c + 3), top = Math.max(...l);
      const logZ = top + Math.log(l.reduce((s, v) => s + Math.exp(v - top), 0));
      gain.push(board[c] === EMPTY ? (l[mover] - logZ) - (l[EMPTY] - logZ) : -Infinity);
      const v = out.values.subarray(3 * c, 3 * c + 3), vt = Math.max(...v), e = v.map((x) => Math.exp(x - vt));
      worth.push(model.outcome_weight * (e[2] - e[0]) / (e[0] + e[1] + e[2]));
    }
    const top = Math.max(...gain), e = gain.map((g) => Math.exp(g - top)), z = e.reduce((a, b) => a + b, 0);
    return { move: nn.argmax(gain.map((g, c) => g + worth[c]), 1e-6), prob: e.map((v) => v / z), gain, ...out };
  }

  // ------------------------------------------------------------------ the page
  const OUTCOME = ["loses", "draws", "wins"];
  const scoreWord = (s) => (s > 0 ? "wins" : s < 0 ? "loses" : "draws");

  function mount(el, model) {
    model.weights = nn.load(model.weights);
    let human = X, board = Array(9).fill(EMPTY), last = null;
    el.innerHTML = `
      <div class="toy-row">
        <button data-side="1">you play X</button><button data-side="2">you play O</button>
        <button data-role="new">new game</button></div>
      <div class="toy-ttt-board" data-role="board">${[...Array(9)].map((_, i) => `<button data-cell="${i}"></button>`).join("")}</div>
      <p class="toy-status" data-role="status"></p>
      <div class="toy-ttt-why" data-role="why"></div>`;
    const $ = (q) => el.querySelector(q);
    const cells = [...el.querySelectorAll("[data-cell]")];

    function explain() {
      // the model's answer in the position it last played: each open cell's chance, its value
      // head's guess, and minimax's verdict; then where the cell it chose looked, layer by layer
      if (!last) return "<p>The model has not moved yet: play a cell.</p>";
      const { before, m } = last, scores = moveScores(before);
      const rows = legal(before).map((c) => {
        const v = m.values.subarray(3 * c, 3 * c + 3);
        return `<tr${c === m.move ? ' class="toy-chosen"' : ""}><td>${c} (row ${(c / 3) | 0}, col ${c % 3})</td>
          <td>${(100 * m.prob[c]).toFixed(1)} %</td><td>${OUTCOME[nn.argmax(Array.from(v))]}</td>
          <td>${scoreWord(scores[c])}</td></tr>`;
      });
      const heat = m.patterns.map((p, l) => {
        const heads = p.length / (17 * 17), mean = Array(17).fill(0);
        for (let h = 0; h < heads; h++) for (let j = 0; j < 17; j++) mean[j] += p[h * 289 + m.move * 17 + j] / heads;
        const onLines = mean.slice(9).reduce((a, b) => a + b, 0), top = Math.max(...mean.slice(0, 9));
        const grid = mean.slice(0, 9).map((a, j) => `<span style="background:linear-gradient(rgba(214,39,40,${(a / top).toFixed(3)}), rgba(214,39,40,${(a / top).toFixed(3)})), #fff"
          title="${(100 * a).toFixed(1)} %">${j === m.move ? "&#9675;" : SYMBOLS[before[j]].replace(".", "")}</span>`).join("");
        return `<figure><div class="toy-mini">${grid}</div><figcaption>layer ${l}<br>${(100 * onLines).toFixed(0)} % on lines</figcaption></figure>`;
      });
      const who = SYMBOLS[toMove(before)];
      return `<p>The model's last move, as ${who}, and the other cells it could have played:</p>
        <table class="toy-table"><tr><th>cell</th><th>the model's chance</th><th>its value head: ${who} then</th><th>minimax: ${who} then</th></tr>
        ${rows.join("")}</table>
        <p>Where cell ${m.move} (circled) looked among the cells, in each layer (mean over heads; the reddest
        cell got the most), and how much of its attention went to the 8 line tokens instead:</p>
        <div class="toy-row">${heat.join("")}</div>`;
    }

    function render() {
      const w = winner(board), over = isOver(board), yours = !over && toMove(board) === human;
      cells.forEach((b, i) => {
        b.textContent = board[i] === EMPTY ? "" : SYMBOLS[board[i]];
        b.disabled = !yours || board[i] !== EMPTY;
        b.classList.toggle("toy-last", !!last && last.m.move === i);
      });
      el.querySelectorAll("[data-side]").forEach((b) => b.classList.toggle("toy-on", +b.dataset.side === human));
      $("[data-role=status]").textContent = over
        ? (w === EMPTY ? "draw" : `${SYMBOLS[w]} wins (${w === human ? "you" : "the model"})`)
        : yours ? `your move (${SYMBOLS[human]})` : "the model's move";
      $("[data-role=why]").innerHTML = explain();
    }
    function modelTurn() {
      if (!isOver(board) && toMove(board) !== human) {
        const m = moves(model, board);
        last = { before: board, m };
        board = play(board, m.move);
      }
      render();
    }
    function restart() {
      board = Array(9).fill(EMPTY);
      last = null;
      modelTurn();
    }
    cells.forEach((b, i) => b.addEventListener("click", () => {
      if (board[i] !== EMPTY || isOver(board) || toMove(board) !== human) return;
      board = play(board, i);
      modelTurn();
    }));
    el.querySelectorAll("[data-side]").forEach((b) => b.addEventListener("click", () => { human = +b.dataset.side; restart(); }));
    $("[data-role=new]").addEventListener("click", restart);
    restart();
    el.toyLive = { state: () => ({ board: board.slice(), human, over: isOver(board), winner: winner(board) }) }; // what the page shows, for scripts/live_drivers.js
    return el.toyLive;
  }

  const api = { EMPTY, X, O, LINES, toMove, winner, isOver, legal, play, minimax, moveScores, forward, moves, mount };
  root.ToyTicTacToe = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);

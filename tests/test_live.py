"""The live boards: the JavaScript computes what PyTorch and toylib compute (under Node), and
the boards in the stored notebooks play in headless Chromium, offline."""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from toylib import live
from toylib.life import config as life_config
from toylib.life import dataset as life_dataset
from toylib.life import look as life_look
from toylib.life import measure as life_measure
from toylib.life import net as life_net
from toylib.life import world as life_world
from toylib.tictactoe import config as ttt_config
from toylib.tictactoe import look as ttt_look
from toylib.tictactoe import measure as ttt_measure
from toylib.tictactoe import net as ttt_net
from toylib.tictactoe import world as ttt_world

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import check_live_pages  # noqa: E402

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="no Node.js: install it (apt-get install nodejs) to run these")
needs_chromium = pytest.mark.skipif(check_live_pages.chromium() is None,
                                    reason="no Chromium: install Debian's (apt-get install chromium) to play the boards")
TOLERANCE = 1e-4  # logits: the page's (double precision) against PyTorch's (float32)


def node(script: str, data: dict, tmp_path: Path) -> object:
    """Run `script` under Node with the shared forward pass loaded (`ToyNN`), `data` as the
    global `job` and `toylib` the package's folder; it sets the global `result`."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps(data, default=live._plain))
    code = (f"const toylib = {json.dumps(str(ROOT / 'toylib'))}; require(toylib + '/js/nn.js');\n"
            f"const job = JSON.parse(require('fs').readFileSync({json.dumps(str(job))}));\n{script}\n"
            f"require('fs').writeFileSync({json.dumps(str(tmp_path / 'out.json'))}, JSON.stringify(result));")
    subprocess.run([NODE, "-e", code], check=True, timeout=300)
    return json.loads((tmp_path / "out.json").read_text())


APIS = {"tictactoe": "ToyTicTacToe", "life": "ToyLife", "maze": "ToyMaze", "sokoban": "ToySokoban"}


def stored_html(notebook: str) -> str:
    """The live board's HTML output stored in a chapter's notebook, as the site shows it."""
    nb = json.loads((ROOT / "book" / f"{notebook}.ipynb").read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            html = "".join(out.get("data", {}).get("text/html", ""))
            if f"{APIS[notebook]}.mount(" in html:
                return html
    raise AssertionError(f"book/{notebook}.ipynb stores no live board")


def stored_board(notebook: str, api: str) -> dict:
    """The data of the live board stored in a chapter's notebook: the weights its run trained."""
    html = stored_html(notebook)
    mount = html.rfind(f"{api}.mount(")
    payload = html[html.index(", ", mount) + 2: html.rindex(");</script>")]
    return json.loads(payload.replace("<\\/", "</"))


def load_weights(model: torch.nn.Module, data: dict) -> torch.nn.Module:
    state = {name: torch.from_numpy(np.frombuffer(base64.b64decode(w["b64"]), "<f4").copy()).view(w["shape"])
             for name, w in data["weights"].items()}
    model.load_state_dict(state)
    return model.eval()


def _tictactoe_model(data: dict) -> torch.nn.Module:
    return load_weights(ttt_net.TicTacToeNet(ttt_config.TicTacToeConfig(
        d_model=data["d_model"], n_heads=data["n_heads"], n_layers=data["n_layers"])), data)


def _life_model(data: dict) -> torch.nn.Module:
    return load_weights(life_net.SingleAttentionNet(life_config.LifeConfig(
        grid_size=data["grid_size"], d_model=data["d_model"], mask_self=data["mask_self"],
        positions=data["positions"])), data)


def _any_size_model(data: dict) -> torch.nn.Module:
    return load_weights(life_net.OffsetAttentionNet(replace(
        life_config.ANY_SIZE, d_model=data["d_model"], radius=data["radius"], mask_self=data["mask_self"])), data)


# ----------------------------------------------------------------------------- the Python side


def test_weights_round_trip_and_refuse_what_is_not_a_float():
    torch.manual_seed(0)
    model = ttt_net.TicTacToeNet(ttt_config.TicTacToeConfig())
    copy = load_weights(ttt_net.TicTacToeNet(ttt_config.TicTacToeConfig()), {"weights": live.weights(model)})
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), copy.state_dict().values()))
    counted = torch.nn.Linear(2, 2)
    counted.register_buffer("count", torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="float weights only"):
        live.weights(counted)


def test_a_board_is_one_self_contained_html_output():
    torch.manual_seed(0)
    page = ttt_look.live_board(ttt_net.TicTacToeNet(ttt_config.TicTacToeConfig()))
    html = page._repr_html_()
    assert html.count("<script>") == 3 and "ToyNN" in html and "ToyTicTacToe.mount(" in html
    assert "http" not in html.replace("http://www.w3.org", "")  # nothing to fetch
    with pytest.raises(ValueError, match="chapter's model"):
        ttt_look.live_board(ttt_net.TicTacToeNet(ttt_config.TicTacToeConfig(positions="cells")))
    with pytest.raises(ValueError, match="learned attention"):
        life_look.live_board(life_net.SingleAttentionNet(life_config.LifeConfig(mixer="pool")))
    with pytest.raises(ValueError, match="names"):
        live.Live("tic tac", "X", {})


# ----------------------------------------------------------------------------- the JavaScript under Node


@needs_node
def test_erf_and_gelu_match_python(tmp_path):
    xs = [i / 8 for i in range(-48, 49)]
    got = node("result = job.xs.map(x => [ToyNN.erf(x), ToyNN.gelu(x)]);", {"xs": xs}, tmp_path)
    for x, (e, g) in zip(xs, got):
        assert e == pytest.approx(math.erf(x), abs=1e-14)
        assert g == pytest.approx(0.5 * x * (1 + math.erf(x / math.sqrt(2))), abs=1e-14)


@needs_node
def test_tictactoe_rules_and_minimax_match_toylib_on_every_position(tmp_path):
    boards = [list(b) for b in ttt_world.all_positions()]
    got = node("const T = require(toylib + '/tictactoe/live.js');"
               "result = job.boards.map(b => [T.winner(b), T.legal(b), T.moveScores(b)]);", {"boards": boards}, tmp_path)
    assert len(boards) == 5478
    for b, (winner, legal, scores) in zip(boards, got):
        state = ttt_world.TicTacToe(tuple(b))
        assert winner == state.winner()
        assert legal == ([] if state.is_terminal() else state.legal_actions())
        assert {int(k): v for k, v in scores.items()} == (ttt_world.move_scores(b) if legal else {})


@needs_node
def test_the_tictactoe_page_computes_what_the_trained_model_computes(tmp_path):
    data = stored_board("tictactoe", "ToyTicTacToe")
    model = _tictactoe_model(data)
    boards = ttt_world.open_positions()
    assert len(boards) == 4520
    boards = boards[::4]  # 1,130 positions: Node takes about 2.5 ms a board
    got = node("const T = require(toylib + '/tictactoe/live.js'); const m = job.model; m.weights = ToyNN.load(m.weights);"
               "result = job.boards.map(b => { const r = T.moves(m, b); return [Array.from(r.logits), Array.from(r.values), r.move]; });",
               {"model": data, "boards": boards}, tmp_path)
    b = torch.tensor(boards)
    with torch.no_grad():
        logits, values, _ = model(b)
    moves = ttt_measure.model_moves(model, b)
    js_logits = torch.tensor([g[0] for g in got]).view(-1, 9, 3)
    js_values = torch.tensor([g[1] for g in got]).view(-1, 9, 3)
    js_moves = torch.tensor([g[2] for g in got])
    assert (js_logits - logits).abs().max() < TOLERANCE and (js_values - values).abs().max() < TOLERANCE
    # every cell's symbol and value class, as PyTorch picks them
    assert torch.equal(js_logits.argmax(-1), logits.argmax(-1)) and torch.equal(js_values.argmax(-1), values.argmax(-1))
    # the same move, except where two moves score alike to the last bits (the board's symmetry
    # makes exact ties, which float32 breaks one way and the page, taking the first, another)
    logp = torch.log_softmax(logits, -1)  # (n, 9, 3), as model_moves ranks the moves
    mover = ttt_world.to_move(b)[:, None, None].expand(-1, 9, 1)
    gain = (logp.gather(2, mover).squeeze(2) - logp[..., 0]).masked_fill(b != 0, -math.inf)  # (n, 9)
    # the chapter's model: the value head's expected outcome counts, and decides
    assert data["outcome_weight"] == ttt_measure.OUTCOME_WEIGHT
    score = gain + ttt_measure.OUTCOME_WEIGHT * torch.softmax(values, -1) @ torch.tensor([-1.0, 0.0, 1.0])
    assert torch.equal(score.argmax(1), moves.move)
    short = score.max(1).values - score.gather(1, js_moves[:, None]).squeeze(1)
    assert short.max() < TOLERANCE * ttt_measure.OUTCOME_WEIGHT  # float32's rounding, weighted as the outcome is
    print(f"tic-tac-toe: logits within {float((js_logits - logits).abs().max()):.1e}, "
          f"values within {float((js_values - values).abs().max()):.1e}")
    print(f"{len(boards):,} positions: the page's move is PyTorch's on {int((js_moves == moves.move).sum()):,}, "
          f"and on the other {int((js_moves != moves.move).sum())} a move that scores within {float(short.max()):.1e}")
    assert (js_moves == moves.move).float().mean() > 0.9


@needs_node
def test_the_life_page_computes_what_the_trained_model_computes_and_the_rule(tmp_path):
    data = stored_board("life", "ToyLife")
    model = _life_model(data)
    config = model.config
    grids = life_dataset.random_grids(400, config.grid_size, np.random.default_rng(7))  # 102,400 cells
    odd = [life_dataset.random_grids(20, shape, np.random.default_rng(8)) for shape in ((3, 3), (5, 7), (9, 31))]
    got = node("const L = require(toylib + '/life/live.js'); const m = job.model; m.weights = ToyNN.load(m.weights);"
               "result = {logits: job.grids.map(g => Array.from(L.forward(m, g).logits)),"
               " steps: job.grids.concat(...job.odd).map(L.step)};",
               {"model": data, "grids": grids, "odd": odd}, tmp_path)
    with torch.no_grad():
        logits = model(torch.from_numpy(grids))[0]
    js = torch.tensor(got["logits"]).view_as(logits)
    print(f"Life: {len(grids):,} grids, logits within {float((js - logits).abs().max()):.1e}, "
          f"{int(((js > 0) != (logits > 0)).sum())} cells called differently")
    assert (js - logits).abs().max() < TOLERANCE
    assert torch.equal((js > 0)[logits.abs() > TOLERANCE], (logits > 0)[logits.abs() > TOLERANCE])
    truth = [*life_world.life_step(grids), *(g for o in odd for g in life_world.life_step(o))]
    assert all(np.array_equal(np.array(s), t) for s, t in zip(got["steps"], truth))


@needs_node
def test_the_life_page_runs_the_any_size_model_on_boards_of_every_shape(tmp_path):
    data = stored_board("life", "ToyLife")["any"]
    model = _any_size_model(data)
    rng = np.random.default_rng(9)
    shapes = ((5, 7), (12, 30), (16, 16), (31, 9))
    grids = {shape: life_dataset.random_grids(250, shape, rng) for shape in shapes}  # 1,000 grids
    got = node("const L = require(toylib + '/life/live.js'); const m = job.model; m.weights = ToyNN.load(m.weights);"
               "result = job.grids.map(gs => gs.map(g => Array.from(L.forwardAny(m, g).logits)));",
               {"model": data, "grids": [grids[s] for s in shapes]}, tmp_path)
    worst = 0.0
    for shape, js in zip(shapes, got):
        with torch.no_grad():
            logits = model(torch.from_numpy(grids[shape]))[0]
        js = torch.tensor(js).view_as(logits)
        worst = max(worst, float((js - logits).abs().max()))
        assert torch.equal((js > 0)[logits.abs() > TOLERANCE], (logits > 0)[logits.abs() > TOLERANCE])
    print(f"Life, any size: 1,000 grids of {len(shapes)} shapes, logits within {worst:.1e}")
    assert worst < TOLERANCE


# ----------------------------------------------------------------------------- the boards in a browser


def stored_page(tmp_path: Path, notebook: str) -> Path:
    """A page holding the live board stored in the notebook, as the site shows it."""
    html = stored_html(notebook)
    page = tmp_path / f"{notebook}.html"
    page.write_text(f'<!doctype html><html><head><meta charset="utf-8"></head><body>{html}</body></html>')
    return page


@needs_chromium
def test_the_stored_tictactoe_board_plays_whole_games_as_the_model_would(tmp_path):
    data = stored_board("tictactoe", "ToyTicTacToe")
    model = _tictactoe_model(data)
    result = check_live_pages.play(stored_page(tmp_path, "tictactoe"))
    assert result["errors"] == [] and [b["chapter"] for b in result["boards"]] == ["tictactoe"]
    for game in result["boards"][0]["games"]:
        human = game["side"]
        state = ttt_world.TicTacToe()
        mine = iter(game["moves"])
        while not state.is_terminal():  # replay: our moves as the driver clicked, the model's by PyTorch
            if state.current_player() == human:
                state = state.apply_action(next(mine))
            else:
                with torch.no_grad():
                    logits, values, _ = model(torch.tensor([state.board]))
                logp = torch.log_softmax(logits[0], -1)  # (9, 3)
                worth = torch.softmax(values[0], -1) @ torch.tensor([-1.0, 0.0, 1.0])  # (9,)
                score = logp[:, state.current_player()] - logp[:, 0] + ttt_measure.OUTCOME_WEIGHT * worth
                shown = [i for i, s in enumerate(game["board"]) if s != "." and state.board[i] == 0]
                legal = state.legal_actions()
                best = [a for a in legal if score[a] >= max(score[legal]) - TOLERANCE * ttt_measure.OUTCOME_WEIGHT]  # ties
                move = next(a for a in best if a in shown) if any(a in shown for a in best) else best[0]
                state = state.apply_action(move)
        board = "".join(".XO"[s] for s in state.board)
        assert "".join(game["board"]) == board
        winner = state.winner()
        assert game["status"] == ("draw" if not winner else f"{'.XO'[winner]} wins ({'you' if winner == human else 'the model'})")
        assert game["why"] >= 2  # the table of the model's last position: a header and its moves


@needs_chromium
def test_the_stored_life_board_steps_a_glider_as_the_model_does(tmp_path):
    data = stored_board("life", "ToyLife")
    model = _life_model(data)
    config = model.config
    result = check_live_pages.play(stored_page(tmp_path, "life"))
    assert result["errors"] == []
    board = result["boards"][0]
    glider = np.zeros((config.grid_size, config.grid_size), np.uint8)
    for r, c in ((0, 1), (1, 2), (2, 0), (2, 1), (2, 2)):
        glider[r + 1, c + 1] = 1
    ours = life_measure.predict(model, glider)
    for _ in range(3):
        ours = life_measure.predict(model, ours)
    assert board["alive"] == np.flatnonzero(ours).tolist()
    assert board["wrong"] == int((ours != life_world.life_run(glider, 4)[-1]).sum())
    assert board["statuses"][-1].startswith("step 4: 5 live cells")
    assert board["heat"] == config.grid_size ** 2 and "% of its attention on its 8 neighbours" in board["caption"]
    # the any-size model on a 12x30 board
    any_model = _any_size_model(data["any"])
    glider = np.zeros((12, 30), np.uint8)
    for r, c in ((0, 1), (1, 2), (2, 0), (2, 1), (2, 2)):
        glider[r + 1, c + 1] = 1
    ours = glider
    for _ in range(4):
        ours = life_measure.predict(any_model, ours)
    assert board["any"]["cells"] == 12 * 30 and board["any"]["alive"] == np.flatnonzero(ours).tolist()
    assert board["any"]["wrong"] == int((ours != life_world.life_run(glider, 4)[-1]).sum())
    assert "cell (0, 0)" in board["any"]["caption"]


# ----------------------------------------------------------------------------- mazes and Sokoban


def _maze_model(data: dict) -> torch.nn.Module:
    from toylib.maze import net as maze_net
    from toylib.maze.config import MazeConfig

    return load_weights(maze_net.MazeNet(MazeConfig(
        d_model=data["d_model"], n_heads=data["n_heads"], n_decoder_layers=data["n_decoder_layers"],
        radius=data["radius"], ways=data.get("ways", 0.0), squash=data.get("squash", 0.0), window=data.get("window", False),
        extra_passes=data.get("extra_passes", 0))), data)


def _as_maze(layout) -> dict:
    return {"rows": layout.arms.shape[0], "cols": layout.arms.shape[1], "arms": layout.arms.astype(bool),
            "start": list(layout.start), "end": list(layout.end)}


@needs_node
def test_the_maze_page_walks_as_the_trained_model_and_bfs_do(tmp_path):
    from toylib.maze import measure as maze_measure
    from toylib.maze import world as maze_world

    data = stored_board("maze", "ToyMaze")
    model = _maze_model(data)
    rng = np.random.default_rng(11)
    first = [maze_world.random_maze(rng).maze for _ in range(400)]  # the first step of 400 mazes
    walked = ([maze_world.random_maze(rng).maze for _ in range(30)]
              + [maze_world.spanning_tree_maze(rng, n).maze for n in (5, 6, 7, 8) for _ in range(3)]
              + [maze_world.spanning_tree_maze(rng, 32, carve, loops).maze  # the largest a reader can draw
                 for carve, loops in (("backtracker", 0.0), ("kruskal", 0.0), ("backtracker", 0.1))])
    got = node("const M = require(toylib + '/maze/live.js'); const m = job.model; m.weights = ToyNN.load(m.weights);"
               "result = {first: job.first.map(z => Array.from(M.decode(m, M.encode(m, z), [M.START]).logits)),"
               " walked: job.walked.map(z => [M.solve(m, z), M.shortestPath(z)])};",
               {"model": data, "first": [_as_maze(maze_world.from_pixels(p)) for p in first],
                "walked": [_as_maze(maze_world.from_pixels(p)) for p in walked]}, tmp_path)
    with torch.no_grad():
        memory = model.encode(torch.from_numpy(np.stack(first)), keep=False)
        logits = model.decode(torch.full((len(first), 1), maze_world.START), memory)[0][:, -1]
    js = torch.tensor(got["first"])
    print(f"maze: {len(first):,} mazes, first-move logits within {float((js - logits).abs().max()):.1e}")
    assert (js - logits).abs().max() < TOLERANCE
    assert torch.equal(js.argmax(1), logits.argmax(1))
    for pixels, (moves, bfs) in zip(walked, got["walked"]):
        assert [maze_world.START, *moves] == maze_measure.solve_greedy(model, pixels)
        assert (bfs is None) == (maze_world.shortest_path(pixels) is None)
        assert bfs is None or maze_world.check_solution(pixels, [maze_world.START, *bfs, maze_world.STOP]).optimal


@needs_node
def test_the_maze_page_runs_the_search_preset_s_bound_window_and_settling_as_pytorch_does(tmp_path, monkeypatch):
    from toylib.maze import look as maze_look
    from toylib.maze import measure as maze_measure
    from toylib.maze import net as maze_net
    from toylib.maze import training as maze_training
    from toylib.maze import world as maze_world
    from toylib.maze.config import MazeConfig

    # random weights settle this far, maze by maze; and at this STILL some of their tiles come to
    # rest while others move, as a trained model's do at net.py's
    rules = {"SETTLED": 0.3, "STILL": 0.3}
    for name, value in rules.items():
        monkeypatch.setattr(maze_net, name, value)
        monkeypatch.setattr(maze_look, name, value)
    torch.manual_seed(0)
    model = maze_training.build_model(MazeConfig()).eval()
    data = json.loads(json.dumps(maze_look.live_board(model).data, default=live._plain))
    assert (data["squash"], data["window"], data["settled"], data["still"]) == (3.0, True, 0.3, 0.3)
    rng = np.random.default_rng(5)
    mazes = [maze_world.random_maze(rng, 6).maze for _ in range(20)] + [maze_world.spanning_tree_maze(rng, 7).maze
                                                                         for _ in range(10)]

    def states(p):
        with torch.no_grad():
            return model.encode(torch.from_numpy(p)[None], keep=False).states

    ruled = [states(p) for p in mazes]
    monkeypatch.setattr(maze_net, "STILL", -1.0)  # every tile takes every pass
    assert sum(not torch.equal(a, states(p)) for a, p in zip(ruled, mazes)) >= 20  # the rule is at work here
    monkeypatch.setattr(maze_net, "STILL", rules["STILL"])
    got = node("const M = require(toylib + '/maze/live.js'); const m = job.model; m.weights = ToyNN.load(m.weights);"
               "result = job.mazes.map(z => { const memory = M.encode(m, z);"
               " return [Array.from(M.decode(m, memory, [M.START, 2, 3]).logits), M.solve(m, z, memory)]; });",
               {"model": data, "mazes": [_as_maze(maze_world.from_pixels(p)) for p in mazes]}, tmp_path)
    for pixels, (logits, moves) in zip(mazes, got):
        with torch.no_grad():
            memory = model.encode(torch.from_numpy(pixels)[None], keep=False)
            expected = model.decode(torch.tensor([[maze_world.START, 2, 3]]), memory)[0][0, -1]
        assert (torch.tensor(logits) - expected).abs().max() < TOLERANCE
        assert [maze_world.START, *moves] == maze_measure.solve_greedy(model, pixels)


def _sokoban_model(data: dict) -> torch.nn.Module:
    from toylib.sokoban import net as sokoban_net
    from toylib.sokoban.config import SokobanConfig

    return load_weights(sokoban_net.SokobanPolicy(SokobanConfig(
        d_model=data["d_model"], n_heads=data["n_heads"], n_layers=data["n_layers"], channels=data["channels"],
        conv_layers=data["conv_layers"], region=data.get("region", False), inside=data.get("inside", False),
        pieces=data.get("pieces", False), n_ctx=data["n_ctx"], history=data["history"])), data)


def _board(b) -> dict:
    return {"walls": b.grid.reshape(-1), "goal": b.goal, "box": b.box, "player": b.player}


@needs_node
def test_the_sokoban_page_reads_boards_as_the_trained_policy_and_counts_moves_as_bfs(tmp_path):
    from toylib.sokoban import look as sokoban_look
    from toylib.sokoban import world as sokoban_world

    data = stored_board("sokoban", "ToySokoban")
    model = _sokoban_model(data)
    rng = np.random.default_rng(12)
    # 1,000 boards: 10 from each of 100 levels (solvable or not, as drawn), along random moves;
    # each read alone after its level's goal
    levels = [sokoban_world.random_board(rng) for _ in range(100)]
    boards = []
    for level in levels:
        b = level
        for _ in range(10):
            boards.append(b)
            b = b.apply_action(int(rng.choice(b.legal_actions()))) if b.legal_actions() else b
    # histories along a shortest solution (or a legal move of a lost board), then an undo
    histories = []
    for b in levels[:30]:
        moves = (sokoban_world.shortest_solution(b) or b.legal_actions()[:1])[:5]
        histories.append(sokoban_look._visit(b, moves + ([sokoban_world.UNDO] if moves else [])))
    got = node("const S = require(toylib + '/sokoban/live.js'); const m = job.model; m.weights = ToyNN.load(m.weights);"
               "const goals = job.levels.map(b => S.token(m, S.goalBoard(b)));"
               "const one = (b, i) => { const r = S.read(m, goals[Math.floor(i / 10)], [S.token(m, b)]);"
               " return [Array.from(r.action), Array.from(r.nsteps), S.movesLeft(b), S.legalMoves(b)]; };"
               "const along = (h) => { const g = S.token(m, S.goalBoard(h[0])), t = h.map(b => S.token(m, b));"
               " return h.map((_, i) => { const r = S.read(m, g, t.slice(0, i + 1)); return [Array.from(r.action), Array.from(r.nsteps)]; }); };"
               "result = {boards: job.boards.map(one), histories: job.histories.map(along)};",
               {"model": data, "levels": [_board(b) for b in levels], "boards": [_board(b) for b in boards],
                "histories": [[_board(b) for b in h] for h in histories]}, tmp_path)
    goals = np.stack([sokoban_world.encode(b.grid, b.goal, b.goal, -1) for b in levels]).repeat(10, 0)  # no player
    planes = np.stack([sokoban_world.to_channels(b) for b in boards])[:, None]  # (n, 1, 5, 8, 8)
    with torch.no_grad():
        a, n, _ = model(torch.from_numpy(goals), torch.from_numpy(planes))  # (n, 1, 5), (n, 1, 7)
    js_a, js_n = torch.tensor([g[0] for g in got["boards"]]), torch.tensor([g[1] for g in got["boards"]])
    worst = max((js_a - a[:, 0]).abs().max().item(), (js_n - n[:, 0]).abs().max().item())
    assert torch.equal(js_a.argmax(1), a[:, 0].argmax(1)) and torch.equal(js_n.argmax(1), n[:, 0].argmax(1))
    for b, (_, _, left, legal) in zip(boards, got["boards"]):
        assert left == sokoban_world.moves_to_goal(b).get((b.box, b.player))
        assert legal == b.legal_actions()
    for h, rows in zip(histories, got["histories"]):
        a, n, _ = sokoban_look._read(model, h)
        worst = max(worst, (torch.tensor([r[0] for r in rows]) - a).abs().max().item(),
                    (torch.tensor([r[1] for r in rows]) - n).abs().max().item())
    print(f"Sokoban: {len(boards):,} boards and {len(histories)} histories, logits within {worst:.1e}")
    assert worst < TOLERANCE


@needs_chromium
def test_the_stored_maze_board_walks_as_the_model_does_after_edits(tmp_path):
    from toylib.maze import measure as maze_measure
    from toylib.maze import world as maze_world

    model = _maze_model(stored_board("maze", "ToyMaze"))
    result = check_live_pages.play(stored_page(tmp_path, "maze"))
    assert result["errors"] == []
    board = result["boards"][0]
    assert len(board["walks"]) == 5 and [w["maze"]["rows"] for w in board["walks"][3:]] == [8, 32]
    for walk in board["walks"]:
        m = walk["maze"]
        pixels = maze_world.to_pixels(np.array(m["arms"]), m["start"], m["end"])
        assert [maze_world.START, *walk["moves"]] == maze_measure.solve_greedy(model, pixels)
        check = maze_world.check_solution(pixels, [maze_world.START, *walk["moves"]])
        assert ("solved by a shortest path" in walk["status"]) == check.optimal
    # each click closed a passage: first the first one open, then one between two rows
    for before, after in zip(board["walks"][:2], board["walks"][1:3]):
        a, b = np.array(before["maze"]["arms"]), np.array(after["maze"]["arms"])
        assert (a & ~b).sum() == 2 and not (b & ~a).any()  # both arms of one passage, nothing opened
    assert "after 1 of its" in board["oneStep"]


@needs_chromium
def test_the_stored_sokoban_board_plays_by_keyboard_and_finishes_greedily(tmp_path):
    from toylib.sokoban import measure as sokoban_measure
    from toylib.sokoban import world as sokoban_world

    data = stored_board("sokoban", "ToySokoban")
    model = _sokoban_model(data)
    result = check_live_pages.play(stored_page(tmp_path, "sokoban"))
    assert result["errors"] == []
    board = result["boards"][0]
    level = data["levels"][0]["board"]
    start = _level(level)
    play = sokoban_world.Play(start)
    for step in board["keys"]:  # replay the keys: an arrow moves where it is legal, u undoes
        action = {"ArrowUp": 0, "ArrowDown": 1, "ArrowLeft": 2, "ArrowRight": 3, "u": 4}[step["key"]]
        assert step["moved"] == (action in play.legal_actions())
        if step["moved"]:
            play = play.step(action)
    assert (board["afterKeys"]["board"]["box"], board["afterKeys"]["board"]["player"]) == (play.board.box, play.board.player)
    assert "Breadth-first search" in board["fresh"]
    greedy = sokoban_measure.solve_greedy(model, [start])[0]
    assert board["finished"]["state"]["actions"] == greedy
    assert board["finished"]["status"].startswith("Solved in")


def _level(level: dict):
    from toylib.sokoban import world as sokoban_world

    walls = np.array(level["walls"], bool).reshape(8, 8)
    return sokoban_world.from_channels(sokoban_world.encode(walls, level["goal"], level["box"], level["player"]))


def test_the_stored_boards_carry_the_scripts_of_this_checkout():
    """A board carries its scripts inline: after a change to one, the chapters must run again."""
    for notebook in APIS:
        html = stored_html(notebook)
        for path in (*live.SCRIPTS, f"{notebook}/live.js", "js/live.css"):
            assert live.source(path) in html, f"book/{notebook}.ipynb stores an older {path}: execute it again"


def test_the_maze_and_sokoban_boards_refuse_what_they_cannot_run():
    from toylib.maze import look as maze_look
    from toylib.maze import training as maze_training
    from toylib.maze.config import POST as MAZE_POST
    from toylib.sokoban import look as sokoban_look
    from toylib.sokoban import net as sokoban_net
    from toylib.sokoban import world as sokoban_world
    from toylib.sokoban.config import SokobanConfig

    with pytest.raises(ValueError, match="looped model"):
        maze_look.live_board(maze_training.build_model(MAZE_POST))
    policy = sokoban_net.SokobanPolicy(SokobanConfig())
    with pytest.raises(ValueError, match="at least one level"):
        sokoban_look.live_board(policy, [])
    lost = sokoban_world.from_xsb("########\n#@     #\n#      #\n#      #\n#      #\n#     .#\n#     $#\n########")
    with pytest.raises(ValueError, match="solvable"):
        sokoban_look.live_board(policy, [lost])


@needs_chromium
@pytest.mark.parametrize("notebook", ["tictactoe", "life", "maze", "sokoban"])
def test_each_stored_board_fits_a_phone_page_while_it_plays(tmp_path, notebook):
    """On a 412-pixel phone the page leaves the board about 380 pixels: played there, after
    every click of the driver, it must not scroll sideways."""
    result = check_live_pages.play(stored_page(tmp_path, notebook), width=412)
    assert result["errors"] == []
    (board,) = result["boards"]
    assert board["shown"] <= 380 and board["width"] <= board["shown"]

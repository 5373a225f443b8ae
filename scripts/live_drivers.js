// Plays every live board on a page as a reader would, with clicks (and keys), and writes what
// the page then shows, as JSON, into a pre element with the id toy-live-results: scripts/check_live_pages.py
// appends this file to a page and reads the results back from the DOM that headless Chromium dumps.
(function () {
  "use strict";
  const click = (el) => el.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  const text = (el, q) => el.querySelector(q).textContent;

  const drivers = {
    // play X, always the lowest open cell, to the end of the game; then the same as O
    tictactoe(el) {
      const games = [];
      for (const side of ["1", "2"]) {
        click(el.querySelector(`[data-side="${side}"]`));
        const moves = [];
        for (let turn = 0; turn < 9; turn++) {
          const open = [...el.querySelectorAll("[data-cell]")].filter((b) => !b.disabled);
          if (!open.length) break;
          moves.push(+open[0].dataset.cell);
          click(open[0]);
        }
        games.push({ side: +side, moves, board: [...el.querySelectorAll("[data-cell]")].map((b) => b.textContent || "."),
                     status: text(el, "[data-role=status]"), why: el.querySelectorAll("[data-role=why] tr").length });
      }
      return { games };
    },
    // a glider, stepped four times; then where the centre cell looks
    life(el) {
      click(el.querySelector("[data-role=glider]"));
      const statuses = [];
      for (let i = 0; i < 4; i++) {
        click(el.querySelector("[data-role=step]"));
        statuses.push(text(el, "[data-role=status]"));
      }
      const alive = [...el.querySelectorAll("[data-cell]")].filter((d) => d.classList.contains("toy-alive")).map((d) => +d.dataset.cell);
      const wrong = [...el.querySelectorAll("[data-cell]")].filter((d) => d.classList.contains("toy-wrong")).length;
      click(el.querySelector("[data-mode=look]"));
      click(el.querySelector("[data-cell]"));
      const heat = [...el.querySelectorAll("[data-heat]")].filter((d) => d.style.background !== "").length;
      const result = { alive, wrong, statuses, heat, caption: text(el, "[data-role=heat-caption]") };
      if (el.querySelector("[data-model=any]")) { // the any-size model on a 12x30 board: a glider, four steps
        click(el.querySelector("[data-model=any]"));
        const shape = el.querySelector("[data-role=shape]");
        shape.value = "12x30";
        shape.dispatchEvent(new Event("change", { bubbles: true }));
        click(el.querySelector("[data-mode=draw]"));
        click(el.querySelector("[data-role=glider]"));
        for (let i = 0; i < 4; i++) click(el.querySelector("[data-role=step]"));
        const cells = [...el.querySelectorAll("[data-cell]")];
        click(el.querySelector("[data-mode=look]"));
        click(cells[0]);
        result.any = { cells: cells.length, alive: cells.filter((d) => d.classList.contains("toy-alive")).map((d) => +d.dataset.cell),
                       wrong: cells.filter((d) => d.classList.contains("toy-wrong")).length, status: text(el, "[data-role=status]"),
                       caption: text(el, "[data-role=heat-caption]") };
      }
      return result;
    },
    // walk the stored maze; close the first open passage and walk again, then the first open
    // passage between two rows; walk a new 8x8 maze, and a new maze of the largest size offered
    maze(el) {
      const walks = [];
      const solve = () => {
        click(el.querySelector("[data-role=solve]"));
        walks.push({ maze: el.toyLive.maze(), moves: el.toyLive.moves(), status: text(el, "[data-role=status]"),
                     walked: el.querySelectorAll(".toy-walked").length });
      };
      solve();
      click(el.querySelector("[data-mode=passage]"));
      click(el.querySelector(".toy-edge.toy-open"));
      solve();
      click(el.querySelector(".toy-edge.toy-h.toy-open"));
      solve();
      const size = el.querySelector("[data-role=size]");
      size.value = "8";
      click(el.querySelector("[data-role=new]"));
      solve();
      size.value = size.options[size.options.length - 1].value;
      click(el.querySelector("[data-role=new]"));
      solve();
      click(el.querySelector("[data-role=reset]"));
      click(el.querySelector("[data-role=step]"));
      return { walks, oneStep: text(el, "[data-role=status]") };
    },
    // the keyboard: every arrow once where it is legal, then u; then the model finishes the level
    sokoban(el) {
      const board = el.querySelector("[data-role=board]");
      const key = (k) => board.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true }));
      const keys = [];
      for (const k of ["ArrowUp", "ArrowRight", "ArrowDown", "ArrowLeft", "u"]) {
        const before = JSON.stringify(el.toyLive.state());
        key(k);
        keys.push({ key: k, moved: JSON.stringify(el.toyLive.state()) !== before });
      }
      const afterKeys = el.toyLive.state();
      click(el.querySelector("[data-role=restart]"));
      const fresh = text(el, "[data-role=status]");
      click(el.querySelector("[data-role=finish]"));
      const finished = { state: el.toyLive.state(), status: text(el, "[data-role=status]") };
      return { keys, afterKeys, fresh, finished };
    },
  };

  const results = { boards: [], errors: [] };
  window.addEventListener("error", (e) => results.errors.push(String(e.message)));
  function run() {
    for (const el of document.querySelectorAll(".toy-live")) {
      const chapter = el.id.split("-")[2];
      try {
        results.boards.push({ chapter, width: el.scrollWidth, shown: el.clientWidth, ...drivers[chapter](el) });
      } catch (e) {
        results.errors.push(`${chapter}: ${e.stack || e}`);
      }
    }
    const pre = document.createElement("pre");
    pre.id = "toy-live-results";
    pre.textContent = JSON.stringify(results);
    document.body.appendChild(pre);
  }
  if (document.readyState === "complete") run(); else window.addEventListener("load", run);
})();

// Reads what a built page shows a reader and writes it, as JSON, into a pre element with the id
// toy-site-results: the theme in force; how the maths was typeset (once MathJax has finished);
// and the contrast of every piece of text on the live boards and in the targets tables, against
// the colour actually behind it. tests/test_site.py appends this file to a page
// (scripts/check_live_pages.py, `render`) and checks the numbers.
(function () {
  "use strict";
  const paint = document.createElement("canvas").getContext("2d");

  // any CSS colour, as the browser computes it (rgb(), oklab(), color(srgb ...)), as [r, g, b, a]:
  // sRGB 0-255 and alpha 0-1, read back through a canvas, which writes it as #rrggbb or rgba()
  function rgba(css) {
    paint.fillStyle = "#000";
    paint.fillStyle = css;
    const v = paint.fillStyle;
    if (v.startsWith("#")) return [1, 3, 5].map((i) => parseInt(v.slice(i, i + 2), 16)).concat(1);
    const p = v.slice(v.indexOf("(") + 1, -1).split(",").map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  }
  const over = (top, below) => [0, 1, 2].map((i) => top[i] * top[3] + below[i] * (1 - top[3])).concat(1);

  // the opaque colour behind an element's text: its own background and its ancestors', each
  // laid over the next; null where a picture or a gradient lies behind it (no single colour)
  function behind(el) {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.backgroundImage !== "none") return null;
      const c = rgba(style.backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let colour = [255, 255, 255, 1];  // the browser's own canvas, where nothing is opaque
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return colour;
  }

  // WCAG 2's relative luminance and contrast ratio
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const contrast = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const hex = (c) => "#" + c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, "0")).join("");

  // every element of the boards and the targets tables that writes text of its own, where a
  // reader sees it; transparent text is meant unseen (Sokoban's squares), and a disabled
  // button is exempt (WCAG 1.4.3), as it is in the browser's own style
  function texts() {
    const found = [];
    let unmeasured = 0;
    for (const el of document.querySelectorAll(".toy-live *, div.toy-table *")) {
      const own = [...el.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.data).join("").trim();
      if (!own || !el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) continue;
      if (el.closest("button:disabled")) continue;
      const fg = rgba(getComputedStyle(el).color);
      if (fg[3] === 0) continue;
      const bg = behind(el);
      if (bg === null) { unmeasured++; continue; }
      const shown = over(fg, bg);
      const cell = el.closest("th.met, td[class^='met']");
      found.push({
        kind: el.closest(".toy-live") ? (el.closest("button") ? "board button" : "board")
          : cell ? "met cell" : "table",
        board: el.closest(".toy-live") ? el.closest(".toy-live").id : null,
        text: own.slice(0, 40), classes: (cell || el).className, fg: hex(shown), bg: hex(bg),
        ratio: Math.round(contrast(shown, bg) * 100) / 100,
      });
    }
    return { texts: found, unmeasured };
  }

  // each formula: typeset or not, and the raw TeX a reader would still see in headings and in
  // the table of contents
  function maths() {
    const spans = [...document.querySelectorAll("span.math, div.math")];
    const raw = (el) => /\\[a-zA-Z]+|\\\(/.test(el.innerText);
    const where = (selector) => [...document.querySelectorAll(selector)].filter((el) => el.querySelector(".math"))
      .map((el) => ({ text: el.innerText.trim().slice(0, 80), typeset: !!el.querySelector("mjx-container"),
                      raw: raw(el) }));
    const fonts = {};
    for (const face of document.fonts) if (/^MJX/.test(face.family)) fonts[face.status] = (fonts[face.status] || 0) + 1;
    return {
      loaded: !!(window.MathJax && window.MathJax.startup && window.MathJax.version),
      version: window.MathJax && window.MathJax.version || null,
      formulas: spans.length, typeset: spans.filter((s) => s.querySelector("mjx-container")).length,
      errors: document.querySelectorAll("mjx-merror").length,
      headings: where("article h1, article h2, article h3"),
      toc: where("li.toc-entry > a"),  // the page's table of contents, at the side and in the header's menu
      fonts,
    };
  }

  const results = { errors: [] };
  window.addEventListener("error", (e) => results.errors.push(String(e.message)));
  async function run() {
    try {
      const startup = window.MathJax && window.MathJax.startup;
      if (startup && startup.promise) await startup.promise;  // typeset, or given up
      await document.fonts.ready;
      results.theme = document.documentElement.dataset.theme || null;
      results.maths = maths();
      Object.assign(results, texts());
    } catch (e) {
      results.errors.push(String(e.stack || e));
    }
    const pre = document.createElement("pre");
    pre.id = "toy-site-results";
    pre.textContent = JSON.stringify(results);
    document.body.appendChild(pre);
  }
  // MathJax loads deferred and typesets after the page's load event: wait for the load first
  if (document.readyState === "complete") run(); else window.addEventListener("load", run);
})();

// The search page's snippets, with their maths typeset. The build (_ext/sitefiles.py) loads this on
// search.html only, deferred, after the site's MathJax and after Sphinx's searchtools.js.
//
// Under each result Sphinx quotes the text around the word found (Search.makeSearchSummary: the 240
// characters from 120 before it), read from the page's HTML, where a formula is still its TeX: a
// reader saw "...divided by \(\sqrt{d_\text{head}}\)...", or half a formula where the cut fell in
// one. This makeSearchSummary takes the same stretch of text, moved out to whole formulas, puts each
// formula in a span of its own, as the pages do, and has the site's MathJax typeset it. The span's
// class `nohighlight` keeps sphinx_highlight.js from splitting the TeX to mark a word inside it.
// With a Sphinx whose search has no such method, the page is left as Sphinx made it; without
// MathJax, the formulas stay as TeX.
(function () {
  "use strict";
  if (typeof Search === "undefined" || typeof Search.htmlToText !== "function"
      || typeof Search.makeSearchSummary !== "function") return;
  const BEFORE = 120, LENGTH = 240;  // Sphinx's own stretch of text (searchtools.js)
  const LONGEST = 160;  // a longer formula at an end of the stretch is left out, not taken in whole
  // Sphinx writes inline maths as \(...\) and displayed maths as \[...\]; MathJax also reads $$...$$
  const FORMULA = /\\\(([\s\S]*?)\\\)|\\\[([\s\S]*?)\\\]|\$\$([\s\S]*?)\$\$/g;

  const formulas = (text) => [...text.matchAll(FORMULA)].map((m) => (
    { start: m.index, end: m.index + m[0].length, tex: (m[1] ?? m[2] ?? m[3]).trim() }));

  function typeset(element) {
    const mathjax = window.MathJax;
    if (!mathjax || !mathjax.startup || !mathjax.startup.promise) return;  // no MathJax: the TeX stays
    // one typesetting at a time, after MathJax's first pass over the page: MathJax's way for content
    // added later. The summary is in the page by then (Sphinx appends it as soon as it is made).
    mathjax.startup.promise = mathjax.startup.promise
      .then(() => mathjax.typesetPromise([element]))
      .catch((e) => console.error("search snippet maths:", e));
  }

  Search.makeSearchSummary = (htmlText, keywords, anchor) => {
    const text = Search.htmlToText(htmlText, anchor);
    if (text === "") return null;
    const lower = text.toLowerCase();
    const found = [...keywords].map((k) => lower.indexOf(k.toLowerCase())).filter((i) => i > -1).slice(-1)[0];
    let start = Math.max((found ?? 0) - BEFORE, 0);
    let end = start + LENGTH;
    const all = formulas(text);
    for (const f of all) {  // an end that falls inside a formula moves out of it
      const long = f.end - f.start > LONGEST;
      if (f.start < start && start < f.end) start = long ? f.end : f.start;
      if (f.start < end && end < f.end) end = long ? f.start : f.end;
    }
    end = Math.min(Math.max(end, start), text.length);

    const parts = [];  // text as strings, formulas as {tex}
    let at = start;
    for (const f of all.filter((f) => f.start >= start && f.end <= end)) {
      parts.push(text.slice(at, f.start), { tex: f.tex });
      at = f.end;
    }
    parts.push(text.slice(at, end));
    parts[0] = parts[0].trimStart();  // as Sphinx trims its stretch
    parts[parts.length - 1] = parts[parts.length - 1].trimEnd();

    const summary = document.createElement("p");
    summary.classList.add("context");
    const add = (s) => { if (s) summary.appendChild(document.createTextNode(s)); };
    add(start === 0 ? "" : "...");
    for (const part of parts) {
      if (typeof part === "string") { add(part); continue; }
      const span = summary.appendChild(document.createElement("span"));
      span.className = "math notranslate nohighlight";
      span.textContent = `\\(${part.tex}\\)`;  // inline, even displayed maths: a snippet is one run of text
    }
    add(end < text.length ? "..." : "");
    typeset(summary);
    return summary;
  };
})();

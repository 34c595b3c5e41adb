"""The page's inline style sheet and script: no fonts, styles or scripts from anywhere else."""

# The dark palette, used for the system's dark scheme and for the page's own dark choice.
DARK = """
  --bg: #0d1117; --fg: #e6edf3; --muted: #9da7b3; --pane: #161b22; --border: #30363d;
  --kw: #ff7b72; --str: #a5d6ff; --num: #79c0ff; --bi: #d2a8ff; --com: #9da7b3;
  --rule: #e3b341; --loc: #9da7b3;
  --hl: #3a2e00; --hl-edge: #e3b341; --hl2: #102a4c; --hl2-edge: #58a6ff; --focus: #58a6ff;
  --fwd-fill: #0c2d6b; --fwd-line: #79c0ff; --bwd-fill: #4a2600; --bwd-line: #f0883e;
  --edge: #8b949e;
  color-scheme: dark;
""".strip()

CSS = r"""
:root {
  --bg: #ffffff; --fg: #1b1f24; --muted: #57606a; --pane: #f6f8fa; --border: #d0d7de;
  --kw: #a8071a; --str: #0a3069; --num: #0550ae; --bi: #6639ba; --com: #57606a;
  --rule: #7a4500; --loc: #57606a;
  --hl: #fff1a8; --hl-edge: #9a6700; --hl2: #ddeaff; --hl2-edge: #0969da; --focus: #0969da;
  --fwd-fill: #ddeeff; --fwd-line: #0550ae; --bwd-fill: #ffe6cc; --bwd-line: #9a4a00;
  --edge: #6e7781;
  color-scheme: light;
}
@media (prefers-color-scheme: dark) {
  :root:not([data-theme="light"]) {
DARK_PLACEHOLDER
  }
}
:root[data-theme="dark"] {
DARK_PLACEHOLDER
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { padding: 12px 16px 4px; display: flex; flex-wrap: wrap; gap: 4px 16px;
  align-items: baseline; }
h1 { font-size: 1.25rem; margin: 0; }
h2 { font-size: 1rem; margin: 0 0 6px; }
code, .code, svg text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  "Liberation Mono", monospace; }
.sub { color: var(--muted); margin: 0; }
.help { margin: 0 16px 8px; color: var(--muted); max-width: 70rem; }
.legend { display: inline-flex; flex-wrap: wrap; gap: 4px 12px; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em;
  border: 1px solid var(--border); border-radius: 2px; margin-right: 4px; }
.sw-hl { background: var(--hl); border-color: var(--hl-edge); }
.sw-hl2 { background: var(--hl2); border-color: var(--hl2-edge); }
.sw-fwd { background: var(--fwd-fill); border-color: var(--fwd-line); }
.sw-bwd { background: var(--bwd-fill); border-color: var(--bwd-line); }
button { font: inherit; color: var(--fg); background: var(--pane);
  border: 1px solid var(--border); border-radius: 6px; padding: 3px 10px; cursor: pointer; }
button:focus-visible, [tabindex]:focus-visible { outline: 2px solid var(--focus);
  outline-offset: 1px; }
#status { margin: 0 16px 8px; min-height: 1.45em; font-weight: 600; }
.panes { display: grid; gap: 12px; padding: 0 16px 16px;
  grid-template-columns: minmax(0, 0.75fr) minmax(0, 1.35fr) minmax(0, 1fr); }
.pane { background: var(--pane); border: 1px solid var(--border); border-radius: 8px;
  padding: 8px; min-width: 0; }
@media (min-width: 1000px) {
  .pane { max-height: calc(100vh - 150px); overflow: auto; }
}
@media (max-width: 999px) {
  .panes { grid-template-columns: minmax(0, 1fr); }
}
.scroll { overflow-x: auto; }
.code { font-size: 12.5px; line-height: 1.5; }
.ln, .line { white-space: pre; }
.file { color: var(--muted); margin: 6px 0 2px; font-size: 12.5px; }
.gap { color: var(--muted); padding-left: 3.2em; }
.ln, .item { border-left: 3px solid transparent; padding-right: 8px; cursor: pointer;
  min-width: max-content; }
.line { display: block; }
.no { display: inline-block; width: 3.2em; padding-right: 0.8em; text-align: right;
  color: var(--muted); user-select: none; }
.ln.linked .no { color: var(--fg); font-weight: 600; }
.item.plain { cursor: default; }
.hl { background: var(--hl); border-left-color: var(--hl-edge); }
.hl2 { background: var(--hl2); border-left-color: var(--hl2-edge); }
.current { outline: 2px solid var(--focus); outline-offset: -2px; }
.kw { color: var(--kw); } .str { color: var(--str); } .num { color: var(--num); }
.bi { color: var(--bi); } .com { color: var(--com); font-style: italic; }
.com.loc { color: var(--loc); font-style: normal; }
.com.rule { color: var(--rule); font-style: normal; font-weight: 600; }
.com.seed { color: var(--rule); }
[role="tablist"] { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 6px; }
#fit { margin-bottom: 6px; font-size: 0.85rem; }
#fit[aria-pressed="true"] { border-color: var(--focus); }
[role="tab"][aria-selected="true"] { background: var(--bg); border-color: var(--focus);
  font-weight: 600; }
details { margin-bottom: 6px; }
summary { cursor: pointer; color: var(--muted); }
svg.graph { display: block; }
svg.graph.fit { max-width: 100%; height: auto; }
svg .node rect { stroke-width: 1.5; }
svg .node.fwd rect { fill: var(--fwd-fill); stroke: var(--fwd-line); }
svg .node.bwd rect { fill: var(--bwd-fill); stroke: var(--bwd-line); }
svg .node.guard rect { stroke-dasharray: 4 2; }
svg .node text { fill: var(--fg); font-size: 12px; text-anchor: middle; }
svg .node text.aval { fill: var(--muted); font-size: 11px; }
svg .node { cursor: pointer; }
svg .node.hl rect { stroke: var(--hl-edge); stroke-width: 4; }
svg .node.hl2 rect { stroke: var(--hl2-edge); stroke-width: 3; stroke-dasharray: 5 2; }
svg .node.current rect { stroke: var(--focus); stroke-width: 4; }
svg .node:focus { outline: none; }
svg .node:focus-visible rect { stroke: var(--focus); stroke-width: 4; }
svg .edge { fill: none; stroke: var(--edge); stroke-width: 1.2; }
svg .edge.bwd { stroke: var(--bwd-line); }
svg .edge.cross { stroke-dasharray: 3 3; opacity: 0.7; }
svg .arrowhead { fill: var(--edge); }
svg .side-title, svg .edge-label { fill: var(--muted); font-size: 12px; }
.listing { font-size: 12px; margin: 8px 0 0; }
""".replace("DARK_PLACEHOLDER", DARK)

JS = r"""
(function () {
  "use strict";
  var doc = document;
  function keysOf(el, attr) {
    var value = el.getAttribute(attr);
    return value ? value.split(" ") : [];
  }
  function linked(el) {
    return el.hasAttribute("data-key") || el.hasAttribute("data-lines") ||
      el.hasAttribute("data-also");
  }
  var all = Array.prototype.slice.call(doc.querySelectorAll("[data-key],[data-lines],[data-also]"));
  var status = doc.getElementById("status");
  function describe(keys, counts) {
    if (!keys.length) { return "This statement is not linked to a line of your function."; }
    var parts = keys.map(function (key) {
      var line = doc.querySelector('[data-key="' + key + '"]');
      var text = line ? line.getAttribute("data-text") : "";
      return "line " + key.split(":")[1] + (text ? " (" + text + ")" : "");
    });
    return parts.join(", ") + ": " + counts.fwd + " forward and " + counts.bwd +
      " backward statements, " + counts.nodes + " graph nodes";
  }
  function select(el) {
    var keys = el.hasAttribute("data-key") ? [el.getAttribute("data-key")] :
      keysOf(el, "data-lines");
    var related = el.hasAttribute("data-key") ? [] : keysOf(el, "data-also");
    if (!keys.length) { keys = related; related = []; }
    var counts = { fwd: 0, bwd: 0, nodes: 0 };
    var firstInPane = {};
    all.forEach(function (other) {
      other.classList.remove("hl", "hl2", "current");
      if (other.hasAttribute("aria-pressed")) { other.setAttribute("aria-pressed", "false"); }
      var own = other.hasAttribute("data-key") ? [other.getAttribute("data-key")] :
        keysOf(other, "data-lines");
      var also = other.hasAttribute("data-key") ? [] : keysOf(other, "data-also");
      var strong = own.some(function (k) { return keys.indexOf(k) >= 0; });
      var weak = !strong && (also.some(function (k) { return keys.indexOf(k) >= 0; }) ||
        (other.hasAttribute("data-key") && related.indexOf(own[0]) >= 0));
      if (strong) {
        other.classList.add("hl");
        if (other.classList.contains("node")) { counts.nodes += 1; }
        else if (other.classList.contains("fwd")) { counts.fwd += 1; }
        else if (other.classList.contains("back") && !other.classList.contains("note")) {
          counts.bwd += 1;
        }
      } else if (weak) {
        other.classList.add("hl2");
      }
      if (strong || weak) {
        var pane = other.closest(".pane");
        if (pane && !firstInPane[pane.id] && other !== el) { firstInPane[pane.id] = other; }
      }
    });
    el.classList.add("current");
    if (el.hasAttribute("aria-pressed")) { el.setAttribute("aria-pressed", "true"); }
    Object.keys(firstInPane).forEach(function (id) {
      var target = firstInPane[id];
      if (target.closest("[hidden]")) { return; }
      var pane = doc.getElementById(id);
      var box = target.getBoundingClientRect(), view = pane.getBoundingClientRect();
      if (box.top < view.top || box.bottom > view.bottom) {
        pane.scrollTop += box.top - view.top - view.height / 3;
      }
    });
    if (status) { status.textContent = describe(keys, counts); }
    doc.body.setAttribute("data-selected", keys.join(" "));
  }
  // One tab stop per list; arrow keys move within it (roving tabindex).
  function focusables(group) {
    return Array.prototype.slice.call(group.querySelectorAll("[tabindex]")).filter(function (e) {
      return !e.closest("[hidden]");
    });
  }
  doc.querySelectorAll("[data-roving]").forEach(function (group) {
    var items = focusables(group);
    if (items.length) { items[0].setAttribute("tabindex", "0"); }
    group.addEventListener("keydown", function (event) {
      var items = focusables(group);
      var at = items.indexOf(doc.activeElement);
      if (at < 0) { return; }
      var next = { ArrowDown: at + 1, ArrowRight: at + 1, ArrowUp: at - 1, ArrowLeft: at - 1,
        Home: 0, End: items.length - 1 }[event.key];
      if (next === undefined) { return; }
      event.preventDefault();
      next = Math.max(0, Math.min(items.length - 1, next));
      items[at].setAttribute("tabindex", "-1");
      items[next].setAttribute("tabindex", "0");
      items[next].focus();
    });
  });
  all.forEach(function (el) {
    if (!el.hasAttribute("tabindex")) { return; }
    el.addEventListener("click", function () { el.focus(); select(el); });
    el.addEventListener("focus", function () { select(el); });
    el.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); select(el); }
    });
  });
  // Tabs: _grad and _value_and_grad.
  doc.querySelectorAll('[role="tablist"]').forEach(function (list) {
    var tabs = Array.prototype.slice.call(list.querySelectorAll('[role="tab"]'));
    function show(tab) {
      tabs.forEach(function (t) {
        var on = t === tab;
        t.setAttribute("aria-selected", on ? "true" : "false");
        t.setAttribute("tabindex", on ? "0" : "-1");
        doc.getElementById(t.getAttribute("aria-controls")).hidden = !on;
      });
    }
    tabs.forEach(function (tab, i) {
      tab.addEventListener("click", function () { show(tab); });
      tab.addEventListener("keydown", function (event) {
        var step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
        if (!step) { return; }
        var next = tabs[(i + step + tabs.length) % tabs.length];
        show(next); next.focus();
      });
    });
  });
  // The drawing at its own size (scrolling) or scaled to the pane.
  var fitButton = doc.getElementById("fit");
  var drawing = doc.querySelector("svg.graph");
  function showFit() {
    var on = drawing.classList.contains("fit");
    fitButton.setAttribute("aria-pressed", on ? "true" : "false");
  }
  if (fitButton && drawing) {
    showFit();
    fitButton.addEventListener("click", function () {
      drawing.classList.toggle("fit");
      showFit();
    });
  }
  // Light, dark, or the system's choice.
  var themeButton = doc.getElementById("theme");
  var themes = ["auto", "light", "dark"];
  function setTheme(name) {
    if (name === "auto") { doc.documentElement.removeAttribute("data-theme"); }
    else { doc.documentElement.setAttribute("data-theme", name); }
    if (themeButton) { themeButton.textContent = "Colours: " + name; }
  }
  if (themeButton) {
    themeButton.addEventListener("click", function () {
      var now = doc.documentElement.getAttribute("data-theme") || "auto";
      setTheme(themes[(themes.indexOf(now) + 1) % themes.length]);
    });
  }
  // page.html#select=0:5 selects line 5 as a click would; #theme=dark picks the colours.
  var hash = decodeURIComponent(location.hash.slice(1));
  hash.split("&").forEach(function (part) {
    var kv = part.split("=");
    if (kv[0] === "theme" && themes.indexOf(kv[1]) >= 0) { setTheme(kv[1]); }
    if (kv[0] === "select") {
      var target = doc.querySelector('[data-key="' + kv[1] + '"]');
      if (target) { target.click(); }
    }
  });
})();
"""

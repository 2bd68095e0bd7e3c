// Plotly figures built in Python: every element with data-figure="<json_script id>" is drawn,
// on load and after each htmx swap. Colours follow the page's light/dark variables, and every
// chart on the page (the search graph too) is re-themed in place when the theme changes.
(function () {
  function colours() {
    var css = getComputedStyle(document.documentElement);
    return {
      fg: css.getPropertyValue("--fg").trim() || "#1d2330",
      muted: css.getPropertyValue("--muted").trim() || "#5b6475",
      line: css.getPropertyValue("--line").trim() || "#dde1e8",
    };
  }
  function axisNames(layout) {
    var names = ["xaxis", "yaxis"];
    Object.keys(layout || {}).forEach(function (key) {
      if (/^[xy]axis\d+$/.test(key)) names.push(key);
    });
    return names;
  }
  // What the theme decides, as Plotly.relayout's dotted keys; themed() applies the same keys.
  function themeUpdate(layout) {
    var c = colours();
    var update = {
      "font.color": c.fg,
      "paper_bgcolor": "rgba(0,0,0,0)",
      "plot_bgcolor": "rgba(0,0,0,0)",
      "legend.font.color": c.fg,
      "title.font.color": c.fg,
      "modebar.bgcolor": "rgba(0,0,0,0)",
      "modebar.color": c.muted,
      "modebar.activecolor": c.fg,
    };
    axisNames(layout).forEach(function (axis) {
      update[axis + ".gridcolor"] = c.line;
      update[axis + ".zerolinecolor"] = c.line;
      update[axis + ".linecolor"] = c.line;
      update[axis + ".tickfont.color"] = c.fg;
      update[axis + ".title.font.color"] = c.fg;
    });
    return update;
  }
  function themed(layout) {
    layout = JSON.parse(JSON.stringify(layout || {}));
    var update = themeUpdate(layout);
    Object.keys(update).forEach(function (path) {
      var keys = path.split(".");
      var at = layout;
      keys.slice(0, -1).forEach(function (k) {
        if (typeof at[k] === "string") at[k] = { text: at[k] };  // a title given as text
        at = at[k] = at[k] || {};
      });
      at[keys[keys.length - 1]] = update[path];
    });
    return layout;
  }
  function draw(root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      Plotly.react(el, figure.data, themed(figure.layout), { responsive: true, displaylogo: false });
    });
  }
  function retheme() {
    if (!window.Plotly) return;
    document.querySelectorAll(".js-plotly-plot").forEach(function (el) {
      Plotly.relayout(el, themeUpdate(el.layout));
    });
  }
  window.keCharts = { draw: draw, themed: themed, retheme: retheme };
  window.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
  // The toggle (theme.js) sets data-theme; "auto" follows the system, which can change too.
  new MutationObserver(retheme).observe(document.documentElement, {
    attributes: true, attributeFilter: ["data-theme"],
  });
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", retheme);
})();

// The search graph: pages of Plotly JSON (built in Python) fetched from the graph endpoint and
// merged trace by trace. The server lays out the whole graph and pages only the drawing, so a
// page's edges already carry their parents' coordinates and merging is concatenation.
// Websocket events re-fetch it (debounced) and Plotly.react redraws in place; the layout's
// uirevision keeps the user's zoom and pan. Click a node to open it.
(function () {
  var el = document.getElementById("search-graph");
  if (!el) return;
  var status = document.getElementById("graph-status");
  // Shown instead of the graph while the campaign has no candidate (no axes with nothing on them).
  var empty = document.getElementById("graph-empty");
  var pending = null;
  var loading = false;
  var again = false;

  function merge(into, page) {
    if (!into) return page.figure;
    page.figure.data.forEach(function (trace, i) {
      var t = into.data[i];
      ["x", "y", "customdata", "text"].forEach(function (k) {
        if (trace[k]) t[k] = (t[k] || []).concat(trace[k]);
      });
      if (Array.isArray(trace.marker && trace.marker.size)) {
        t.marker.size = t.marker.size.concat(trace.marker.size);
      }
      t.showlegend = t.showlegend || trace.showlegend;
    });
    // Pages of one fetch share the frame; a page laid out after new nodes arrived may be larger.
    var a = into.layout, b = page.figure.layout;
    a.xaxis.range = [Math.min(a.xaxis.range[0], b.xaxis.range[0]), Math.max(a.xaxis.range[1], b.xaxis.range[1])];
    a.yaxis.range = [Math.max(a.yaxis.range[0], b.yaxis.range[0]), Math.min(a.yaxis.range[1], b.yaxis.range[1])];
    a.height = Math.max(a.height, b.height);
    return into;
  }

  function fetchAll(url, figure, count) {
    return fetch(url, { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("graph: HTTP " + r.status);
        return r.json();
      })
      .then(function (page) {
        figure = merge(figure, page);
        count += page.count;
        if (page.next_url) return fetchAll(page.next_url, figure, count);
        return { figure: figure, count: count };
      });
  }

  // What a finished load leaves for readers and tests (the empty state counts as a render).
  function rendered(result, t0) {
    var ms = Math.round(performance.now() - t0);
    el.dataset.nodeCount = result.count;
    el.dataset.renderMs = ms;  // fetch + merge + draw
    el.dataset.renders = (parseInt(el.dataset.renders || "0", 10) + 1).toString();
    return ms;
  }

  function load() {
    if (loading) { again = true; return; }
    loading = true;
    var t0 = performance.now();
    fetchAll(el.dataset.graphUrl, null, 0)
      .then(function (result) {
        if (empty) empty.hidden = result.count > 0;
        el.hidden = !result.count;
        if (!result.count) {
          status.textContent = "";
          rendered(result, t0);
          return;
        }
        var layout = window.keCharts ? keCharts.themed(result.figure.layout) : result.figure.layout;
        // The server sizes the graph to its lanes. The box gets that height too: on a window
        // resize Plotly's responsive mode drops layout.height and fills its box.
        el.style.height = layout.height + "px";
        var t1 = performance.now();
        // Keep the user's zoom: uirevision is constant, so Plotly.react leaves the axes alone.
        return Plotly.react(el, result.figure.data, layout, { responsive: true, displaylogo: false, scrollZoom: true })
          .then(function () {
            el.dataset.drawMs = Math.round(performance.now() - t1);  // Plotly.react alone
            var ms = rendered(result, t0);
            status.textContent = result.count + " candidates · drawn in " + ms + " ms";
            if (!el.dataset.clickBound) {
              el.dataset.clickBound = "1";
              el.on("plotly_click", function (data) {
                var point = data.points && data.points[0];
                if (point && point.customdata) window.location.href = point.customdata;
              });
            }
          });
      })
      .catch(function (err) { status.textContent = String(err); })
      .finally(function () {
        loading = false;
        if (again) { again = false; load(); }
      });
  }

  function refreshCharts() {
    var slot = document.getElementById("campaign-charts-slot");
    if (slot) htmx.ajax("GET", slot.dataset.chartsUrl, { target: "#campaign-charts", swap: "outerHTML" });
  }

  function schedule() {
    if (pending) return;
    pending = setTimeout(function () { pending = null; load(); refreshCharts(); }, 300);
  }

  window.addEventListener("load", load);
  document.body.addEventListener("htmx:wsAfterMessage", schedule);
  // Events sent before the socket (re)opened were missed: the live section catches up then
  // (campaign_live.js), and the graph and the charts above it must too, or the funnel card says
  // "No candidate has been generated yet" above a table that counts them.
  document.body.addEventListener("htmx:wsOpen", schedule);
  // idle: nothing fetching, drawing or scheduled (tests wait on it before timing a redraw).
  window.keGraph = { reload: load, idle: function () { return !loading && !pending && !again; } };
})();

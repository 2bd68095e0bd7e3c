// Live campaign page: events arrive over the websocket as out-of-band htmx swaps. Whenever the
// socket (re)opens, fetch the live section once, so events sent before the connection (or while
// it was down) are caught up without losing the user's place on the page.
//
// A catch-up answer can be older than what the page already shows: an event or the answer to a
// button (pause, cancel) may land while the catch-up request is in flight. Such an answer is not
// swapped in (it would put the old status back); the catch-up is asked for again instead.
(function () {
  var HEADER = "X-KE-Catch-Up";
  var generation = 0; // bumped by every change that reaches the page by another way
  var attempts = 0;

  function catchUp() {
    var live = document.getElementById("campaign-live");
    if (!live) return;
    var headers = {};
    headers[HEADER] = String(generation);
    htmx.ajax("GET", live.dataset.liveUrl, {
      target: "#campaign-live",
      swap: "outerHTML",
      headers: headers,
    });
  }

  document.body.addEventListener("htmx:wsAfterMessage", function () {
    generation += 1;
  });
  document.body.addEventListener("htmx:afterRequest", function (event) {
    var config = event.detail.requestConfig || {};
    if (config.verb && config.verb !== "get") generation += 1;
  });
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    var config = event.detail.requestConfig || {};
    var asked = config.headers && config.headers[HEADER];
    if (asked === undefined) return;
    if (Number(asked) !== generation) {
      event.detail.shouldSwap = false;
      if (attempts < 5) {
        attempts += 1;
        catchUp();
      }
    } else {
      attempts = 0;
    }
  });
  document.body.addEventListener("htmx:wsOpen", catchUp);

  // Every progress partial carries the campaign's revision (bumped with each change, under the
  // row's lock). The answer to a button (Cancel) and the websocket's events can arrive in any
  // order; one older than what the page shows is dropped, so a step's "running" sent before
  // the cancel cannot bring back Pause and Cancel after the answer said "cancelled".
  function shownRevision() {
    var progress = document.getElementById("campaign-progress");
    var value = progress && progress.getAttribute("data-revision");
    return value === null || value === undefined || value === "" ? null : Number(value);
  }
  function older(incoming) {
    var shown = shownRevision();
    return incoming !== null && shown !== null && !isNaN(incoming) && incoming < shown;
  }
  document.body.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "campaign-progress" || !event.detail.fragment) return;
    var incoming = event.detail.fragment.querySelector("[data-revision]");
    if (incoming && older(Number(incoming.getAttribute("data-revision")))) {
      event.detail.shouldSwap = false;
    }
  });
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    var match = xhr && /id="campaign-progress"[^>]*data-revision="(\d+)"/.exec(xhr.responseText);
    if (match && older(Number(match[1]))) event.detail.shouldSwap = false;
  });
})();
